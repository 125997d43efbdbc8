"""The CPU preview's kernel names against real GPU captures: `compile --preview-gpu` of the model files behind the
committed GPU fixtures, on this CPU machine, and each inference graph's Triton kernels (name, category) compared with
the fixture's.

    python benchmarks/preview_names.py [--out RESULT.md] [--work DIR]

Cases (model file, fixture, compile arguments as the fixture was captured):
- samples/mlp.py, samples/softmax_ln.py, samples/block.py against mlp_default, softmax_ln_default, block_default
  (H200, torch 2.11, default mode; tests/e2e/test_gpu_preview.py checks these three in CI);
- benchmarks/models/hf_gpt2_small.py against gpt2_small_ro (H100, torch 2.11, reduce-overhead);
- benchmarks/models/hf_llama_small.py against llama_small_bf16 (H100, torch 2.11, bf16).

The interpreter check is given 5 s per compiled call (INDUCTOR_LENS_INTERPRETER_BUDGET_S): the names are what is
compared here. Prints a markdown table (per case: kernels, exact name and category matches, the kernels that differ)
and the total; writes it to --out. Needs transformers for the two HF models.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = (
    ("samples/mlp.py", "mlp_default", ()),
    ("samples/softmax_ln.py", "softmax_ln_default", ()),
    ("samples/block.py", "block_default", ()),
    ("benchmarks/models/hf_gpt2_small.py", "gpt2_small_ro", ("--mode", "reduce-overhead")),
    ("benchmarks/models/hf_llama_small.py", "llama_small_bf16", ("--dtype", "bf16")),
)


def _inference_kernels(run: object) -> list[tuple[str, str]]:
    graphs = [g for g in run.graphs if g.kind == "inference"]  # type: ignore[attr-defined]
    return [(k.name, k.category) for k in graphs[0].kernels if k.backend == "triton"] if graphs else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "preview-names")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from inductor_lens.parse import parse_debug_folder
    from inductor_lens.records import CompileRun

    env = {**os.environ, "INDUCTOR_LENS_INTERPRETER_BUDGET_S": "5"}
    lines = ["| model | fixture | kernels | same name | same category | names that differ |",
             "|---|---|---:|---:|---:|---|"]  # fmt: skip
    totals = [0, 0, 0]
    for model, fixture, extra in CASES:
        out = args.work / fixture
        command = [sys.executable, "-m", "inductor_lens", "compile", str(ROOT / model), "--preview-gpu",
                   "--out", str(out), *extra]  # fmt: skip
        print("$", " ".join(command), flush=True)
        subprocess.run(command, env=env, cwd=ROOT, check=True)
        preview = _inference_kernels(CompileRun.from_json((out / "lens.json").read_text()))
        unpacked = args.work / f"{fixture}-fixture"
        if not unpacked.exists():
            with tarfile.open(ROOT / "tests" / "fixtures" / f"{fixture}.tar.gz") as archive:
                archive.extractall(unpacked, filter="data")
        expected = _inference_kernels(parse_debug_folder(unpacked))
        # as multisets: a kernel inserted or left out shifts no other kernel's match
        names = sum((Counter(n for n, _ in preview) & Counter(n for n, _ in expected)).values())
        categories = sum((Counter(c for _, c in preview) & Counter(c for _, c in expected)).values())
        count = max(len(preview), len(expected))
        only_here = sorted((Counter(n for n, _ in preview) - Counter(n for n, _ in expected)).elements())
        only_there = sorted((Counter(n for n, _ in expected) - Counter(n for n, _ in preview)).elements())
        differing = [f"here only `{n}`" for n in only_here] + [f"fixture only `{n}`" for n in only_there]
        lines.append(f"| {model} | {fixture} | {count} | {names} | {categories} | {'; '.join(differing) or '—'} |")
        totals = [totals[0] + count, totals[1] + names, totals[2] + categories]
    count, names, categories = totals
    lines += ["", f"In all: {names} of {count} kernel names ({100 * names / count:.0f}%) and {categories} of {count} "
              f"categories ({100 * categories / count:.0f}%) the same as the GPU's."]  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps({"kernels": count, "same_name": names, "same_category": categories}))


if __name__ == "__main__":
    main()
