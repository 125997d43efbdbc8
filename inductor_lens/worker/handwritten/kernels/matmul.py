"""Stage 4 of the pipeline (bench), hand-written side: matmul, with an optional fused bias and activation.

One kernel, written like Triton's matrix-multiplication tutorial, computes ``c = act(a @ b + bias)``.
Each program owns a BLOCK_M x BLOCK_N tile of ``c`` and walks K in BLOCK_K steps, feeding ``tl.dot``
(tensor cores: wgmma on Hopper) and keeping the sum in a float32 accumulator. Programs are numbered
in groups of GROUP_M tile-rows, so tiles that run at the same time share rows of ``a`` and columns
of ``b`` and find them in L2 instead of HBM. Rows and columns past the edge are wrapped (``% M``,
``% N``) rather than masked, so the K loop's loads need no mask for them; only the store is masked,
and the K tail is masked unless K is a multiple of BLOCK_K (``EVEN_K``). Strides are arguments, so
``b`` may be a transposed view (nn.Linear's weight). Offsets are int32 unless a tensor spans 2**31
elements (``INT64_OFFSETS``): int64 address math measured about 10% slower on an H200. The epilogue
(bias broadcast over rows, then ReLU or exact-erf GELU) runs on the float32 accumulator before the
one store, so the fused variants cost no extra pass over ``c``. Which tile shape wins depends on the
shape, the layout of ``b`` and the GPU, so on a GPU the kernel is autotuned over the tutorial's
configurations plus the large 128x256 / 256x128 tiles that keep Hopper's tensor cores busy and small
tiles for skinny products. float32 follows torch: TF32 only when
``torch.backends.cuda.matmul.allow_tf32`` is set.

For 16-bit products on Hopper the same kernel has a second form (``TMA_PERSISTENT``, Triton's tutorial 09):
one program per SM walks the tiles, and the tensor-memory accelerator copies each block of a and b into shared
memory from descriptors built on the GPU. The search times both forms' configurations and keeps the faster
(ViT-S/16's bf16 qkv: persistent; GPT-2's c_attn: one tile per program).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ..tuning import TunedKernel
from . import Implementation, cdiv, interpreting

ACTIVATIONS = ("none", "relu", "gelu")


@triton.jit
def _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped ordering: consecutive tiles sweep GROUP_M tile-rows column by column (L2 reuse)."""
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _epilogue(accumulator, bias_ptr, offs_cn, N, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_cn, mask=offs_cn < N, other=0.0)
        accumulator += bias.to(tl.float32)[None, :]
    if ACTIVATION == "relu":
        accumulator = tl.maximum(accumulator, 0.0)
    elif ACTIVATION == "gelu":
        accumulator = 0.5 * accumulator * (1.0 + tl.math.erf(accumulator * 0.7071067811865476))
    return accumulator


@triton.jit
def _persistent_tma_tiles(
    a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_bk, stride_bn, stride_cm,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    B_K_CONTIGUOUS: tl.constexpr, NUM_SMS: tl.constexpr,
):  # fmt: skip
    """Triton's persistent TMA matmul (tutorial 09): NUM_SMS programs walk the tiles, the tensor-memory
    accelerator copies each block of a and b into shared memory (zero-filled past the edges, so no masks), and
    ``flatten`` lets the compiler start the next tile's loads while this one's epilogue stores."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    if B_K_CONTIGUOUS:  # b is a transposed nn.Linear weight: read it as the [N, K] matrix it is
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1],
                                           block_shape=[BLOCK_N, BLOCK_K])  # fmt: skip
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                           block_shape=[BLOCK_K, BLOCK_N])  # fmt: skip
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    # The epilogue recomputes its tile from its own counter, as the tutorial does: the flattened loop
    # pipelines better when the store does not depend on values carried from the loads.
    tile_id_c = tl.program_id(axis=0) - NUM_SMS
    for tile_id in tl.range(tl.program_id(axis=0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            if B_K_CONTIGUOUS:
                accumulator = tl.dot(a, b_desc.load([off_n, ki * BLOCK_K]).T, accumulator)
            else:
                accumulator = tl.dot(a, b_desc.load([ki * BLOCK_K, off_n]), accumulator)
        tile_id_c += NUM_SMS
        pid_m, pid_n = _grouped_tile(tile_id_c, num_pid_m, num_pid_n, GROUP_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        accumulator = _epilogue(accumulator, bias_ptr, offs_cn, N, HAS_BIAS, ACTIVATION)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], accumulator.to(c_ptr.dtype.element_ty))


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, INT64_OFFSETS: tl.constexpr,
    TMA_PERSISTENT: tl.constexpr = False, B_K_CONTIGUOUS: tl.constexpr = False, NUM_SMS: tl.constexpr = 1,
):  # fmt: skip
    if TMA_PERSISTENT:
        _persistent_tma_tiles(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, stride_am, stride_bk, stride_bn, stride_cm,
                              HAS_BIAS, ACTIVATION, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, B_K_CONTIGUOUS, NUM_SMS)
    else:
        # One tile per program.
        pid_m, pid_n = _grouped_tile(tl.program_id(axis=0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)

        # Out-of-range rows/columns wrap onto valid ones; their results are dropped by the store mask.
        offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
        offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
        offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        if INT64_OFFSETS:
            offs_am = offs_am.to(tl.int64)
            offs_bn = offs_bn.to(tl.int64)
            offs_cm = offs_cm.to(tl.int64)
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
        b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

        accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                k_left = K - k * BLOCK_K
                a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
                b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            accumulator = tl.dot(a, b, accumulator, input_precision=INPUT_PRECISION)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk

        accumulator = _epilogue(accumulator, bias_ptr, offs_cn, N, HAS_BIAS, ACTIVATION)
        c_ptrs = c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptrs, accumulator.to(c_ptr.dtype.element_ty), mask=c_mask)


def _config(block_m: int, block_n: int, block_k: int, stages: int, warps: int, **form: bool) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k, "GROUP_M": 8, **form},
        num_stages=stages,
        num_warps=warps,
    )


# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps): the tutorial's CUDA list, then Hopper-sized and skinny tiles,
# then the winners of benchmarks/matmul_sweep_gpu.py on an H100 that the others missed: small-M tiles for
# classifier heads (a 64x1000x384 product ran 2.5x slower than cuBLAS on the list without them), three-stage
# 128x128 and 64x128 tiles; last, a two-warp small-M tile: the fp32 head by GPU time alone, 10.1 us against
# four warps' 15.7 us (benchmarks/matmul_subtile_gpu.py). ``_prune`` drops, per shape, those that cannot fit or
# pay off.
AUTOTUNE_CONFIGS = [
    _config(*c)
    for c in (
        (128, 256, 64, 3, 8),
        (64, 256, 32, 4, 4),
        (128, 128, 32, 4, 4),
        (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4),
        (128, 32, 32, 4, 4),
        (64, 32, 32, 5, 2),
        (32, 64, 32, 5, 2),
        (256, 128, 64, 3, 8),
        (256, 128, 64, 4, 8),
        (128, 128, 64, 4, 4),
        (128, 128, 64, 4, 8),
        (128, 64, 64, 4, 4),
        (64, 128, 64, 4, 4),
        (32, 64, 64, 4, 4),
        (64, 32, 64, 4, 4),
        (128, 128, 64, 3, 8),
        (64, 128, 64, 3, 4),
        (64, 128, 32, 3, 4),
        (16, 32, 64, 3, 4),
        (16, 32, 128, 4, 4),
        (32, 32, 128, 5, 4),
        (32, 32, 64, 4, 4),
        (16, 32, 128, 3, 2),
    )
]
# The persistent TMA form, for 16-bit inputs on Hopper (``_tma_fits``): on ViT-S/16's bf16 12608x1152x384 + bias
# an H100 ran it 1.15x of cuBLAS's addmm by do_bench (1.105x by GPU time), the one-tile-per-program form 1.22x
# (benchmarks/results/2026-11-28-h100-matmul-tma.md, where matmul_tma_gpu.py times each of these).
TMA_CONFIGS = [
    _config(*c, TMA_PERSISTENT=True)
    for c in (
        (128, 128, 128, 3, 8),
        (128, 128, 64, 3, 8),
        (128, 128, 64, 4, 8),
        (128, 128, 128, 3, 4),
        (128, 128, 64, 3, 4),
        (128, 128, 64, 4, 4),
        (128, 256, 64, 3, 8),
        (256, 128, 64, 3, 8),
        (128, 64, 128, 3, 4),
        (128, 64, 64, 4, 4),
        (64, 128, 64, 4, 4),
        (128, 128, 32, 5, 4),
    )
]
AUTOTUNE_CONFIGS += TMA_CONFIGS
# What a Hopper block may use (227 KiB); the device's own figure where Triton's driver gives it.
DEFAULT_SHARED_BYTES = 232448


@functools.cache
def _shared_bytes(device_index: int) -> int:
    try:
        properties = triton.runtime.driver.active.utils.get_device_properties(device_index)
        return int(properties["max_shared_mem"])
    except Exception:
        return DEFAULT_SHARED_BYTES


@functools.cache
def _capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)


@functools.cache
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _tma_fits(named_args: Mapping[str, Any]) -> bool:
    """Whether the persistent TMA form can run this product: a Hopper GPU (sm_90; Blackwell's TMA is untested
    here), 16-bit inputs, a and c row-major and b contiguous along K or N, every address and row stride a
    multiple of 16 bytes, as the tensor-memory accelerator requires."""
    a = named_args["a_ptr"]
    if a.device.type != "cuda" or _capability(a.device.index or 0)[0] != 9 or interpreting():
        return False
    b, c = named_args["b_ptr"], named_args["c_ptr"]
    if a.dtype not in (torch.float16, torch.bfloat16) or b.dtype != a.dtype or c.dtype != a.dtype:
        return False
    stride_bk, stride_bn = named_args["stride_bk"], named_args["stride_bn"]
    if named_args["stride_ak"] != 1 or named_args["stride_cn"] != 1 or 1 not in (stride_bk, stride_bn):
        return False
    b_row = stride_bn if stride_bk == 1 else stride_bk
    rows = (named_args["stride_am"], b_row, named_args["stride_cm"])
    return all(t.data_ptr() % 16 == 0 for t in (a, b, c)) and all(r * a.element_size() % 16 == 0 for r in rows)


def _prune(configs: list[triton.Config], named_args: dict[str, Any], **switches: Any) -> list[triton.Config]:
    """The configurations worth timing for this shape: their pipelined tiles fit in shared memory, no tile is
    larger than the product it covers (a 64-row product gains nothing from 256-row tiles, only waste), and the
    persistent TMA form only where it can run and has at least a tile for every SM to walk."""
    a = named_args["a_ptr"]
    M, N, K = named_args["M"], named_args["N"], named_args["K"]
    itemsize = a.element_size()
    limit = _shared_bytes(a.device.index or 0) if a.device.type == "cuda" else DEFAULT_SHARED_BYTES
    tma = _tma_fits(named_args)
    kept = []
    for config in configs:
        block_m, block_n, block_k = (config.kwargs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
        persistent = config.kwargs.get("TMA_PERSISTENT", False)
        if persistent and (not tma or cdiv(M, block_m) * cdiv(N, block_n) < sm_count(a.device.index or 0)):
            continue
        # The persistent form also stages its output tile in shared memory for the TMA store.
        staged = block_m * block_n * itemsize if persistent else 0
        if config.num_stages * (block_m + block_n) * block_k * itemsize + staged > limit:
            continue
        if block_m > max(16, triton.next_power_of_2(M)) or block_n > max(32, triton.next_power_of_2(N)):
            continue
        if block_k > max(32, triton.next_power_of_2(K)):
            continue
        kept.append(config)
    return kept or [c for c in configs if not c.kwargs.get("TMA_PERSISTENT", False)][-1:]

# Layout and epilogue are in the key: a transposed weight and a row-major b favour different tiles, and
# the GELU epilogue (exposed after each tile's K loop) shifts the best tile shape. EVEN_K depends on the
# config's BLOCK_K, so it is decided per config.
matmul_tuned = TunedKernel(
    matmul_kernel,
    AUTOTUNE_CONFIGS,
    key=["M", "N", "K", "stride_ak", "stride_bk", "HAS_BIAS", "ACTIVATION"],
    prune=_prune,
    heuristics={
        "EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0,
        "B_K_CONTIGUOUS": lambda args: args["stride_bk"] == 1,
    },
)
# float32 products in IEEE precision (no TF32) run on the FMA units, which read b a row of N at a time: from a
# transposed weight (K contiguous) an H100 ran GPT-2's 4096x2304x768 1.7x slower than from a copy of it with N
# contiguous, the copy included (benchmarks/results/2026-11-27-h100-first-report.md). Below this many rows of a
# the copy costs more than it saves (a 64-row classifier head ran 1.4x slower with it).
PRETRANSPOSE_MIN_ROWS = 256

# Under the interpreter: one small config, so checks stay fast.
INTERPRETER_CONFIG = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}


def _largest_offset(t: torch.Tensor) -> int:
    return sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride(), strict=True))


def matmul(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, activation: str = "none",
    input_precision: str | None = None,
) -> torch.Tensor:  # fmt: skip
    """``activation(a @ b + bias)`` for a[M, K], b[K, N], bias[N] (any strides); c[M, N] in a's dtype.
    float32 products follow torch's matmul flag unless ``input_precision`` says ("tf32", "ieee")."""
    c = _output(a, b, activation)
    if c.numel() == 0:
        return c
    if input_precision is None:
        tf32 = a.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32
        input_precision = "tf32" if tf32 else "ieee"
    ieee_float32 = a.dtype == torch.float32 and input_precision == "ieee"
    if ieee_float32 and b.stride(0) == 1 and b.stride(1) != 1 and c.shape[0] >= PRETRANSPOSE_MIN_ROWS and not interpreting():
        b = b.contiguous()
    if interpreting():
        _launch(triton.Config(INTERPRETER_CONFIG), a, b, c, bias, activation, input_precision, num_sms=1)
    else:
        num_sms = sm_count(a.device.index or 0)
        args, switches = _arguments(a, b, c, bias, activation, input_precision, num_sms)
        matmul_tuned[_grid(c, num_sms)](*args, **switches)
    return c


def matmul_with(
    config: triton.Config, a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None,
    activation: str = "none", *, input_precision: str = "ieee", out: torch.Tensor | None = None,
    num_sms: int | None = None,
) -> torch.Tensor:  # fmt: skip
    """``matmul`` with one configuration, launched directly (no search, no table, no pre-transposed b): for the
    tests and benchmarks that check or time each configuration of the list. ``out``: c, written in place;
    ``num_sms``: how many programs the persistent form runs (the GPU's SMs by default)."""
    c = out if out is not None else _output(a, b, activation)
    if num_sms is None:
        num_sms = sm_count(a.device.index or 0) if a.device.type == "cuda" and not interpreting() else 1
    if c.numel():
        _launch(config, a, b, c, bias, activation, input_precision, num_sms)
    return c


def _output(a: torch.Tensor, b: torch.Tensor, activation: str) -> torch.Tensor:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    (M, K), (b_rows, N) = a.shape, b.shape
    if b_rows != K:
        raise ValueError(f"a is {M}x{K} but b is {b_rows}x{N}")
    return torch.empty((M, N), device=a.device, dtype=a.dtype)


def _arguments(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bias: torch.Tensor | None, activation: str,
    input_precision: str, num_sms: int,
) -> tuple[tuple[Any, ...], dict[str, Any]]:  # fmt: skip
    """matmul_kernel's arguments and switches for c = activation(a @ b + bias); the configuration's fields and
    the heuristics (EVEN_K, B_K_CONTIGUOUS) come from ``matmul_tuned``."""
    (M, K), N = a.shape, b.shape[1]
    args = (
        a, b, c, bias if bias is not None else c,
        M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
    )  # fmt: skip
    switches = dict(
        HAS_BIAS=bias is not None,
        ACTIVATION=activation,
        INPUT_PRECISION=input_precision,
        INT64_OFFSETS=any(_largest_offset(t) >= 2**31 for t in (a, b, c)),
        NUM_SMS=num_sms,
    )
    return args, switches


def _grid(c: torch.Tensor, num_sms: int) -> Callable[[Mapping[str, Any]], tuple[int]]:
    """One program per tile, or for the persistent form one per SM (fewer where there are fewer tiles)."""
    M, N = c.shape

    def grid(meta: Mapping[str, Any]) -> tuple[int]:
        tiles = cdiv(M, meta["BLOCK_M"]) * cdiv(N, meta["BLOCK_N"])
        return (min(num_sms, tiles),) if meta.get("TMA_PERSISTENT") else (tiles,)

    if c.is_cuda:
        # The persistent form's descriptors are built on the GPU, in scratch memory Triton asks this for.
        triton.set_allocator(_descriptor_scratch)
    return grid


def _launch(
    config: triton.Config, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, bias: torch.Tensor | None,
    activation: str, input_precision: str, num_sms: int,
) -> None:  # fmt: skip
    args, switches = _arguments(a, b, c, bias, activation, input_precision, num_sms)
    matmul_tuned.launch_config(config, _grid(c, num_sms), args, switches)


def _descriptor_scratch(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _make_inputs(
    transposed_b: bool, with_bias: bool
) -> Callable[[Mapping[str, int], torch.dtype, torch.device, torch.Generator], tuple[torch.Tensor, ...]]:
    def make_inputs(
        shape: Mapping[str, int], dtype: torch.dtype, device: torch.device, generator: torch.Generator
    ) -> tuple[torch.Tensor, ...]:
        M, N, K = shape["M"], shape["N"], shape["K"]

        def randn(*size: int) -> torch.Tensor:
            return torch.randn(*size, generator=generator, device=device, dtype=torch.float32)

        a = randn(M, K).to(dtype)
        # Scaled by K**-0.5 so a @ b stays O(1) for any K. A transposed b is nn.Linear's weight.t().
        if transposed_b:
            b = (randn(N, K) * K**-0.5).to(dtype).t()
        else:
            b = (randn(K, N) * K**-0.5).to(dtype)
        return (a, b, randn(N).to(dtype)) if with_bias else (a, b)

    return make_inputs


def _reference(activation: str) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    def reference(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        out = a @ b + bias
        if activation == "relu":
            return torch.relu(out)
        return F.gelu(out) if activation == "gelu" else out

    return reference


def _run(activation: str) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
    def run(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return matmul(a, b, bias, activation)

    return run


IMPLEMENTATIONS: dict[str, Implementation] = {
    "matmul": Implementation(
        run=matmul,
        reference=lambda a, b: a @ b,
        make_inputs=_make_inputs(transposed_b=False, with_bias=False),
        kernels=(matmul_kernel,),
    ),
    **{
        name: Implementation(
            run=_run(activation),
            reference=_reference(activation),
            make_inputs=_make_inputs(transposed_b=True, with_bias=True),
            kernels=(matmul_kernel,),
        )
        for name, activation in (
            ("matmul_bias", "none"),
            ("matmul_bias_relu", "relu"),
            ("matmul_bias_gelu", "gelu"),
        )
    },
}
