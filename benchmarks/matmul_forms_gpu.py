"""Which form of the bf16 matmul_bias kernel comes within 10% of cuBLAS on Hopper (GPU, one process, side by side).

Forms, each timed over a small configuration list on the shapes of issue 33 (bf16, b an nn.Linear weight):
``tma`` (one tile per program, TMA loads, masked pointer store; the best form of matmul_sweep_gpu.py),
``tma_store`` (the same with a TMA store of the tile, optionally in two halves: ``subtile``), and
``persistent`` (one program per SM walking the tiles, as Triton's tutorial 09, with and without the flattened
tile loop and the split epilogue). ``torch.addmm`` is timed beside each; times are do_bench medians (warm-up
10 ms, 40 ms of repetitions, L2 cleared before each).

Usage: python benchmarks/matmul_forms_gpu.py --out forms.json
"""

# ruff: noqa: B023  (each timed closure is called inside the loop iteration that made it)

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from matmul_sweep_gpu import SHAPES, _tile, _tma_product

NUM_SMS = 132


@triton.jit
def _epilogue(acc, c_desc, bias_ptr, off_m, off_n, N, BLOCK_N: tl.constexpr, SUBTILE: tl.constexpr):
    offs_n = off_n + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc = acc + bias.to(tl.float32)[None, :]
    if SUBTILE:
        acc = tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2))
        acc = tl.permute(acc, (0, 2, 1))
        acc0, acc1 = tl.split(acc)
        c_desc.store([off_m, off_n], acc0.to(c_desc.dtype))
        c_desc.store([off_m, off_n + BLOCK_N // 2], acc1.to(c_desc.dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def tma_store_kernel(a_desc, w_desc, c_desc, bias_ptr, M, N, K,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     SUBTILE: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile(tl.program_id(0), GROUP_M * num_pid_n, num_pid_m, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = _tma_product(a_desc, w_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K, "tf32")
    _epilogue(acc, c_desc, bias_ptr, off_m, off_n, N, BLOCK_N, SUBTILE)


@triton.jit
def persistent_kernel(a_desc, w_desc, c_desc, bias_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      SUBTILE: tl.constexpr, FLATTEN: tl.constexpr, NUM_SMS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    tile_id_c = tl.program_id(0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=FLATTEN):
        pid_m, pid_n = _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            w = w_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(a, w.T, acc)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _tile(tile_id_c, num_pid_in_group, num_pid_m, GROUP_M)
        _epilogue(acc, c_desc, bias_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N, N, BLOCK_N, SUBTILE)


def launch(form, a, w, c, bias, cfg):
    bm, bn, bk, stages, warps, group, subtile, flatten = cfg
    M, K = a.shape
    N = w.shape[0]
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    w_desc = TensorDescriptor.from_tensor(w, [bn, bk])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn // 2 if subtile else bn])
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    common = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, SUBTILE=subtile, num_stages=stages, num_warps=warps)
    if form == "tma_store":
        return tma_store_kernel[(tiles,)](a_desc, w_desc, c_desc, bias, M, N, K, **common)
    return persistent_kernel[(min(NUM_SMS, tiles),)](a_desc, w_desc, c_desc, bias, M, N, K, FLATTEN=flatten,
                                                      NUM_SMS=NUM_SMS, **common)


def configs(M):
    tiles = [(128, 128, 64, 3, 8), (128, 128, 64, 4, 8), (128, 256, 64, 3, 8), (128, 256, 64, 4, 8),
             (128, 128, 128, 3, 8), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (256, 128, 64, 3, 8)]
    if M <= 64:
        tiles = [(64, 32, 128, 4, 4), (64, 64, 128, 3, 4), (64, 32, 64, 4, 4), (64, 128, 64, 3, 4)]
    out = []
    for form in ("tma_store", "persistent"):
        for tile, group, subtile, flatten in itertools.product(tiles, (8, 16), (False, True), (False, True)):
            if form == "tma_store" and flatten:
                continue
            if group == 16 and (subtile or flatten):
                continue
            out.append((form, (*tile, group, subtile, flatten)))
    return out


def inputs(M, N, K):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g).bfloat16()
    w = (torch.randn(N, K, device="cuda", generator=g) * K**-0.5).bfloat16()
    bias = torch.randn(N, device="cuda", generator=g).bfloat16()
    return a, w, bias


def _compile(job):
    form, shape, cfg = job
    a, w, bias = inputs(*shape)
    c = torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16)
    started = time.perf_counter()
    try:
        launch(form, a, w, c, bias, cfg)
        torch.cuda.synchronize()
        return time.perf_counter() - started, None
    except Exception as exc:
        return time.perf_counter() - started, f"{type(exc).__name__}: {str(exc)[:160]}"


def bench(fn):
    return float(do_bench(fn, warmup=10, rep=40, return_mode="median"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    global NUM_SMS
    NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    out = {"torch": torch.__version__, "triton": triton.__version__, "gpu": torch.cuda.get_device_name(), "rows": []}
    pool = ProcessPoolExecutor(14, mp_context=multiprocessing.get_context("spawn"))
    try:
        for label, (M, N, K) in SHAPES.items():
            a, w, bias = inputs(M, N, K)
            c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            jobs = [(form, (M, N, K), cfg) for form, cfg in configs(M)]
            compiled = list(pool.map(_compile, jobs))
            ref = torch.addmm(bias.float(), a.float(), w.float().t())
            results = []
            for (form, _, cfg), (compile_s, error) in zip(jobs, compiled, strict=True):
                row = {"form": form, "config": cfg, "compile_s": round(compile_s, 2)}
                if error is None:
                    try:
                        row["ms"] = bench(lambda: launch(form, a, w, c, bias, cfg))
                        row["addmm_ms"] = bench(lambda: torch.addmm(bias, a, w.t()))
                        row["max_rel_error"] = float((c.float() - ref).abs().max() / ref.abs().max())
                    except Exception as exc:
                        error = f"{type(exc).__name__}: {str(exc)[:160]}"
                if error is not None:
                    row["error"] = error
                results.append(row)
            timed = sorted((r for r in results if "ms" in r), key=lambda r: r["ms"] / r["addmm_ms"])
            out["rows"].append({"shape": label, "M": M, "N": N, "K": K, "results": results})
            for r in timed[:5]:
                print(f"{label}: {r['form']} {r['config']} {r['ms'] * 1e3:.1f} us vs addmm {r['addmm_ms'] * 1e3:.1f} us "
                      f"= {r['ms'] / r['addmm_ms']:.3f}x err {r['max_rel_error']:.1e}", flush=True)
            errors = [r for r in results if "error" in r]
            if errors:
                print(f"{label}: {len(errors)} errors, first: {errors[0]['error']}", flush=True)
    finally:
        pool.shutdown()
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
