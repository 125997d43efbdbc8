"""Make the shipped table of tuned configurations for one GPU architecture (run on that GPU).

The hand-written kernels look a launch's configuration up in ``inductor_lens/worker/handwritten/tuned/<arch>.json``
before searching (``worker/handwritten/tuning.py``). This script writes that file from the autotune caches of full
searches (every configuration each kernel's prune keeps, no budget, the table itself not read), merged with
the entries the table already has (a key searched again replaces its entry):

    INDUCTOR_LENS_TUNING_TABLE=0 INDUCTOR_LENS_TUNE_BUDGET=0 INDUCTOR_LENS_CACHE_DIR=/tmp/tt/gpt2 \\
        python3 benchmarks/handwritten_coverage.py --captures CAPTURE --handwritten-budget 0 ...
    python3 benchmarks/tuning_table.py --caches /tmp/tt/*/handwritten-autotune --arch sm_90 \\
        --device-name H100 --out inductor_lens/worker/handwritten/tuned/sm_90.json

Only entries tuned on a GPU whose name contains ``--device-name`` are taken (an H100's winners are an H100's;
an H200 shares the architecture and the table). Each entry keeps the GPU, the Triton version and the kernel
version it was tuned with; the table's header says when and from what it was made.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inductor_lens.worker.handwritten.tuning_store import FORMAT

FIELDS = ("kernel", "version", "shape_class", "dtypes", "device", "triton", "config", "time_ms", "tuned_on")


def read_cache(folder: Path, device_name: str) -> list[dict]:
    entries = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("format") != FORMAT or device_name not in str(data.get("device", "")):
            continue
        entries.append({name: data.get(name) for name in FIELDS})
    return entries


def key(entry: dict) -> tuple[str, str, str]:
    return entry["kernel"], json.dumps(entry["shape_class"], sort_keys=True), entry["dtypes"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--caches", nargs="+", type=Path, required=True)
    parser.add_argument("--arch", required=True, help="sm_90")
    parser.add_argument("--device-name", required=True, help="a part of the GPU's name: H100")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--note", default="", help="what the searches ran on (models, captures)")
    args = parser.parse_args()
    table: dict[tuple[str, str, str], dict] = {}
    if args.out.is_file():
        for entry in json.loads(args.out.read_text(encoding="utf-8")).get("entries", []):
            table[key(entry)] = entry
    before = len(table)
    fresh = [e for folder in args.caches for e in read_cache(folder, args.device_name)]
    for entry in fresh:
        known = table.get(key(entry))
        # an old entry is replaced; of two searches of one key (two models share a shape class), the faster stays
        if known is None or known not in fresh or (entry["time_ms"] or 1e9) < (known["time_ms"] or 1e9):
            table[key(entry)] = entry
    header = {
        "format": FORMAT,
        "arch": args.arch,
        "made": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "devices": sorted({e["device"] for e in table.values()}),
        "triton": sorted({e["triton"] for e in table.values()}),
        "note": args.note,
        "how": "benchmarks/tuning_table.py from full searches (INDUCTOR_LENS_TUNING_TABLE=0 INDUCTOR_LENS_TUNE_BUDGET=0)",
    }
    entries = sorted(table.values(), key=lambda e: (e["kernel"], e["dtypes"], json.dumps(e["shape_class"], sort_keys=True)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**header, "entries": entries}, indent=1) + "\n", encoding="utf-8")
    print(f"{args.out}: {len(entries)} entries ({len(fresh)} read from {len(args.caches)} caches, {before} before)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
