"""The parser registry: everything the real captures hold is declared, the rest is a counted warning
(an error under strict), and records of the wrong shape are warnings, never exceptions."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from inductor_lens.errors import ParseError
from inductor_lens.parse import parse_debug_folder, readers, registry
from inductor_lens.parse.diagnostics import Diagnostics
from inductor_lens.parse.ir import parse_ir
from inductor_lens.parse.readers import REGISTRY
from inductor_lens.parse.trace import read_traces

from ..conftest import CPU_CASE, GPU_CASES, TIMED_CASE

ALL_CASES = (*GPU_CASES, CPU_CASE, TIMED_CASE)
# Read independently of the parser: the JSON envelope of each record line.
RECORD = re.compile(r"^[VIWEC]\d{4} [\d:.]+\s+\d+ [^\]]*\] (\{.*\})\s*$")
ENVELOPE = {"frame_id", "frame_compile_id", "attempt", "has_payload", "compiled_autograd_id", "rank", "stack"}

KINDS_IN_FIXTURES = {
    "aot_backward_graph", "aot_forward_graph", "aot_inference_graph", "aot_joint_graph", "artifact",
    "bwd_compilation_metrics", "chromium_event", "compilation_metrics", "compilation_metrics_runtime",
    "describe_source", "describe_storage", "describe_tensor", "dynamo_cpp_guards_str", "dynamo_output_graph",
    "dynamo_start", "inductor_output_code", "str",
}  # fmt: skip
ARTIFACTS_IN_FIXTURES = {
    "after_joint_graph", "after_pre_grad_graph", "aot_forward_graph_fw_metadata", "aotautograd_cache_miss",
    "backward_epilogue", "backward_prologue", "before_joint_graph", "before_post_grad_graph",
    "before_pre_grad_graph", "compiled_fn_wrapper", "compiled_function_backward", "compiled_function_forward",
    "fx_graph_cache_miss", "fx_graph_runnable", "inductor_post_grad_graph",
    "inductor_provenance_tracking_kernel_stack_traces", "inductor_provenance_tracking_node_mappings",
    "recompile_reasons", "runtime_wrapper_orchestration", "torch._functorch.config", "torch_version",
    "triton_kernel_info",
}  # fmt: skip
# Seen in the real GPU captures of /work/shared/fixtures (not committed), or read today.
OTHER_REAL_NAMES = {
    ("trace record", "bwd_compilation_metrics_runtime"),
    ("trace artifact", "dynamo_side_effects"),
    ("trace artifact", "dynamo_graph_break_reason"),
}


def _trace_names(root: Path) -> tuple[Counter[str], set[str]]:
    kinds: Counter[str] = Counter()
    artifacts: set[str] = set()
    for path in root.rglob("dedicated_log_torch_trace*.log"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if match := RECORD.match(line):
                envelope = json.loads(match[1])
                kind = next(k for k in envelope if k not in ENVELOPE)
                kinds[kind] += 1
                if kind == "artifact":
                    artifacts.add(envelope["artifact"]["name"])
    return kinds, artifacts


def test_every_record_kind_and_artifact_of_the_fixtures_is_registered(unpacked) -> None:
    kinds: Counter[str] = Counter()
    artifacts: set[str] = set()
    for case in ALL_CASES:
        case_kinds, case_artifacts = _trace_names(unpacked(case))
        kinds += case_kinds
        artifacts |= case_artifacts
    assert set(kinds) == KINDS_IN_FIXTURES
    assert artifacts == ARTIFACTS_IN_FIXTURES
    found = (
        {("trace record", k) for k in kinds} | {("trace artifact", a) for a in artifacts} | OTHER_REAL_NAMES
    )
    assert all(REGISTRY.find(source, name) is not None for source, name in found)  # type: ignore[arg-type]
    shown = {name for source, name in found if REGISTRY.find(source, name).shown}  # type: ignore[arg-type, union-attr]
    assert shown == {
        "artifact", "bwd_compilation_metrics", "compilation_metrics", "dynamo_cpp_guards_str",
        "dynamo_output_graph", "dynamo_start", "inductor_output_code", "str", "dynamo_graph_break_reason",
        "inductor_provenance_tracking_kernel_stack_traces", "inductor_provenance_tracking_node_mappings",
        "recompile_reasons", "triton_kernel_info", "fx_graph_cache_miss", "aotautograd_cache_miss", "chromium_event",
        # a compile's IR stages (DynamoFrame.stages)
        "aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph",
        "aot_forward_graph_fw_metadata", "before_pre_grad_graph", "after_pre_grad_graph", "before_joint_graph",
        "after_joint_graph", "before_post_grad_graph", "inductor_post_grad_graph",
    }  # fmt: skip


def test_every_file_of_the_fixtures_graph_folders_is_registered(unpacked) -> None:
    names = {
        path.name
        for case in ALL_CASES
        for path in unpacked(case).rglob("torchinductor/*/*")
        if path.is_file()
    }
    assert names == {
        "bench_k.txt", "debug.log", "fx_graph_readable.py", "fx_graph_runnable.py", "fx_graph_transformed.py",
        "graph_diagram.svg", "inductor_provenance_tracking_node_mappings.json", "info.log", "ir_post_fusion.txt",
        "ir_pre_fusion.txt", "orig_fx_graph_diagram.svg", "output_code.py",
    }  # fmt: skip
    not_shown = {n for n in names if not REGISTRY.find("graph file", n).shown}  # type: ignore[union-attr]
    assert not_shown == {"debug.log", "graph_diagram.svg", "info.log", "orig_fx_graph_diagram.svg"}


def test_record_kinds_are_counted_and_runtime_metrics_pass_strict(unpacked) -> None:
    root = unpacked("block_reduce_overhead")
    traces = read_traces(sorted(root.rglob("dedicated_log_torch_trace*.log")), root, Diagnostics(strict=True))
    kinds, _ = _trace_names(root)
    assert traces.record_kinds == kinds
    assert traces.record_kinds["compilation_metrics_runtime"] == 37


def test_declarations_are_complete() -> None:
    for parser in REGISTRY.parsers:
        assert parser.description, parser.name
        assert parser.shown == bool(parser.goes_to), parser.name
        assert parser.shown or (parser.reason and parser.torch), parser.name
    # every record field graph.py and __init__.py fill has exactly the parsers they expect
    assert [p.reads for p in REGISTRY.of("graph file", readers.KERNELS)] == ["output_code.py"]
    assert [p.reads for p in REGISTRY.of("graph file", readers.FX_GRAPHS)] == [
        "fx_graph_readable.py",
        "fx_graph_transformed.py",
    ]
    assert (
        len(REGISTRY.of("process log", readers.AUTOTUNE))
        == len(REGISTRY.of("process log", readers.COMPILE_IDS))
        == 1
    )
    with pytest.raises(ValueError, match="declared twice"):
        registry.Registry([*readers.GRAPH_FILES, readers.GRAPH_FILES[0]])


def test_families_of_names_match_by_glob() -> None:
    assert REGISTRY.find("trace artifact", "forward_ORIGINAL_BYTECODE") is not None
    assert REGISTRY.find("trace artifact", "normalization_pass_aten_post_grad") is not None
    assert REGISTRY.find("graph file", "graph_diagram.png") is not None
    assert REGISTRY.find("trace artifact", "brand_new_artifact") is None
    assert REGISTRY.find("trace artifact", ["a", "list"]) is None


# --- unknown content --------------------------------------------------------------------------

LINE = "V1121 21:49:53.467000 994 torch/x.py:1] "


def _trace(tmp_path: Path, *records: dict, payloads: dict[int, str] | None = None) -> Path:
    lines = []
    for index, record in enumerate(records):
        lines.append(LINE + json.dumps(record))
        for payload_line in (payloads or {}).get(index, "").splitlines():
            lines.append("\t" + payload_line)
    path = tmp_path / "dedicated_log_torch_trace_x.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _warnings(path: Path) -> list[str]:
    diagnostics = Diagnostics()
    read_traces([path], path.parent, diagnostics)
    return [f"{d.message} x{d.count}" for d in diagnostics.stats().warnings]


IDS = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}


def test_unknown_kind_and_artifact_are_counted_warnings_and_strict_errors(tmp_path: Path) -> None:
    path = _trace(
        tmp_path,
        {"brand_new_kind": {}, **IDS},
        {"brand_new_kind": {}, **IDS},
        {"artifact": {"name": "brand_new_artifact", "encoding": "string"}, **IDS},
        {"compilation_metrics_runtime": {}, **IDS},
        {**IDS},
    )
    assert _warnings(path) == [
        "record kind 'brand_new_kind' not known to this version; skipped x2",
        "artifact 'brand_new_artifact' not known to this version; skipped x1",
        "line 5: record has no kind; skipped x1",
    ]
    with pytest.raises(ParseError, match="record kind 'brand_new_kind' not known to this version"):
        read_traces([path], tmp_path, Diagnostics(strict=True))


def test_unknown_graph_file_is_a_warning_and_a_strict_error(fixture_copy) -> None:
    root = fixture_copy("mlp_default")
    (folder,) = root.glob("torch_compile_debug/run_*/torchinductor/model__1_inference_3.1")
    (folder / "new_dump.txt").write_text("x", encoding="utf-8")
    run = parse_debug_folder(root)
    assert [(w.where.rsplit("/", 1)[-1], w.message) for w in run.stats.warnings] == [
        ("new_dump.txt", "file not known to this version; skipped")
    ]
    with pytest.raises(ParseError, match=r"new_dump\.txt: file not known to this version"):
        parse_debug_folder(root, strict=True)


# --- records of the wrong shape ---------------------------------------------------------------


def test_wrong_shapes_are_warnings_not_exceptions(tmp_path: Path) -> None:
    path = _trace(
        tmp_path,
        {"str": ["/m/model.py", "abc"]},
        {"str": ["/m/model.py", [1]]},
        {"artifact": {"name": ["triton_kernel_info"], "encoding": "json"}, **IDS},
        {"compilation_metrics": {"co_name": "forward", "co_firstlineno": "12", "restart_reasons": 7}, **IDS},
        {"artifact": {"name": "triton_kernel_info", "encoding": "json"}, **IDS, "has_payload": "x"},
        {"dynamo_start": {"stack": "not a list"}, **IDS},
        {"dynamo_start": {"stack": [{"line": 3, "name": ["f"], "filename": 0}]}, **IDS},
        {"compilation_metrics": {}, "frame_id": "²", "frame_compile_id": 0},
        {"bwd_compilation_metrics": [1, 2], **IDS},
        payloads={4: json.dumps({"k1": {"best_config": [1, 2], "autotune_cache_state": ["hit"]}, "k2": 3})},
    )
    assert _warnings(path) == [
        "line 1: str record is not [text, index]; skipped x1",
        "line 2: str record is not [text, index]; skipped x1",
        "line 3: artifact record has no name string; skipped x1",
        "line 4: compilation_metrics co_firstlineno is a JSON string; left out x1",
        "line 4: compilation_metrics restart_reasons is a JSON number; left out x1",
        "line 5: triton_kernel_info best_config of k1 has another shape; left out x1",
        "line 5: triton_kernel_info autotune_cache_state of k1 has another shape; left out x1",
        "line 5: triton_kernel_info of k2 is a JSON number; skipped x1",
        "line 7: dynamo_start record has no stack list; skipped x1",
        "line 8: dynamo_start record has a stack frame whose name or code is not a string; skipped x1",
        "line 9: compilation_metrics record has a frame_id that is not an integer; skipped x1",
        "line 10: bwd_compilation_metrics record is not a JSON object; skipped x1",
    ]


def test_payload_json_of_another_type_is_a_warning(tmp_path: Path) -> None:
    path = _trace(
        tmp_path,
        {"inductor_output_code": {"filename": "x.py"}, **IDS, "has_payload": "md5"},
        {"artifact": {"name": "inductor_provenance_tracking_node_mappings", "encoding": "json"}, **IDS},
        {"artifact": {"name": "inductor_provenance_tracking_kernel_stack_traces", "encoding": "json"}, **IDS},
        payloads={0: "code", 1: "[1, 2]", 2: "{not json"},
    )
    assert _warnings(path) == [
        "line 3: artifact inductor_provenance_tracking_node_mappings: payload is a JSON array, not an object x1",
        "line 5: artifact inductor_provenance_tracking_kernel_stack_traces: payload is not JSON x1",
    ]


def test_safety_net_names_the_parser_and_the_file() -> None:
    def broken(text: str, where: str, diagnostics: Diagnostics) -> None:
        raise KeyError("surprise")

    parser = registry.Parser("graph file", "odd.txt", "a parser with a bug", "GraphRecord.ir", broken)
    diagnostics = Diagnostics()
    assert registry.run(parser, "g/odd.txt", diagnostics, "text", "g/odd.txt", diagnostics, default=()) == ()
    (warning,) = diagnostics.stats().warnings
    assert warning.where == "g/odd.txt"
    assert warning.message == (
        f"the graph file odd.txt parser {registry.NET_MARK} (KeyError: 'surprise'); skipped"
    )
    with pytest.raises(ParseError, match=r"the graph file odd\.txt parser failed unexpectedly"):
        strict = Diagnostics(strict=True)
        registry.run(parser, "g/odd.txt", strict, "text", "g/odd.txt", strict)


# --- escaping ----------------------------------------------------------------------------------


def test_binary_bytes_of_a_corrupt_ir_line_are_escaped() -> None:
    text = "op0: SchedulerNode(ComputedBuffer)\n\x00\x1b[31m\x07garbage\udc80\n"
    with pytest.raises(ParseError) as raised:
        parse_ir(text, "post_fusion", "ir_post_fusion.txt", Diagnostics(strict=True))
    message = raised.value.one_line()
    assert message == "ir_post_fusion.txt: unrecognised IR line: \\x00\\x1b[31m\\x07garbage\\udc80"
    assert message.isprintable()
    diagnostics = Diagnostics()
    parse_ir(text, "post_fusion", "ir_post_fusion.txt", diagnostics)
    assert all(d.message.isprintable() for d in diagnostics.stats().diagnostics)
