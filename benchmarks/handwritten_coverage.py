"""How much of real models' device time the hand-written kernels stand in for, and how they compare (GPU).

Run on a GPU machine from the repository root, e.g.

    PYTHONPATH=$PWD python3 benchmarks/handwritten_coverage.py --out /tmp/cov --results cov.md --cases gpt2 resnet50-train

Each case is one `inductor-lens compile` of a real model (benchmarks/gpu_real_models.py's corpus) with the
hand-written stage on, or (`--reports DIR ...`) an existing report re-read. From each report's lens.json:
(`--captures DIR ...` checks and times the hand-written kernels of a capture made elsewhere, such as a committed
fixture, within `--timeout` seconds: what did not finish stays unchecked.)
- coverage: the share of the profiled device time per step whose launch has an exact or composed hand-written
  equivalent (handwritten/match.py `coverage`), and the share whose every hand-written kernel agrees with torch;
- the device time left without one, by what the launch computes (the largest first);
- per hand-written kernel (distinct name, shape, dtype): its do_bench median against Inductor's kernel for the
  same launch (in-context profiled time of an exact match), and, for memory-bound ones, its share of the
  measured copy bandwidth;
- per exact or composed match, whether its equivalents compute what Inductor's kernel computes
  (handwritten/verify.py: float64, the launch's input shapes, against the kernel's own FX nodes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inductor_lens.capture import find_capture_dir
from inductor_lens.handwritten.catalog import get
from inductor_lens.handwritten.match import coverage, timed_launches
from inductor_lens.pipeline import build_run, load_run
from inductor_lens.records import CompileRun

REAL = "samples/real"
CASES: dict[str, tuple[list[str], str]] = {
    "gpt2": ([f"{REAL}/gpt2.py"], "HF GPT-2, fp32, default"),
    "llama-bf16-mat": ([f"{REAL}/llama.py", "--dtype", "bf16", "--mode", "max-autotune-no-cudagraphs"],
                       "HF Llama, bf16, max-autotune-no-cudagraphs"),
    "llama-bf16": ([f"{REAL}/llama.py", "--dtype", "bf16"], "HF Llama, bf16, default"),
    "resnet50-train": ([f"{REAL}/torchvision_resnet50.py", "--train"], "torchvision ResNet-50, fp32, --train"),
    "vit": ([f"{REAL}/vit.py"], "HF ViT, fp32, default"),
    "timm-vit": ([f"{REAL}/timm_vit.py"], "timm ViT, fp32, default"),
    "gpt2-train": ([f"{REAL}/gpt2.py", "--train"], "HF GPT-2, fp32, --train"),
    "gated": (["benchmarks/models/gated_mlps.py"], "four gated MLPs (T5's NewGELU, tanh GELU, erf GELU, SwiGLU), fp32"),
}  # fmt: skip


def compile_case(name: str, out: Path, timeout: int) -> tuple[Path, str, float, int]:
    folder = out / name
    command = [sys.executable, "-m", "inductor_lens", "compile", "--out", str(folder), "--timeout", str(timeout),
               "--device", "cuda", *CASES[name][0]]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    print(
        f"$ inductor-lens {' '.join(command[3:])}\n{done.stderr[-2000:]}(exit {done.returncode}, {wall:.0f} s)",
        flush=True,
    )
    return folder, "inductor-lens " + " ".join(command[3:]), wall, done.returncode


def summarise(run: CompileRun) -> dict:
    share = coverage(run)
    left: Counter[str] = Counter()
    inductor_us: dict[tuple[str, str, str], list[float]] = {}
    for launch, match, time_us in timed_launches(run):
        if match is None or match.kind not in ("exact", "composed"):
            what = launch.label if match is None or not match.concepts else "+".join(match.concepts)
            left[f"{match.kind if match else 'not matched'}: {what}"] += time_us
        elif match.kind == "exact" and match.runs:
            key = (match.runs[0].name, json.dumps(dict(match.runs[0].shape)), match.dtype)
            inductor_us.setdefault(key, []).append(time_us)
    kernels = []
    ceilings = run.bench.ceilings if run.bench else None
    seen = set()
    for match in run.handwritten:
        for step in match.runs:
            key = (step.name, json.dumps(dict(step.shape)), step.dtype)
            if key in seen or step.timing is None:
                continue
            seen.add(key)
            equivalent = get(step.name)
            inductor = sorted(inductor_us.get(key, []))
            copy_share = None
            if equivalent.bound == "memory" and ceilings and ceilings.copy_gb_per_s and step.roofline:
                copy_share = (step.roofline.gb_per_s or 0.0) / ceilings.copy_gb_per_s
            kernels.append({
                "name": step.name, "shape": equivalent.shape_text(step.shape), "dtype": step.dtype, "ok": step.ok,
                "ms": step.timing.median_ms, "p10": step.timing.p10_ms, "p90": step.timing.p90_ms,
                "alone_ms": step.gpu_alone.median_ms if step.gpu_alone else None,
                "inductor_us": inductor[len(inductor) // 2] if inductor else None, "bound": equivalent.bound,
                "copy_share": copy_share,
            })  # fmt: skip
    verified = [
        {"graph": m.graph_id, "target": m.target, "kind": m.kind, "equivalents": " -> ".join(m.equivalents),
         "verified": m.verified, "error": m.verify_error, "tolerance": m.verify_tolerance, "note": m.verify_note}
        for m in run.handwritten if m.kind in ("exact", "composed")
    ]  # fmt: skip
    return {"coverage": share, "left": left, "kernels": kernels, "verified": verified}


def write(results: Path, rows: list[dict], device: str, versions: str) -> None:
    lines = ["# Hand-written coverage of real models", "", f"Device: {device}; {versions}.", ""]
    lines += ["| case | profiled device time per step | exact or composed | ... that agree with torch | launches |",
              "|---|---|---|---|---|"]  # fmt: skip
    for row in rows:
        cov = row["summary"]["coverage"]
        if cov is None:
            lines.append(f"| {row['name']} | not timed (exit {row['exit']}) | | | |")
            continue
        lines.append(f"| {row['name']} ({row['what']}) | {cov.total_us:,.0f} µs | {cov.matched_share:.1%} | "
                     f"{cov.agreeing_share:.1%} | {cov.launches} |")  # fmt: skip
    for row in rows:
        lines += [
            "",
            f"## {row['name']}: {row['what']}",
            "",
            f"`{row['command']}` (exit {row['exit']}, {row['wall']:.0f} s)",
            "",
        ]
        summary = row["summary"]
        if summary["coverage"] is None:
            continue
        total = summary["coverage"].total_us
        lines += ["Device time without an exact or composed equivalent, largest first:", ""]
        lines += [f"- {us / total:.1%} {what}" for what, us in summary["left"].most_common(12)]
        lines += ["", "| hand-written | shape | dtype | agrees | median ms (p10-p90) | GPU alone ms | Inductor's in-context µs (exact match) | ratio | % of copy bandwidth |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for k in summary["kernels"]:
            ratio = f"{k['ms'] * 1e3 / k['inductor_us']:.2f}x" if k["inductor_us"] else ""
            alone = "" if k["alone_ms"] is None else f"{k['alone_ms']:.4f}"
            inductor = "" if k["inductor_us"] is None else f"{k['inductor_us']:.1f}"
            copy = "" if k["copy_share"] is None else f"{100 * k['copy_share']:.0f}%"
            timing = f"{k['ms']:.4f} ({k['p10']:.4f}-{k['p90']:.4f})"
            lines.append(f"| {k['name']} | {k['shape']} | {k['dtype']} | {k['ok']} | {timing} | {alone} | {inductor} | "
                         f"{ratio} | {copy} |")  # fmt: skip
        lines += ["", "Each exact or composed match against what Inductor's kernel computes (float64, the launch's input "
                  "shapes, the kernel's own FX nodes):", "",
                  "| graph | Inductor's kernel or call | match | equivalents | verified | error / tolerance | note |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for v in summary["verified"]:
            verdict = {True: "yes", False: "REJECTED", None: "not verified"}[v["verified"]]
            error = "" if v["error"] is None else f"{v['error']:.2e} / {v['tolerance']:.0e}"
            lines.append(f"| {v['graph']} | `{v['target']}` | {v['kind']} | {v['equivalents']} | {verdict} | {error} | "
                         f"{v['note']} |")  # fmt: skip
    results.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--cases", nargs="*", default=[], choices=list(CASES))
    parser.add_argument(
        "--reports", nargs="*", type=Path, default=[], help="existing report folders to re-read"
    )
    parser.add_argument("--captures", nargs="*", type=Path, default=[],
                        help="capture folders (a fixture's) whose hand-written kernels to check and time here")  # fmt: skip
    parser.add_argument("--timeout", type=int, default=420)
    parser.add_argument("--handwritten-budget", type=float, default=None,
                        help="the hand-written stage's budget for --captures (0: none; default: the device's)")  # fmt: skip
    args = parser.parse_args()
    import torch
    import triton

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    versions = f"torch {torch.__version__}, triton {triton.__version__}"
    rows = []
    for folder in args.reports:
        run = load_run(folder)
        rows.append({"name": folder.name, "what": run.title, "command": f"(report {folder})", "exit": 0, "wall": 0.0,
                     "summary": summarise(run)})  # fmt: skip
    for folder in args.captures:
        started = time.perf_counter()
        run = build_run(folder, find_capture_dir(folder), run_handwritten=True, timeout_s=args.timeout,
                        budget_s=args.handwritten_budget)  # fmt: skip
        rows.append({"name": folder.name, "what": run.title, "command": f"(capture {folder}, hand-written stage run here)",
                     "exit": 0, "wall": time.perf_counter() - started, "summary": summarise(run)})  # fmt: skip
        write(args.results, rows, device, versions)
    for name in args.cases:
        folder, command, wall, code = compile_case(name, args.out, args.timeout)
        summary = summarise(load_run(folder)) if (folder / "lens.json").is_file() else {"coverage": None}
        rows.append(
            {
                "name": name,
                "what": CASES[name][1],
                "command": command,
                "exit": code,
                "wall": wall,
                "summary": summary,
            }
        )
        write(args.results, rows, device, versions)
    write(args.results, rows, device, versions)


if __name__ == "__main__":
    main()
