"""The CPU preview's stand-in CUDA device guard (``worker/gpu_preview_device.py::guard_library``), built for real with
this machine's C++ compiler against the installed torch's headers: with the C++ standard torch's own C++ builder
passes (torch 2.14's c10 headers need C++20: ``std::strong_ordering`` in ``c10/util/intrusive_ptr.h``, where
``-std=c++17`` made ``--preview-gpu`` exit 5), and a failed build said in one line carrying the compiler's first
``error:`` line rather than a cut-off command line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from torch._inductor.cpp_builder import _get_cpp_std_cflag
from torch.utils.cpp_extension import include_paths

from inductor_lens.worker import gpu_preview_device

FAILED = r"building the stand-in CUDA device guard failed \(c\+\+ exit 1\): "
NEEDS_CXX20 = "strong_ordering" in (Path(include_paths()[0]) / "c10" / "util" / "intrusive_ptr.h").read_text()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "inductor-lens" / "gpu-preview"


def test_the_guard_is_built_with_the_standard_torchs_builder_passes(cache: Path) -> None:
    assert gpu_preview_device.cpp_standard_flag() == "-" + _get_cpp_std_cflag()[0] == "-std=c++20"
    library = gpu_preview_device.guard_library()  # built, not loaded: it would register a CUDA guard here
    assert library == cache / f"fake_cuda_guard-{torch.__version__.replace('+', '-')}.so"
    assert library.stat().st_size > 0 and not list(cache.glob("*.tmp"))


def test_a_failed_build_says_the_compilers_first_error(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_preview_device, "GUARD_SOURCE", gpu_preview_device.GUARD_SOURCE + "not_a_type x;\n")
    with pytest.raises(RuntimeError) as failed:
        gpu_preview_device.guard_library()
    message = str(failed.value)
    assert "\n" not in message and len(message) < 400
    assert re.fullmatch(FAILED + r"\S*fake_cuda_guard\.cpp:3:1: error: .*not_a_type.*", message), message
    assert not list(cache.glob("*.so"))


@pytest.mark.skipif(not NEEDS_CXX20, reason="this torch's c10 headers build as C++17 (torch 2.13 and older)")
def test_cxx17_fails_on_headers_that_need_cxx20(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``--preview-gpu`` did on torch 2.14.1 before: now one line with the compiler's reason."""
    monkeypatch.setattr(gpu_preview_device, "cpp_standard_flag", lambda: "-std=c++17")
    with pytest.raises(RuntimeError) as failed:
        gpu_preview_device.guard_library()
    pattern = FAILED + r"\S*/c10/util/intrusive_ptr\.h:\d+:\d+: error: .strong_ordering. in namespace .std. does not name a type"
    assert re.fullmatch(pattern, str(failed.value)), str(failed.value)
