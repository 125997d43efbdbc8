"""Which attention backend CUDA's SDPA picks, on this GPU, for a grid of inputs: the ground truth for the CPU
preview's ``worker/gpu_preview.py::sdp_choice`` (tests/unit/test_gpu_preview_sdpa.py replays every row).

    python benchmarks/sdpa_choice_probe.py --out RESULT.json

Each row: dtype, query/key heads, query/key lengths, head dims, the mask (none, bool or float, 4-D), is_causal,
enable_gqa, requires_grad, dropout, and ``aten._fused_sdp_choice``'s answer (0 math, 1 flash, 2 efficient,
3 cuDNN). Nothing is run but the choice; the file also records torch, cuDNN, the device and the priority order.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    order_before = list(torch._C._get_sdp_priority_order())
    rows = []
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    grid = itertools.product(dtypes, [(8, 8), (8, 2)], [(256, 256), (1, 256), (128, 256)], [(64, 64), (80, 80),
                             (128, 128), (256, 256), (40, 40), (64, 128), (512, 512)], ["none", "bool", "float"],
                             [False, True], [False, True], [False, True], [0.0, 0.1])  # fmt: skip
    for dtype, (hq, hk), (lq, lk), (d, dv), mask, causal, gqa, grad, dropout in grid:
        if causal and mask != "none":
            continue
        if hq != hk and not gqa and mask == "none" and causal:
            continue
        q = torch.randn(2, hq, lq, d, device="cuda", dtype=dtypes[dtype], requires_grad=grad)
        k = torch.randn(2, hk, lk, d, device="cuda", dtype=dtypes[dtype], requires_grad=grad)
        v = torch.randn(2, hk, lk, dv, device="cuda", dtype=dtypes[dtype], requires_grad=grad)
        attn_mask = None
        if mask == "bool":
            attn_mask = torch.ones(lq, lk, device="cuda", dtype=torch.bool).tril().expand(2, 1, lq, lk)
        elif mask == "float":
            attn_mask = torch.zeros(2, 1, lq, lk, device="cuda", dtype=dtypes[dtype])
        try:
            choice = int(torch.ops.aten._fused_sdp_choice(q, k, v, attn_mask, dropout, causal, scale=None, enable_gqa=gqa))
        except RuntimeError as exc:
            choice = -1
            error = str(exc).splitlines()[0][:120]
        else:
            error = ""
        rows.append(dict(dtype=dtype, hq=hq, hk=hk, lq=lq, lk=lk, d=d, dv=dv, mask=mask, causal=causal, gqa=gqa,
                         grad=grad, dropout=dropout, choice=choice, error=error))  # fmt: skip
    facts = dict(
        torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
        device=torch.cuda.get_device_name(), capability=list(torch.cuda.get_device_capability()),
        priority_order_before=order_before, priority_order_after=list(torch._C._get_sdp_priority_order()),
    )  # fmt: skip
    args.out.write_text(json.dumps({"facts": facts, "rows": rows}, indent=0) + "\n")
    counts: dict[int, int] = {}
    for row in rows:
        counts[row["choice"]] = counts.get(row["choice"], 0) + 1
    print(facts, len(rows), "rows; choices:", counts)


if __name__ == "__main__":
    main()
