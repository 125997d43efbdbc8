"""Compiler stages: the child process that compiles Inductor's Triton kernels for a GPU target (see ``aot.py``).

``python -m inductor_lens.stages.compile_child`` reads ``{"work": folder, "requests": [CompileRequest]}`` on
stdin and prints ``{key: {"folder": cache entry, "note", "config"} or {"error": why}}`` as its last line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _no_stream(device: int = 0) -> int:
    return 0


def _prepare_child() -> dict[str, Any]:
    """Make a kernel module importable on any machine: the GPU driver is never asked for, and the
    decorator's autotuner is replaced by one that records what the decorator computed."""
    import torch
    import torch._inductor.runtime.triton_helpers as triton_helpers
    import torch._inductor.runtime.triton_heuristics as triton_heuristics

    if not hasattr(torch._C, "_cuda_getCurrentRawStream"):  # a CPU build of torch: imported by kernel modules
        torch._C._cuda_getCurrentRawStream = _no_stream
    triton_helpers.set_driver_to_gpu = lambda: None
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

    triton_heuristics.cached_autotune = recording_autotune
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


def _compile_one(request: Mapping[str, Any], folder: Path, seen: dict[str, Any]) -> dict[str, Any]:
    import importlib.util
    from types import SimpleNamespace

    import triton
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{request['name']}.py"
    path.write_text(request["source"], encoding="utf-8")
    seen.clear()
    spec = importlib.util.spec_from_file_location(f"inductor_lens_kernel_{folder.name}", path)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    if "fn" not in seen:
        return {"error": "the kernel's module defines no Inductor-decorated Triton kernel"}
    config, note = _config_for(seen["configs"], request["config"])
    owner = SimpleNamespace(triton_meta=seen["triton_meta"], inductor_meta=seen["inductor_meta"], fn=seen["fn"],
                            device_props=seen["triton_meta"].get("device"))  # fmt: skip
    # torch's own methods on a stand-in holding what they read: no autotuner (which would ask for a GPU) is made
    meta = CachingAutotuner._create_compile_meta(owner, config)  # type: ignore[arg-type]
    options = CachingAutotuner._create_compile_options(owner, config, meta)  # type: ignore[arg-type]
    source = ASTSource(seen["fn"], meta["signature"], meta["constants"], meta["configs"][0])
    compiled = triton.compile(source, target=GPUTarget("cuda", request["cc"], 32), options=options)
    json_file = next(p for name, p in compiled.metadata_group.items() if name.endswith(".json"))
    used = {**dict(config.kwargs), "num_warps": config.num_warps, "num_stages": config.num_stages}
    return {"folder": str(Path(json_file).parent), "note": note, "config": used}


def main() -> None:
    payload = json.load(sys.stdin)
    seen = _prepare_child()
    results: dict[str, Any] = {}
    for index, request in enumerate(payload["requests"]):
        try:
            results[request["key"]] = _compile_one(request, Path(payload["work"]) / str(index), seen)
        except Exception as error:  # reported per kernel on its page
            results[request["key"]] = {"error": f"{type(error).__name__}: {error}"[-1500:]}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
