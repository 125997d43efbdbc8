"""The configs Inductor's autotune cache kept (``<key>.best_config`` beside each kernel's file), kept by the
capture (capture/triton_cache.py ``keep_best_configs``) and read by the compiler stages (stages/cache.py):
the config a capture without timing chose, and the Triton cache entry it compiled into.

The best_config files are written by torch's own ``AutotuneCache.create(...).save(...)``, as the autotuner
writes them; the Triton cache entries are hand-built (metadata, and a TTIR naming the kernel's file and its
block size), as a GPU capture leaves them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from inductor_lens.capture.triton_cache import BEST_CONFIGS_FILE, KEPT_CACHE_DIR, keep_best_configs
from inductor_lens.records import KernelRecord, KernelTiming
from inductor_lens.stages.cache import (
    AutotuneChoice,
    autotune_choice,
    chosen_config,
    pick_entry,
    read_autotune_choices,
    read_cache,
)

pytest.importorskip("triton")

KERNEL = "triton_poi_fused_gelu_0"
# the keys torch 2.13's AutotuneCache.save writes for a config without extra_options (no warp specialization)
SAVED_KEYS = {
    "num_warps",
    "num_stages",
    "configs_hash",
    "found_by_coordesc",
    "time_taken_ms",
    "triton_cache_hash",
}


def _save_best_config(
    kernel_file: Path,
    blocks: dict[str, int],
    num_warps: int,
    *,
    cache_hash: str | None,
    coordesc: bool = False,
) -> Path:
    """What Inductor's autotuner writes when it keeps this config for the kernel compiled from ``kernel_file``
    (``CachingAutotuner.autotune_to_one_config`` saves the winner's ``cache_hash``; coordinate descent saves
    none); returns the file."""
    from torch._inductor.runtime.autotune_cache import AutotuneCache
    from torch._inductor.runtime.triton_compat import Config
    from torch._inductor.runtime.triton_heuristics import hash_configs

    config = Config(blocks, num_warps=num_warps, num_stages=1)
    meta = {"autotune_local_cache": True, "autotune_remote_cache": False}
    cache = AutotuneCache.create(meta, str(kernel_file), hash_configs([config]))
    assert cache is not None and cache.local_cache is not None
    cache.artifact_recorder = None  # keeps this process's mega-cache record clean; the file is the same
    cache.save(config, 3_000_000, found_by_coordesc=coordesc, triton_cache_hash=cache_hash)
    return Path(cache.local_cache[1])


def _triton_entry(cache: Path, folder: str, name: str, source: Path, xblock: int, num_warps: int) -> None:
    """One Triton cache entry as a GPU capture keeps it: the metadata, and a TTIR whose first location names
    the file the kernel was compiled from."""
    entry = cache / folder
    entry.mkdir(parents=True)
    metadata = {"name": name, "hash": folder.lower(), "num_warps": num_warps, "num_stages": 1}
    (entry / f"{name}.json").write_text(json.dumps(metadata))
    (entry / f"{name}.ttir").write_text(
        f'#loc = loc("{source}":18:0)\nmodule {{\n  tt.func public @{name}() {{\n'
        f"    %0 = tt.make_range {{end = {xblock} : i32, start = 0 : i32}} : tensor<{xblock}xi32> loc(#loc)\n"
        "  } loc(#loc)\n} loc(#loc)\n"
    )


def _kernel(kernel_file: Path, name: str = KERNEL) -> KernelRecord:
    """A kernel of a capture made without timing: the trace logged no best_config."""
    return KernelRecord(name, "triton", "pointwise", "", 1, kernel_path=str(kernel_file), autotune_info={})


@pytest.fixture
def inductor(tmp_path: Path) -> Path:
    return tmp_path / "caches" / "inductor"


def test_keeping_indexes_each_best_config_as_torch_wrote_it(inductor: Path, tmp_path: Path) -> None:
    written = _save_best_config(inductor / "ab" / "cabkernel.py", {"XBLOCK": 256}, 4, cache_hash="HASHB")
    # torch names the file by its own key of the kernel's file and torch_key(), in the kernel file's folder
    assert written.parent == inductor / "ab" and written.stem != "cabkernel"
    saved = json.loads(written.read_text())
    assert set(saved) == SAVED_KEYS | {"XBLOCK"}
    assert (saved["XBLOCK"], saved["num_warps"], saved["triton_cache_hash"], saved["found_by_coordesc"]) == (
        256,
        4,
        "HASHB",
        False,
    )
    (inductor / "ab" / "broken.best_config").write_text("{not json")
    (inductor / "cd").mkdir()
    (inductor / "cd" / "list.best_config").write_text("[1, 2]")
    (inductor / "cd" / "cdkernel.py").write_text("not a best_config")
    capture = tmp_path / "capture"
    assert keep_best_configs(inductor, capture) == 1
    index = json.loads((capture / BEST_CONFIGS_FILE).read_text())
    assert index == {f"ab/{written.name}": saved}
    assert keep_best_configs(tmp_path / "no such cache", tmp_path / "other") == 0
    assert not (tmp_path / "other").exists()


def test_a_capture_without_timing_shows_the_config_the_autotune_cache_names(
    inductor: Path, tmp_path: Path
) -> None:
    """Three compiled configs of one kernel, two of them alike in num_warps and XBLOCK (a capture's Triton
    cache holds every config autotuning compiled): the winner's folder, named by the best_config, is shown."""
    kernel_file = inductor / "ab" / "cabkernel.py"
    capture = tmp_path / "capture"
    triton = capture / KEPT_CACHE_DIR
    _triton_entry(triton, "HASHA", KERNEL, kernel_file, 256, 4)
    _triton_entry(triton, "HASHB", KERNEL, kernel_file, 256, 4)
    _triton_entry(triton, "HASHC", KERNEL, kernel_file, 1024, 8)
    _save_best_config(kernel_file, {"XBLOCK": 256}, 4, cache_hash="HASHB")
    keep_best_configs(inductor, capture)
    entries, choices = read_cache(triton), read_autotune_choices(capture)
    kernel = _kernel(kernel_file)

    # without the autotune cache: the decorator's nothing, and a guess among the three
    assert chosen_config(kernel) == ({}, "the report does not record the config the run chose")
    _, note = pick_entry(entries, kernel, {})
    assert note.startswith("the cache holds 3 compiled configurations")

    choice = autotune_choice(kernel, choices, entries)
    assert choice is not None and choice.cache_hash == "HASHB"
    config, how = chosen_config(kernel, choice)
    assert config == {"XBLOCK": 256, "num_warps": 4, "num_stages": 1}
    assert (
        how
        == "the config the run's autotuning chose (Inductor's autotune cache, which names the winner's binary)"
    )
    entry, note = pick_entry(entries, kernel, config, choice.cache_hash)
    assert entry is not None and entry.folder.name == "HASHB" and note == ""

    # the trace's config and the launcher the run kept come first
    timed = replace(kernel, timing=KernelTiming(1.0, 1, config="XBLOCK: 256, num_warps: 4, num_stages: 1"))
    assert chosen_config(timed, choice)[1].startswith("the launcher the run kept")
    traced = replace(
        kernel, autotune_info={"best_config": [["XBLOCK", 256], ["num_warps", 4], ["num_stages", 1]]}
    )
    assert chosen_config(traced, choice)[1] == "the config the run's autotuning chose"

    # a same-named kernel of another file is no match for that best_config
    other = _kernel(inductor / "ab" / "cabother.py")
    _triton_entry(triton, "HASHD", KERNEL, inductor / "ab" / "cabother.py", 256, 4)
    assert autotune_choice(other, choices, read_cache(triton)) is None


def test_coordinate_descent_best_configs_are_matched_by_the_kernel_file_folder(
    inductor: Path, tmp_path: Path
) -> None:
    """Coordinate descent saves no triton_cache_hash: the best_config goes to the one kernel file of its folder
    with an entry compiled with its config."""
    first, second, elsewhere = (
        inductor / "ab" / "cabfirst.py",
        inductor / "ab" / "cabsecond.py",
        inductor / "cd" / "ccdthird.py",
    )
    capture = tmp_path / "capture"
    triton = capture / KEPT_CACHE_DIR
    _triton_entry(triton, "HASHA", "triton_poi_a", first, 512, 8)
    _triton_entry(triton, "HASHB", "triton_poi_a", first, 128, 4)
    _triton_entry(triton, "HASHC", "triton_poi_b", second, 128, 4)
    _triton_entry(triton, "HASHD", "triton_poi_c", elsewhere, 512, 8)
    saved = json.loads(
        _save_best_config(first, {"XBLOCK": 512}, 8, cache_hash=None, coordesc=True).read_text()
    )
    assert saved["triton_cache_hash"] is None and saved["found_by_coordesc"] is True
    keep_best_configs(inductor, capture)
    entries, choices = read_cache(triton), read_autotune_choices(capture)

    kernel = _kernel(first, "triton_poi_a")
    choice = autotune_choice(kernel, choices, entries)
    assert choice is not None and choice.config == {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}
    config, how = chosen_config(kernel, choice)
    assert how.endswith("(Inductor's autotune cache, matched by the kernel's folder)")
    entry, note = pick_entry(entries, kernel, config, choice.cache_hash)
    assert entry is not None and entry.folder.name == "HASHA" and not note
    # the other kernel of the folder compiled no such config; the kernel of another folder is not looked at
    assert autotune_choice(_kernel(second, "triton_poi_b"), choices, entries) is None
    assert autotune_choice(_kernel(elsewhere, "triton_poi_c"), choices, entries) is None

    # a second file of the folder compiled that config too: whose it is cannot be told
    _triton_entry(triton, "HASHE", "triton_poi_b", second, 512, 8)
    assert autotune_choice(kernel, choices, read_cache(triton)) is None


def test_unreadable_or_foreign_best_configs_are_left_out(inductor: Path, tmp_path: Path) -> None:
    kernel_file = inductor / "ab" / "cabkernel.py"
    capture = tmp_path / "capture"
    triton = capture / KEPT_CACHE_DIR
    _triton_entry(triton, "HASHA", KERNEL, kernel_file, 256, 4)
    entries = read_cache(triton)
    assert read_autotune_choices(capture) == []  # none kept
    (capture / BEST_CONFIGS_FILE).write_text("{broken")
    assert read_autotune_choices(capture) == []
    (capture / BEST_CONFIGS_FILE).write_text("[]")
    assert read_autotune_choices(capture) == []
    kept = {
        "no-folder.best_config": {
            "XBLOCK": 256,
            "num_warps": 4,
            "num_stages": 1,
            "triton_cache_hash": "HASHA",
        },
        "ab/a.best_config": [256, 4],
        "ab/b.best_config": {"XBLOCK": 256, "num_stages": 1, "triton_cache_hash": "HASHA"},  # no num_warps
        "ab/c.best_config": {"num_warps": True, "num_stages": 1, "triton_cache_hash": "HASHA"},
        "ab/d.best_config": {"XBLOCK": 64, "num_warps": 2, "num_stages": 1, "triton_cache_hash": "ELSEWHERE"},
        "ab/e.best_config": {"XBLOCK": [1], "num_warps": 2, "num_stages": 1, "triton_cache_hash": 7},
    }
    (capture / BEST_CONFIGS_FILE).write_text(json.dumps(kept))
    choices = read_autotune_choices(capture)
    assert [c.values for c in choices] == [kept["ab/d.best_config"], kept["ab/e.best_config"]]
    # a hash naming no entry of the kernel; a hash that is no string and a block size that is no number
    assert autotune_choice(_kernel(kernel_file), choices, entries) is None
    odd = AutotuneChoice("ab", kept["ab/e.best_config"])
    assert (odd.cache_hash, odd.config) == (None, {"num_warps": 2, "num_stages": 1})


def test_the_kept_index_names_each_choices_kernel_file_so_no_cache_is_needed(inductor: Path, tmp_path: Path) -> None:
    """Where the kernel's file is in the cache, keeping computes torch's key of it: the choice is the kernel's
    exactly, with no Triton cache entry (a capture copied without its cache, stages compiled ahead of time), and
    whatever the hash says (coordinate descent writes none)."""
    kernel_file = inductor / "ab" / "cabkernel.py"
    kernel_file.parent.mkdir(parents=True)
    kernel_file.write_text("# the kernel's module")
    (inductor / "ab" / "cabother.py").write_text("# another kernel of the folder")
    written = _save_best_config(kernel_file, {"XBLOCK": 512}, 8, cache_hash=None, coordesc=True)
    capture = tmp_path / "capture"
    assert keep_best_configs(inductor, capture) == 1
    index = json.loads((capture / BEST_CONFIGS_FILE).read_text())
    assert index[f"ab/{written.name}"]["kernel_file"] == "ab/cabkernel.py"
    choices = read_autotune_choices(capture)
    choice = autotune_choice(_kernel(kernel_file), choices, [])
    assert choice is not None and choice.kernel_file == "ab/cabkernel.py"
    assert choice.config == {"XBLOCK": 512, "num_warps": 8, "num_stages": 1}  # the bookkeeping left out
    config, how = chosen_config(_kernel(kernel_file), choice)
    assert config == {"XBLOCK": 512, "num_warps": 8, "num_stages": 1} and "autotune cache" in how
    assert autotune_choice(_kernel(inductor / "ab" / "cabother.py"), choices, []) is None


def test_the_model_process_names_the_autotune_key_so_the_tool_needs_no_torch_to_match_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model process writes the key its torch names best_config files with (``write_autotune_key``, from the
    ``torch_key()`` Inductor computed); keep_best_configs matches files with it, and with the written key only: a
    made-up one here, which this process's torch would never compute."""
    import hashlib

    import torch._inductor.codecache as codecache

    from inductor_lens.exchange.files import AUTOTUNE_KEY_FILE
    from inductor_lens.worker.inductor_cache import write_autotune_key

    inductor = tmp_path / "inductor"
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    write_autotune_key()  # not the model process (no private Inductor cache named): nothing written
    assert not inductor.exists()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor))
    write_autotune_key()
    written = json.loads((inductor / AUTOTUNE_KEY_FILE).read_text())
    assert written["torch_key"] == codecache.torch_key().hex()
    (inductor / AUTOTUNE_KEY_FILE).write_text(json.dumps({"torch_key": "00ff", "cache_key_tag": "tag"}))
    (inductor / "ab").mkdir()
    (inductor / "ab" / "cabkernel.py").write_text("# a kernel file")
    key = hashlib.sha256(b"cabkernel.py:tag").hexdigest()
    name = hashlib.sha256(key.encode() + bytes.fromhex("00ff")).hexdigest()
    (inductor / "ab" / f"{name}.best_config").write_text(json.dumps({"XBLOCK": 64, "num_warps": 4}))
    capture = tmp_path / "capture"
    assert keep_best_configs(inductor, capture) == 1
    index = json.loads((capture / BEST_CONFIGS_FILE).read_text())
    assert index[f"ab/{name}.best_config"]["kernel_file"] == "ab/cabkernel.py"
