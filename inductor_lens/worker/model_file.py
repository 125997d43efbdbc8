"""Stage 1 of the pipeline (capture), in the model process: the model-file contract.

A model file defines ``get_model()`` (an ``nn.Module`` or any callable) and ``get_inputs()``, which
returns what to call it with:

    a tensor                      one positional argument
    a tuple (or any non-list)     the positional arguments
    a dict                        keyword arguments (``input_ids=..., attention_mask=...``)
    a pair (tuple, dict)          positional and keyword arguments
    a list of the above           several calls, made in order (other shapes, a recompile, dynamic sizes)

Arguments may nest (lists, tuples, dicts of tensors); every tensor is moved to the device, and floating
ones to ``--dtype``. A forward that takes a tuple and a dict positionally is written ``((t, d), {})``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import linecache
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..records.graph import SourceLine
from .compat import tree_map
from .failure import Failure, first_line

# Modules whose construction site is kept (a model of thousands of layers keeps its first ones).
MODULE_SITES_KEPT = 200


@dataclass
class Call:
    """One call of the model: its positional and keyword arguments."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def __call__(self, fn: Any) -> Any:
        return fn(*self.args, **self.kwargs)


# The module name a model file is imported under (a name of its own, so it never shadows an installed module).
MODEL_MODULE_PREFIX = "inductor_lens_model_"


def load_model_file(path: Path) -> Any:
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"{MODEL_MODULE_PREFIX}{path.stem}", path)
    if spec is None or spec.loader is None:
        raise Failure("ModelFileError", f"{path.name} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: Dynamo looks a traced function's globals up by its
    # module's name (a forward calling a module-level function).
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise Failure("ModelFileError", f"{path.name}:{exc.lineno}: syntax error: {exc.msg}") from exc
    except Exception as exc:
        raise Failure(
            "ModelFileError", f"{path.name} raised {type(exc).__name__} while importing: {first_line(exc)}"
        ) from exc
    return module


def call_contract(module: Any, name: str, path: Path) -> Any:
    function = getattr(module, name, None)
    if function is None:
        raise Failure(
            "ModelFileError",
            f"{path.name} defines no {name}() (a model file needs get_model and get_inputs)",
        )
    if not callable(function):
        raise Failure("ModelFileError", f"{path.name}: {name} is not a function")
    try:
        return function()
    except Exception as exc:
        raise Failure("ModelRunError", f"{name}() raised {type(exc).__name__}: {first_line(exc)}") from exc


@contextlib.contextmanager
def module_construction(path: Path) -> Iterator[dict[int, tuple[torch.nn.Module, int]]]:
    """While open, every ``nn.Module`` built from a line of the model file ``path`` is recorded: id -> (the
    module, its line). The model's own code, for a model of torch's modules (``nn.Sequential(nn.Linear(...))``),
    is only where it was built: its forward, and so every frame and FX note of the compile, is torch's."""
    module_class = torch.nn.Module
    original = module_class.__init__
    filename = str(path.resolve())
    sites: dict[int, tuple[torch.nn.Module, int]] = {}

    def recording_init(self: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        frame = sys._getframe(1)
        # the first line of the model file that is not the module's own __init__ (its super().__init__())
        while frame is not None and (frame.f_code.co_filename != filename or frame.f_locals.get("self") is self):
            frame = frame.f_back  # type: ignore[assignment]
        if frame is not None and id(self) not in sites:
            sites[id(self)] = (self, frame.f_lineno)

    module_class.__init__ = recording_init  # type: ignore[method-assign]
    try:
        yield sites
    finally:
        module_class.__init__ = original  # type: ignore[method-assign]


def module_sites(model: object, path: Path, sites: dict[int, tuple[torch.nn.Module, int]]) -> list[SourceLine]:
    """Where the model file built the model and each of its modules: ``SourceLine(file, line, "0: Linear",
    code)``, the model itself first (``"Sequential"``); none for a model that is not an ``nn.Module``."""
    if not isinstance(model, torch.nn.Module):
        return []
    filename = str(path.resolve())
    lines = []
    for name, module in model.named_modules():
        site = sites.get(id(module))
        if site is None or site[0] is not module:
            continue
        code = linecache.getline(filename, site[1]).strip() or None
        kind = type(module).__name__
        lines.append(SourceLine(filename, site[1], f"{name}: {kind}" if name else kind, code))
        if len(lines) >= MODULE_SITES_KEPT:
            break
    return lines


def calls_from(value: Any) -> list[Call]:
    """The calls ``get_inputs()`` asks for, in order."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise Failure("ModelFileError", "get_inputs() returned an empty list: no call to make")
    return [_call(item, len(items) > 1, n) for n, item in enumerate(items, 1)]


def _call(item: Any, several: bool, number: int) -> Call:
    where = f"get_inputs() item {number}" if several else "get_inputs()"
    if isinstance(item, dict):
        return Call((), _keywords(item, where))
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (tuple, list)) and isinstance(item[1], dict):
        return Call(tuple(item[0]), _keywords(item[1], where))
    if isinstance(item, tuple):
        return Call(item, {})
    if item is not None and not isinstance(item, (list, set, str, bytes)):
        return Call((item,), {})  # a tensor, or any single object the model takes
    raise Failure(
        "ModelFileError",
        f"{where} is a {type(item).__name__}: give a tensor, a tuple of arguments, a dict of keyword "
        "arguments, an (args, kwargs) pair, or a list of those for several calls",
    )


def _keywords(value: dict[Any, Any], where: str) -> dict[str, Any]:
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise Failure("ModelFileError", f"{where}: keyword arguments need string names, got {bad[0]!r}")
    return dict(value)


def place(
    model: Callable[..., Any], calls: list[Call], device: torch.device, dtype: torch.dtype | None
) -> tuple[Callable[..., Any], list[Call]]:
    """The model and every tensor of every call on ``device``; floating ones in ``dtype`` when given."""
    try:
        if isinstance(model, torch.nn.Module):
            model = model.to(device=device, dtype=dtype) if dtype is not None else model.to(device)
        return model, [Call(move(c.args, device, dtype), move(c.kwargs, device, dtype)) for c in calls]
    except Exception as exc:
        raise Failure(
            "ModelRunError", f"moving the model to {device} failed: {type(exc).__name__}: {first_line(exc)}"
        ) from exc


def move(value: Any, device: torch.device, dtype: torch.dtype | None) -> Any:
    """``value`` with every tensor inside it on ``device`` (and floating ones in ``dtype``)."""

    def one(x: Any) -> Any:
        if not isinstance(x, torch.Tensor):
            return x
        x = x.to(device)
        return x.to(dtype) if dtype is not None and x.is_floating_point() else x

    return tree_map(one, value)


def describe_calls(calls: list[Call]) -> list[str]:
    """``float32[256, 1024] on cpu``, ``attention_mask=int64[4, 128] on cpu``; ``call 2: ...`` for several."""
    lines: list[str] = []
    for number, call in enumerate(calls, 1):
        prefix = f"call {number}: " if len(calls) > 1 else ""
        parts = [describe(a) for a in call.args] + [f"{k}={describe(v)}" for k, v in call.kwargs.items()]
        lines.extend(prefix + part for part in parts or ["(no arguments)"])
    return lines


def describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        short = str(value.dtype).removeprefix("torch.")
        return f"{short}[{', '.join(str(s) for s in value.shape)}] on {value.device}"
    if isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe(v) for v in value[:4]) + (", ..." if len(value) > 4 else "")
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return type(value).__name__


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise Failure("UsageError", "--device cuda, but this torch sees no CUDA device")
    return torch.device(requested)

