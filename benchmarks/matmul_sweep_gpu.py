"""Where the hand-written matmul_bias loses to cuBLAS, and which kernel form and configurations close it (GPU).

For the shapes of issue 33 (GPT-2's c_attn 4096x2304x768, ViT's qkv 12608x1152x384, a 64x1000x384 classifier
head, and ViT's MLP 12608x1536x384 / 12608x384x1536), in float32 (torch's default precision: IEEE products) and
bfloat16, each with b an nn.Linear weight's transpose (K contiguous), this times in one process, side by side:

- ``torch.addmm(bias, a, w.t())`` (cuBLAS, the call a Linear makes);
- the hand-written kernel (``worker/handwritten/kernels/matmul.py``) with every candidate configuration, each launched
  directly with its configuration (no autotuner): the time each would give, and the time to compile it;
- variants of the kernel: ``pretransposed`` (the weight copied N-contiguous first, the copy timed with it) and,
  where Triton has them, TMA tensor descriptors (``tma``).

Times are ``triton.testing.do_bench`` medians (warm-up 10 ms, 40 ms of repetitions, L2 cleared before each).
A first section measures how the compilation of 12 configurations parallelises: one after another, in a
thread pool under Triton's ``AsyncCompileMode``, and in a process pool.

Usage: python benchmarks/matmul_sweep_gpu.py --out results.json [--quick]
"""

# ruff: noqa: B023  (each timed closure is called inside the loop iteration that made it)

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import torch
import triton
import triton.language as tl
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from inductor_lens.worker.handwritten.kernels.matmul import matmul_kernel

SHAPES = {
    "gpt2 c_attn": (4096, 2304, 768),
    "vit qkv": (12608, 1152, 384),
    "head": (64, 1000, 384),
    "vit fc1": (12608, 1536, 384),
    "vit fc2": (12608, 384, 1536),
}
SMEM = 227 * 1024


def candidates(M: int, N: int, K: int, itemsize: int) -> list[tuple[int, int, int, int, int]]:
    out = []
    block_ks = (32, 64, 128) if itemsize == 2 else (16, 32, 64)
    for bm, bn, bk, stages, warps in itertools.product(
        (16, 32, 64, 128, 256), (32, 64, 128, 256), block_ks, (3, 4, 5), (4, 8)
    ):
        if bm > max(16, triton.next_power_of_2(M)) or bn > max(32, triton.next_power_of_2(N)):
            continue
        if bm == 16 and M > 64:
            continue
        if stages * (bm * bk + bk * bn) * itemsize > SMEM:
            continue
        tile = bm * bn
        if (warps == 8 and tile < 128 * 128) or (warps == 4 and tile >= 128 * 128 and M > 64):
            continue
        if tile > 128 * 256 or (itemsize == 4 and tile > 128 * 128) or (tile < 64 * 64 and M > 64):
            continue
        out.append((bm, bn, bk, stages, warps))
    return out


def launch_pointer(a, b, c, bias, config, precision):
    bm, bn, bk, stages, warps = config
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    return matmul_kernel[grid](
        a, b, c, bias, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        HAS_BIAS=True, ACTIVATION="none", INPUT_PRECISION=precision,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, EVEN_K=K % bk == 0, INT64_OFFSETS=False,
        num_stages=stages, num_warps=warps,
    )


try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # an older Triton
    TensorDescriptor = None


@triton.jit
def _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    """Grouped program order, as the hand-written kernel's: GROUP_M tile-rows swept column by column."""
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _tma_product(a_desc, w_desc, off_m, off_n, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """One tile of a @ w.T, both read through TMA descriptors (w is the weight, K contiguous)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        w = w_desc.load([off_n, k * BLOCK_K])
        acc = tl.dot(a, w.T, acc, input_precision=INPUT_PRECISION)
    return acc


@triton.jit
def matmul_tma_kernel(
    a_desc, w_desc, c_ptr, bias_ptr, M, N, K, stride_cm,
    INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    pid_m, pid_n = _tile(tl.program_id(axis=0), GROUP_M * tl.cdiv(N, BLOCK_N), num_pid_m, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = _tma_product(a_desc, w_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K, INPUT_PRECISION)
    offs_m = off_m + tl.arange(0, BLOCK_M)
    offs_n = off_n + tl.arange(0, BLOCK_N)
    bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
    acc += bias.to(tl.float32)[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :], acc.to(c_ptr.dtype.element_ty), mask=mask)


def launch_tma(a, w, c, bias, config, precision):
    bm, bn, bk, stages, warps = config
    M, K = a.shape
    N = w.shape[0]
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
    w_desc = TensorDescriptor.from_tensor(w, [bn, bk])
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    return matmul_tma_kernel[grid](
        a_desc, w_desc, c, bias, M, N, K, c.stride(0), INPUT_PRECISION=precision,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_stages=stages, num_warps=warps,
    )


def inputs(M, N, K, dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=g).to(dtype)
    w = (torch.randn(N, K, device="cuda", generator=g) * K**-0.5).to(dtype)
    bias = torch.randn(N, device="cuda", generator=g).to(dtype)
    return a, w, bias


def bench(fn) -> float:
    return float(do_bench(fn, warmup=10, rep=40, return_mode="median"))


def _compile_one(args):
    variant, shape, dtype_name, config = args
    M, N, K = shape
    dtype = getattr(torch, dtype_name)
    a, w, bias = inputs(M, N, K, dtype)
    c = torch.empty(M, N, device="cuda", dtype=dtype)
    precision = "ieee" if dtype == torch.float32 else "tf32"
    started = time.perf_counter()
    try:
        if variant == "pointer":
            launch_pointer(a, w.t(), c, bias, config, precision)
        elif variant == "pretransposed":
            launch_pointer(a, w.t().contiguous(), c, bias, config, precision)
        else:
            launch_tma(a, w, c, bias, config, precision)
        torch.cuda.synchronize()
        return time.perf_counter() - started, None
    except Exception as exc:
        return time.perf_counter() - started, f"{type(exc).__name__}: {str(exc)[:120]}"


def compile_probe(out: dict) -> None:
    """12 configurations of one shape compiled three ways (each way with its own Triton cache)."""
    shape, dtype = SHAPES["gpt2 c_attn"], "bfloat16"
    configs = candidates(*shape, 2)[:12]
    jobs = [("pointer", shape, dtype, c) for c in configs]
    results = {}
    base = os.environ.get("TRITON_CACHE_DIR", "/tmp/triton-sweep")
    for way in ("sequential", "threads", "processes"):
        os.environ["TRITON_CACHE_DIR"] = f"{base}-probe-{way}"
        started = time.perf_counter()
        if way == "sequential":
            for job in jobs:
                _compile_one(job)
        elif way == "threads":
            try:
                from triton.runtime._async_compile import AsyncCompileMode

                a, w, bias = inputs(*shape[:1], *shape[1:], torch.bfloat16)
                c = torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16)
                with ThreadPoolExecutor(12) as pool, AsyncCompileMode(pool):
                    for cfg in configs:
                        bm, bn, bk, stages, warps = cfg
                        M, N, K = shape
                        matmul_kernel.warmup(
                            a, w.t(), c, bias, M, N, K, a.stride(0), a.stride(1), w.t().stride(0), w.t().stride(1),
                            c.stride(0), c.stride(1), HAS_BIAS=True, ACTIVATION="none", INPUT_PRECISION="tf32",
                            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, EVEN_K=K % bk == 0, INT64_OFFSETS=False,
                            num_stages=stages, num_warps=warps, grid=(1,),
                        )
            except Exception as exc:
                results["threads_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        else:
            import multiprocessing

            with ProcessPoolExecutor(12, mp_context=multiprocessing.get_context("spawn")) as pool:
                list(pool.map(_compile_one, jobs))
        results[way] = round(time.perf_counter() - started, 2)
        print("compile probe", way, results[way], flush=True)
    os.environ["TRITON_CACHE_DIR"] = base
    out["compile_probe"] = {"configs": len(configs), **results}


def sweep(out: dict, quick: bool, deadline: float) -> None:
    import multiprocessing

    pool = ProcessPoolExecutor(14, mp_context=multiprocessing.get_context("spawn"))
    rows = out.setdefault("rows", [])
    for (label, (M, N, K)), dtype_name in itertools.product(SHAPES.items(), ("float32", "bfloat16")):
        if time.time() > deadline:
            out["cut"] = f"stopped before {label} {dtype_name}: deadline"
            break
        dtype = getattr(torch, dtype_name)
        itemsize = 4 if dtype == torch.float32 else 2
        precision = "ieee" if dtype == torch.float32 else "tf32"
        a, w, bias = inputs(M, N, K, dtype)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        row = {"shape": label, "M": M, "N": N, "K": K, "dtype": dtype_name}
        row["addmm_ms"] = bench(lambda: torch.addmm(bias, a, w.t()))
        row["mm_plus_bias_ms"] = bench(lambda: a @ w.t() + bias)
        configs = candidates(M, N, K, itemsize)
        if quick:
            configs = configs[::3]
        variants = ["pointer"] + (["tma"] if TensorDescriptor is not None else [])
        jobs = [(v, (M, N, K), dtype_name, cfg) for v in variants for cfg in configs]
        started = time.perf_counter()
        compiled = list(pool.map(_compile_one, jobs))
        row["compile_wall_s"] = round(time.perf_counter() - started, 1)
        row["configs"] = len(configs)
        results = []
        wt = w.t()

        def time_all(jobs, compiled):
            for (variant, _, _, cfg), (compile_s, error) in zip(jobs, compiled, strict=True):
                if error is not None:
                    results.append({"variant": variant, "config": cfg, "error": error, "compile_s": round(compile_s, 2)})
                    continue
                try:
                    if variant == "pointer":
                        ms = bench(lambda: launch_pointer(a, wt, c, bias, cfg, precision))
                    elif variant == "pretransposed":
                        ms = bench(lambda: launch_pointer(a, wt.contiguous(), c, bias, cfg, precision))
                    else:
                        ms = bench(lambda: launch_tma(a, w, c, bias, cfg, precision))
                except Exception as exc:
                    results.append({"variant": variant, "config": cfg, "error": f"{type(exc).__name__}: {str(exc)[:120]}"})
                    continue
                results.append({"variant": variant, "config": cfg, "ms": ms, "compile_s": round(compile_s, 2)})

        time_all(jobs, compiled)
        top = sorted((r for r in results if r["variant"] == "pointer" and "ms" in r), key=lambda r: r["ms"])[:10]
        jobs = [("pretransposed", (M, N, K), dtype_name, r["config"]) for r in top]
        time_all(jobs, list(pool.map(_compile_one, jobs)))
        variants.append("pretransposed")
        ref = torch.addmm(bias.float(), a.float(), w.float().t())
        best = {}
        for variant in variants:
            timed = [r for r in results if r["variant"] == variant and "ms" in r]
            if timed:
                top = min(timed, key=lambda r: r["ms"])
                best[variant] = top
        # correctness of each variant's best
        for variant, top in best.items():
            if variant == "pointer":
                launch_pointer(a, wt, c, bias, top["config"], precision)
            elif variant == "pretransposed":
                launch_pointer(a, wt.contiguous(), c, bias, top["config"], precision)
            else:
                launch_tma(a, w, c, bias, top["config"], precision)
            torch.cuda.synchronize()
            top["max_rel_error"] = float((c.float() - ref).abs().max() / ref.abs().max())
        row["best"] = best
        row["results"] = results
        rows.append(row)
        summary = ", ".join(f"{v} {b['ms'] * 1e3:.1f} us {tuple(b['config'])}" for v, b in best.items())
        print(f"{label} {dtype_name}: addmm {row['addmm_ms'] * 1e3:.1f} us, mm+bias {row['mm_plus_bias_ms'] * 1e3:.1f} us; "
              f"{summary}; {len(configs)} configs compiled in {row['compile_wall_s']} s", flush=True)
    pool.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--limit-s", type=float, default=420)
    parser.add_argument("--no-probe", action="store_true")
    args = parser.parse_args()
    deadline = time.time() + args.limit_s
    out: dict = {
        "torch": torch.__version__, "triton": triton.__version__, "gpu": torch.cuda.get_device_name(),
        "tf32": torch.backends.cuda.matmul.allow_tf32,
    }
    try:
        if not args.no_probe:
            compile_probe(out)
        sweep(out, args.quick, deadline)
    finally:
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
