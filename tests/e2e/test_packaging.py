"""The built wheel carries the templates (top-level templates/ ships as inductor_lens/templates) and works."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ..conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("inductor_lens-*.whl")
    return built


def test_wheel_contains_templates_and_static_files(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {
        f"inductor_lens/templates/{p.relative_to(ROOT / 'templates').as_posix()}"
        for p in (ROOT / "templates").rglob("*")
        if p.is_file()
    }
    assert {"inductor_lens/templates/base.html.j2", "inductor_lens/templates/static/lens.css"} <= expected
    assert expected <= names
    assert {"inductor_lens/worker/__main__.py", "inductor_lens/worker/capture.py"} <= names
    assert "inductor_lens/worker/handwritten/tuned/sm_90.json" in names  # the shipped tuning table
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "inductor-lens = inductor_lens.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_renders_from_its_own_templates(wheel: Path, unpacked, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = "from inductor_lens.report.resources import templates_dir; print(templates_dir())"
    located = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert Path(located.stdout.strip()) == site / "inductor_lens" / "templates"
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "inductor_lens",
            "report",
            str(unpacked("mlp_default")),
            "--out",
            str(tmp_path / "r"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r" / "index.html").is_file()
