"""Unit tier: torch 2.14's kernel information (capture/kernel_information.json) joined to the library calls.

``cpu-torch2.14.1-mlp-train`` is samples/mlp.py trained on torch 2.14.1 (CPU): a forward graph with two
``extern_kernels.addmm`` and a lazily compiled backward with three ``extern_kernels.mm``; the model process
kept each compile's ``create_kernel_information_json()``. The expected tensors are read here from the raw file,
independently of the reader. ``cpu-torch2.13-custom-op`` (torch 2.13, no such file) stays as it was.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from inductor_lens.bench.roofline import extern_cost
from inductor_lens.errors import ParseError
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.kernel_information import attach_kernel_information
from inductor_lens.records import CompileRun
from inductor_lens.worker import kernel_information as kernel_information_module
from inductor_lens.worker.kernel_information import kernel_information

from ..conftest import FIXED_TIME

FIXTURE_214 = "cpu-torch2.14.1-mlp-train"
FIXTURE_213 = "cpu-torch2.13-custom-op"
SHORT = {"torch.float32": "f32"}


def _run(root: Path, capture: Path | None = None, *, strict: bool = True) -> CompileRun:
    run = parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME)
    return attach_kernel_information(run, capture or root / "capture", strict=strict)


def _raw_entries(root: Path) -> dict[tuple[str | None, str], dict[str, object]]:
    raw = json.loads((root / "capture" / "kernel_information.json").read_text())
    return {(c["compile_id"], key): entry for c in raw["compiles"] for key, entry in c["kernels"].items()}


def _typed(dtype: str, shape: list[int]) -> str:
    return f"{SHORT[dtype]}[{', '.join(str(d) for d in shape)}]"


def test_extern_launches_take_the_recorded_shapes(unpacked: Callable[[str], Path]) -> None:
    root = unpacked(FIXTURE_214)
    run = _run(root)
    raw = _raw_entries(root)
    # the forward's compile is 0/0; the backward, compiled at the first backward call, has no compile id
    assert sorted(raw, key=str) == sorted(
        [("0/0", "extern_kernels.addmm:1"), ("0/0", "cpp_fused_gelu_0:2"), ("0/0", "extern_kernels.addmm:3"),
         (None, "extern_kernels.mm:1"), (None, "extern_kernels.mm:2"), (None, "cpp_fused_gelu_gelu_backward_sum_0:3"),
         (None, "extern_kernels.mm:4"), (None, "cpp_fused_sum_1:5")], key=str,
    )  # fmt: skip
    compile_of = {"forward": "0/0", "backward": None}
    seen = []
    for graph in run.graphs:
        assert graph.compile_id == "0/0"
        for launch in graph.launches:
            assert launch.handle is not None
            entry = raw[(compile_of[graph.kind], launch.handle)]
            if launch.kind != "extern":
                assert launch.tensors is None and "input_shapes" not in entry
                continue
            assert launch.tensors is not None and launch.tensors.source == "kernel_information"
            assert launch.tensors.inputs == tuple(
                _typed(d, s) for s, d in zip(entry["input_shapes"], entry["input_dtypes"], strict=True)  # type: ignore[call-overload]
            )
            assert launch.tensors.output == _typed(entry["output_dtype"], entry["output_shape"])  # type: ignore[arg-type]
            seen.append((graph.kind, launch.handle, launch.tensors.inputs, launch.tensors.output))
    assert seen == [
        ("forward", "extern_kernels.addmm:1", ("f32[4096]", "f32[256, 1024]", "f32[1024, 4096]"), "f32[256, 4096]"),
        ("forward", "extern_kernels.addmm:3", ("f32[1024]", "f32[256, 4096]", "f32[4096, 1024]"), "f32[256, 1024]"),
        ("backward", "extern_kernels.mm:1", ("f32[256, 1024]", "f32[1024, 4096]"), "f32[256, 4096]"),
        ("backward", "extern_kernels.mm:2", ("f32[1024, 256]", "f32[256, 4096]"), "f32[1024, 4096]"),
        ("backward", "extern_kernels.mm:4", ("f32[4096, 256]", "f32[256, 1024]"), "f32[4096, 1024]"),
    ]


def test_costs_of_library_calls_come_from_the_recorded_shapes(unpacked: Callable[[str], Path]) -> None:
    forward = _run(unpacked(FIXTURE_214)).graphs[0]
    first = next(launch for launch in forward.launches if launch.kind == "extern")
    moved, flops, source = extern_cost(forward, first)
    assert source == "counted from Inductor's kernel information: A, B (and bias) read, C written; 2*M*N*K FLOPs"
    assert flops == 2 * 256 * 1024 * 4096
    assert moved == 4 * (256 * 1024 + 1024 * 4096 + 256 * 4096 + 4096)


def test_a_capture_without_the_file_is_unchanged(unpacked: Callable[[str], Path]) -> None:
    root = unpacked(FIXTURE_213)
    assert not (root / "capture" / "kernel_information.json").exists()
    plain = parse_debug_folder(root, strict=True, now=lambda: FIXED_TIME)
    run = attach_kernel_information(plain, root / "capture", strict=True)
    assert run == plain
    externs = [launch for graph in run.graphs for launch in graph.launches if launch.kind == "extern"]
    assert len(externs) == 2 and all(launch.tensors is None for launch in externs)
    addmm = next(launch for launch in externs if launch.target == "extern_kernels.addmm")
    assert extern_cost(run.graphs[0], addmm)[2].startswith("counted: A, B (and bias) read")


def test_a_damaged_file_is_a_warning_or_under_strict_an_error(
    unpacked: Callable[[str], Path], tmp_path: Path
) -> None:
    root = unpacked(FIXTURE_214)
    capture = tmp_path / "capture"
    capture.mkdir()
    shutil.copy(root / "capture" / "kernel_information.json", capture)
    (capture / "kernel_information.json").write_text('{"compiles": [{"compile_id": 3}]}')
    run = _run(root, capture, strict=False)
    assert all(launch.tensors is None for graph in run.graphs for launch in graph.launches)
    assert [d.message.split(" (")[0] for d in run.stats.diagnostics if d.where.endswith("kernel_information.json")] == [
        "kernel information not read, library calls' shapes read from the code"
    ]
    with pytest.raises(ParseError, match="kernel information not read"):
        _run(root, capture, strict=True)


def test_older_torch_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # torch 2.13: create_kernel_information_json and reset_provenance_globals, but no shapes of extern kernels
    debug = SimpleNamespace(
        reset_provenance_globals=lambda: pytest.fail("patched"),
        create_kernel_information_json=lambda: {"extern_kernels.mm:1": {"post_grad_nodes": ["mm"]}},
    )
    monkeypatch.setattr(kernel_information_module, "inductor_debug", lambda: debug)
    original = debug.reset_provenance_globals
    with kernel_information(tmp_path):
        assert debug.reset_provenance_globals is original  # torch's compile is left as it is
    assert list(tmp_path.iterdir()) == []
