"""The real-model corpus on a GPU: compile each case with inductor-lens and tabulate what the reports say.

Run on a GPU machine from the repository root, e.g.

    PYTHONPATH=$PWD python3 benchmarks/gpu_real_models.py --out /tmp/real --results real.md [--cases gpt2 llama-bf16]

Each case is one `inductor-lens compile` (or `run` for the training script) in a process of its own, with
`--no-handwritten` (the hand-written stage is measured elsewhere). The table gives, from each report's lens.json:
exit code, graphs, Dynamo frames and recompiles, kernels by kind, the accuracy verdict (against a float64 run)
with the worst tensor, compiled and eager step medians and wall time. `--pack NAME ...` writes those reports'
pages and lens.json (without the capture folder) as NAME.tar.gz next to the results, to be looked at elsewhere.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REAL = "samples/real"
# name -> (command words after `inductor-lens`, what it is)
CASES: dict[str, tuple[list[str], str]] = {
    "gpt2": (["compile", f"{REAL}/gpt2.py"], "HF GPT-2, fp32, default"),
    "gpt2-train": (["compile", f"{REAL}/gpt2.py", "--train"], "HF GPT-2, fp32, --train"),
    "bert": (["compile", f"{REAL}/bert.py"], "HF BERT with attention_mask=, fp32, default"),
    "bert-train": (["compile", f"{REAL}/bert.py", "--train"], "HF BERT, --train"),
    "vit": (["compile", f"{REAL}/vit.py"], "HF ViT, fp32, default"),
    "llama": (["compile", f"{REAL}/llama.py"], "HF Llama, fp32, default"),
    "llama-bf16": (["compile", f"{REAL}/llama.py", "--dtype", "bf16"], "HF Llama, bf16, default"),
    "llama-bf16-mat": (["compile", f"{REAL}/llama.py", "--dtype", "bf16", "--mode", "max-autotune-no-cudagraphs"],
                       "HF Llama, bf16, max-autotune-no-cudagraphs"),
    "llama-dynamic": (["compile", f"{REAL}/llama_dynamic.py"], "HF Llama, three sequence lengths (automatic dynamic)"),
    "resnet50-train": (["compile", f"{REAL}/torchvision_resnet50.py", "--train"], "torchvision ResNet-50, --train"),
    "resnet50-train-mat": (["compile", f"{REAL}/torchvision_resnet50.py", "--train", "--mode",
                            "max-autotune-no-cudagraphs"], "torchvision ResNet-50, --train, max-autotune-no-cudagraphs"),
    "resnet50-train-bf16": (["compile", f"{REAL}/torchvision_resnet50.py", "--train", "--dtype", "bf16"],
                            "torchvision ResNet-50, --train, bf16, default"),
    "resnet50-train-bf16-mat": (["compile", f"{REAL}/torchvision_resnet50.py", "--train", "--dtype", "bf16", "--mode",
                                 "max-autotune-no-cudagraphs"], "torchvision ResNet-50, --train, bf16, max-autotune-no-cudagraphs"),
    "timm-vit": (["compile", f"{REAL}/timm_vit.py"], "timm ViT, fp32, default"),
    "timm-vit-bf16": (["compile", f"{REAL}/timm_vit.py", "--dtype", "bf16"], "timm ViT, bf16, default"),
    "timm-vit-bf16-mat": (["compile", f"{REAL}/timm_vit.py", "--dtype", "bf16", "--mode", "max-autotune-no-cudagraphs"],
                          "timm ViT, bf16, max-autotune-no-cudagraphs"),
    # CUDA-graph modes (issue 14: timing under CUDA graphs; tables by benchmarks/gpu_cudagraph_timing.py)
    "block-ro": (["compile", "samples/block.py", "--mode", "reduce-overhead"], "transformer block, reduce-overhead"),
    "block-ma": (["compile", "samples/block.py", "--mode", "max-autotune"], "transformer block, max-autotune"),
    "gpt2-ro": (["compile", f"{REAL}/gpt2.py", "--mode", "reduce-overhead"], "HF GPT-2, fp32, reduce-overhead"),
    "gpt2-ma": (["compile", f"{REAL}/gpt2.py", "--mode", "max-autotune"], "HF GPT-2, fp32, max-autotune"),
    "timm-vit-ro": (["compile", f"{REAL}/timm_vit.py", "--mode", "reduce-overhead"], "timm ViT, fp32, reduce-overhead"),
    "train-gpt2": (["run", "--", "python", f"{REAL}/train_gpt2.py", "--steps", "8", "--device", "cuda"],
                   "a GPT-2 training script, two sequence lengths, under `run`"),
}


def run_case(name: str, out: Path, timeout: int) -> dict:
    words, what = CASES[name]
    folder = out / name
    command = [sys.executable, "-m", "inductor_lens", *words[:1], "--out", str(folder), "--timeout", str(timeout),
               "--no-handwritten", *words[1:]]  # fmt: skip
    if words[0] == "compile":
        command += ["--device", "cuda"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    print(f"$ inductor-lens {' '.join(command[3:])}\n{done.stderr[-3000:]}(exit {done.returncode}, {wall:.0f} s)", flush=True)
    lens = folder / "lens.json"
    run = json.loads(lens.read_text())["run"] if lens.is_file() else None
    return {"name": name, "what": what, "command": " ".join(["inductor-lens", *command[3:]]), "exit": done.returncode,
            "wall_s": wall, "run": run, "error": [line for line in done.stderr.splitlines() if line.startswith("error:")]}  # fmt: skip


def row(case: dict) -> str:
    run = case["run"]
    if run is None:
        return f"| {case['name']} | {case['exit']} | no report | | | | | {case['wall_s']:.0f} s |"
    kinds: dict[str, int] = {}
    for graph in run["graphs"]:
        for launch in graph["launches"]:
            kinds[launch["kind"]] = kinds.get(launch["kind"], 0) + 1
    frames = run["frames"]
    recompiles = sum(1 for f in frames if f["recompile_reasons"])
    capture = run.get("capture") or {}
    acc = capture.get("accuracy")
    if acc is None:
        verdict = "not judged (a script)" if capture.get("command") else "—"
    else:
        worst = acc["checks"][0] if acc.get("checks") else None
        verdict = ("agrees" if acc["within_tolerance"] else "**differs**") + f" ({acc.get('reference') or 'eager'}, {acc.get('checked', '?')} tensors"
        verdict += f"; worst {worst['name']}: {worst['note']})" if worst else ")"
    e2e = (run.get("bench") or {}).get("end_to_end") or {}
    step = (run.get("bench") or {}).get("step") or {}
    def spread(t: dict) -> str:
        return f"{t['median_ms']:.3f} ({t['p10_ms']:.3f}-{t['p90_ms']:.3f}, n={t['samples']})"

    timing = (f"{spread(e2e['compiled'])} / {spread(e2e['eager'])} ms ({e2e['speedup']:.2f}x)"
              if e2e else f"{step.get('total_us', 0) / 1e3:.3f} ms GPU per profiled step" if step else "—")  # fmt: skip
    kernels = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return (f"| {case['name']} | {case['exit']} | {len(run['graphs'])} | {len(frames)} / {recompiles} | {kernels} | "
            f"{verdict} | {timing} | {case['wall_s']:.0f} s |")  # fmt: skip


def pack(out: Path, name: str, target: Path) -> None:
    folder = out / name
    with tarfile.open(target / f"{name}.tar.gz", "w:gz") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "capture" not in path.relative_to(folder).parts:
                archive.add(path, arcname=f"{name}/{path.relative_to(folder).as_posix()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where the reports go")
    parser.add_argument("--results", type=Path, required=True, help="the Markdown page to write")
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--pack", nargs="*", default=[], help="cases whose report pages to pack next to the results")
    parser.add_argument("--timeout", type=int, default=420)
    args = parser.parse_args()
    import torch  # the versions, for the page

    versions = [f"torch {torch.__version__}"]
    for name in ("triton", "transformers", "torchvision", "timm"):
        try:
            versions.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            versions.append(f"{name} not installed")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    cases = []
    for name in args.cases:
        cases.append(run_case(name, args.out, args.timeout))
        write(args.results, cases, device, versions)
    for name in args.pack:
        pack(args.out, name, args.results.parent)


def write(results: Path, cases: list[dict], device: str, versions: list[str]) -> None:
    lines = [
        f"Device: {device}; {', '.join(versions)}; CUDA {__import__('torch').version.cuda}; Python {platform.python_version()}.",
        "",
        "| case | exit | graphs | frames / recompiles | launches by kind | accuracy (reference, tensors judged; worst) | compiled / eager step: median (p10-p90, samples) | wall |",
        "|---|---|---|---|---|---|---|---|",
        *(row(c) for c in cases),
        "",
        "Commands:",
        "",
        *(f"- {c['name']} ({c['what']}): `{c['command']}`" + (f" → {c['error'][0]}" if c["error"] else "") for c in cases),
    ]
    results.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
