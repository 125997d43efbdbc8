"""Reproducer, step 2: a plan -> ``repro.py``, a script that imports torch and triton only.

The script's top holds what a user edits (the kernel's source, its launch config) and the data the plan
worked out, as Python literals; the rest is a fixed runner (``RUNNER`` below, the same in every script):
build the arguments (the saved tensors of the real launch, or random ones of its sizes, strides and
dtypes), compile the kernel with Inductor's own ``async_compile`` (so the heuristics, ``triton_meta`` and C++
flags are Inductor's), run it, check what it writes against the eager reference in float64, time it, and
print one summary line::

    repro <kernel>: check passed (...) | <median> us median, p10 <..>, p90 <..> (<method>) | inputs: <...>

Exit status: 0 when the check passed or could not be made (the line says why), 1 when it failed.
"""

from __future__ import annotations

import ast
import datetime as dt
import pprint
from dataclasses import asdict

from ..version import __version__
from .arguments import extent
from .parts import ScalarArg, TensorArg
from .plan import ReproPlan

SUMMARY_PREFIX = "repro "


def render_script(plan: ReproPlan, *, origin: str, saved_inputs: str | None, saved_note: str = "") -> str:
    """The text of repro.py; ``saved_inputs``: the .pt file (beside the script) holding the real arguments."""
    storages = _storages(plan)
    args = [_arg_literal(a) for a in plan.args]
    reference = plan.reference
    inputs_note = (f"the real arguments of its launch, saved at capture time ({saved_inputs})" if saved_inputs
                   else "random arguments of the recorded sizes, strides and dtypes (see ARGS)")  # fmt: skip
    header = HEADER.format(
        kernel=plan.kernel,
        graph=plan.graph_id,
        origin=origin,
        version=__version__,
        date=dt.date.today().isoformat(),
        launch=plan.launch_code or "?",
        position=plan.launch_position,
        inputs=inputs_note,
        saved_note=f"\n{saved_note}\n" if saved_note else "",
    )
    parts = [
        header,
        f"KERNEL_NAME = {plan.kernel!r}",
        f"BACKEND = {plan.backend!r}  # 'triton' or 'cpp'",
        f"DEVICE = {plan.device!r}  # where the capture ran it (Triton's device_str)",
        "",
        "# ---- the kernel, exactly as Inductor generated it (edit it and run again) " + "-" * 30,
        _source_literal("KERNEL_SOURCE", plan.source),
    ]
    if plan.backend == "cpp":
        parts += [
            f"CPP_ARG_TYPES = {list(plan.cpp_arg_types)!r}  # async_compile.cpp_pybinding's argument types",
            "",
        ]
    else:
        recorded = f" The report recorded: {plan.recorded_config}." if plan.recorded_config else ""
        parts += [
            "# None: Inductor's own launcher picks the config (its heuristics, autotuning where it has several).",
            "# Or force one, e.g. {'XBLOCK': 1024, 'num_warps': 4, 'num_stages': 1} (R0_BLOCK, YBLOCK for",
            f"# reductions and 2D tiles): the @triton.jit function is then launched directly with it.{recorded}",
            "CONFIG = None",
            "",
        ]
    parts += [
        "# ---- the launch: the kernel's parameters and what call() passed them " + "-" * 35,
        f"# launch #{plan.launch_position} in call(): {plan.launch_code}",
        "# A tensor's values: 'randn' (normal), 'randint(0, K)' (indices kept in range), 'bool', 'zeros' (written by",
        "# the kernel); arguments that share a 'storage' are views of one buffer, as in call().",
        f"ARGS = {_pretty(args)}",
        f"STORAGES = {_pretty(storages)}  # elements of each shared buffer",
        f"SAVED_INPUTS = {saved_inputs!r}  # the real arguments (torch.save'd list, beside this file), or None",
        f"ISOLATED_US = {plan.isolated_us!r}  # the report's isolated time of this kernel, for comparison",
        "",
        "# ---- the eager reference: the kernel's post-grad FX nodes, as the graph's code writes them "
        + "-" * 13,
    ]
    if reference.missing:
        parts += [f"REFERENCE_MISSING = {reference.missing!r}", "REFERENCE_CODE = ''", "REFERENCE_INPUTS = []",
                  "REFERENCE_OUTPUTS = []", "UNCHECKED = []"]  # fmt: skip
    else:
        parts += [
            "REFERENCE_MISSING = ''",
            _source_literal("REFERENCE_CODE", reference.code + "\n"),
            "# each FX input: the kernel argument that holds it (or, for a size, its value at the size hints)",
            f"REFERENCE_INPUTS = {_pretty([asdict(i) for i in reference.inputs])}",
            "# each FX node the kernel hands on: the argument it writes it to",
            f"REFERENCE_OUTPUTS = {_pretty([asdict(o) for o in reference.outputs])}",
            f"UNCHECKED = {_pretty(list(reference.unchecked))}",
        ]
    parts += ["", RUNNER]
    return "\n".join(parts)


def _storages(plan: ReproPlan) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for arg in plan.tensor_args:
        sizes[arg.storage] = max(sizes.get(arg.storage, 0), extent(arg.size, arg.stride, arg.offset))
    return sizes


def _arg_literal(arg: TensorArg | ScalarArg) -> dict[str, object]:
    if isinstance(arg, ScalarArg):
        return {"param": arg.param, "scalar": arg.value, "written": arg.written}
    return {"param": arg.param, "role": arg.role, "dtype": arg.dtype, "size": list(arg.size),
            "stride": list(arg.stride), "offset": arg.offset, "storage": arg.storage, "values": arg.values,
            "written": arg.written, **({"why": arg.values_why} if arg.values.startswith("randint") else {}),
            **({"layout": arg.layout_why} if arg.layout_why else {})}  # fmt: skip


def _pretty(value: object) -> str:
    """A list one item a line (each a dict literal), anything else as pprint writes it."""
    if isinstance(value, list) and value:
        return "[\n" + "".join(f"    {item!r},\n" for item in value) + "]"
    return pprint.pformat(value, width=110, sort_dicts=False)


def _source_literal(name: str, text: str) -> str:
    """``NAME = r'''...'''`` where that literal gives back ``text`` exactly (readable, editable), else its repr."""
    if "'''" not in text and not text.endswith("\\"):
        literal = f"r'''{text}'''"
        try:
            if ast.literal_eval(literal) == text:
                return f"{name} = {literal}"
        except (SyntaxError, ValueError):
            pass
    return f"{name} = {text!r}"


HEADER = '''#!/usr/bin/env python3
"""Reproducer of {kernel}, a kernel of graph {graph} ({origin}).

Written by inductor-lens {version} on {date}. It imports torch and triton only.

    python repro.py                     run the kernel alone, check it, time it; one summary line
    TRITON_INTERPRET=1 python repro.py  a Triton kernel on CPU tensors under Triton's interpreter (slow;
                                        the check runs, the time means nothing)

It runs the kernel exactly as Inductor generated it (KERNEL_SOURCE, compiled by Inductor's own
async_compile) on {inputs}, as launch #{position} of the graph's call() passed them:
    {launch}
It checks every tensor the kernel hands on against the ATen ops it fuses (the graph's post-grad FX nodes,
run eagerly in float64 where the dtype allows): it passes within atol = rtol = 1e-4 of float64 for float32
outputs (1e-2 for float16 and bfloat16), or no further from float64 than twice eager in the kernel's own
dtype (plus atol); integer and boolean outputs must be equal. Then it times it: on a GPU
triton.testing.do_bench (median, p10, p90; L2 cleared before each repetition), on CPU a time.perf_counter
loop after warm-up (median, p10, p90). Edit KERNEL_SOURCE or CONFIG and run again.
{saved_note}"""
'''


RUNNER = r'''
# ---- the runner (the same in every reproducer) ----------------------------------------------------------
import math
import os
import statistics
import sys
import time

import torch

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# atol, rtol of the check against float64, by the dtype of the kernel's output
TOLERANCE = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-7, 1e-7), torch.float16: (1e-2, 1e-2),
             torch.bfloat16: (1e-2, 1e-2)}


def run_device():
    if BACKEND == "cpp" or INTERPRET:
        return torch.device("cpu")
    return torch.device(DEVICE if ":" in DEVICE else f"{DEVICE}:0")


def make_args(device):
    """The kernel's arguments: the saved ones of the real launch, else random ones of its layout."""
    if SAVED_INPUTS:
        here = os.path.dirname(os.path.abspath(__file__))
        saved = torch.load(os.path.join(here, SAVED_INPUTS), map_location=device, weights_only=True)
        return [value for value in saved], "saved"
    generator = torch.Generator().manual_seed(0)
    storages = {}
    values = []
    for arg in ARGS:
        if "scalar" in arg:
            values.append(arg["scalar"])
            continue
        dtype = getattr(torch, arg["dtype"])
        key = (arg["storage"], dtype)
        if key not in storages:
            storages[key] = _random(arg["values"], STORAGES[arg["storage"]], dtype, generator).to(device)
        values.append(storages[key].as_strided(arg["size"], arg["stride"], arg["offset"]))
    return values, "random"


def _random(kind, numel, dtype, generator):
    if kind == "randn":
        return torch.randn(numel, generator=generator, dtype=torch.float32).to(dtype)
    if kind == "bool":
        return torch.randint(0, 2, (numel,), generator=generator).bool()
    if kind.startswith("randint("):
        low, high = (int(v) for v in kind[len("randint("):-1].split(","))
        return torch.randint(low, high, (numel,), generator=generator).to(dtype)
    return torch.zeros(numel, dtype=dtype)


def copy_args(args):
    """A copy of the arguments with the same storage sharing."""
    clones, copied = {}, []
    for value in args:
        if not isinstance(value, torch.Tensor):
            copied.append(value)
            continue
        storage = value.untyped_storage()
        if storage.data_ptr() not in clones:
            clones[storage.data_ptr()] = storage.clone()
        view = torch.empty(0, dtype=value.dtype, device=value.device)
        view.set_(clones[storage.data_ptr()], value.storage_offset(), value.size(), value.stride())
        copied.append(view)
    return copied


def load_kernel():
    """The kernel compiled as Inductor compiles it: a callable taking the arguments."""
    if BACKEND == "cpp":
        from torch._inductor.async_compile import AsyncCompile

        async_compile = AsyncCompile()
        compiled = {KERNEL_NAME: async_compile.cpp_pybinding(CPP_ARG_TYPES, KERNEL_SOURCE)}
        async_compile.wait(compiled)
        return compiled[KERNEL_NAME], "C++ (cpp_pybinding)"
    if INTERPRET:
        # the kernel's module asks for a GPU driver and CUDA's stream getter: neither is needed to interpret it
        from torch._inductor.runtime import triton_helpers

        triton_helpers.set_driver_to_gpu = lambda: None
        if not hasattr(torch._C, "_cuda_getCurrentRawStream"):
            torch._C._cuda_getCurrentRawStream = lambda index: 0
        # Triton's interpreter runs tl.math, not CUDA's libdevice: the libdevice functions tl.math also has
        # (erf, exp, rsqrt, ...) are pointed at it; a kernel calling any other one cannot be interpreted
        import triton.language as tl

        for name in dir(tl.math):
            if not name.startswith("_") and hasattr(triton_helpers.libdevice, name):
                setattr(triton_helpers.libdevice, name,
                        lambda *args, _name=name, **kwargs: getattr(tl.math, _name)(*args, **kwargs))
    if INTERPRET or CONFIG is not None:
        from torch._inductor.codecache import PyCodeCache

        autotuner = getattr(PyCodeCache.load(KERNEL_SOURCE), KERNEL_NAME)
        return _direct_launcher(autotuner)
    from torch._C import _cuda_getCurrentRawStream as get_raw_stream
    from torch._inductor.async_compile import AsyncCompile

    async_compile = AsyncCompile()
    compiled = {KERNEL_NAME: async_compile.triton(KERNEL_NAME, KERNEL_SOURCE, device_str=DEVICE)}
    async_compile.wait(compiled)
    autotuner = compiled[KERNEL_NAME]
    index = run_device().index or 0

    def launch(*args):
        autotuner.run(*args, stream=get_raw_stream(index))

    launch.autotuner = autotuner
    return launch, "Inductor's launcher"


def _direct_launcher(autotuner):
    """The @triton.jit function launched directly with CONFIG (or, interpreted, Inductor's first config)."""
    import triton
    from torch._inductor.runtime.triton_heuristics import GridExpr

    if CONFIG is not None:
        settings = dict(CONFIG)
        config = triton.Config({k: v for k, v in settings.items() if k not in ("num_warps", "num_stages")},
                               num_warps=settings.get("num_warps", 4), num_stages=settings.get("num_stages", 1))
    else:
        config = autotuner.configs[0]
    grid = GridExpr.from_meta(autotuner.inductor_meta, config)
    names = [p for p in autotuner.fn.arg_names if p not in config.kwargs]

    def launch(*args):
        scope = {**dict(zip(names, args)), **config.kwargs}
        sizes = tuple(eval(str(g), {"min": min, "max": max}, scope) for g in (grid.x_grid, grid.y_grid, grid.z_grid))
        autotuner.fn[sizes](*args, **config.kwargs, num_warps=config.num_warps, num_stages=config.num_stages)

    described = ", ".join(f"{k}={v}" for k, v in config.kwargs.items())
    described += f", num_warps={config.num_warps}, num_stages={config.num_stages}"
    return launch, f"launched directly with {described}"


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- the check -------------------------------------------------------------------------------------------
def reference_function(dtype_to=None):
    """REFERENCE_CODE as a function of REFERENCE_INPUTS; ``dtype_to``: every floating dtype it names becomes this one."""
    code = REFERENCE_CODE
    if dtype_to is not None:
        for name in ("torch.float32", "torch.float16", "torch.bfloat16"):
            code = code.replace(name, dtype_to)
    params = ", ".join(i["node"] for i in REFERENCE_INPUTS)
    outputs = ", ".join(o["node"] for o in REFERENCE_OUTPUTS)
    body = "".join(f"    {line}\n" for line in code.splitlines())
    text = f"def reference({params}):\n{body}    return ({outputs},)\n"
    scope = {"torch": torch, "inf": math.inf, "nan": math.nan, "device": _reference_device}
    exec(compile(text, "<reference>", "exec"), scope)
    return scope["reference"]


_REFERENCE_DEVICE = [torch.device("cpu")]


def _reference_device(type=None, index=None):
    return _REFERENCE_DEVICE[0]  # the device the reproducer runs on, whatever the capture's was


def reference_inputs(args, float64):
    params = [a["param"] for a in ARGS]
    values = []
    for item in REFERENCE_INPUTS:
        if item["param"] is None:
            values.append(item["value"])
            continue
        value = args[params.index(item["param"])].clone()
        if float64 and value.is_floating_point():
            value = value.double()
        values.append(value)
    return values


def first_line(exc):
    return (str(exc).splitlines() or [""])[0][:200]


def distance(value, exact):
    """|value - exact| elementwise in float64: 0 where both are the same infinity or both NaN, infinite where
    only one is NaN."""
    value, exact = value.double().reshape(exact.shape), exact.double()
    error = (value - exact).abs()
    error = torch.where((value == exact) | (torch.isnan(value) & torch.isnan(exact)), torch.zeros_like(error), error)
    return torch.where(torch.isnan(error), torch.full_like(error, math.inf), error)


def check(pristine, ran, device):
    """(verdict, detail): every tensor the kernel hands on against eager in float64 (and in its own dtype)."""
    if REFERENCE_MISSING:
        return "missing", f"no check: {REFERENCE_MISSING}"
    _REFERENCE_DEVICE[0] = device
    try:
        same = reference_function()(*reference_inputs(pristine, False))
    except Exception as exc:
        return "missing", f"no check: the eager reference raised {type(exc).__name__}: {first_line(exc)}"
    against, wide_failed = "eager float64", ""
    try:
        wide = reference_function("torch.float64")(*reference_inputs(pristine, True))
    except Exception as exc:  # an op without a float64 kernel: eager in the kernel's own dtype is the reference
        wide, against = same, "eager in the kernel's dtype"
        wide_failed = f"; float64 raised {type(exc).__name__}: {first_line(exc)}"
    params = [a["param"] for a in ARGS]
    worst, failures = 0.0, []
    for item, eager, exact in zip(REFERENCE_OUTPUTS, same, wide):
        got = ran[params.index(item["param"])]
        if got.numel() != exact.numel():
            return "missing", f"no check: {item['param']} holds {got.numel()} elements, {item['node']} {exact.numel()}"
        got = got.reshape(exact.shape)
        if not got.is_floating_point():
            if not torch.equal(got.cpu(), exact.to(got.dtype).cpu()):
                failures.append(f"{item['node']} ({item['param']}): not equal")
            continue
        atol, rtol = TOLERANCE.get(got.dtype, (1e-2, 1e-2))
        error = distance(got, exact)
        limit = atol + rtol * exact.double().abs()
        eager_error = distance(eager, exact).max().item() if eager.numel() else 0.0
        kernel_error = error.max().item() if error.numel() else 0.0
        worst = max(worst, kernel_error)
        # within tolerance of float64, or no further from it than twice eager in the kernel's dtype
        if not bool((error <= limit).all()) and kernel_error > 2 * eager_error + atol:
            failures.append(f"{item['node']} ({item['param']}): max abs error {kernel_error:.3g}, "
                            f"eager {got.dtype} {eager_error:.3g}, atol {atol:g} rtol {rtol:g}")
    count = f"{len(REFERENCE_OUTPUTS)} output{'s' if len(REFERENCE_OUTPUTS) != 1 else ''}"
    if failures:
        return "failed", f"check FAILED ({count} against {against}; " + "; ".join(failures) + wide_failed + ")"
    skipped = f", {len(UNCHECKED)} scratch not checked" if UNCHECKED else ""
    return "passed", f"check passed ({count} against {against}, max abs error {worst:.3g}{skipped}{wide_failed})"


# ---- the time --------------------------------------------------------------------------------------------
def quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def time_kernel(launch, args, device):
    if INTERPRET:
        return "not timed under Triton's interpreter"
    if device.type == "cuda":
        from triton.testing import do_bench

        samples = do_bench(lambda: launch(*args), warmup=25, rep=100, return_mode="all")
        method = "triton.testing.do_bench, L2 cleared before each"
        samples_us = [s * 1e3 for s in samples]
    else:
        for _ in range(3):
            launch(*args)
        samples_us, started = [], time.perf_counter()
        while len(samples_us) < 20 or (len(samples_us) < 1000 and time.perf_counter() - started < 0.5):
            start = time.perf_counter()
            launch(*args)
            samples_us.append((time.perf_counter() - start) * 1e6)
        method = "time.perf_counter after 3 warm-up calls"
    median = statistics.median(samples_us)
    text = (f"{median:.3f} us median, p10 {quantile(samples_us, 0.1):.3f}, p90 {quantile(samples_us, 0.9):.3f} "
            f"({method}, {len(samples_us)} samples)")
    if ISOLATED_US:
        text += f", report's isolated time {ISOLATED_US:.3f} us"
    return text


def main():
    device = run_device()
    args, source = make_args(device)
    launch, how = load_kernel()
    pristine = copy_args(args)
    ran = copy_args(args)
    launch(*ran)
    synchronize(device)
    verdict, detail = check(pristine, ran, device)
    timing = time_kernel(launch, copy_args(args), device)
    inputs = "saved inputs of the real launch" if source == "saved" else "random inputs"
    print(f"repro {KERNEL_NAME}: {detail} | {timing} | {inputs}; {how}", flush=True)
    return 1 if verdict == "failed" else 0


if __name__ == "__main__":
    sys.exit(main())
'''
