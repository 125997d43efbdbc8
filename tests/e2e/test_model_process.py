"""The model process, seen from inside: what it imports, and what it hands back to the tool.

It must stay as light as the user's own script would be: no report, no Jinja2, no CLI. A model file
records ``sys.modules`` (and who imported the report's libraries) when its process exits, after the
compile, the comparison with eager and the timing; the files it left must read back complete.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from inductor_lens.exchange.files import (
    HandwrittenResults,
    read_bench_data,
    read_capture_result,
    read_json_file,
)
from inductor_lens.worker.model_file import MODEL_MODULE_PREFIX

from ..conftest import ROOT, run_cli_process

# The tool's own modules a worker may import: its own package, what crosses the boundary (exchange), the plain data
# it declares, the spec it reads (options, config_options), and the plain formatting of numbers its errors use
# (units: the standard library only).
WORKER_SIDE = tuple(f"inductor_lens.{name}" for name in (
    "worker", "exchange", "records", "options", "config_options", "errors", "version", "units"))  # fmt: skip
# Libraries of the report and the command line. Inductor imports Jinja2 itself (for its templates),
# so the test records who imported each first: it must never be the tool.
PARENT_LIBRARIES = ("jinja2", "markupsafe", "pygments", "click", "graphviz")

MODEL = """
import atexit, importlib.abc, json, os, sys, traceback
import torch

importers = {}

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in WATCHED and name not in importers:
            frames = [f.filename for f in traceback.extract_stack()[:-1]]
            callers = [f for f in frames if "importlib" not in f and not f.startswith("<")]
            importers[name] = callers[-1] if callers else "?"
        return None

WATCHED = __WATCHED__
sys.meta_path.insert(0, Watch())
# Imported before this file was loaded (the tool's worker had run, and torch was imported).
early = sorted(m for m in sys.modules if m.split(".")[0] in WATCHED)

def _record():
    with open(os.environ["MODULES_OUT"], "w") as out:
        json.dump({"modules": sorted(sys.modules), "importers": importers, "early": early}, out)

atexit.register(_record)

def get_model():
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))

def get_inputs():
    return (torch.randn(16, 32),)
""".replace("__WATCHED__", repr(PARENT_LIBRARIES))


def test_model_process_imports_no_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "tiny.py"
    model.write_text(textwrap.dedent(MODEL))
    modules_out = tmp_path / "modules.json"
    monkeypatch.setenv("MODULES_OUT", str(modules_out))
    # a relative model path and --out: the model process and the check process run in the capture folder
    result = run_cli_process("compile", model.name, "--device", "cpu", "--out", "r", "--strict", cwd=tmp_path)
    assert result.code == 0, result.stderr
    recorded = json.loads(modules_out.read_text())
    modules = recorded["modules"]
    assert "torch" in modules and "inductor_lens.worker.capture" in modules
    assert "inductor_lens.worker.measure" in modules  # it was timed, so the whole child side ran
    # the model file itself is imported as ``inductor_lens_model_<stem>`` (worker/model_file.py): not a tool module
    ours = [m for m in modules if m.startswith("inductor_lens") and not m.startswith(MODEL_MODULE_PREFIX)]
    assert [m for m in ours if m != "inductor_lens" and not m.startswith(WORKER_SIDE)] == []
    package = str(ROOT / "inductor_lens")
    by_us = {name: who for name, who in recorded["importers"].items() if who.startswith(package)}
    assert recorded["early"] == [] and by_us == {}
    # what crossed back is complete and typed
    capture = tmp_path / "r" / "capture"
    outcome = read_capture_result(capture / "capture.json")
    assert outcome is not None and outcome.status == "ok" and outcome.phase == "done"
    assert outcome.accuracy is not None and outcome.accuracy.within_tolerance
    bench = read_bench_data(capture / "capture.json")
    assert bench is not None and bench.device == "cpu" and bench.end_to_end is not None
    assert bench.profile is not None and bench.profile.steps == 20
    handwritten = read_json_file(capture / "handwritten.json", HandwrittenResults)
    assert handwritten is not None and handwritten.device == "cpu" and handwritten.results


