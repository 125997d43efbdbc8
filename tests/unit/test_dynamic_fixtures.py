"""Dynamic shapes on real CPU captures (tests/fixtures/cpu-torch2.13-*dynamic*, see PROVENANCE.md): parsed
without a warning, symbols with their hints, specializations and guards per frame, bytes and hand-written
shapes worked out at the hints (numbers below computed by hand), and the pages that show them."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.analysis import analyze
from inductor_lens.bench.roofline import extern_cost, kernel_cost
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.readers import REGISTRY
from inductor_lens.pipeline import build_run
from inductor_lens.records import CompileRun, GraphRecord, ShapeSymbol
from inductor_lens.report import render_report

from ..conftest import FIXED_TIME, require_graphviz

RECOMPILE = "cpu-torch2.13-dynamic-recompile"  # two calls, lengths 16 then 24: automatic dynamic
BLOCK = "cpu-torch2.13-block-dynamic"  # samples/block.py --dynamic: reductions, attention, matmuls
SLICE = "cpu-torch2.13-slice-dynamic"  # a graph that only slices and transposes its input: no kernels
TRAIN = "cpu-torch2.13-mlp-train-dynamic"  # samples/mlp.py --train --dynamic: forward and backward
CASES = (RECOMPILE, BLOCK, SLICE, TRAIN)
RECORD = re.compile(r"^[VIWEC]\d{4} [\d:.]+\s+\d+ [^\]]*\] (\{.*\})\s*$")
ENVELOPE = {"frame_id", "frame_compile_id", "attempt", "has_payload", "compiled_autograd_id", "rank", "stack"}


def _run(unpacked, case: str) -> CompileRun:
    root = unpacked(case)
    return build_run(root, root / "capture", strict=True, now=lambda: FIXED_TIME)


def _cost(graph: GraphRecord, position: int) -> tuple[int | None, int | None, str]:
    launch = graph.launches[position - 1]
    kernel = graph.kernel(launch.target)
    return kernel_cost(graph, kernel, launch) if kernel is not None else extern_cost(graph, launch)


@pytest.mark.parametrize("case", CASES)
def test_dynamic_captures_parse_without_a_warning(unpacked, case: str) -> None:
    run = parse_debug_folder(unpacked(case), strict=True)
    assert run.stats.warnings == ()
    assert all(graph.symbols for graph in run.graphs if graph.compile_id != "0/0" or case != RECOMPILE)


@pytest.mark.parametrize("case", CASES)
def test_report_of_a_dynamic_capture_passes_strict(run_cli, unpacked, tmp_path: Path, case: str) -> None:
    result = run_cli("report", unpacked(case), "--out", tmp_path / "report", "--strict")
    assert result.code == 0, result.stderr
    assert "warning" not in result.stderr


def test_every_record_kind_of_the_dynamic_captures_is_registered(unpacked) -> None:
    kinds: set[str] = set()
    for case in CASES:
        for path in unpacked(case).rglob("dedicated_log_torch_trace*.log"):
            for line in path.read_text(encoding="utf-8").splitlines():
                if match := RECORD.match(line):
                    kinds.add(next(k for k in json.loads(match[1]) if k not in ENVELOPE))
    dynamic = {"create_symbol", "guard_added_fast", "symbolic_shape_specialization"}
    assert dynamic <= kinds
    for kind in kinds:
        parser = REGISTRY.find("trace record", kind)
        assert parser is not None, kind
    assert all(REGISTRY.find("trace record", k).shown for k in dynamic)  # type: ignore[union-attr]


def test_automatic_dynamic_recompile(unpacked) -> None:
    run = _run(unpacked, RECOMPILE)
    static, recompiled = run.frames
    assert (static.compile_id, static.symbols, static.shape_guards) == ("0/0", (), ())
    assert recompiled.recompile_reasons == (
        "0/0: tensor 'input_ids' size mismatch at index 1. expected 16, actual 24",
    )
    assert [(s.name, s.hint, s.hint_from, s.source, s.range) for s in recompiled.symbols] == [
        ("s70", 24, "trace", "L['input_ids'].size()[1]", "[2, int_oo]"),
        ("s53", 24, "trace", "L['attention_mask'].size()[1]", "[2, int_oo]"),
    ]
    assert [(s.user_line.line, s.user_line.code) for s in recompiled.symbols if s.user_line] == [
        (18, "hidden = torch.relu(self.proj(self.embed(input_ids)))"),
        (19, 'return {"hidden": hidden * attention_mask.unsqueeze(-1)}'),
    ]
    assert [g.expr for g in recompiled.shape_guards] == ["Eq(s70, s53)"]
    assert recompiled.specializations == ()

    first, second = run.graphs
    assert (first.compile_id, first.symbols, first.hints) == ("0/0", (), {})
    assert second.compile_id == "0/1"
    assert [(s.name, s.hint, s.hint_from) for s in second.symbols] == [
        ("s53", 24, "benchmark harness"),  # arg1_1: "Sym(s53)" is passed 24 by get_args()
        ("s70", 24, "call()"),  # s70 = arg1_1 in call()
    ]
    assert second.symbols[0].source == "L['attention_mask'].size()[1]"
    assert (second.buffers["buf0"], second.buffers["buf1"]) == ("f32[2, s53, 32]", "f32[2*s53, 32]")
    fx = second.fx_graph("transformed")
    assert fx is not None
    nodes = {n.name: n for n in fx.nodes}
    assert (nodes["mul_8"].target, nodes["mul_8"].type, nodes["mul_8"].inputs) == (
        "operator.mul",
        "Sym(2*s53)",
        ("arg1_1",),
    )
    assert nodes["arg1_1"].role == "size"
    assert [launch.target for launch in second.launches] == [
        "cpp_fused_embedding_0",
        "extern_kernels.addmm",
        "cpp_fused_mul_relu_unsqueeze_view_1",
    ]
    # By hand, s53 = 24. Embedding: ids i64[2, 24] 384 B + table f32[100, 32] 12800 B + out f32[2, 24, 32]
    # 6144 B. The addmm: A 48x32, B 32x32 and C 48x32 in f32 (16384 B) + bias 128 B; 2*48*32*32 FLOPs.
    # mul_relu: in_out f32[2, 24, 32] twice (12288 B) + mask f32[2, 24] 192 B.
    hinted = "from size hints s53=24"
    assert _cost(second, 1) == (
        19328,
        None,
        f"counted from the tensors passed (each read or written once); {hinted}",
    )
    assert _cost(second, 2) == (
        16512,
        98304,
        f"counted: A, B (and bias) read, C written; 2*M*N*K FLOPs; {hinted}",
    )
    assert _cost(second, 3)[:2] == (12480, None)
    assert _cost(first, 3) == (8320, None, "counted from the tensors passed (each read or written once)")

    matches = [(m.target, m.kind, dict(m.shape), m.note) for m in run.handwritten if m.graph_id == second.id]
    assert matches == [
        ("cpp_fused_embedding_0", "exact", {"rows": 48, "cols": 32, "tokens": 48, "vocab": 100, "dim": 32},
         f"shapes {hinted} (dynamic shapes)"),
        ("extern_kernels.addmm", "exact", {"M": 48, "N": 32, "K": 32}, f"shapes {hinted} (dynamic shapes)"),
        ("cpp_fused_mul_relu_unsqueeze_view_1", "partial", {"rows": 48, "cols": 32},
         f"shapes {hinted} (dynamic shapes)"),
    ]  # fmt: skip
    # checked at these shapes in the capture; the embedding kernel came later, so the capture has no result for it
    runs = [r for m in run.handwritten for r in m.runs]
    assert all(r.ok for r in runs if r.name != "embedding")
    embeddings = [(r.shape["tokens"], r.ok) for r in runs if r.name == "embedding"]
    assert embeddings == [(32, None), (48, None)]


def test_dynamic_block_specializes_its_width(unpacked) -> None:
    run = _run(unpacked, BLOCK)
    (frame,) = run.frames
    assert frame.compile_id == "0/0_1"  # the restarted attempt; its first attempt is folded into it
    assert [(s.name, s.hint, s.source) for s in frame.symbols] == [
        ("s77", 8, "L['x'].size()[0]"),
        ("s27", 256, "L['x'].size()[1]"),
        ("s53", 512, "L['x'].size()[2]"),
        ("zf50", 1e-05, "L['self']._modules['ln1'].eps"),
        ("zf43", 1e-05, "L['self']._modules['ln2'].eps"),
    ]
    assert [(s.symbol, s.value, s.reason, s.guard, s.sources) for s in frame.specializations] == [
        ("zf50", "1e-05", "trivial_lhs", "Eq(zf50, 1.0e-5)", ("L['self']._modules['ln1'].eps",)),
        ("s53", "512", "range_refined_to_singleton", "Eq(s53, 512)", ("L['x'].size()[2]",)),
        ("zf43", "1e-05", "trivial_lhs", "Eq(zf43, 1.0e-5)", ("L['self']._modules['ln2'].eps",)),
    ]
    assert [g.expr for g in frame.shape_guards] == ["Eq(zf50, 1.0e-5)", "Eq(s53, 512)", "Eq(zf43, 1.0e-5)"]
    spec = frame.specializations[1]
    assert spec.user_line is not None and spec.user_line.line == 27

    (graph,) = run.graphs
    assert graph.hints == {"s77": 8, "s27": 256}  # s53 is 512 in the graph: specialized away
    # cpp_fused_gelu_view_2 updates buf14, f32[s77, s27, 2048], in place: 8*256*2048*4 B read and written.
    gelu = next(launch for launch in graph.launches if launch.target == "cpp_fused_gelu_view_2")
    assert _cost(graph, gelu.position) == (
        2 * 8 * 256 * 2048 * 4,
        None,
        "counted from the tensors passed (each read or written once); from size hints s77=8, s27=256",
    )
    kernel = graph.kernel("cpp_fused_gelu_view_2")
    assert kernel is not None and kernel.timing is not None and kernel.timing.roofline is not None
    assert kernel.timing.roofline.bytes == 33554432
    assert kernel.timing.roofline.cost_source.endswith("from size hints s77=8, s27=256")
    # the qkv matmul: A (s27*s77) x 512 = 2048 x 512, B 512 x 1536, bias 1536
    assert _cost(graph, 2)[:2] == (
        (2048 * 512 + 512 * 1536 + 2048 * 1536) * 4 + 1536 * 4,
        2 * 2048 * 1536 * 512,
    )

    # every kernel and extern matmul or attention call is matched at the hinted shapes, and checked
    assert len(run.handwritten) == 9
    assert all(
        m.kind != "none" and m.shape and m.note.startswith("shapes from size hints") for m in run.handwritten
    )
    # the capture's hand-written results were recorded when these residual adds matched bias_residual (CPU
    # addmm calls add their bias themselves): the residual steps have no recorded run, every other one agrees
    runs = [r for m in run.handwritten for r in m.runs]
    assert all(r.ok for r in runs if r.name != "residual")
    assert {r.ok for r in runs if r.name == "residual"} == {None}
    attention = next(m for m in run.handwritten if "attention" in m.target)
    assert (attention.equivalents, dict(attention.shape)) == (
        ("flash_attention_causal",),
        {"batch": 8, "heads": 8, "seq": 256, "head_dim": 64},
    )


def test_a_graph_that_only_views_its_input(unpacked) -> None:
    run = _run(unpacked, SLICE)
    assert run.stats.warnings == ()
    (graph,) = run.graphs
    assert (graph.kernels, graph.launches) == ((), ())
    assert [len(dump.nodes) for dump in graph.ir] == [0, 0]  # Inductor wrote empty scheduler dumps
    assert graph.outputs == ("arg2_1",)  # a view of the input: reinterpret_tensor(arg2_1, (4, s77), ...)
    assert [(s.name, s.hint, s.source) for s in graph.symbols] == [
        ("s77", 8, "L['x'].size()[0]"),
        ("s27", 16, "L['x'].size()[1]"),
    ]
    (frame,) = run.frames
    assert [g.expr for g in frame.shape_guards] == ["s27 >= 5"]  # x[:, 1:5] needs 5 columns


def test_dynamic_training_graphs(unpacked) -> None:
    run = _run(unpacked, TRAIN)
    forward, backward = run.graphs
    assert (forward.kind, backward.kind) == ("forward", "backward")
    assert forward.hints == backward.hints == {"s33": 256}
    assert forward.outputs == ("buf2", "primals_4", "primals_5", "buf0", "buf1")  # s33 is returned too
    roles = {n.name: n.role for n in backward.fx_graphs[0].nodes if n.op == "placeholder"}
    assert roles == {
        "primals_3": "size",
        "primals_4": "saved",
        "primals_5": "saved",
        "addmm": "saved",
        "mul_4": "saved",
        "tangents_1": "tangent",
    }
    (frame,) = run.frames
    # the input's width is nn.Linear's in_features: specialized
    assert [(s.symbol, s.value) for s in frame.specializations] == [("s50", "1024")]
    # gelu backward: buf3 f32[s33, 4096] in and out (2 * 4 MiB), tangents_1 f32[s33, 1024] (1 MiB),
    # addmm f32[s33, 4096] (4 MiB), buf2 f32[1, 1024] (4 KiB), at s33 = 256
    fused = next(
        launch for launch in backward.launches if launch.target == "cpp_fused_gelu_gelu_backward_sum_0"
    )
    assert _cost(backward, fused.position)[0] == 2 * 4194304 + 1048576 + 4194304 + 4096
    shapes = [
        dict(m.shape)
        for m in run.handwritten
        if m.graph_id == backward.id and m.target == "extern_kernels.mm"
    ]
    assert shapes == [
        {"M": 256, "N": 4096, "K": 1024},
        {"M": 1024, "N": 4096, "K": 256},
        {"M": 4096, "N": 1024, "K": 256},
    ]


def test_dynamic_runs_round_trip_through_lens_json(unpacked) -> None:
    for case in (RECOMPILE, BLOCK):
        run = _run(unpacked, case)
        assert CompileRun.from_json(run.to_json()) == run


def test_pages_show_symbols_with_their_hints(unpacked) -> None:
    run = _run(unpacked, RECOMPILE)
    files = render_report(run, analyze(run), draw=False)
    compile_page = files["compile.html"]
    assert 'id="frame-0-1-shapes"' in compile_page and 'href="#frame-0-1-shapes"' in compile_page
    assert "2 symbols, 0 specialized, 1 guard on sizes" in compile_page
    assert "<code>L[&#39;input_ids&#39;].size()[1]</code>" in compile_page
    assert "<td>dynamic, Eq(s70, s53)</td>" in compile_page
    assert "<code>Eq(s70, s53)</code>" in compile_page
    graph_page = files["graphs/model__1_inference_1.1.html"]
    assert 'id="symbols"' in graph_page and "<code>s53=24</code>" in graph_page
    assert "the benchmark harness (get_args() in output_code.py)" in graph_page
    assert 'id="symbols"' not in files["graphs/model__0_inference_0.0.html"]  # the static graph
    kernel_page = files["kernels/model__1_inference_1.1/cpp_fused_mul_relu_unsqueeze_view_1.html"]
    assert "<code>f32[2, s53=24, 32]</code>" in kernel_page and "<code>size s53=24</code>" in kernel_page
    assert "SYMBOLIC SIZES" in kernel_page.upper()
    index = files["index.html"]
    assert "dynamic in 1 of 2 graphs" in index and "s53=24, s70=24" in index


def test_symbol_text_is_escaped(unpacked) -> None:
    run = _run(unpacked, RECOMPILE)
    evil = "<img src=x onerror=alert(1)>"
    frame = replace(run.frames[1], symbols=(ShapeSymbol("s53", 24, "trace", evil, evil),))
    graph = replace(run.graphs[1], symbols=(ShapeSymbol("s53", 24, evil, evil, evil),))
    hostile = replace(run, frames=(run.frames[0], frame), graphs=(run.graphs[0], graph))
    files = render_report(hostile, analyze(hostile), draw=False)
    for path, text in files.items():
        if path.endswith(".html"):
            assert "<img src=x" not in text, path
    assert "&lt;img src=x onerror=alert(1)&gt;" in files["compile.html"]


def test_drawings_label_symbolic_types_with_their_hints(unpacked) -> None:
    require_graphviz()
    run = _run(unpacked, BLOCK)
    page = render_report(run, analyze(run))["graphs/model__1_inference_0.0.html"]
    assert "f32[s77=8, s27=256, 512]" in page  # in both drawings
    assert "f32[s27*s77=2048, 1536]" in page  # the qkv matmul's output, between launches 2 and 3
    assert "symbolic size" in page  # Sym(...) placeholders drawn as sizes


def test_profiled_times_go_to_the_graph_that_ran(unpacked) -> None:
    """Both graphs of the recompile launch the same kernels; the profile's region names (the FX graph cache
    key) say the steps ran the dynamic one."""
    from inductor_lens.pipeline import build_run

    root = unpacked("cpu-torch2.13-dynamic-recompile")
    run = build_run(root, root / "capture", strict=True)
    static, dynamic = run.graphs
    assert static.fx_cache_key and dynamic.fx_cache_key and static.fx_cache_key != dynamic.fx_cache_key
    assert all(launch.timing is None for launch in static.launches)
    assert all(launch.timing is not None for launch in dynamic.launches)
