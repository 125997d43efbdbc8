"""Faults around a run lose nothing the user had (issue 36, part B): reports written beside the old one and
swapped in, one run per folder, default folders that tell runs apart, caches cleared only when no run uses
them, damaged cache entries rebuilt."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens import api, caches
from inductor_lens.errors import InUseError, NoSpaceError
from inductor_lens.options import CompileSpec, ScriptSpec
from inductor_lens.report import LENS_JSON, folders, highlight, render_cache, write_report
from inductor_lens.report.folders import TIMELINE_EXPORT
from inductor_lens.worker.handwritten import tuning_store

from ..conftest import assert_one_line_error


def _tuning_key() -> tuning_store.TuningKey:
    return tuning_store.TuningKey(kernel="matmul", version="v1", shape_class={"M": 1024}, dtypes="float32",
                            device="NVIDIA H100 80GB HBM3", triton="3.6.0")  # fmt: skip


def test_deeply_nested_autotune_entry_reads_as_damaged(tmp_path: Path) -> None:
    key = _tuning_key()
    nested = "[" * 100_000 + "]" * 100_000
    (tmp_path / key.file_name).write_text(nested, encoding="utf-8")
    (tmp_path / "matmul-0123456789abcdef0123456789abcdef.json").write_text(nested, encoding="utf-8")
    assert tuning_store.load(key, tmp_path) is None
    assert tuning_store.nearest_config(key, tmp_path) is None


def test_damaged_render_cache_entries_are_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path))
    code = "def f(x):\n    return x + 1\r\n" * 40
    whole = str(highlight.highlight(code, "python", "k"))
    [entry] = (tmp_path / "render").iterdir()
    assert render_cache.read(entry.stem, "html") == whole
    for damage in (entry.read_bytes()[: entry.stat().st_size // 2], b"", whole.encode()):  # truncated, emptied, old
        entry.write_bytes(damage)
        assert render_cache.read(entry.stem, "html") is None
        assert not entry.exists()  # removed, so the next render writes it whole again
        assert str(highlight.highlight(code, "python", "k")) == whole
        assert render_cache.read(entry.stem, "html") == whole


@pytest.fixture
def private_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An Inductor cache with one header file, and a lens cache (where runs register), private to the test."""
    root = tmp_path / "torchinductor_test"
    (root / "precompiled_headers").mkdir(parents=True)
    (root / "precompiled_headers" / "h.gch").write_bytes(b"x" * 30)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("INDUCTOR_LENS_CACHE_DIR", str(tmp_path / "lens"))
    monkeypatch.chdir(tmp_path)
    return root


def test_cache_clear_refuses_while_a_run_uses_the_caches(run_cli, private_caches: Path) -> None:
    run = caches.register_run("compile samples/mlp.py")
    assert run is not None
    try:
        result = run_cli("cache", "clear", "--all", "--yes")
        assert result.code == InUseError.exit_code == 14
        assert_one_line_error(result, f"inductor-lens pid {os.getpid()} (compile samples/mlp.py, started ",
                              "nothing was removed")  # fmt: skip
        assert (private_caches / "precompiled_headers" / "h.gch").is_file()
        assert run_cli("cache", "clear", "--inductor", "--dry-run").code == 0  # looking is allowed
    finally:
        run.release()
    result = run_cli("cache", "clear", "--inductor", "--yes")  # the run ended: cleared
    assert result.code == 0, result.stderr
    assert not (private_caches / "precompiled_headers").exists()


def test_a_dead_runs_registration_does_not_block_clear(run_cli, private_caches: Path) -> None:
    runs = private_caches.parent / "lens" / caches.RUNS_FOLDER
    runs.mkdir(parents=True)
    (runs / "999999.lock").write_text('{"pid": 999999, "host": "h", "command": "compile x.py", "started": 0}')
    result = run_cli("cache", "clear", "--inductor", "--yes")
    assert result.code == 0, result.stderr
    assert list(runs.iterdir()) == []  # no process holds it: removed


def test_cache_clear_says_when_it_removed_nothing(run_cli, private_caches: Path) -> None:
    assert run_cli("cache", "clear", "--inductor", "--yes").code == 0
    result = run_cli("cache", "clear", "--inductor", "--triton", "--yes")
    assert result.code == 0, result.stderr
    assert f"inductor: nothing to remove in {private_caches}\n" in result.stdout
    assert "triton: nothing to remove in " in result.stdout and "(not there)" in result.stdout


def test_cache_clear_of_a_read_only_cache_fails_in_one_line(
    run_cli, private_caches: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = private_caches / "precompiled_headers"
    unlink = Path.unlink

    def read_only(path: Path, missing_ok: bool = False) -> None:  # what a read-only folder does, even to root
        if headers in path.parents:
            raise PermissionError(13, "Permission denied", str(path))
        unlink(path, missing_ok)

    monkeypatch.setattr(Path, "unlink", read_only)
    result = run_cli("cache", "clear", "--inductor", "--yes")
    assert result.code == caches.CacheError.exit_code
    assert_one_line_error(result, f"inductor: 2 entries not removed from {private_caches}", "Permission denied",
                          "permissions")  # fmt: skip
    assert (headers / "h.gch").is_file()


@pytest.fixture
def lens_json_only(unpacked, tmp_path: Path) -> Path:
    """A report folder holding only its lens.json (of the CPU mlp --train capture), as copied off a machine."""
    built = api.report_folder(unpacked("cpu-torch2.13-mlp-train"), tmp_path / "built", draw=False)
    folder = tmp_path / "only"
    folder.mkdir()
    shutil.copy(built.index.parent / LENS_JSON, folder / LENS_JSON)
    return folder


def _disk_full_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """Every file written after the first ``writes`` fails as on a full disk."""
    write_text = Path.write_text
    done = []

    def full(path: Path, *args: object, **kwargs: object) -> int:
        done.append(path)
        if len(done) > writes:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return write_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)


@pytest.mark.parametrize("writes", [0, 5, 15])
def test_disk_full_while_rerendering_keeps_lens_json(
    run_cli, lens_json_only: Path, monkeypatch: pytest.MonkeyPatch, writes: int
) -> None:
    before = (lens_json_only / LENS_JSON).read_bytes()
    _disk_full_after(monkeypatch, writes)
    result = run_cli("report", lens_json_only)
    monkeypatch.undo()
    assert result.code == NoSpaceError.exit_code == 13
    assert_one_line_error(result, f"cannot write the report to {lens_json_only} (the report there is unchanged)",
                          "no space left")  # fmt: skip
    assert sorted(p.name for p in lens_json_only.iterdir()) == [LENS_JSON]  # nothing half written left
    assert (lens_json_only / LENS_JSON).read_bytes() == before
    assert run_cli("report", lens_json_only).code == 0  # space again: the report is whole
    assert (lens_json_only / "index.html").is_file() and (lens_json_only / LENS_JSON).read_bytes() == before


def test_a_new_report_replaces_the_old_ones_pages_only(tmp_path: Path) -> None:
    out = tmp_path / "report"
    write_report({"index.html": "old", "graphs/0.html": "old graph", "graphs/9.html": "gone graph",
                  TIMELINE_EXPORT: "{}", LENS_JSON: "{}"}, out)  # fmt: skip
    (out / "capture").mkdir()
    (out / "capture" / "spec.json").write_text("{}")
    (out / "notes.txt").write_text("mine")
    write_report({"index.html": "new", "graphs/0.html": "new graph", LENS_JSON: '{"new": 1}'}, out)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "capture", "capture/spec.json", "graphs", "graphs/0.html", "index.html", LENS_JSON, "notes.txt"]  # fmt: skip
    assert (out / "graphs" / "0.html").read_text() == "new graph" and (out / LENS_JSON).read_text() == '{"new": 1}'


def test_a_second_run_into_a_folder_in_use_is_refused(run_cli, lens_json_only: Path) -> None:
    with folders.claimed_out_dir(lens_json_only, "compile samples/mlp.py"):
        result = run_cli("report", lens_json_only)
        assert result.code == InUseError.exit_code
        assert_one_line_error(result, f"{lens_json_only} is in use by inductor-lens pid {os.getpid()} "
                              "(compile samples/mlp.py, started ", "); wait for it or pass another --out")  # fmt: skip
    assert not (lens_json_only / folders.OUT_LOCK).exists()  # released with the run
    assert run_cli("report", lens_json_only).code == 0


def test_a_killed_runs_lock_and_leftovers_do_not_stop_the_next(tmp_path: Path) -> None:
    out = tmp_path / "report"
    write_report({"index.html": "old", LENS_JSON: "{}"}, out)
    (out / folders.OUT_LOCK).write_text('{"pid": 999999, "host": "h", "command": "compile x.py", "started": 0}')
    (out / ".inductor-lens-new-999999" / "graphs").mkdir(parents=True)  # a report half written when it was killed
    (out / ".inductor-lens-previous-capture-999999").mkdir()  # the capture it had set aside
    with folders.claimed_out_dir(out, "compile samples/mlp.py", fresh_capture=True) as claim:
        assert claim.had_report and claim.previous_capture is not None
        assert sorted(p.name for p in out.iterdir() if not p.name.startswith(folders.OWN_PREFIX)) == [
            "index.html", LENS_JSON]  # fmt: skip
        (out / "capture").mkdir()
    assert sorted(p.name for p in out.iterdir()) == ["capture", "index.html", LENS_JSON]


def test_default_folders_tell_runs_of_one_model_apart() -> None:
    def folder(**settings: object) -> str:
        return api.default_report_dir(CompileSpec(model_path=Path("samples/mlp.py"), **settings)).name  # type: ignore[arg-type]

    assert folder() == "mlp-default"  # as before, for the plain run
    assert folder(train=True, dtype="bfloat16") == "mlp-default-train-bf16"
    assert folder(mode="max-autotune", dynamic=True) == "mlp-max-autotune-dynamic"
    assert folder(dynamic=False, options={"epilogue_fusion": False}) == "mlp-default-static-epilogue_fusion-False"
    names = {folder(), folder(train=True), folder(dtype="float16"), folder(dynamic=True), folder(dynamic=False),
             folder(options={"epilogue_fusion": False}), folder(options={"epilogue_fusion": True}),
             folder(options={f"option_{i}": i for i in range(20)}), folder(options={f"option_{i}": i for i in range(21)})}  # fmt: skip
    assert len(names) == 9 and all(len(name) <= 120 for name in names)
    script = ScriptSpec(argv=("train.py",), cwd=Path.cwd(), model_path=Path("train.py"))
    assert api.default_script_report_dir(script).name == "train-run"
    assert api.default_script_report_dir(replace(script, mode="reduce-overhead", dynamic=True)).name == (
        "train-run-reduce-overhead-dynamic")


def test_a_multi_rank_run_and_a_comparison_take_their_folder_alone_too(run_cli, tmp_path: Path) -> None:
    """``compile --nproc``, ``run -- torchrun`` and ``compare`` hold their ``--out`` as ``compile`` does: a second
    run into it is refused in one line before anything starts."""
    out = tmp_path / "job"
    model = Path(__file__).resolve().parents[2] / "samples" / "ddp_mlp.py"
    with folders.locked_out_dir(out, "compile --nproc 2 samples/ddp_mlp.py"):
        for args in (("compile", model, "--nproc", "2", "--out", out),
                     ("compare", model, "--mode", "default", "--mode", "max-autotune", "--out", out),
                     ("run", "--out", out, "--", "torchrun", "--nproc-per-node", "2", model)):  # fmt: skip
            result = run_cli(*args)
            assert result.code == InUseError.exit_code, (args, result.stderr)
            assert_one_line_error(result, f"{out} is in use by inductor-lens pid {os.getpid()} "
                                  "(compile --nproc 2 samples/ddp_mlp.py, started ", "; wait for it or pass another --out")  # fmt: skip
    assert not (out / folders.OUT_LOCK).exists()
