"""The persistent TMA form of the hand-written matmul, each of its configurations on issue 33's bf16 shapes (GPU).

``worker/handwritten/kernels/matmul.py`` runs 16-bit products on Hopper either one tile per program or, with
``TMA_PERSISTENT``, as Triton's tutorial-09 persistent kernel (TMA descriptors built on the GPU, a flattened tile
loop). This launches the package's own ``matmul_kernel`` with every configuration of its ``TMA_CONFIGS`` list
directly (no tuning, no table), on GPT-2's c_attn 4096x2304x768 and timm ViT-S/16's qkv 12608x1152x384 in bf16 with
a bias and nn.Linear's transposed weight, and for each gives:

- its max error against a float32 ``addmm`` (relative to the largest value), or the error that stopped it;
- its GPU time alone (``do_bench_cudagraph`` median: the call replayed from a CUDA graph, no host launch) over
  ``torch.addmm``'s, timed right after it.

The package's search (``matmul_bias_vs_cublas.py`` with the table off) then picks among these and the
one-tile-per-program list; this says what each one does, and whether any fails to compile on this GPU.

Usage: PYTHONPATH=$PWD python3 benchmarks/matmul_tma_gpu.py --out tma.json [--deadline-s 100]
"""

# ruff: noqa: B023  (each timed closure is called inside the loop iteration that made it)

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
import triton
from triton.testing import do_bench_cudagraph

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inductor_lens.worker.handwritten.kernels import matmul as library

SHAPES = {"GPT-2 c_attn": (4096, 2304, 768), "ViT-S/16 qkv": (12608, 1152, 384)}


def launch(config: triton.Config, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, c: torch.Tensor) -> None:
    library.matmul_with(config, a, b, bias, out=c)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline-s", type=float, default=100)
    args = parser.parse_args()
    started = time.time()
    out: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "triton": triton.__version__, "shapes": []}  # fmt: skip
    for label, (M, N, K) in SHAPES.items():
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        b = (torch.randn(N, K, device="cuda", generator=g) * K**-0.5).bfloat16().t()
        bias = torch.randn(N, device="cuda", generator=g).bfloat16()
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        reference = torch.addmm(bias.float(), a.float(), b.float())
        rows = []
        for config in library.TMA_CONFIGS:
            text = f"{config.kwargs} warps={config.num_warps} stages={config.num_stages}"
            if time.time() - started > args.deadline_s:
                rows.append({"config": text, "error": "not run: deadline"})
                continue
            try:
                c.fill_(float("nan"))
                launch(config, a, b, bias, c)
                torch.cuda.synchronize()
                error = float((c.float() - reference).abs().max() / reference.abs().max())
                ours = do_bench_cudagraph(lambda: launch(config, a, b, bias, c))
                theirs = do_bench_cudagraph(lambda: torch.addmm(bias, a, b))
                rows.append({"config": text, "max_rel_error": error, "alone_us": ours * 1e3,
                             "addmm_alone_us": theirs * 1e3, "ratio": ours / theirs})  # fmt: skip
            except Exception as exc:  # a configuration this GPU refuses: said, and the next one tried
                rows.append({"config": text, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"})
            print(label, rows[-1], flush=True)
        out["shapes"].append({"shape": label, "M": M, "N": N, "K": K, "rows": rows})
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    out["wall_s"] = time.time() - started
    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
