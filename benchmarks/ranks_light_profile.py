"""Time the landing page of N ranks with and without the light pass reading each rank's profile trace.

Run from the repository root, with a copy of the version before (``git archive <commit> inductor_lens templates
pyproject.toml | tar -x -C /tmp/before``):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/ranks_light_profile.py --ranks 64 --rounds 3 --before /tmp/before \
        --tlparse /tmp/tlp/bin/tlparse --results benchmarks/results/2026-11-28-cpu-ranks-light-profile.md

Two inputs of N ranks, each made from the committed two-rank capture (tests/fixtures/cpu-torch2.13-two-ranks.tar.gz):
- ``logs``: its TORCH_TRACE logs copied to N ranks (ranks_scale.py's input): no rank has a profile trace;
- ``captures``: its ``compile --nproc`` rank folders copied to N ranks (``rank<r>/capture/``, rank r getting rank
  r % 2's), each with its capture.json and its profile trace (250 KB), which the light pass now reads.
Per input and round, the version before and this one alternately (ranks_scale.ours: each ``inductor-lens report FOLDER
--out <tmp>`` in a fresh process, its time to the landing page polled every 10 ms); with ``--tlparse``, also
``tlparse --all-ranks-html`` on the ``logs`` input. Times: median over the rounds (min-max).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ranks_scale import FIXTURE, make_folder, ours, timed

_CAPTURES = "cpu-torch2.13-two-ranks/compile-nproc"


def make_captures(target: Path, ranks: int) -> Path:
    """``ranks`` rank folders, rank r a copy of the fixture's ``compile --nproc`` rank r % 2."""
    with tempfile.TemporaryDirectory() as unpacked:
        with tarfile.open(FIXTURE) as archive:
            archive.extractall(unpacked, filter="data")
        for rank in range(ranks):
            shutil.copytree(Path(unpacked) / _CAPTURES / f"rank{rank % 2}", target / f"rank{rank}")
    return target


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[64])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, required=True, help="a copy of the version before")
    parser.add_argument("--tlparse", default=None)
    parser.add_argument("--results", type=Path, default=None)
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        base = Path(work)
        for n in args.ranks:
            for label, make in (("logs", lambda n=n: make_folder(base / f"logs{n}", n, identical=False)),
                                ("captures", lambda n=n: make_captures(base / f"captures{n}", n))):  # fmt: skip
                folder = make()
                landing: dict[str, list[float]] = {"before": [], "after": []}
                total: dict[str, list[float]] = {"before": [], "after": []}
                theirs: list[float] = []
                for round_ in range(args.rounds):
                    for version, source in (("before", args.before), ("after", root)):
                        out = base / f"out-{label}{n}-{version}-{round_}"
                        whole, first, _verdict = ours(folder, out, source)
                        landing[version].append(first)
                        total[version].append(whole)
                        shutil.rmtree(out, ignore_errors=True)
                    if args.tlparse and label == "logs":
                        out = base / f"tlp-{n}-{round_}"
                        theirs.append(timed([args.tlparse, "--all-ranks-html", str(folder), "-o", str(out),
                                             "--overwrite", "--no-browser"])[0])  # fmt: skip
                        shutil.rmtree(out, ignore_errors=True)
                    print(f"{label}, {n} ranks, round {round_ + 1}: landing before {landing['before'][-1]:.2f} s, "
                          f"after {landing['after'][-1]:.2f} s", file=sys.stderr)  # fmt: skip
                rows.append((label, str(n), spread(landing["before"]), spread(landing["after"]),
                             spread(total["before"]), spread(total["after"]), spread(theirs) if theirs else "not run"))  # fmt: skip
                shutil.rmtree(folder)
    lines = [
        "# CPU: the landing page of N ranks, the light pass reading each rank's profile trace (before / after)",
        "",
        f"Command: `PYTHONPATH=$PWD .venv/bin/python benchmarks/ranks_light_profile.py --ranks "
        f"{' '.join(map(str, args.ranks))} --rounds {args.rounds} --before {args.before}"
        + (f" --tlparse {args.tlparse}" if args.tlparse else "") + "`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. The machine is "
        f"shared: its 1-minute load average was {load_before:.1f} before the run and {os.getloadavg()[0]:.1f} after.",
        "",
        "| input | ranks | landing page, before | landing page, after | total, before | total, after | tlparse |",
        "|---|---|---|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.results is not None:
        with args.results.open("a", encoding="utf-8") as results:
            results.write(text)


if __name__ == "__main__":
    main()
