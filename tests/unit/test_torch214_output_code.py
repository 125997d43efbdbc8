"""torch 2.14's output code: grouped input asserts, ``assert_tensor_metadata``, kernels of other kinds.

On ``cpu-torch2.14-channels-last`` (``samples/channels_last.py`` captured with torch 2.14.1, see
tests/fixtures/PROVENANCE.md): exact kernels and launches with no diagnostic under strict parsing, each input
of a grouped assert given its sizes and strides as a single assert gives them, and the channels-last image's
true strides in the reproducer (which then checks out against eager) and in the hand-written problem.
The last tests use small synthetic snippets, for forms no capture here can make (the other kernel kinds
need CuTe DSL, FlyDSL or a GPU): their text follows torch 2.14.1's codegen (named in compat.py).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from inductor_lens.errors import ParseError
from inductor_lens.handwritten.problem import launch_problem
from inductor_lens.handwritten.shapes import strides_of
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.call_layouts import WrittenLayout, read_layouts, view_layout, written_layouts
from inductor_lens.parse.diagnostics import Diagnostics
from inductor_lens.parse.output_code import parse_output_code
from inductor_lens.records import GraphRecord
from inductor_lens.repro.arguments import call_layouts, contiguous
from inductor_lens.repro.plan import plan_repro
from inductor_lens.repro.writer import write_repro

from .test_repro import run_script

CASE = "cpu-torch2.14-channels-last"
IMAGE = ((2, 8, 16, 16), (2048, 1, 128, 8))  # the model's input, stored channels-last


def _graph(unpacked: Callable[[str], Path]) -> GraphRecord:
    run = parse_debug_folder(unpacked(CASE) / "capture", strict=True)
    assert run.stats.diagnostics == ()
    (graph,) = run.graphs
    return graph


def test_capture_parses_with_exact_kernels_and_launches(unpacked: Callable[[str], Path]) -> None:
    graph = _graph(unpacked)
    assert graph.id.startswith("model__0_inference_0")
    assert [k.name for k in graph.kernels] == [
        "cpp_fused_convolution_0", "cpp_fused_add_mul_relu_1", "cpp_fused_add_mul_relu_transpose_view_2",
    ]  # fmt: skip
    assert [(la.kind, la.target) for la in graph.launches] == [
        ("cpp", "cpp_fused_convolution_0"),
        ("extern", "extern_kernels.convolution"),
        ("cpp", "cpp_fused_add_mul_relu_1"),
        ("extern", "extern_kernels.addmm"),
        ("extern", "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default"),
        ("extern", "extern_kernels.addmm"),
        ("cpp", "cpp_fused_add_mul_relu_transpose_view_2"),
    ]
    # what makes it a 2.14 capture: three grouped input asserts and two metadata asserts after extern kernels
    assert graph.output_code.count("assert_size_stride_grouped(") == 3
    assert graph.output_code.count("    assert_tensor_metadata(") == 2
    # the metadata asserts type the extern kernels' outputs, which call() does not allocate
    assert (graph.buffers["buf1"], graph.buffers["buf5"]) == ("f32[2, 8, 16, 16]", "f32[2, 2, 256, 4]")
    conv, pointwise = graph.launches[1], graph.launches[2]
    assert conv.writes == ("buf1",) and pointwise.reads == ("buf2", "arg2_1", "arg3_1")


def test_grouped_asserts_give_each_input_its_layout(unpacked: Callable[[str], Path]) -> None:
    layouts = written_layouts(_graph(unpacked).output_code)
    # assert_size_stride_grouped((arg2_1, arg1_1), ((2, 8, 16, 16), (8, )), ((2048, 1, 128, 8), (1, )), 'input')
    assert layouts["arg2_1"].ints() == IMAGE
    assert layouts["arg1_1"] == WrittenLayout(("8",), ("1",))
    assert layouts["arg4_1"].ints() == ((24, 8), (8, 1)) and layouts["arg5_1"].ints() == ((24,), (1,))
    assert layouts["arg0_1"].ints() == ((8, 8, 3, 3), (72, 9, 3, 1))  # a single assert_size_stride
    # assert_tensor_metadata after the convolution and after attention, with the output's dtype
    assert layouts["buf1"].ints() == IMAGE and layouts["buf1"].dtype == "torch.float32"
    assert layouts["buf5"].ints() == ((2, 2, 256, 4), (2048, 4, 8, 1))
    assert layouts["buf8"] == WrittenLayout(("2", "256", "8"), ("2048", "8", "1"), "0", "buf2")  # a view
    assert sorted(n for n in layouts if n.startswith("arg")) == [f"arg{i}_1" for i in range(8)]


def test_reproducer_takes_the_channels_last_input_as_it_is(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    graph = _graph(unpacked)
    kernel = next(k for k in graph.kernels if k.name == "cpp_fused_add_mul_relu_1")
    plan = plan_repro(graph, kernel)
    image = next(a for a in plan.tensor_args if a.written == "arg2_1")
    assert (image.size, image.stride) == IMAGE
    assert image.stride != contiguous(image.size)
    assert call_layouts(graph.output_code, graph.hints)["arg2_1"].stride == IMAGE[1]
    # run: read in any other layout, the kernel's output would not equal eager's
    result = write_repro(unpacked(CASE) / "capture", "cpp_fused_add_mul_relu_1", tmp_path / "repro")
    code, summary = run_script(result.script)
    assert code == 0
    assert summary["check"].startswith("check passed"), summary["check"]


def test_handwritten_problem_sees_the_channels_last_convolution(unpacked: Callable[[str], Path]) -> None:
    graph = _graph(unpacked)
    assert strides_of(graph, "arg2_1") == IMAGE[1]
    conv = next(la for la in graph.launches if la.target == "extern_kernels.convolution")
    problem = launch_problem(graph, None, conv)
    assert problem.concepts == ["convolution"]
    assert problem.shape["channels_last"] == 1
    assert problem.note == ""


# --- synthetic snippets (forms no capture here makes) -------------------------------------------------------


def _call(body: str) -> str:
    return "class Runner:\n    def call(self, args):\n" + textwrap.indent(textwrap.dedent(body), " " * 8)


def test_symbolic_grouped_assert_and_views() -> None:
    """Synthetic: a grouped assert under dynamic shapes (sizes as expressions), a view of an input."""
    code = _call("""
        arg0_1, arg1_1, arg2_1 = args
        assert_size_stride_grouped((arg1_1, arg2_1), ((s77, 64), (2*s77, (s77//2))), ((64, 1), (1, 2*s77)), 'input')
        buf0 = reinterpret_tensor(arg1_1, (64, s77), (1, 64), 128)
        """)
    layouts = written_layouts(code)
    assert layouts["arg1_1"] == WrittenLayout(("s77", "64"), ("64", "1"))
    assert layouts["arg2_1"] == WrittenLayout(("2*s77", "s77//2"), ("1", "2*s77"))  # as ast.unparse writes it
    assert layouts["arg2_1"].ints() is None
    assert layouts["buf0"] == WrittenLayout(("64", "s77"), ("1", "64"), "128", "arg1_1")
    assert call_layouts(code, {"s77": 8})["arg2_1"].size == (16, 4)
    assert view_layout("reinterpret_tensor(buf3, (2, 4), (4, 1), 8)") == WrittenLayout(("2", "4"), ("4", "1"), "8", "buf3")
    assert view_layout("buf3") is None


def test_unreadable_layout_check_is_reported_never_guessed() -> None:
    """Synthetic: a grouped assert whose sizes do not pair with its tensors."""
    body = "assert_size_stride_grouped((arg0_1, arg1_1), ((4, ),), ((1, ), (1, )), 'input')\n"
    read = read_layouts(ast.parse(body).body)
    assert read.layouts == {} and len(read.unreadable) == 1
    code = _call("arg0_1, arg1_1 = args\n" + body)
    with pytest.raises(ParseError, match="not read as sizes and strides"):
        parse_output_code(code, "output_code.py", Diagnostics(strict=True))


@pytest.mark.parametrize(
    ("definer", "launch"),
    [
        # codegen/cutedsl/cutedsl_scheduling.py + CuteDSLTemplateKernel.call_kernel (triton=True): name.run(...)
        ("async_compile.cutedsl", "k0.run(buf0, arg0_1, stream=stream0)"),
        ("async_compile.nv_universal_gemm", "k0.run(buf0, arg0_1, stream=stream0)"),
        # FlyDSL (torch after 2.14.1), launched without .run
        ("async_compile.flydsl", "k0(buf0, arg0_1)"),
        # a CUDA C++ kernel: name.name(args, c_void_p(stream)) (wrapper.py _generate_kernel_call_helper)
        ("async_compile.cuda", "k0.k0(buf0, arg0_1, c_void_p(stream0))"),
    ],
)
def test_other_kernel_kinds_are_noted_and_launched(definer: str, launch: str) -> None:
    """Synthetic: a kernel of a kind whose source is not read is listed with a note; its launch is a library
    call under its name, never an unrecognised call (strict parsing passes)."""
    code = (
        "# kernel path: /tmp/k0.py\n# Topologically Sorted Source Nodes: [mm], Original ATen: [aten.mm]\n"
        f"k0 = {definer}('k0', r'''\nsource\n''', precompile_metadata=None)\n"
        "async_compile.wait(globals())\n"
        + _call(f"arg0_1, = args\nbuf0 = empty_strided_cuda((4, ), (1, ), torch.float32)\n"
                f"# Topologically Sorted Source Nodes: [mm], Original ATen: [aten.mm]\n{launch}\nreturn (buf0, )\n")
    )
    diagnostics = Diagnostics(strict=True)
    parsed = parse_output_code(code, "output_code.py", diagnostics)
    assert parsed.kernels == ()
    assert [(la.kind, la.target, la.aten_op, la.aten_ops) for la in parsed.launches] == [
        ("extern", "k0", None, ("aten.mm",))
    ]
    assert [(d.level, d.message) for d in diagnostics.stats().diagnostics] == [
        ("note", f"k0 is defined by {definer}, which this version does not show as a kernel")
    ]


def test_a_layout_call_does_not_state_is_guessed_and_says_so(fixture_copy: Callable[[str], Path]) -> None:
    """The same capture with the grouped assert of the image cut out of call(): the reproducer takes the
    image as contiguous, and its plan says that this is a guess."""
    root = fixture_copy(CASE) / "capture"
    (path,) = root.glob("torch_compile_debug/run_*/torchinductor/*/output_code.py")
    text = path.read_text()
    grouped = next(line for line in text.splitlines() if "assert_size_stride_grouped((arg2_1, arg1_1)" in line)
    path.write_text(text.replace(grouped + "\n", ""))
    (graph,) = parse_debug_folder(root, strict=True).graphs
    kernel = next(k for k in graph.kernels if k.name == "cpp_fused_add_mul_relu_1")
    args = {a.written: a for a in plan_repro(graph, kernel).tensor_args}
    assert args["arg2_1"].stride == contiguous(IMAGE[0])
    assert args["arg2_1"].layout_why == "call() states no layout for it: taken as contiguous"
    assert args["arg3_1"].layout_why == ""


def test_gpu_wrapper_grouped_assert(unpacked: Callable[[str], Path]) -> None:
    """torch 2.14.1's GPU wrapper (the preview capture of samples/softmax_ln.py, Triton for an H200 generated on
    a CPU): all four inputs checked in one grouped line before the device guard; each gets its layout, and the
    Triton kernel's reproducer takes them from it, none guessed."""
    run = parse_debug_folder(unpacked("cpu-torch2.14.1-softmax_ln-preview"), strict=True)
    assert run.stats.diagnostics == ()
    (graph,) = run.graphs
    assert graph.output_code.count("assert_size_stride_grouped((arg0_1, arg1_1, arg2_1, arg3_1)") == 1
    assert [(la.kind, la.target) for la in graph.launches] == [
        ("triton", "triton_red_fused__softmax_add_mul_native_layer_norm_prepare_softmax_online_0")
    ]
    args = plan_repro(graph, graph.kernels[0]).tensor_args
    assert [(a.written, a.size, a.stride, a.layout_why) for a in args] == [
        ("arg0_1", (2048, 4096), (4096, 1), ""), ("arg1_1", (4096,), (1,), ""), ("arg2_1", (4096,), (1,), ""),
        ("arg3_1", (4096,), (1,), ""), ("buf5", (2048, 4096), (4096, 1), ""),
    ]  # fmt: skip
