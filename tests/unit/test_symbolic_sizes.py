"""Symbolic sizes on small hand-written inputs: the evaluator, types at their hints, the FX lines and
call() statements of dynamic wrappers, the benchmark harness, and the trace records of dynamic shapes."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from inductor_lens.bench.roofline import hinted, nbytes, tensor_type
from inductor_lens.parse.diagnostics import Diagnostics
from inductor_lens.parse.fx_graph import parse_fx_graph
from inductor_lens.parse.ir import parse_ir
from inductor_lens.parse.output_code import parse_output_code
from inductor_lens.parse.symbolic import annotate, evaluate, is_symbol, symbols_in, tensor_dims
from inductor_lens.parse.trace import read_traces


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2*s53", 48),
        ("s27*s77", 2048),
        ("(s53//5)", 4),
        ("s53 % 5 + 1", 5),
        ("-s53 + 32", 8),
        ("Max(1, s53)", 24),
        ("Min(s53, 8)", 8),
        ("FloorDiv(s53, 7)", 3),
        ("CeilDiv(s53, 7)", 4),
        ("s53**2", 576),
        ("4096", 4096),
        ("zf0", 1e-05),
    ],
)
def test_sizes_are_worked_out_at_their_hints(expression: str, value: float) -> None:
    assert evaluate(expression, {"s53": 24, "s27": 256, "s77": 8, "zf0": 1e-05}) == value


@pytest.mark.parametrize(
    "expression",
    [
        "u0 * 2",  # no hint (an unbacked size)
        "s53 / 2",  # true division is not a size
        "s53 // 0",
        "s53 ** s53 ** s53",  # far beyond any size
        "__import__('os').system('true')",
        "open('x')",
        "s53.bit_length()",
        "[s53][0]",
        "s53 if s53 else 1",
        "",
        "2 *",
    ],
)
def test_anything_else_is_not_evaluated(expression: str) -> None:
    assert evaluate(expression, {"s53": 24}) is None


def test_types_show_and_count_their_hints() -> None:
    hints = {"s53": 24, "s77": 8, "s27": 256}
    assert annotate("f32[2, s53, 32]", hints) == "f32[2, s53=24, 32]"
    assert annotate("f32[s27*s77, 1536][1536, 1]cpu", hints) == "f32[s27*s77=2048, 1536][1536, 1]cpu"
    assert annotate("Sym(2*s53)", hints) == "Sym(2*s53)=48"
    assert annotate("f32[u0, 4]", hints) == "f32[u0, 4]"  # no hint: left as written
    assert annotate("bf16[1024, 8192]", hints) == "bf16[1024, 8192]"  # static types are untouched
    assert annotate(None, hints) == ""
    assert tensor_dims("f32[2, s53, 32]", hints) == ("f32", [2, 24, 32])
    assert tensor_dims("f32[2, s53, 32]") is None  # symbolic without hints
    assert tensor_type("i64[(s53//2), 4]", hints) == ("i64", [12, 4])
    assert nbytes("f32[s27*s77, 512]", hints) == 2048 * 512 * 4
    assert symbols_in("f32[s27*s77, s27, ps0, zf1, u3, x0, ks0, 4]") == ("s27", "s77", "ps0", "zf1", "u3")
    assert is_symbol("s53") and is_symbol("ps0") and not is_symbol("buf0") and not is_symbol("ks0")
    assert hinted("counted", hints, ["f32[s77, s27, 1]", "f32[512]", None]) == (
        "counted; from size hints s77=8, s27=256"
    )
    assert hinted("counted", hints, ["f32[512]"]) == "counted"


def test_fx_nodes_typed_sym_are_operators_on_sizes() -> None:
    text = textwrap.dedent(
        """
        class <lambda>(torch.nn.Module):
            def forward(self, arg0_1: "f32[100, 32]", arg1_1: "Sym(s53)", arg2_1: "i64[2, s53]"):
                # File: /m/model.py:18 in forward, code: hidden = self.embed(input_ids)
                embedding: "f32[2, s53, 32]" = torch.ops.aten.embedding.default(arg0_1, arg2_1);  arg0_1 = None
                mul_8: "Sym(2*s53)" = 2 * arg1_1
                floordiv: "Sym((s53//2))" = arg1_1 // 2
                neg: "Sym(-s53)" = -arg1_1
                eq: "Sym(Eq(s53, 4))" = arg1_1 == 4
                view: "f32[2*s53, 32]" = torch.ops.aten.view.default(embedding, [mul_8, 32]);  mul_8 = None
                return (view, floordiv, neg, eq)
        """
    )
    graph = parse_fx_graph(text, "readable", "fx_graph_readable.py", Diagnostics(strict=True))
    nodes = {n.name: n for n in graph.nodes}
    assert (nodes["mul_8"].op, nodes["mul_8"].target, nodes["mul_8"].type) == (
        "call_function",
        "operator.mul",
        "Sym(2*s53)",
    )
    assert nodes["mul_8"].inputs == ("arg1_1",)
    assert nodes["mul_8"].source is not None and nodes["mul_8"].source.line == 18
    assert [nodes[n].target for n in ("floordiv", "neg", "eq")] == [
        "operator.floordiv",
        "operator.neg",
        "operator.eq",
    ]
    assert nodes["view"].inputs == ("embedding", "mul_8")
    assert nodes["arg1_1"].type == "Sym(s53)"


DYNAMIC_WRAPPER = textwrap.dedent(
    """
    cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*', 'const int64_t'], r'''
    extern "C"  void  kernel(float* in_out_ptr0, const int64_t ks0)
    {
    }
    ''')

    class Runner:
        def call(self, args):
            arg0_1, arg1_1, arg2_1 = args
            args.clear()
            s70 = arg0_1
            arg1_1_size = arg1_1.size()
            s53 = arg1_1_size[1]
            arg1_1.stride()
            ps0 = 32*s53
            assert_size_stride(arg1_1, (2, s53), (s53, 1), 'input')
            buf0 = empty_strided_cpu((2*s53, 32), (32, 1), torch.float32)
            extern_kernels.mm(reinterpret_tensor(arg2_1, (2*s53, 32), (32, 1), 0), arg2_1, out=buf0)
            buf1 = reinterpret_tensor(buf0, (2, s53, 32), (ps0, 32, 1), 0); del buf0  # reuse
            cpp_fused_relu_0_xnumel = 64*s53
            cpp_fused_relu_0(buf1, s53, cpp_fused_relu_0_xnumel)
            return (buf1, s70, )

    runner = Runner(partitions=[])
    call = runner.call


    def get_args():
        from torch._dynamo.testing import rand_strided
        arg0_1 = 24
        arg1_1 = rand_strided((2, 24), (24, 1), device='cpu', dtype=torch.float32)
        arg2_1 = rand_strided((48, 32), (32, 1), device='cpu', dtype=torch.float32)
        return [arg0_1, arg1_1, arg2_1]
    """
)


def test_dynamic_wrapper_reads_sizes_before_its_launches() -> None:
    parsed = parse_output_code(DYNAMIC_WRAPPER, "output_code.py", Diagnostics(strict=True))
    assert [(launch.kind, launch.target) for launch in parsed.launches] == [
        ("extern", "extern_kernels.mm"),
        ("cpp", "cpp_fused_relu_0"),
    ]
    assert parsed.sizes == {
        "s70": "arg0_1",
        "arg1_1_size": "arg1_1.size()",
        "s53": "arg1_1_size[1]",
        "ps0": "32 * s53",
        "cpp_fused_relu_0_xnumel": "64 * s53",  # a numel Triton wrappers name before a launch
    }
    assert parsed.buffers == {"buf0": "f32[2*s53, 32]", "buf1": "f32[2, s53, 32]"}
    assert parsed.aliases == {"buf1": "buf0"}  # sizes are not storage aliases
    assert parsed.launches[1].reads == ("buf1",) and parsed.launches[1].writes == ("buf1",)
    assert parsed.outputs == ("buf1",)  # a size returned for backward is not a tensor
    assert parsed.harness == {"arg0_1": 24, "arg1_1": (2, 24), "arg2_1": (48, 32)}


def test_an_empty_scheduler_dump_is_a_graph_without_kernels() -> None:
    diagnostics = Diagnostics()
    assert parse_ir("", "pre_fusion", "ir_pre_fusion.txt", diagnostics).nodes == ()
    assert diagnostics.stats().warnings == ()
    parse_ir("something else\n", "pre_fusion", "ir_pre_fusion.txt", diagnostics)
    assert [w.message for w in diagnostics.stats().warnings] == [
        "unrecognised IR line: something else",
        "no scheduler nodes found",
    ]


LINE = "V1124 01:06:50.898000 3218 torch/fx/experimental/symbolic_shapes.py:5754] "
IDS = {"frame_id": 0, "frame_compile_id": 1, "attempt": 0}
STACK = [{"line": 19, "name": "forward", "filename": 7, "loc": "return x[:, 1:5]"}]


def _trace(tmp_path: Path, *records: dict) -> Path:
    path = tmp_path / "dedicated_log_torch_trace_x.log"
    lines = [LINE + json.dumps({"str": ["/m/model.py", 7]})] + [LINE + json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_trace_records_of_dynamic_shapes(tmp_path: Path) -> None:
    path = _trace(
        tmp_path,
        {"create_symbol": {"symbol": "s27", "val": "16", "vr": "[2, int_oo]", "source": "L['x'].size()[1]",
                           "user_stack": STACK, "stack": []}, **IDS},
        {"create_unbacked_symbol": {"symbol": "u0", "node_id": 1, "vr": "[-int_oo, int_oo]", "user_stack": [],
                                    "stack": []}, **IDS},
        {"guard_added_fast": {"expr": "Eq(s27, 16)", "user_stack": STACK, "stack": []}, **IDS},
        {"guard_added": {"expr": "Eq(s27, 16)", "prefix": "", "user_stack": STACK}, **IDS},
        {"symbolic_shape_specialization": {"symbol": "s27", "sources": ["L['x'].size()[1]"], "value": "16",
                                           "reason": "range_refined_to_singleton", "user_stack": STACK}, **IDS},
        {"guard_added_fast": {"expr": "s27 >= 5", "user_stack": []}, **IDS},
    )  # fmt: skip
    traces = read_traces([path], tmp_path, Diagnostics(strict=True))
    frame = traces.frames["0/1"]
    (s27, u0) = frame.symbols
    assert (s27.name, s27.hint, s27.hint_from, s27.source, s27.range) == (
        "s27",
        16,
        "trace",
        "L['x'].size()[1]",
        "[2, int_oo]",
    )
    assert s27.user_line is not None and (s27.user_line.filename, s27.user_line.line) == ("/m/model.py", 19)
    assert (u0.name, u0.hint, u0.range) == ("u0", None, "[-int_oo, int_oo]")
    assert [(g.expr, g.user_line is not None) for g in frame.shape_guards] == [
        ("Eq(s27, 16)", True),  # logged twice (guard_added_fast and guard_added), kept once
        ("s27 >= 5", False),
    ]
    (spec,) = frame.specializations
    assert (spec.symbol, spec.value, spec.guard, spec.sources) == (
        "s27",
        "16",
        "Eq(s27, 16)",
        ("L['x'].size()[1]",),
    )


def test_dynamic_shape_records_of_another_shape_are_warnings(tmp_path: Path) -> None:
    path = _trace(
        tmp_path,
        {"create_symbol": {"symbol": "s0", "val": 16, "vr": "[2, int_oo]", "source": "x"}, **IDS},
        {"create_symbol": ["not", "an", "object"], **IDS},
        {
            "symbolic_shape_specialization": {"symbol": "s0", "sources": "x", "value": "1", "reason": "r"},
            **IDS,
        },
        {"guard_added_fast": {"expr": None}, **IDS},
        {"guard_added_fast": {"expr": "Eq(s0, 1)", "user_stack": [{"line": "x"}, 5]}, **IDS},
    )
    diagnostics = Diagnostics()
    traces = read_traces([path], tmp_path, diagnostics)
    assert [w.message for w in diagnostics.stats().warnings] == [
        "line 2: create_symbol record field val is a JSON number; skipped",
        "line 3: create_symbol record is not a JSON object; skipped",
        "line 4: symbolic_shape_specialization record field sources is a JSON string; skipped",
        "line 5: guard_added_fast record field expr is a JSON null; skipped",
    ]
    frame = traces.frames["0/1"]
    assert frame.symbols == [] and frame.specializations == []
    assert [g.expr for g in frame.shape_guards] == ["Eq(s0, 1)"]  # odd stack frames are skipped
