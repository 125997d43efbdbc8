"""The command line without compiling: `report`, `open`, and bad input giving one clear error line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inductor_lens.errors import InputFolderError, ParseError, UsageError

from ..conftest import CPU_CASE, GPU_CASES, TIMED_CASE, assert_one_line_error, run_cli_process


@pytest.mark.parametrize("case", GPU_CASES)
def test_report_on_every_gpu_fixture(run_cli, unpacked, tmp_path: Path, case: str) -> None:
    result = run_cli("report", unpacked(case), "--out", tmp_path / "r", "--strict")
    assert result.code == 0, result.stderr
    assert result.stdout.strip() == f"report: {tmp_path / 'r' / 'index.html'}"
    assert "parse warning" not in result.stderr
    lens = json.loads((tmp_path / "r" / "lens.json").read_text())
    kernels = sum(len(g["kernels"]) for g in lens["run"]["graphs"])
    assert f"2 graph(s), {kernels} kernel(s)" in result.stderr


def test_report_rerenders_its_own_output_in_place(run_cli, unpacked, tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert run_cli("report", unpacked(CPU_CASE), "--out", out).code == 0
    (out / "index.html").write_text("stale")
    result = run_cli("report", out)  # a report folder (lens.json, no debug tree inside): re-render it
    assert result.code == 0, result.stderr
    assert "stale" not in (out / "index.html").read_text()


def test_report_of_a_corrupt_folder_warns_and_renders(run_cli, fixture_copy, tmp_path: Path) -> None:
    root = fixture_copy("block_default")
    graph = next(root.glob("torch_compile_debug/run_*/torchinductor/model__1_inference_3.1"))
    code = (graph / "output_code.py").read_text()
    (graph / "output_code.py").write_text(code[: len(code) // 3])
    (graph / "ir_post_fusion.txt").write_bytes(b"\x00\xff garbage \x89PNG\n")
    (graph / "inductor_provenance_tracking_node_mappings.json").write_text("{not json")
    (graph / "stray.bin").write_bytes(b"\x00" * 10)
    trace = next(root.glob("trace/*.log"))
    with trace.open("a") as handle:
        handle.write("this is not a trace line\nV1121 00:00:00.000000 1 x.py:1] {broken json\n")
    result = run_cli("report", root, "--out", tmp_path / "r")
    assert result.code == 0, result.stderr
    assert "parse warning(s)" in result.stderr
    index = (tmp_path / "r" / "index.html").read_text()
    assert "were not understood and were skipped" in index
    assert "not valid Python" in index and "not valid JSON" in index
    # the intact graph is fully there
    assert "triton_poi_fused_add_addmm_view_3" in index
    strict = run_cli("report", root, "--out", tmp_path / "s", "--strict")
    assert_one_line_error(strict, "not a structured-trace record")
    assert strict.code == ParseError.exit_code


def test_report_of_a_capture_folder_copied_off_a_gpu_box(run_cli, unpacked, tmp_path: Path) -> None:
    result = run_cli("report", unpacked(TIMED_CASE), "--out", tmp_path / "r", "--strict")
    assert result.code == 0, result.stderr
    index = (tmp_path / "r" / "index.html").read_text()
    assert "Where the time goes" in index and "NVIDIA H200" in index and "4,243 GB/s" in index
    assert json.loads((tmp_path / "r" / "lens.json").read_text())["run"]["bench"]["step"]["steps"] == 20
    # the capture folder alone: the title still names the model, from the spec it ran with
    result = run_cli("report", unpacked(TIMED_CASE) / "capture", "--out", tmp_path / "c")
    assert result.code == 0, result.stderr
    assert json.loads((tmp_path / "c" / "lens.json").read_text())["run"]["title"] == "block"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("profile_trace.json", "JSONDecodeError"),  # truncated trace
        ("capture.json", "measurements not read"),  # bench entries of the wrong type
    ],
)
def test_corrupt_measurements_warn_and_render(
    run_cli, fixture_copy, tmp_path: Path, damage: str, message: str
) -> None:
    capture = fixture_copy(TIMED_CASE) / "capture"
    if damage == "profile_trace.json":
        text = (capture / damage).read_text()
        (capture / damage).write_text(text[: len(text) // 2])
    else:
        data = json.loads((capture / damage).read_text())
        data["bench"]["ceilings"]["copy"] = "fast"
        data["bench"]["end_to_end"] = [1, 2]
        (capture / damage).write_text(json.dumps(data))
    result = run_cli("report", capture.parent, "--out", tmp_path / "r")
    assert result.code == 0, result.stderr
    assert "parse warning(s)" in result.stderr
    index = (tmp_path / "r" / "index.html").read_text()
    assert message in index and 'id="timing"' not in index
    assert "triton_poi_fused_addmm_gelu_view_2" in index  # the kernels are all there
    strict = run_cli("report", capture.parent, "--out", tmp_path / "s", "--strict")
    assert_one_line_error(strict, "measurements not read")
    assert strict.code == ParseError.exit_code


def test_hostile_graph_folder_name(run_cli, fixture_copy, tmp_path: Path) -> None:
    root = fixture_copy("mlp_default")
    graph = next(root.glob("torch_compile_debug/run_*/torchinductor/model__0_forward_1.0"))
    graph.rename(graph.with_name('model__0_forward_1.0<img src=x onerror=alert(1)> "&'))
    result = run_cli("report", root, "--out", tmp_path / "r")
    assert result.code == 0, result.stderr
    pages = list((tmp_path / "r").rglob("*.html"))
    assert all("<img src=x" not in p.read_text() for p in pages)
    assert (tmp_path / "r" / "graphs" / "model__0_forward_1.0_img_src_x_onerror_alert_1.html").is_file()


@pytest.mark.parametrize(
    ("make", "code", "fragments"),
    [
        (lambda tmp: tmp / "missing", InputFolderError.exit_code, ("no such folder",)),
        (lambda tmp: tmp, InputFolderError.exit_code, ("no torch_compile_debug output found",)),
        (lambda tmp: _foreign(tmp), InputFolderError.exit_code, ("no torch_compile_debug output found",)),
    ],
)
def test_report_bad_folders(run_cli, tmp_path: Path, make, code: int, fragments: tuple[str, ...]) -> None:
    folder = make(tmp_path / "in")
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.name == "in":
        folder.mkdir(exist_ok=True)
    result = run_cli("report", folder, "--out", tmp_path / "out")
    assert_one_line_error(result, *fragments)
    assert result.code == code


def _foreign(folder: Path) -> Path:
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "main.py").write_text("print('hello')\n")
    (folder / "notes.log").write_text("nothing to see\n")
    return folder


def test_report_refuses_to_overwrite_a_foreign_folder(run_cli, unpacked, tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    result = run_cli("report", unpacked("mlp_default"), "--out", precious)
    assert_one_line_error(result, "is not empty and holds no inductor-lens report")
    assert result.code == UsageError.exit_code
    assert (precious / "thesis.tex").read_text() == "do not delete"


def test_empty_graph_folders_are_explained(run_cli, fixture_copy, tmp_path: Path) -> None:
    root = fixture_copy("mlp_default")
    for graph in root.glob("torch_compile_debug/run_*/torchinductor/model__*"):
        for file in graph.iterdir():
            file.unlink()
    result = run_cli("report", root, "--out", tmp_path / "r")
    assert result.code == 0
    assert "no output_code.py" in (tmp_path / "r" / "index.html").read_text()


def test_open_prints_the_file_url(run_cli, unpacked, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("webbrowser.open", lambda url: False)
    assert run_cli("report", unpacked("mlp_default"), "--out", tmp_path / "r").code == 0
    result = run_cli("open", tmp_path / "r")
    assert result.code == 0
    assert result.stdout.strip() == (tmp_path / "r" / "index.html").resolve().as_uri()
    assert_one_line_error(run_cli("open", tmp_path / "nothing"), "no index.html")


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    model = tmp_path / "m.py"
    model.write_text("def get_model(): pass\n")
    cases = [
        (["compile", model, "--mode", "fast"], "unknown mode 'fast'; this torch has default, lite"),
        (["compile", model, "--option", "epilog_fusion=true"], "closest: epilogue_fusion"),
        (["compile", model, "--option", "nonsense"], "--option expects KEY=VALUE"),
        (["compile", tmp_path / "absent.py"], "no such model file"),
        (["report"], "Missing argument 'FOLDER'"),
        (["frobnicate"], "No such command 'frobnicate'"),
    ]
    for args, fragment in cases:
        result = run_cli_process(*args, cwd=tmp_path)
        assert_one_line_error(result, fragment)
        assert result.code == 2, (args, result)


def test_version_and_help() -> None:
    assert run_cli_process("--version").stdout.startswith("inductor-lens, version ")
    help_text = run_cli_process("compile", "--help").stdout
    for option in (
        "--mode",
        "--option",
        "--train",
        "--device",
        "--dtype",
        "--fullgraph",
        "--dynamic",
        "--out",
        "--timeout",
        "--open",
    ):
        assert option in help_text


def test_python_dash_m_matches_console_script() -> None:
    script = Path(sys.executable).parent / "inductor-lens"
    if not script.is_file():
        pytest.skip("no console script beside this interpreter")
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True).stdout
    assert out == run_cli_process("--version").stdout
