"""Can Triton bring bf16 matmul_bias within 10% of cuBLAS on issue 33's shapes, and the fp32 classifier head?

Three questions, one device call, each candidate timed side by side with ``torch.addmm`` in this process:

1. bf16, GPT-2's 4096x2304x768 and ViT's 12608x1152x384 (+ bias): tutorial 09's persistent TMA kernel with its
   epilogue stored in two halves (``EPILOGUE_SUBTILE``: the 2026-11-27 forms run reached 1.06x on ViT's qkv with
   it), with and without ``warp_specialize`` on the tile loop (Triton may refuse it on Hopper: recorded), over
   tiles 128x128, 128x256 and 256x128; the shipped one-tile-per-program kernel for reference.
2. fp32 64x1000x384 (+ bias, weight K-contiguous as nn.Linear holds it): the shipped kernel's own Triton program
   (``matmul_kernel``) over a grid of small tiles, warps and stages, since the table's choice was made by do_bench,
   which times host launch for a kernel this short.
3. What Inductor's own max-autotune Triton templates reach on the same bf16 shapes (``max_autotune_gemm_backends=
   "TRITON"``), as the yardstick of what Triton does there.

Times: ``triton.testing.do_bench`` medians (L2 cleared before each call) and ``do_bench_cudagraph`` medians (the
call replayed from a CUDA graph: GPU time alone, no host launch); each candidate's ratio is the median over
``--rounds`` rounds alternating it with addmm, with the min-max.

Usage: PYTHONPATH=$PWD python benchmarks/matmul_subtile_gpu.py --out subtile.json [--rounds 3] [--deadline-s 420]
"""

# ruff: noqa: B023  (each timed closure is called inside the loop iteration that made it)

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from triton.testing import do_bench, do_bench_cudagraph
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_sweep_gpu import _tile

BF16_SHAPES = {"gpt2 c_attn": (4096, 2304, 768), "vit qkv": (12608, 1152, 384)}
HEAD = (64, 1000, 384)


@triton.jit
def persistent_subtile_kernel(a_desc, w_desc, c_desc, bias_ptr, M, N, K,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                              GROUP_M: tl.constexpr, SUBTILE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
                              NUM_SMS: tl.constexpr):  # fmt: skip
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    tile_id_c = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            w = w_desc.load([off_n, ki * BLOCK_K])
            acc = tl.dot(a, w.T, acc)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if SUBTILE:
            acc = tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            offs0 = off_n + tl.arange(0, BLOCK_N // 2)
            acc0 += tl.load(bias_ptr + offs0, mask=offs0 < N, other=0.0).to(tl.float32)[None, :]
            c_desc.store([off_m, off_n], acc0.to(c_desc.dtype))
            offs1 = off_n + BLOCK_N // 2 + tl.arange(0, BLOCK_N // 2)
            acc1 += tl.load(bias_ptr + offs1, mask=offs1 < N, other=0.0).to(tl.float32)[None, :]
            c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(c_desc.dtype))
        else:
            offs = off_n + tl.arange(0, BLOCK_N)
            acc += tl.load(bias_ptr + offs, mask=offs < N, other=0.0).to(tl.float32)[None, :]
            c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


def persistent(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, c: torch.Tensor, cfg: tuple[Any, ...],
               num_sms: int) -> torch.Tensor:  # fmt: skip
    bm, bn, bk, stages, warps, subtile, ws = cfg
    M, K = a.shape
    N = w.shape[0]
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    w_desc = TensorDescriptor.from_tensor(w, [bn, bk])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn // 2 if subtile else bn])
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    persistent_subtile_kernel[(min(num_sms, tiles),)](
        a_desc, w_desc, c_desc, bias, M, N, K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, SUBTILE=subtile,
        WARP_SPECIALIZE=ws, NUM_SMS=num_sms, num_stages=stages, num_warps=warps)  # fmt: skip
    return c


def persistent_configs() -> list[tuple[Any, ...]]:
    out = []
    for (bm, bn), bk, stages, subtile, ws in itertools.product(
        ((128, 128), (128, 256), (256, 128)), (64, 128), (3, 4), (True, False), (False, True)
    ):
        if stages * (bm + bn) * bk * 2 > 200 * 1024:
            continue
        out.append((bm, bn, bk, stages, 8, subtile, ws))
    return out


def timed_pair(fn: Callable[[], Any], library: Callable[[], Any], rounds: int) -> dict[str, float]:
    """Median and min-max of fn's time over addmm's, by do_bench and by CUDA-graph replay, in alternating rounds."""
    bench, alone, bench_us, alone_us, lib_us, lib_alone_us = [], [], [], [], [], []
    for _ in range(rounds):
        mine, theirs = do_bench(fn), do_bench(library)
        mine_g, theirs_g = do_bench_cudagraph(fn), do_bench_cudagraph(library)
        bench.append(mine / theirs)
        alone.append(mine_g / theirs_g)
        bench_us.append(mine * 1e3)
        lib_us.append(theirs * 1e3)
        alone_us.append(mine_g * 1e3)
        lib_alone_us.append(theirs_g * 1e3)
    return {"us": statistics.median(bench_us), "library_us": statistics.median(lib_us),
            "ratio": statistics.median(bench), "ratio_min": min(bench), "ratio_max": max(bench),
            "alone_us": statistics.median(alone_us), "library_alone_us": statistics.median(lib_alone_us),
            "alone_ratio": statistics.median(alone), "alone_min": min(alone), "alone_max": max(alone)}  # fmt: skip


def error(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got.float() - ref).abs().max() / ref.abs().max())


def bf16_part(args: argparse.Namespace, out: dict[str, Any], started: float) -> None:
    from inductor_lens.worker.handwritten.kernels.matmul import matmul

    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    for label, (M, N, K) in BF16_SHAPES.items():
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        w = (torch.randn(N, K, device="cuda", generator=g) * K**-0.5).bfloat16()
        bias = torch.randn(N, device="cuda", generator=g).bfloat16()
        c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        ref = torch.addmm(bias.float(), a.float(), w.float().t())

        def library() -> torch.Tensor:
            return torch.addmm(bias, a, w.t())

        screened: dict[tuple[Any, ...], float] = {}
        failures: dict[str, str] = {}
        for cfg in persistent_configs():
            if time.time() - started > args.deadline_s * 0.4:
                break
            try:
                persistent(a, w, bias, c, cfg, num_sms)
                torch.cuda.synchronize()
                if error(c, ref) > 2e-2:
                    failures[str(cfg)] = f"wrong result: {error(c, ref):.1e}"
                    continue
                screened[cfg] = do_bench_cudagraph(lambda: persistent(a, w, bias, c, cfg, num_sms))
            except Exception as exc:
                failures[str(cfg)] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        best = sorted(screened, key=screened.__getitem__)[:3]
        rows = []
        candidates = [(str(cfg), lambda cfg=cfg: persistent(a, w, bias, c, cfg, num_sms)) for cfg in best]
        candidates.append(("shipped kernel (table)", lambda: matmul(a, w.t(), bias)))
        for name, fn in candidates:
            row = {"candidate": name, **timed_pair(fn, library, args.rounds), "max_rel_error": error(fn(), ref)}
            rows.append(row)
            print(f"{label} bf16: {name}: do_bench {row['ratio']:.3f}x ({row['ratio_min']:.3f}-{row['ratio_max']:.3f})"
                  f", alone {row['alone_ratio']:.3f}x ({row['alone_min']:.3f}-{row['alone_max']:.3f}) "
                  f"[{row['alone_us']:.1f} vs {row['library_alone_us']:.1f} us]", flush=True)
        out["bf16"].append({"shape": label, "M": M, "N": N, "K": K, "screened_alone_us": {str(k): v * 1e3 for k, v
                            in screened.items()}, "failures": failures, "rows": rows})  # fmt: skip
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


def head_part(args: argparse.Namespace, out: dict[str, Any], started: float) -> None:
    from inductor_lens.worker.handwritten.kernels.matmul import matmul, matmul_kernel

    M, N, K = HEAD
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g)
    weight = torch.randn(N, K, device="cuda", generator=g) * K**-0.5
    bias = torch.randn(N, device="cuda", generator=g)
    b = weight.t()  # K-contiguous, as nn.Linear's weight is read
    c = torch.empty(M, N, device="cuda")
    ref = torch.addmm(bias.double(), a.double(), b.double()).float()

    def library() -> torch.Tensor:
        return torch.addmm(bias, a, b)

    def launch(cfg: tuple[int, ...]) -> torch.Tensor:
        bm, bn, bk, warps, stages = cfg
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        matmul_kernel[grid](a, b, c, bias, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            c.stride(1), HAS_BIAS=True, ACTIVATION="none", INPUT_PRECISION="ieee", BLOCK_M=bm,
                            BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, EVEN_K=K % bk == 0, INT64_OFFSETS=False,
                            num_warps=warps, num_stages=stages)  # fmt: skip
        return c

    screened: dict[tuple[int, ...], float] = {}
    for cfg in itertools.product((16, 32, 64), (16, 32, 64), (16, 32, 64, 128), (1, 2, 4), (2, 3, 4)):
        if time.time() - started > args.deadline_s * 0.75:
            break
        if cfg[0] * cfg[1] < 16 * 32 * (cfg[3] // 2 or 1):
            continue
        try:
            launch(cfg)
            torch.cuda.synchronize()
            if error(c, ref) < 1e-4:
                screened[cfg] = do_bench_cudagraph(lambda: launch(cfg))
        except Exception:
            continue
    best = sorted(screened, key=screened.__getitem__)[:3]
    rows = []
    candidates = [(str(cfg), lambda cfg=cfg: launch(cfg)) for cfg in best]
    candidates.append(("shipped kernel (table)", lambda: matmul(a, b, bias, input_precision="ieee")))
    for name, fn in candidates:
        row = {"candidate": name, **timed_pair(fn, library, args.rounds), "max_rel_error": error(fn(), ref)}
        rows.append(row)
        print(f"head fp32: {name}: do_bench {row['ratio']:.3f}x, alone {row['alone_ratio']:.3f}x "
              f"({row['alone_min']:.3f}-{row['alone_max']:.3f}) [{row['alone_us']:.1f} vs {row['library_alone_us']:.1f} us]",
              flush=True)  # fmt: skip
    out["head"] = {"M": M, "N": N, "K": K, "screened_alone_us": {str(k): v * 1e3 for k, v in screened.items()},
                   "rows": rows}  # fmt: skip
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


def inductor_part(args: argparse.Namespace, out: dict[str, Any], started: float) -> None:
    import torch._inductor.config as inductor_config

    for label, (M, N, K) in BF16_SHAPES.items():
        if time.time() - started > args.deadline_s * 0.9:
            out["inductor_cut"] = f"stopped before {label}: deadline"
            break
        g = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
        w = (torch.randn(N, K, device="cuda", generator=g) * K**-0.5).bfloat16()
        bias = torch.randn(N, device="cuda", generator=g).bfloat16()
        torch._dynamo.reset()
        with inductor_config.patch(max_autotune=True, max_autotune_gemm_backends="TRITON"):
            compiled = torch.compile(lambda a, w, bias: torch.addmm(bias, a, w.t()))
            compiled(a, w, bias)
        row = {"candidate": "Inductor max-autotune, Triton templates only",
               **timed_pair(lambda: compiled(a, w, bias), lambda: torch.addmm(bias, a, w.t()), args.rounds)}
        print(f"{label} bf16 Inductor Triton: do_bench {row['ratio']:.3f}x, alone {row['alone_ratio']:.3f}x", flush=True)
        out["inductor"].append({"shape": label, **row})
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--deadline-s", type=float, default=420)
    args = parser.parse_args()
    started = time.time()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    torch.backends.cuda.matmul.allow_tf32 = False
    out: dict[str, Any] = {"torch": torch.__version__, "triton": triton.__version__, "gpu": torch.cuda.get_device_name(),
                           "method": "do_bench and do_bench_cudagraph medians, rounds alternating with torch.addmm",
                           "bf16": [], "inductor": []}  # fmt: skip
    bf16_part(args, out, started)
    head_part(args, out, started)
    inductor_part(args, out, started)
    out["wall_s"] = time.time() - started
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
