"""How many programs per SM the split reductions should run: the norm backwards' first stage
(``norms.BACKWARD_PROGRAMS_PER_SM``) and batch norm's per-channel sums (``batchnorm.REDUCE_PROGRAMS_PER_SM``).

Each program walks a group of rows and writes one fp32 partial per column (or channel); more programs keep
more bytes in flight per SM and cost more partials to write and sum. For each setting this retunes the
tiles (a fresh tuning cache) and times the whole operation (every stage) with GPU time alone
(``do_bench_cudagraph`` medians, replayed from a CUDA graph), with the share of the measured copy bandwidth
it reaches with the catalog's bytes.

Run on a GPU machine from the repository root:

    PYTHONPATH=$PWD python3 benchmarks/programs_per_sm.py --results programs-per-sm.md
"""

from __future__ import annotations

import argparse
import functools
import platform
import tempfile
from pathlib import Path
from types import ModuleType

import torch
import triton

from inductor_lens.handwritten.catalog import get
from inductor_lens.handwritten.equivalent import ITEMSIZE
from inductor_lens.worker.handwritten import check, tuning
from inductor_lens.worker.handwritten.kernels import batchnorm, norms

# (module, its constant, the tuned kernels to forget between settings, the entries and shapes timed)
STUDIES: tuple[tuple[ModuleType, str, tuple[tuning.TunedKernel, ...], tuple[str, ...], tuple[tuple[int, ...], ...]], ...] = (
    (
        norms,
        "BACKWARD_PROGRAMS_PER_SM",
        (norms._backward_fused_tuned, norms._backward_looped_tuned),
        ("layernorm_backward", "rmsnorm_backward", "rmsnorm_residual_backward"),
        ((16384, 4096), (4096, 768)),
    ),
    (
        batchnorm,
        "REDUCE_PROGRAMS_PER_SM",
        (batchnorm._sums_tuned,),
        ("batchnorm_backward_reduce", "batchnorm_train"),
        ((32, 256, 56, 56, 1), (32, 2048, 7, 7, 1)),
    ),
)  # fmt: skip
SETTINGS = (2, 4, 8, 16)


def _fresh_tuning(folder: Path, kernels: tuple[tuning.TunedKernel, ...]) -> None:
    """Forget every winner, in memory and on disk, so each setting is tuned for itself."""
    tuning.handwritten_dir = lambda: (folder, "benchmark")
    for tuned in kernels:
        tuned._by_exact_key.clear()
        tuned._by_tuning_key.clear()
        tuned._launches.clear()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--results", type=Path, required=True)
    args = parser.parse_args()
    from inductor_lens.worker.measure import ceilings

    copy = ceilings(torch.device("cuda"), torch.bfloat16).copy_gb_per_s
    lines = [
        f"# Split reductions: programs per SM, {torch.cuda.get_device_name()}",
        "",
        f"torch {torch.__version__}, triton {triton.__version__}, Python {platform.python_version()}; bf16; GPU time "
        f"alone (do_bench_cudagraph median, us) and % of the measured copy bandwidth ({copy:,.0f} GB/s).",
        "",
        "| constant | kernel | shape | " + " | ".join(f"{s}" for s in SETTINGS) + " |",
        "|---|---|---|" + "---|" * len(SETTINGS),
    ]
    for module, constant, kernels, names, shapes in STUDIES:
        default = getattr(module, constant)
        for name in names:
            equivalent = get(name)
            implementation = check.implementation(equivalent)
            for values in shapes:
                shape = equivalent.shape(values)
                inputs = check.make_inputs(equivalent, shape, "bfloat16", "cuda")
                moved, _ = equivalent.cost(shape, ITEMSIZE["bfloat16"])
                cells = []
                for setting in SETTINGS:
                    setattr(module, constant, setting)
                    with tempfile.TemporaryDirectory() as folder:
                        _fresh_tuning(Path(folder), kernels)
                        run = functools.partial(implementation.run, *inputs)
                        run()
                        ms = triton.testing.do_bench_cudagraph(run, rep=100)
                    cells.append(f"{ms * 1e3:,.1f} ({moved / (ms * 1e-3) / 1e9 / copy:.0%})")
                row = f"| {constant} (now {default}) | {name} | {'x'.join(map(str, values))} | "
                lines.append(row + " | ".join(cells) + " |")
                print(lines[-1], flush=True)
        setattr(module, constant, default)
    args.results.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
