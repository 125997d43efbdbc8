"""Time the hand-written stage on a GPU cold (empty autotune cache) and warm (a second run on the cache the first left).

Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/handwritten_autotune_cache.py [--dtypes bfloat16,float32] [--keep DIR]

Each run is a fresh process doing what the report's check process does for every task
(``worker/handwritten.run_task``: check against torch, time with do_bench, time torch eager, replay from a
CUDA graph) for every kernel of the catalog at a few GPT-2-sized shapes, some of them neighbours that share
a shape class. Both runs use one private cache folder (``INDUCTOR_LENS_CACHE_DIR``, removed afterwards
unless ``--keep``). Printed per run: wall time, how many times Triton's autotuner ran, how many
configurations came from the cache, and failures. Expected: the warm run runs the autotuner 0 times, reads
every configuration from the cache and takes a fraction of the cold run's time; its checks agree as well.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

# (dimensions by family): GPT-2 small (768 wide, 12 heads, 4 x 1024 tokens), with neighbours of the same
# shape class (4000 rows; 2304 wide, rounded up like 3072) so the cache's rounding is exercised too.
SHAPES = {
    "elementwise": [(4096, 768), (4000, 768), (4096, 3072)],
    "row-wise": [(4096, 768), (4000, 768), (4096, 3072)],
    "matmul": [(4096, 2304, 768), (4096, 3072, 768), (4096, 768, 3072), (4096, 768, 768)],
    "attention": [(4, 12, 1024, 64), (4, 12, 1000, 64)],
}


def child(dtypes: list[str]) -> dict[str, object]:
    """One run of the stage in this process (the check process's loop, without its files)."""
    from inductor_lens.exchange.files import HandwrittenTask
    from inductor_lens.handwritten.catalog import EQUIVALENTS
    from inductor_lens.worker.handwritten import tuning
    from inductor_lens.worker.handwritten.job import run_task

    origins: Counter[str] = Counter()
    failures = []
    tasks = 0
    started = time.perf_counter()
    for equivalent in EQUIVALENTS:
        # a family without a list here (entries of their own dimensions): the entry's default shape
        for shape in SHAPES.get(equivalent.family, [equivalent.default_shape]):
            for dtype in dtypes:
                task = HandwrittenTask(equivalent.name, equivalent.shape(shape), dtype)
                try:
                    entry = run_task(task, "cuda")
                except Exception as exc:  # report it and go on, as the check process does
                    failures.append(f"{task.key}: {type(exc).__name__}: {exc}"[:300])
                    continue
                tasks += 1
                origins.update(c.origin for c in entry.configs)
                if entry.error or entry.ok is False:
                    failures.append(f"{task.key}: {entry.error or f'error {entry.max_rel_error:.2e}'}")
    return {
        "seconds": time.perf_counter() - started,
        "tasks": tasks,
        "autotuner_runs": tuning.FIRST_USES["tuned"],
        "cache_hits": tuning.FIRST_USES["cache"],
        "config_origins": dict(origins),
        "failures": failures,
    }


def run_once(label: str, cache: Path, dtypes: list[str]) -> dict[str, object]:
    env = {**os.environ, "INDUCTOR_LENS_CACHE_DIR": str(cache)}
    env.pop("TRITON_INTERPRET", None)
    command = [sys.executable, __file__, "--child", "--dtypes", ",".join(dtypes)]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{label} run failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - started
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="bfloat16", help="comma-separated: bfloat16, float16, float32")
    parser.add_argument("--keep", type=Path, help="use and keep this cache folder (it should start empty)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if args.child:
        print(json.dumps(child(dtypes)))
        return 0

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU: on a CPU the hand-written kernels run under Triton's interpreter, untuned")
    root = args.keep or Path(tempfile.mkdtemp(prefix="lens-autotune-"))
    try:
        cold = run_once("cold", root, dtypes)
        warm = run_once("warm", root, dtypes)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    entries = len(list((root / "handwritten-autotune").glob("*.json"))) if args.keep else None
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; dtypes {', '.join(dtypes)}")
    print(f"{'run':<5} {'tasks':>5} {'stage s':>8} {'process s':>9} {'autotuner runs':>14} {'cache hits':>10}  origins")
    for label, result in (("cold", cold), ("warm", warm)):
        print(f"{label:<5} {result['tasks']:>5} {result['seconds']:>8.1f} {result['process_seconds']:>9.1f} "
              f"{result['autotuner_runs']:>14} {result['cache_hits']:>10}  {result['config_origins']}")  # fmt: skip
    if entries is not None:
        print(f"cache entries: {entries} in {root / 'handwritten-autotune'}")
    for label, result in (("cold", cold), ("warm", warm)):
        for failure in result["failures"]:  # type: ignore[attr-defined]
            print(f"{label} FAILED {failure}")
    ok = warm["autotuner_runs"] == 0 and not cold["failures"] and not warm["failures"]
    print("OK: the warm run tuned nothing" if ok else "NOT OK: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
