"""End to end on CPU: `inductor-lens compile` on every sample (C++ kernels), and on broken model files.

Each compile runs the model in a child process (about 10-20 s on 2 cores), so these are marked slow.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from inductor_lens.errors import CaptureTimeout, CompileError, ModelFileError, ModelRunError, UsageError

from ..conftest import SAMPLES, assert_one_line_error, run_cli_process

SAMPLE_NAMES = ("mlp", "softmax_ln", "block", "convnet", "graphbreak", "channels_last")


def _compile(tmp_path: Path, model: Path, *args: str, out: str = "report"):
    return run_cli_process(
        "compile", model, "--device", "cpu", "--out", tmp_path / out, "--strict", *args, cwd=tmp_path
    )


def _lens(report: Path) -> dict:
    return json.loads((report / "lens.json").read_text())["run"]


@pytest.mark.parametrize("sample", SAMPLE_NAMES)
def test_sample_compiles_on_cpu(tmp_path: Path, sample: str) -> None:
    result = _compile(tmp_path, SAMPLES / f"{sample}.py")
    assert result.code == 0, result.stderr
    run = _lens(tmp_path / "report")
    capture = run["capture"]
    assert capture["status"] == "ok" and capture["phase"] == "done"
    assert capture["accuracy"]["within_tolerance"] is True
    assert capture["cold_compile_s"] > 0
    assert run["environment"]["device_type"] == "cpu" and run["environment"]["source"] == "capture"
    assert run["graphs"], "no graph captured"
    kernels = [k for g in run["graphs"] for k in g["kernels"]]
    assert kernels and all(k["backend"] == "cpp" and k["name"].startswith("cpp_") for k in kernels)
    assert all(g["kind"] == "inference" for g in run["graphs"])
    assert run["stats"]["diagnostics"] == [] or all(d["level"] == "note" for d in run["stats"]["diagnostics"])
    index = (tmp_path / "report" / "index.html").read_text()
    assert "agrees with eager" in index
    for graph in run["graphs"]:
        for kernel in graph["kernels"]:
            assert (tmp_path / "report" / "kernels" / graph["id"] / f"{kernel['name']}.html").is_file()
    assert (tmp_path / "report" / "capture" / "capture.log").is_file()
    assert list((tmp_path / "report" / "capture" / "trace").glob("*.log"))
    _assert_cpu_timings(run, index)
    _assert_handwritten_checked(run, tmp_path / "report")
    if sample == "mlp":
        _assert_first_report_came_first(result.stderr, run, tmp_path / "report")


# The hand-written kernels each sample's C++ kernels and extern calls are matched to (forward graph).
EXPECTED_HANDWRITTEN = {
    "mlp": {"matmul_bias", "gelu"},
    "softmax_ln": {"scale_bias", "softmax", "layernorm", "residual"},
    "block": {"layernorm", "matmul_bias", "flash_attention_causal", "gelu", "residual"},  # CPU addmm adds its bias
}


def _assert_handwritten_checked(run: dict, report: Path) -> None:
    """Every matched hand-written kernel ran under Triton's interpreter and agreed with torch."""
    matches = run["handwritten"]
    runs = [r for m in matches for r in m["runs"]]
    assert all(r["interpreter"] and r["ok"] is True and r["error"] is None for r in runs), runs
    assert all(r["timing"] is None for r in runs)  # timing needs a GPU
    # checked against what Inductor's kernels compute too: no match computes something else
    assert not [(m["target"], m["verify_note"]) for m in matches if m["verified"] is False]
    names = {r["name"] for r in runs}
    sample = Path(run["capture"]["model_path"]).stem
    assert EXPECTED_HANDWRITTEN.get(sample, set()) <= names, names
    page = (report / "handwritten.html").read_text()
    assert "Hand-written equivalents" in page and "Triton interpreter" in page


def _assert_first_report_came_first(stderr: str, run: dict, report: Path) -> None:
    """The report was written before the hand-written checks, its path said, and rewritten after them (issue 33)."""
    lines = stderr.splitlines()
    written = next(i for i, line in enumerate(lines) if "] report written: " in line)
    assert str(report / "index.html") in lines[written] and "the hand-written kernels" in lines[written]
    assert any(line.endswith("] hand-written kernels") for line in lines[written + 1 :]), stderr
    assert run["handwritten_status"] == "done"
    for page in ("index.html", "handwritten.html"):
        assert "Hand-written: running" not in (report / page).read_text()


def _assert_cpu_timings(run: dict, index: str) -> None:
    """Timed on CPU: end to end, the profiled step, and every C++ kernel from its profiler range."""
    bench = run["bench"]
    assert bench["device"] == "cpu" and bench["error"] is None and bench["ceilings"] is None
    e2e = bench["end_to_end"]
    assert e2e["eager"]["median_ms"] > 0 and e2e["compiled"]["median_ms"] > 0 and e2e["speedup"] > 0
    step = bench["step"]
    assert step["steps"] == 20 and 0 < step["attributed_us"] <= step["total_us"]
    kernels = [k for g in run["graphs"] for k in g["kernels"]]
    assert all(k["timing"]["in_context_us"] > 0 and k["timing"]["launches"] >= 1 for k in kernels)
    assert all(k["timing"]["isolated"] is None for k in kernels)  # isolated timing is for Triton kernels
    assert "Where the time goes" in index and "CPU" in index


@pytest.mark.parametrize("sample", SAMPLE_NAMES)
def test_sample_compiles_with_train(tmp_path: Path, sample: str) -> None:
    # the hand-written checks are the inference test's (here they would run the interpreter on every backward kernel)
    result = _compile(tmp_path, SAMPLES / f"{sample}.py", "--train", "--no-handwritten")
    assert result.code == 0, result.stderr
    run = _lens(tmp_path / "report")
    kinds = [g["kind"] for g in run["graphs"]]
    assert kinds.count("forward") == kinds.count("backward") >= 1
    assert run["capture"]["accuracy"]["compared"] == "outputs and parameter gradients"
    assert run["capture"]["accuracy"]["grad_max_abs_error"] is not None
    assert run["settings"]["train"] is True
    # the profiled step is forward + backward, so the backward graph's C++ kernels are timed too
    backward = [k for g in run["graphs"] if g["kind"] == "backward" for k in g["kernels"]]
    assert backward and all(k["timing"]["in_context_us"] > 0 for k in backward)


def test_no_bench_skips_timing(tmp_path: Path) -> None:
    result = _compile(tmp_path, SAMPLES / "mlp.py", "--no-bench")
    assert result.code == 0, result.stderr
    report = tmp_path / "report"
    run = _lens(report)
    assert run["bench"] is None
    assert all(k["timing"] is None for g in run["graphs"] for k in g["kernels"])
    assert not (report / "capture" / "profile_trace.json").exists()
    assert json.loads((report / "capture" / "capture.json").read_text())["bench"] is None  # nothing measured
    index = (report / "index.html").read_text()
    assert 'id="timing"' not in index and "the launches were not timed" in index


def test_graph_break_sample_reports_the_break(tmp_path: Path) -> None:
    assert _compile(tmp_path, SAMPLES / "graphbreak.py").code == 0
    report = tmp_path / "report"
    run = _lens(report)
    assert [g["compile_id"] for g in run["graphs"]] == ["0/0_1", "1/0"]
    assert [(f["compile_id"], f["function"]) for f in run["frames"]] == [
        ("0/0_1", "forward"),
        ("1/0", "torch_dynamo_resume_in_forward_at_20"),
    ]
    (graph_break,) = run["graph_breaks"]
    assert graph_break["reason"].startswith("Unsupported Tensor.item() call")
    location = graph_break["location"]
    assert location["filename"] == str(SAMPLES / "graphbreak.py") and location["line"] == 20
    assert location["code"] == "if y.sum().item() > 0:  # data-dependent Python control flow: a graph break"
    compile_page = (report / "compile.html").read_text()
    assert "Unsupported Tensor.item() call" in compile_page and "graphbreak.py:20" in compile_page
    # each graph links to its frame, and each frame lists its graph
    for graph in run["graphs"]:
        anchor = "frame-" + graph["compile_id"].replace("/", "-")
        assert f'href="../compile.html#{anchor}"' in (report / "graphs" / f"{graph['id']}.html").read_text()
        frame_section = compile_page.split(f'id="{anchor}"', 1)[1].split("</section>", 1)[0]
        assert f'href="graphs/{graph["id"]}.html"' in frame_section
    source_page = (report / "source.html").read_text()
    line_20 = source_page.split('id="f0-L20"', 1)[1].split("</tr>", 1)[0]
    assert "graph break" in line_20 and "cpp_fused" in line_20


def test_source_page_annotates_the_model_file(tmp_path: Path) -> None:
    assert _compile(tmp_path, SAMPLES / "softmax_ln.py").code == 0
    source_page = (tmp_path / "report" / "source.html").read_text()
    forward = source_page.split('id="f0-L19"', 1)[1].split("</tr>", 1)[0]
    assert "return self.norm(torch.softmax(x * 0.125 + self.bias, dim=-1)) + x" in forward
    assert 'href="kernels/model__0_inference_0.0/cpp_fused_' in forward


def test_options_modes_and_dtype_are_recorded(tmp_path: Path) -> None:
    result = _compile(
        tmp_path,
        SAMPLES / "mlp.py",
        "--mode",
        "max-autotune-no-cudagraphs",
        "--dtype",
        "bf16",
        "--option",
        "epilogue_fusion=false",
        "--no-dynamic",
    )
    assert result.code == 0, result.stderr
    settings = _lens(tmp_path / "report")["settings"]
    assert settings["mode"] == "max-autotune-no-cudagraphs"
    assert settings["mode_options"] == {"max_autotune": True, "coordinate_descent_tuning": True}
    assert settings["options"] == {"epilogue_fusion": False}
    assert settings["dtype"] == "bfloat16" and settings["dynamic"] is False
    inputs = _lens(tmp_path / "report")["capture"]["inputs"]
    assert inputs == ["bfloat16[256, 1024] on cpu"]


def _model(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


BROKEN = {
    "syntax": ("def get_model(:\n    pass\n", ModelFileError, "broken.py:1: syntax error"),
    "import": (
        "import not_a_module_anywhere\n",
        ModelFileError,
        "raised ModuleNotFoundError while importing",
    ),
    "no_get_model": ("def get_inputs():\n    return ()\n", ModelFileError, "defines no get_model()"),
    "no_get_inputs": (
        "import torch\ndef get_model():\n    return torch.nn.ReLU()\n",
        ModelFileError,
        "defines no get_inputs()",
    ),
    "bad_inputs": (
        "import torch\ndef get_model():\n    return torch.nn.ReLU()\ndef get_inputs():\n    return 'x'\n",
        ModelFileError,
        "get_inputs() is a str: give a tensor, a tuple of arguments, a dict of keyword arguments",
    ),
    "wrong_keywords": (  # a dict is keyword arguments now: the model's forward refuses this one
        "import torch\ndef get_model():\n    return torch.nn.ReLU()\ndef get_inputs():\n    return {'x': torch.ones(2)}\n",
        ModelRunError,
        "eager forward raised TypeError",
    ),
    "forward_raises": (
        """
        import torch
        class Bad(torch.nn.Module):
            def forward(self, x):
                raise ValueError("shapes do not line up")
        def get_model():
            return Bad()
        def get_inputs():
            return (torch.randn(2, 2),)
        """,
        ModelRunError,
        "eager forward raised ValueError: shapes do not line up",
    ),
    "get_model_raises": (
        "def get_model():\n    raise RuntimeError('no weights here')\ndef get_inputs():\n    return ()\n",
        ModelRunError,
        "get_model() raised RuntimeError: no weights here",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_model_files(tmp_path: Path, case: str) -> None:
    source, error, fragment = BROKEN[case]
    result = _compile(tmp_path, _model(tmp_path, "broken.py", source))
    assert_one_line_error(result, fragment)
    assert result.code == error.exit_code
    # what was captured is kept: the log and a report that explains the failure
    log = (tmp_path / "report" / "capture" / "capture.log").read_text()
    assert "[inductor-lens] error" in log
    index = (tmp_path / "report" / "index.html").read_text()
    assert "Capture failed" in index


def test_compile_error_with_fullgraph(tmp_path: Path) -> None:
    result = _compile(tmp_path, SAMPLES / "graphbreak.py", "--fullgraph")
    assert_one_line_error(result, "torch.compile raised")
    assert result.code == CompileError.exit_code
    run = _lens(tmp_path / "report")
    assert run["capture"]["phase"] == "compile"


def test_timeout_kills_the_model_process_and_keeps_the_log(tmp_path: Path) -> None:
    model = _model(
        tmp_path,
        "slow.py",
        """
        import time, torch
        class Slow(torch.nn.Module):
            def forward(self, x):
                print("starting a very long forward", flush=True)
                time.sleep(600)
                return x
        def get_model():
            return Slow()
        def get_inputs():
            return (torch.randn(2),)
        """,
    )
    result = _compile(tmp_path, model, "--timeout", "8")
    assert_one_line_error(result, "timed out after 8 s during 'eager run'")
    assert result.code == CaptureTimeout.exit_code
    assert "starting a very long forward" in (tmp_path / "report" / "capture" / "capture.log").read_text()


def test_cuda_requested_without_a_gpu(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = run_cli_process(
        "compile", SAMPLES / "mlp.py", "--device", "cuda", "--out", tmp_path / "r", cwd=tmp_path
    )
    assert_one_line_error(result, "--device cuda, but this torch sees no CUDA device")
    assert result.code == UsageError.exit_code


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    model = _model(tmp_path, "broken.py", "def get_model(:\n")
    result = run_cli_process(
        "compile", model, "--device", "cpu", "--out", tmp_path / "r", "--verbose", cwd=tmp_path
    )
    assert result.code == ModelFileError.exit_code
    assert "Traceback" in result.stderr and "error: broken.py:1: syntax error" in result.stderr


def test_hostile_model_file_name(tmp_path: Path) -> None:
    name = 'evil <img src=x onerror=alert(1)> "&.py'
    model = _model(
        tmp_path, name, (SAMPLES / "mlp.py").read_text().replace("4096", "64").replace("1024", "32")
    )
    result = _compile(tmp_path, model, "--timeout", "300")
    assert result.code == 0, result.stderr
    for page in (tmp_path / "report").rglob("*.html"):
        assert "<img src=x" not in page.read_text()
