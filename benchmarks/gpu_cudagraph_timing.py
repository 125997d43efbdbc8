"""Timing under CUDA graphs: how much of each profiled step's device time the report ties to launches.

For each case (reduce-overhead and max-autotune, which turn CUDA graphs on), one ``inductor-lens compile``
process (``gpu_real_models.run_case``), then from its lens.json: the profiled device time per step, the part
tied to launches (and of it, the part replayed from CUDA graphs and the part tied by position only), the
launches with a time, the Triton kernels with an isolated time, and what the CUDA graphs cost and saved.

Run on the GPU machine: ``python3 benchmarks/gpu_cudagraph_timing.py --out /tmp/cg --results $OUT/cg.md
--cases block-ro block-ma gpt2-ro gpt2-ma``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_real_models import CASES, pack, run_case


def row(case: dict) -> str:
    run = case["run"]
    if run is None or not (run.get("bench") or {}).get("step"):
        return f"| {case['name']} | {case['exit']} | no timings | | | | | | {case['wall_s']:.0f} s |"
    bench = run["bench"]
    step = bench["step"]
    launches = [launch for g in run["graphs"] for launch in g["launches"]]
    timed = sum(1 for launch in launches if launch.get("timing"))
    triton = [k for g in run["graphs"] for k in g["kernels"] if k.get("backend") == "triton"]
    isolated = sum(1 for k in triton if (k.get("timing") or {}).get("isolated"))
    tied = step["attributed_us"] / step["total_us"] if step["total_us"] else 0.0
    cg = bench.get("cudagraphs") or {}
    e2e = bench.get("end_to_end") or {}

    def spread(t: dict | None) -> str:
        return f"{t['median_ms']:.3f} ({t['p10_ms']:.3f}-{t['p90_ms']:.3f})" if t else "—"

    graphs = (f"{cg.get('graphs_recorded')} rec / {cg.get('rerecords')} re-rec / {cg.get('skips')} skips"
              if cg else (e2e.get("cudagraphs") or "—"))  # fmt: skip
    return (f"| {case['name']} | {case['exit']} | {step['total_us']:.1f} | {step['attributed_us']:.1f} ({tied:.1%}) | "
            f"{step.get('replayed_us') or 0:.1f} / {step.get('approximate_us') or 0:.1f} | {timed}/{len(launches)} | "
            f"{isolated}/{len(triton)} | {graphs}; with {spread(cg.get('with_graphs') or e2e.get('compiled'))} vs "
            f"without {spread(cg.get('without_graphs'))} ms; eager {spread(e2e.get('eager'))} ms | {case['wall_s']:.0f} s |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--cases", nargs="*", required=True, choices=list(CASES))
    parser.add_argument("--pack", nargs="*", default=[])
    parser.add_argument("--timeout", type=int, default=300)
    args = parser.parse_args()
    import torch
    import triton

    head = (f"Device: {torch.cuda.get_device_name()}; torch {torch.__version__}, triton {triton.__version__}, CUDA "
            f"{torch.version.cuda}, Python {platform.python_version()}.\n\n"
            "| case | exit | device µs/step | tied to launches | replayed / by position only (µs) | launches timed | "
            "Triton kernels isolated | CUDA graphs; compiled step with / without graphs; eager (median, p10-p90) | wall |\n"
            "|---|---|---|---|---|---|---|---|---|\n")  # fmt: skip
    rows, notes = [], []
    for name in args.cases:
        case = run_case(name, args.out, args.timeout)
        rows.append(row(case))
        cg = ((case["run"] or {}).get("bench") or {}).get("cudagraphs") or {}
        step = ((case["run"] or {}).get("bench") or {}).get("step") or {}
        notes.append(f"- {name}: `{case['command']}`; tie: {cg.get('tie', '—')}; errors: {cg.get('errors') or case['error'] or 'none'}; "
                     f"unattributed: {json.dumps({k[:60]: round(v, 2) for k, v in (step.get('unattributed') or {}).items()})}")  # fmt: skip
        args.results.write_text(head + "\n".join(rows) + "\n\n" + "\n".join(notes) + "\n")
    for name in args.pack:
        pack(args.out, name, args.results.parent)


if __name__ == "__main__":
    main()
