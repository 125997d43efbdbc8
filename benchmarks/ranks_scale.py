"""Time the landing page of N ranks' TORCH_TRACE logs: `inductor-lens report` against `tlparse --all-ranks-html`.

Run from the repository root (tlparse from PyPI, in a venv of its own: `python3 -m venv /tmp/tlp &&
/tmp/tlp/bin/pip install tlparse==0.4.3`):

    PYTHONPATH=$PWD .venv/bin/python benchmarks/ranks_scale.py --ranks 16 64 --rounds 3 \
        --tlparse /tmp/tlp/bin/tlparse --baseline /tmp/before \
        --results benchmarks/results/2026-11-28-cpu-ranks-scale.md

The N-rank folder is the committed two-rank capture's logs (tests/fixtures/cpu-torch2.13-two-ranks.tar.gz,
torchrun-shared/trace: a job whose rank 1 branches on the rank and recompiles) copied to N ranks, rank r getting
the log of rank r % 2 under the name torch gives a rank's log (``dedicated_log_torch_trace_rank_<r>_*.log``). A
second folder, rank 0's log copied to every rank, checks that identical logs are never said to diverge.

Per N and round, interleaved (tlparse, then ours, so machine load hits both alike), each in a fresh process:
- tlparse: ``tlparse --all-ranks-html FOLDER -o <tmp> --overwrite --no-browser``;
- ours: ``inductor-lens report FOLDER --out <tmp>``: the landing page (from the light pass over every log, in
  parallel), then the full reports of one rank of each group of identical ranks. Its time to the landing page
  is the wall time from the command's start until the page is on disk (polled every 10 ms).
Wall time is the median over the rounds with min-max.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "cpu-torch2.13-two-ranks.tar.gz"
LOGS = "cpu-torch2.13-two-ranks/torchrun-shared/trace"
_VERDICT = re.compile(r"inductor-lens: (?P<v>the ranks .*) \(see the landing page\)")


def make_folder(target: Path, ranks: int, *, identical: bool) -> Path:
    """``ranks`` ranks' logs in ``target``: copies of the fixture's two (or of rank 0's alone)."""
    with tempfile.TemporaryDirectory() as unpacked:
        with tarfile.open(FIXTURE) as archive:
            archive.extractall(unpacked, filter="data")
        logs = {int(p.name.split("_")[5]): p for p in (Path(unpacked) / LOGS).glob("*.log")}
        return _copied(target, ranks, lambda rank: logs[0 if identical else rank % 2])


def make_real_folder(target: Path, ranks: int, fixture: str) -> Path:
    """``ranks`` copies of the TORCH_TRACE log of a real single-process capture (``tests/fixtures/<fixture>``)."""
    with tempfile.TemporaryDirectory() as unpacked:
        with tarfile.open(ROOT / "tests" / "fixtures" / f"{fixture}.tar.gz") as archive:
            archive.extractall(unpacked, filter="data")
        log = max(Path(unpacked).rglob("dedicated_log_torch_trace_*.log"), key=lambda p: p.stat().st_size)
        return _copied(target, ranks, lambda rank: log)


def _copied(target: Path, ranks: int, log_of: Callable[[int], Path]) -> Path:
    target.mkdir(parents=True)
    for rank in range(ranks):
        shutil.copyfile(log_of(rank), target / f"dedicated_log_torch_trace_rank_{rank}_copy{rank}.log")
    return target


def timed(command: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return seconds, done.stderr


def ours(folder: Path, out: Path, source: Path = ROOT) -> tuple[float, float, str]:
    """Our total wall time, the wall time until the landing page is on disk (polled), and the verdict printed;
    ``source``: the checkout whose inductor_lens runs (another one: the version before the light pass)."""
    command = [sys.executable, "-m", "inductor_lens", "report", str(folder), "--out", str(out)]
    started = time.perf_counter()
    landing = None
    environment = {**os.environ, "PYTHONPATH": str(source)}
    with subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment, cwd=source
    ) as process:
        while process.poll() is None:
            if landing is None and (out / "index.html").is_file():
                landing = time.perf_counter() - started
            time.sleep(0.01)
        stderr = process.stderr.read() if process.stderr is not None else ""
    total = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {process.returncode}\n{stderr[-2000:]}")
    verdict = _VERDICT.search(stderr)
    return total, landing if landing is not None else total, verdict["v"] if verdict else "?"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} s ({min(values):.1f}-{max(values):.1f})"


def measure(label: str, folder: Path, n: int, args: argparse.Namespace, base: Path) -> tuple[tuple[str, ...], str]:
    """One table row (ours and tlparse over the rounds) and the baseline's line, for one N-rank folder."""
    size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
    totals, landings, theirs, verdict = [], [], [], ""
    for round_ in range(args.rounds):
        if args.tlparse:
            out = base / f"tlp-{folder.name}-{round_}"
            theirs.append(timed([args.tlparse, "--all-ranks-html", str(folder), "-o", str(out),
                                 "--overwrite", "--no-browser"])[0])  # fmt: skip
            shutil.rmtree(out, ignore_errors=True)
        out = base / f"ours-{folder.name}-{round_}"
        total, landing, verdict = ours(folder, out)
        totals.append(total)
        landings.append(landing)
        shutil.rmtree(out, ignore_errors=True)
        print(f"{label}, {n} ranks, round {round_ + 1}: ours {total:.1f} s (landing {landing:.1f} s)"
              + (f", tlparse {theirs[-1]:.1f} s" if theirs else ""), file=sys.stderr)  # fmt: skip
    ratios = (
        f"{statistics.median(landings) / statistics.median(theirs):.2f}x / "
        f"{statistics.median(totals) / statistics.median(theirs):.2f}x" if theirs else "—"
    )
    baseline = ""
    if args.baseline is not None:
        before = ours(folder, base / f"before-{folder.name}", args.baseline)
        baseline = f"{label}, {n} ranks: landing page after {before[1]:.1f} s, total {before[0]:.1f} s"
        shutil.rmtree(base / f"before-{folder.name}", ignore_errors=True)
    row = (label, str(n), f"{size:.1f} MB", spread(landings), spread(totals),
           spread(theirs) if theirs else "not run", ratios, verdict)  # fmt: skip
    return row, baseline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tlparse", default=shutil.which("tlparse"), help="the tlparse binary (none: ours alone)")
    parser.add_argument("--results", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout of the version before the light pass (git worktree add DIR 4df5669): timed once "
                        "per folder, its landing page waits for every rank's full report")  # fmt: skip
    parser.add_argument("--real", default=None, help="also a real capture's log (a fixture's name, e.g. "
                        "h100-resnet50-train) copied to --real-ranks ranks")  # fmt: skip
    parser.add_argument("--real-ranks", type=int, default=16)
    args = parser.parse_args()
    rows, checks, baselines = [], [], []
    tlparse_version = ""
    if args.tlparse:
        tlparse_version = subprocess.run([args.tlparse, "--version"], capture_output=True, text=True).stdout.strip()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as work:
        base = Path(work)
        jobs = [("two-rank capture", n, lambda n=n: make_folder(base / f"job{n}", n, identical=False)) for n in args.ranks]
        if args.real:
            jobs.append((f"{args.real} log", args.real_ranks,
                         lambda: make_real_folder(base / "real", args.real_ranks, args.real)))  # fmt: skip
        for label, n, make in jobs:
            folder = make()
            row, baseline = measure(label, folder, n, args, base)
            rows.append(row)
            if baseline:
                baselines.append(baseline)
            shutil.rmtree(folder)
        for n in args.ranks:
            same = make_folder(base / f"same{n}", n, identical=True)
            checks.append((n, ours(same, base / f"same-out{n}")[2]))
    lines = [
        "# CPU: the landing page of N ranks' TORCH_TRACE logs, inductor-lens against tlparse",
        "",
        f"Command: `PYTHONPATH=$PWD .venv/bin/python benchmarks/ranks_scale.py --ranks {' '.join(map(str, args.ranks))} "
        f"--rounds {args.rounds}" + (f" --tlparse {args.tlparse}" if args.tlparse else "")
        + (f" --baseline {args.baseline}" if args.baseline else "")
        + (f" --real {args.real} --real-ranks {args.real_ranks}" if args.real else "") + "`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"tlparse: {tlparse_version or 'not installed'}. The machine is shared: its 1-minute load average was "
        f"{load_before:.1f} before the run and {os.getloadavg()[0]:.1f} after it.",
        "Input: the two-rank capture's logs (tests/fixtures/cpu-torch2.13-two-ranks.tar.gz, torchrun-shared) copied "
        "to N ranks, rank r getting rank r % 2's log"
        + (f"; and the TORCH_TRACE log of tests/fixtures/{args.real}.tar.gz (one process) copied to "
           f"{args.real_ranks} ranks" if args.real else "") + ". Times: median over the rounds (min-max), each "
        "command in a fresh process, the interpreter's start included; ours to the landing page: until the page is "
        "on disk; its total adds the full reports of one rank per group of identical ranks (in parallel).",
        "",
        "| input | ranks | logs | ours: landing page | ours: total | tlparse --all-ranks-html | ours / tlparse "
        "(landing / total) | verdict |",
        "|---|---|---|---|---|---|---|---|",
        *(f"| {' | '.join(row)} |" for row in rows),
        "",
        "Identical logs (rank 0's copied to every rank), the verdict: "
        + "; ".join(f"{n} ranks: {verdict}" for n, verdict in checks) + ".",
        "",
    ]
    if baselines:
        lines += [
            f"The version before the light pass ({args.baseline}, one round each, a full report of every rank "
            "one after another before the landing page): " + "; ".join(baselines) + ".",
            "",
        ]
    text = "\n".join(lines)
    print(text)
    if args.results is not None:
        args.results.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
