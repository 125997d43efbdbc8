"""Parser units on small hand-written inputs: formats, version drift, tolerance and strict mode."""

from __future__ import annotations

import textwrap

import pytest

from inductor_lens.errors import ParseError
from inductor_lens.parse.diagnostics import Diagnostics
from inductor_lens.parse.fx_graph import parse_fx_graph
from inductor_lens.parse.ir import parse_ir
from inductor_lens.parse.logs import debug_trace_compile_ids, parse_bench_k, parse_runnable_header
from inductor_lens.parse.output_code import parse_output_code
from inductor_lens.parse.pyliteral import literal
from inductor_lens.parse.source_lines import from_traceback, user_frames
from inductor_lens.records import SourceLine

OLD_STYLE = textwrap.dedent(
    """
    # kernel path: /tmp/x/ab/cabcdefghijk.py
    # Source Nodes: [relu], Original ATen: [aten.relu]
    triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''
    import triton
    import triton.language as tl
    from torch._inductor import triton_helpers, triton_heuristics

    @triton_heuristics.pointwise(size_hints=[1024], filename=__file__,
        triton_meta={'signature': {0: '*fp32', 1: 'i32'}, 'device': 0, 'constants': {}},
        inductor_meta={'kernel_name': 'triton_poi_fused_relu_0', 'num_load': 1})
    @triton.jit
    def triton_poi_fused_relu_0(in_out_ptr0, xnumel, XBLOCK : tl.constexpr):
        pass
    ''', device_str='cuda')

    def call(args):
        arg0_1, = args
        args.clear()
        with torch.cuda._DeviceGuard(0):
            torch.cuda.set_device(0)
            buf0 = empty_strided_cuda((1024, ), (1, ), torch.float32)
            # Source Nodes: [relu], Original ATen: [aten.relu]
            stream0 = get_raw_stream(0)
            triton_poi_fused_relu_0.run(buf0, 1024, grid=grid(1024), stream=stream0)
            buf1 = aten.randint.low(0, 10, [4])
        return (buf0, buf1, )
    """
)


def test_older_output_code_layout_still_parses() -> None:
    diagnostics = Diagnostics(strict=True)
    parsed = parse_output_code(OLD_STYLE, "output_code.py", diagnostics)
    (kernel,) = parsed.kernels
    assert kernel.category == "pointwise"
    assert kernel.size_hints == {"dim0": 1024}  # list-style size_hints kept by position
    assert [(a.name, a.type) for a in kernel.args] == [
        ("in_out_ptr0", "*fp32"),
        ("xnumel", "i32"),
        ("XBLOCK", "constexpr"),
    ]
    assert kernel.source_nodes == ("relu",) and kernel.aten_ops == ("aten.relu",)
    assert kernel.kernel_path == "/tmp/x/ab/cabcdefghijk.py"
    assert [(launch.kind, launch.target) for launch in parsed.launches] == [
        ("triton", "triton_poi_fused_relu_0"),
        ("extern", "aten.randint.low"),
    ]
    assert parsed.launches[0].source_nodes == ("relu",)
    assert parsed.launches[1].source_nodes == ()  # the comment belongs to the launch before
    assert kernel.launches == (1,)


def test_unknown_content_is_counted_not_fatal() -> None:
    text = OLD_STYLE.replace("buf1 = aten.randint.low(0, 10, [4])", "buf1 = mystery_helper(buf0)")
    text += "\nweird = async_compile.newfangled('x', '''...''')\n"
    diagnostics = Diagnostics()
    parsed = parse_output_code(text, "output_code.py", diagnostics)
    assert [k.name for k in parsed.kernels] == ["triton_poi_fused_relu_0"]
    messages = sorted(d.message for d in diagnostics.stats().warnings)
    assert messages == [
        "call(): unrecognised call mystery_helper",
        "unrecognised kernel definition async_compile.newfangled for weird",
    ]
    with pytest.raises(ParseError, match="unrecognised"):
        parse_output_code(text, "output_code.py", Diagnostics(strict=True))


def test_truncated_output_code_gives_a_warning() -> None:
    diagnostics = Diagnostics()
    parsed = parse_output_code(OLD_STYLE[: len(OLD_STYLE) // 2], "output_code.py", diagnostics)
    assert parsed.kernels == () and parsed.launches == ()
    (warning,) = diagnostics.stats().warnings
    assert warning.message.startswith("not valid Python")


def test_repeated_warnings_are_counted_once() -> None:
    diagnostics = Diagnostics()
    for _ in range(3):
        diagnostics.warn("a.txt", "same thing")
    (warning,) = diagnostics.stats().diagnostics
    assert warning.count == 3


def test_cpp_kernel_signature_and_category() -> None:
    text = textwrap.dedent(
        """
        cpp_fused_sum_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''
        #include <torch/csrc/inductor/cpp_prefix.h>
        extern "C"  void  kernel(const float* in_ptr0,
                               float* out_ptr0)
        {
            float tmp_acc0 = 0;
        }
        ''')

        class Runner:
            def call(self, args):
                buf0 = empty_strided_cpu((), (), torch.float32)
                # [Provenance debug handles] cpp_fused_sum_0:1
                cpp_fused_sum_0(arg0_1, buf0)
                return (buf0, )
        """
    )
    parsed = parse_output_code(text, "output_code.py", Diagnostics(strict=True))
    (kernel,) = parsed.kernels
    assert (kernel.backend, kernel.category) == ("cpp", "reduction")
    assert [(a.name, a.type) for a in kernel.args] == [("in_ptr0", "const float*"), ("out_ptr0", "float*")]
    (launch,) = parsed.launches
    assert (launch.kind, launch.handle) == ("cpp", "cpp_fused_sum_0:1")


def test_pyliteral_reads_inductor_expressions_without_running_them() -> None:
    import ast

    node = ast.parse(
        "{'device': DeviceProperties(type='cuda', index=0, cc=90), 'hints': set(), "
        "'r': ReductionHint.INNER, 'n': -1, 'k': {(0,): [['tt.divisibility', 16]]}, 'f': open('x')}",
        mode="eval",
    ).body
    value = literal(node)
    assert value["device"] == {"_call": "DeviceProperties", "type": "cuda", "index": 0, "cc": 90}
    assert value["hints"] == [] and value["r"] == "ReductionHint.INNER" and value["n"] == -1
    assert value["k"] == {"(0,)": [["tt.divisibility", 16]]}
    assert value["f"] == {"_call": "open", "_args": ["x"]}


def test_fx_graph_lines() -> None:
    text = textwrap.dedent(
        """
        class <lambda>(torch.nn.Module):
            def forward(self, arg0_1: "f32[4, 8]", arg1_1: "f32[8]"):
                # File: /m/model.py:12 in forward, code: y = x.relu() + b
                relu: "f32[4, 8]" = torch.ops.aten.relu.default(arg0_1);  arg0_1 = None
                add: "f32[4, 8]" = torch.ops.aten.add.Tensor(relu, arg1_1);  relu = arg1_1 = None
                var_mean = torch.ops.aten.var_mean.correction(add, [1], correction = 0, keepdim = True)
                # No stacktrace found for following nodes
                getitem: "f32[4, 1]" = var_mean[0];  var_mean = None
                return (add, getitem)

            class submod_0(torch.nn.Module):
                def forward(self, x: "f32[2]"):
                    return (x,)
        """
    )
    diagnostics = Diagnostics()
    graph = parse_fx_graph(text, "readable", "fx_graph_readable.py", diagnostics)
    assert [(n.name, n.op) for n in graph.nodes] == [
        ("arg0_1", "placeholder"),
        ("arg1_1", "placeholder"),
        ("relu", "call_function"),
        ("add", "call_function"),
        ("var_mean", "call_function"),
        ("getitem", "call_function"),
        ("output", "output"),
    ]
    add = graph.nodes[3]
    assert add.target == "aten.add.Tensor" and add.inputs == ("relu", "arg1_1")
    assert add.source == SourceLine("/m/model.py", 12, "forward", "y = x.relu() + b")
    assert graph.nodes[5].source is None and graph.nodes[5].inputs == ("var_mean",)
    assert graph.nodes[-1].inputs == ("add", "getitem")
    assert [d.level for d in diagnostics.stats().diagnostics] == ["note"]


def test_ir_dump_with_unknown_line() -> None:
    text = "op0: SchedulerNode(ComputedBuffer)\nop0.writes = [MemoryDep('buf0', c0, {c0: 4})]\n%%% garbage\n"
    diagnostics = Diagnostics()
    dump = parse_ir(text, "post_fusion", "ir_post_fusion.txt", diagnostics)
    assert [(n.name, n.writes) for n in dump.nodes] == [("op0", ("buf0",))]
    assert diagnostics.stats().warnings[0].message.startswith("unrecognised IR line")


def test_debug_trace_lines_and_bench_lines() -> None:
    log = (
        "W1121 21:49:57.841000 994 torch/_inductor/debug.py:520] [0/0] model__0_forward_1 debug trace: "
        "/x/run/torchinductor/model__0_forward_1.0\n"
        "W1121 21:49:59.923000 994 torch/_inductor/debug.py:520] [2/0_1] model__1_inference_3 debug trace: "
        "/x/run/torchinductor/model__1_inference_3.1\n"
    )
    assert debug_trace_compile_ids(log) == {"model__0_forward_1.0": "0/0", "model__1_inference_3.1": "2/0_1"}
    bench = "\x1b[31mNone                 UNK cqamdviden 0.023ms    \t0.008 GB \t  364.80GB/s   19 regs    0 spills         0 shared mem\x1b[39m\n"
    results = parse_bench_k(bench, "bench_k.txt", Diagnostics(strict=True))
    assert results["cqamdviden"].ms == 0.023 and results["cqamdviden"].registers == 19


def test_runnable_header() -> None:
    text = (
        "# torch version: 2.11.0+cu130\n# torch cuda version: 13.0\n\n# GPU Hardware Info: \n# NVIDIA H200 : 1 \n\n"
        "torch._inductor.config.max_autotune = True\ntorch._inductor.config.max_autotune_gemm_backends = 'TRITON'\n"
    )
    facts, config = parse_runnable_header(text)
    assert facts == {"version": "2.11.0+cu130", "cuda version": "13.0", "gpu": "NVIDIA H200"}
    assert config == {"max_autotune": True, "max_autotune_gemm_backends": "TRITON"}


def test_traceback_frames_and_user_code() -> None:
    text = (
        '  File "/m/model.py", line 15, in <module>\n    out = cm(x)\n          ^^^^^\n'
        '  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1778, in _wrapped_call_impl\n'
        "    return self._call_impl(*args, **kwargs)\n"
        '  File "/m/model.py", line 9, in forward\n    if y.sum().item() > 0:\n       ^^^^^^^^^^^^\n'
    )
    frames = from_traceback(text)
    assert [(f.line, f.function) for f in frames] == [
        (15, "<module>"),
        (1778, "_wrapped_call_impl"),
        (9, "forward"),
    ]
    assert frames[2].code == "if y.sum().item() > 0:"
    assert [f.line for f in user_frames(frames)] == [15, 9]


def test_the_model_process_of_inductor_lens_is_not_user_code() -> None:
    from inductor_lens.parse.source_lines import is_user_file

    assert not is_user_file("/work/x/inductor_lens/worker/capture.py")
    assert not is_user_file("/opt/venv/src/inductor_lens/capture/child.py")  # captures before the worker/
    assert is_user_file("/home/me/project/model.py")
    assert is_user_file("/home/me/inductor_lens_demo/worker/capture.py.bak")


def test_origin_blocks_of_a_cpp_kernel() -> None:
    """C++ kernels carry the same ORIGIN blocks as Triton's, as // comments (torch 2.13 codegen/cpp.py)."""
    from inductor_lens.parse.origins import origin_segments

    source = "\n".join([
        'extern "C" void kernel(const float* in_ptr0, float* out_ptr0)',
        "{",
        "    // ORIGIN:",
        "    // call_function aten.relu.default seq_nr:-1",
        '    //   File "/m/model.py", line 7, in forward\\\\    return torch.relu(x)\\\\',
        "    // END ORIGIN",
        "    auto tmp0 = in_ptr0[x0];",
        "    auto tmp1 = std::max(tmp0, decltype(tmp0)(0));",
        "}",
    ])  # fmt: skip
    (segment,) = origin_segments(source)
    assert segment.ops == ("aten.relu.default",) and (segment.first_line, segment.last_line) == (7, 9)
    assert [(s.filename, s.line) for s in segment.source] == [("/m/model.py", 7)]


def test_a_graph_break_inside_a_library_keeps_its_frames() -> None:
    """transformers' GPT-2 breaks in its loss function: no user frame; the location and the stack say where."""
    from inductor_lens.parse.frames import graph_breaks
    from inductor_lens.parse.trace import FrameTrace

    lib = "/venv/lib/python3.12/site-packages/transformers"
    text = (
        f"Graph break in user code at {lib}/modeling_utils.py:4635\n"
        "Graph Break Reason: Logger not supported for non-export cases.\n"
        "User code traceback:\n"
        '  File "/work/inductor_lens/worker/capture.py", line 260, in step\n    outputs = call(fn)\n'
        f'  File "{lib}/models/gpt2/modeling_gpt2.py", line 1100, in forward\n    loss = self.loss_function(\n'
        f'  File "{lib}/modeling_utils.py", line 4635, in loss_function\n    logger.warning_once(\n'
    )
    (found,) = graph_breaks(FrameTrace(compile_id="0/0", graph_breaks=[text]))
    assert found.location is not None and found.location.function == "loss_function"
    assert found.location.code == "logger.warning_once("
    assert [(f.filename.rsplit("/", 1)[-1], f.line) for f in found.user_stack] == [
        ("modeling_gpt2.py", 1100), ("modeling_utils.py", 4635)
    ]  # fmt: skip
