"""Compiler stages read side by side (issue 33): ``attach_stages`` reads the capture cache's entries in threads.

Each entry's reading (``stages_from_entry``: cuobjdump and nvdisasm on its cubin) is replaced by one that sleeps a
random while, so the threads finish out of order: the run's stages still come in the kernels' order, as one read in
turn, and more than one thread read them.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inductor_lens import stages
from inductor_lens.capture.triton_cache import KEPT_CACHE_DIR
from inductor_lens.parse import parse_debug_folder
from inductor_lens.records import KernelStages


def test_the_entries_are_read_in_threads_into_the_kernels_order(
    unpacked: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = parse_debug_folder(unpacked("block_default"), strict=True)
    triton = [(g.id, k.name) for g, k in run.all_kernels() if k.backend == "triton"]
    assert len(triton) == 8
    capture_dir = tmp_path / "capture"
    (capture_dir / KEPT_CACHE_DIR).mkdir(parents=True)
    assert stages.stages_to_attach(run, capture_dir) == 8
    assert stages.stages_to_attach(run, tmp_path) == 0  # no Triton cache kept: nothing to read
    threads: set[int] = set()
    shuffle = random.Random(33)
    delays = {key: shuffle.uniform(0.0, 0.05) for key in triton}

    def read(entry: Any, graph_id: str, kernel: Any, origin: Any, *_: Any) -> KernelStages:
        threads.add(threading.get_ident())
        time.sleep(delays[graph_id, kernel.name])
        return KernelStages(graph_id, kernel.name, origin)

    monkeypatch.setattr(stages, "read_cache", lambda _: [])
    monkeypatch.setattr(stages, "pick_entry", lambda *_: (object(), ""))
    monkeypatch.setattr(stages, "stages_from_entry", read)
    attached = stages.attach_stages(run, capture_dir)
    assert [(s.graph_id, s.kernel) for s in attached.kernel_stages] == triton
    assert len(threads) > 1 or stages.os.cpu_count() == 1
    monkeypatch.setattr(stages, "MAX_WORKERS", 1)
    assert stages.attach_stages(run, capture_dir) == attached
    assert stages.stages_to_attach(attached, capture_dir) == 0
