"""Two ranks of one DDP job on two H100s (torch 2.11, ``compile samples/ddp_mlp.py --nproc 2 --train``) compile
the same graph into output code that differs only by what names the rank's GPU: the kernel's path in its private
cache, the device index in FX comments, ``DeviceProperties`` and ``rand_strided``, the device guard, and the
stream variable Inductor names after the index (``stream1 = get_raw_stream(1)``). The lines below are those
lines of the two ranks' real ``output_code.py``; ``code_hash`` must see one graph, and still see a change in
what the kernel computes."""

from __future__ import annotations

from inductor_lens.records.rank_normalise import code_hash

RANK0 = """
# kernel path: /tmp/inductor-lens-cache-5lgkyfho/rank0/inductor/q5/cq5fdtniw4u3brstbllndsgusk6psbqwqwe5k2d4b244ga2vgr4z.py
#   %addmm : Tensor "f32[32, 256][256, 1]cuda:0" = PlaceHolder[target=addmm]
    triton_meta={'signature': {'in_ptr0': '*fp32', 'out_ptr0': '*fp32', 'xnumel': 'i32', 'XBLOCK': 'constexpr'}, 'device': DeviceProperties(type='cuda', index=0, multi_processor_count=132, cc=90, major=9), 'constants': {}},
    tmp1 = 0.5
    arg_0 = rand_strided((32, 256), (256, 1), device='cuda:0', dtype=torch.float32)
    with torch.cuda._DeviceGuard(0):
        torch.cuda.set_device(0)
        stream0 = get_raw_stream(0)
        triton_poi_fused_gelu_0.run(*args, stream=stream0)
"""


def test_the_same_graph_on_two_gpus_hashes_the_same() -> None:
    rank1 = (RANK0.replace("rank0/inductor/q5/cq5fdtn", "rank1/inductor/3a/c3awt7h").replace("cuda:0", "cuda:1")
             .replace("index=0", "index=1").replace("(0)", "(1)").replace("stream0", "stream1"))  # fmt: skip
    assert rank1 != RANK0 and "stream1 = get_raw_stream(1)" in rank1
    assert code_hash(rank1) == code_hash(RANK0)
    assert code_hash(RANK0.replace("tmp1 = 0.5", "tmp1 = 0.25")) != code_hash(RANK0)


def test_globals_dynamo_names_after_object_ids_are_per_process() -> None:
    """FSDP2's and tensor parallel's guards name globals after object ids (HF Llama, ``fully_shard``, gloo, two ranks
    of torch 2.13): the same guard on both ranks, once normalised."""
    from inductor_lens.records.rank_normalise import normalized_guards

    rank0 = ("ID_MATCH: ___check_obj_id(G['_139750064709264_c14'].Tensor, 94269139436384)\n"
             "LAMBDA_GUARD: G['__dtensor_spec_139750064709264'] ___check_opaque_guard_fn_139750064709264_c0/0")  # fmt: skip
    rank1 = rank0.replace("139750064709264", "140003668582832").replace("94269139436384", "94650071002080")
    assert normalized_guards(rank0) == normalized_guards(rank1)
    assert normalized_guards(rank0) != normalized_guards(rank0.replace("_c14", "_c15"))
