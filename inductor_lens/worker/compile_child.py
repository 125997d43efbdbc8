"""Compiler stages: the child process that compiles Inductor's Triton kernels for a GPU target (see ``aot.py``).

``python -m inductor_lens.worker.compile_child`` reads ``{"work": folder, "requests": [CompileRequest],
"helpers": folder or null}`` on stdin and prints ``{key: {"folder": cache entry, "note", "config", "torch",
"helpers"} or {"error": why, "torch", "helpers", "helper", "cause", "cause_type"}}`` as its last line.

``helpers``: the Triton helper modules kept with the capture (``capture/triton_cache.py``,
``keep_runtime_helpers``). While a kernel's module is executed, ``torch._inductor.runtime.triton_helpers``
is the kept copy (loaded as a package of its own, so its ``from .triton_compat import`` finds the kept
``triton_compat``), so the Triton functions the kernel inlines are those of the torch that generated it.
Without them, the installed torch's are used; a compile error inside a call of one of them names it
(``helper``, ``cause``), for the one line the report gives.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from .compat import (
    CUDA_RAW_STREAM,
    TRITON_HELPERS_MODULE,
    caching_autotuner,
    triton_helpers,
    triton_heuristics,
)

KEPT_PACKAGE = "inductor_lens_kept_triton_runtime"
HELPER_NAMES = ("triton_helpers", "libdevice", "tl_math")  # as the kernels import them


def _no_stream(device: int = 0) -> int:
    return 0


def _prepare_child() -> dict[str, Any]:
    """Make a kernel module importable on any machine: the GPU driver is never asked for, and the
    decorator's autotuner is replaced by one that records what the decorator computed."""
    if not hasattr(torch._C, CUDA_RAW_STREAM):  # a CPU build of torch: imported by kernel modules
        setattr(torch._C, CUDA_RAW_STREAM, _no_stream)
    triton_helpers().set_driver_to_gpu = lambda: None
    seen: dict[str, Any] = {}

    def recording_autotune(
        size_hints: Any, configs: Any, triton_meta: Any, heuristic_type: Any, *args: Any, **kwargs: Any
    ) -> Any:
        def decorate(fn: Any) -> Any:
            seen.update(
                configs=list(configs),
                triton_meta=triton_meta,
                inductor_meta=kwargs.get("inductor_meta") or {},
                fn=fn,
            )
            return fn

        return decorate

    triton_heuristics().cached_autotune = recording_autotune
    return seen


def _config_for(configs: list[Any], wanted: Mapping[str, Any]) -> tuple[Any, str]:
    import triton

    launch = ("num_warps", "num_stages", "num_ctas", "maxnreg")
    if not wanted:
        note = (
            ""
            if len(configs) == 1
            else f"the run's choice is not recorded: compiled the first of {len(configs)} configs"
        )
        return configs[0], note
    kwargs = {k: v for k, v in wanted.items() if k not in launch}
    for config in configs:
        if dict(config.kwargs) == kwargs and all(
            getattr(config, k, None) == v for k, v in wanted.items() if k in launch
        ):
            return config, ""
    # coordinate descent tuning leaves configs the decorator never listed
    return triton.Config(kwargs, **{k: v for k, v in wanted.items() if k in launch}), ""


def _load_kept_helpers(folder: Path) -> ModuleType:
    """The kept ``triton_helpers`` module, as a package of its own whose path is ``folder``."""
    import importlib.util

    package = ModuleType(KEPT_PACKAGE)
    package.__path__ = [str(folder)]
    sys.modules[KEPT_PACKAGE] = package
    spec = importlib.util.spec_from_file_location(f"{KEPT_PACKAGE}.triton_helpers", folder / "triton_helpers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.set_driver_to_gpu = lambda: None  # type: ignore[attr-defined]  # kernels call it on import
    return module


@contextlib.contextmanager
def _helpers_as(module: ModuleType | None) -> Iterator[None]:
    """While inside: ``torch._inductor.runtime.triton_helpers`` is ``module`` (None: the installed one)."""
    if module is None:
        yield
        return
    runtime = importlib.import_module(TRITON_HELPERS_MODULE.rpartition(".")[0])
    installed = triton_helpers()
    sys.modules[TRITON_HELPERS_MODULE] = module
    setattr(runtime, "triton_helpers", module)  # noqa: B010  # the package's attribute, as `from . import` reads it
    try:
        yield
    finally:
        sys.modules[TRITON_HELPERS_MODULE] = installed
        setattr(runtime, "triton_helpers", installed)  # noqa: B010


def _helper_in_error(error: BaseException) -> dict[str, str]:
    """For a Triton compile error at a call of a helper function: the function and why the call failed."""
    node = getattr(error, "node", None)
    called = node.func if isinstance(node, ast.Call) else node  # a call of it, or the name alone (missing)
    if not (isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name)
            and called.value.id in HELPER_NAMES):  # fmt: skip
        return {}
    cause = error.__cause__ or error.__context__
    return {
        "helper": f"{called.value.id}.{called.attr}",
        "cause": (str(cause).splitlines() or [""])[0][:200] if cause is not None else "",
        "cause_type": type(cause).__name__ if cause is not None else "",
    }


def _compile_one(request: Mapping[str, Any], folder: Path, seen: dict[str, Any],
                 helpers: ModuleType | None = None) -> dict[str, Any]:  # fmt: skip
    import importlib.util
    from types import SimpleNamespace

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{request['name']}.py"
    path.write_text(request["source"], encoding="utf-8")
    seen.clear()
    spec = importlib.util.spec_from_file_location(f"inductor_lens_kernel_{folder.name}", path)
    assert spec is not None and spec.loader is not None
    with _helpers_as(helpers):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    if "fn" not in seen:
        return {"error": "the kernel's module defines no Inductor-decorated Triton kernel"}
    config, note = _config_for(seen["configs"], request["config"])
    owner = SimpleNamespace(triton_meta=seen["triton_meta"], inductor_meta=seen["inductor_meta"], fn=seen["fn"],
                            device_props=seen["triton_meta"].get("device"))  # fmt: skip
    # torch's own methods on a stand-in holding what they read: no autotuner (which would ask for a GPU) is made
    autotuner = caching_autotuner()
    meta = autotuner._create_compile_meta(owner, config)
    options = autotuner._create_compile_options(owner, config, meta)
    source = ASTSource(seen["fn"], meta["signature"], meta["constants"], meta["configs"][0])
    compiled = triton.compile(source, target=GPUTarget("cuda", request["cc"], 32), options=options)
    json_file = next(p for name, p in compiled.metadata_group.items() if name.endswith(".json"))
    used = {**dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}
    return {"folder": str(Path(json_file).parent), "note": note, "config": used}


def main() -> None:
    payload = json.load(sys.stdin)
    seen = _prepare_child()
    helpers, used = None, "installed"
    if payload.get("helpers"):
        try:
            helpers, used = _load_kept_helpers(Path(payload["helpers"])), "kept"
        except Exception as error:  # the kept helpers do not import here: the installed ones, and say so
            why = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
            used = f"its Triton helpers, kept in this capture, do not load here ({why})"
    common = {"torch": torch.__version__, "helpers": used}
    results: dict[str, Any] = {}
    for index, request in enumerate(payload["requests"]):
        try:
            result = _compile_one(request, Path(payload["work"]) / str(index), seen, helpers)
        except Exception as error:  # reported per kernel on its page
            result = {"error": f"{type(error).__name__}: {error}"[-1500:], **_helper_in_error(error)}
        results[request["key"]] = {**result, **common}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
