"""Seeded fuzz cases of ``report``: real captures made odd, as folders from the field are (files
truncated, emptied, deleted, bytes flipped, trace records and json files whose values have another
type, an artifact name that is a list...), give a report or a one-line error, never a traceback.

The harness is benchmarks/fuzz_report.py (``python benchmarks/fuzz_report.py --cases 10000``); a hundred
and more of its cases run here, most without rendering (the strict run never renders), some rendered.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ..conftest import ROOT

HARNESS = ROOT / "benchmarks" / "fuzz_report.py"
SEED = 12
PARSED = range(0, 120)  # lenient and strict, parse stage and the rest of report_folder, no rendering
RENDERED = range(120, 132)  # the lenient run rendered too


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fuzz_report", HARNESS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not HARNESS.is_file(), reason="benchmarks/ is not shipped in the sdist")
def test_fuzzed_captures_never_end_in_a_traceback(tmp_path: Path) -> None:
    fuzz = _harness()
    results = fuzz.run_cases(SEED, list(PARSED), render="none", base=tmp_path)
    results += fuzz.run_cases(SEED, list(RENDERED), render="lenient", base=tmp_path)
    outcomes = [(r, mode, getattr(r, mode)) for r in results for mode in ("lenient", "strict")]
    uncaught = [
        f"case {r.index} {mode}: {o.detail} at {o.place}; {r.mutations}"
        for r, mode, o in outcomes
        if o.kind == "uncaught"
    ]
    assert uncaught == []
    assert [r.index for r, _, o in outcomes if o.raw_bytes] == []  # one-line errors escape raw bytes
    assert [r.index for r, _, o in outcomes if o.net] == []  # no parser needed the safety net
    # the cases are varied enough: lenient always gives a report, strict often refuses
    assert all(r.lenient.kind == "report" for r in results)
    strict_errors = sum(r.strict.kind == "error" for r in results)
    assert 0.2 * len(results) < strict_errors < 0.9 * len(results)
    # every fixture that is a capture (a TORCH_COMPILE_DEBUG folder; not the saved lens.json documents, nor the
    # trace-and-profile excerpt of a several-rank job) was fuzzed
    captures = {c.name for c in fuzz.unpack_all(tmp_path / "captures")}
    assert len(captures) >= 38 and {r.capture for r in results} == captures
