"""Parse stage: the TORCH_TRACE readers of dynamic shapes, filed per compile id like the others.

- ``create_symbol`` / ``create_unbacked_symbol``: a symbolic size, its hint, range and source;
- ``symbolic_shape_specialization``: a symbol turned back into a constant, with the guard that did it;
- ``guard_added_fast`` / ``guard_added``: a guard on sizes, with the user line being traced.
"""

from __future__ import annotations

import re
from typing import Any

from ..records import ShapeGuard, ShapeSpecialization, ShapeSymbol, SourceLine
from .diagnostics import Diagnostics
from .source_lines import is_user_file
from .trace_records import TraceRecord, TraceState, json_type, stack_lines

# --- dynamic shapes --------------------------------------------------------------------------


def _fields(
    record: TraceRecord, diagnostics: Diagnostics, **types: type | tuple[type, ...]
) -> dict[str, Any] | None:
    """The record's body when each named field has the JSON type torch writes; else a warning."""
    body = record.body
    if not isinstance(body, dict):
        record.skip(diagnostics, "is not a JSON object")
        return None
    for key, kind in types.items():
        if not isinstance(body.get(key), kind):
            record.skip(diagnostics, f"field {key} is a JSON {json_type(body.get(key))}")
            return None
    return body


def _user_line(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> SourceLine | None:
    """The innermost line of the user's own code in the record's ``user_stack`` (else its innermost)."""
    frames = record.body.get("user_stack") if isinstance(record.body, dict) else None
    if not isinstance(frames, list):
        return None
    stack = stack_lines(frames, record, state, diagnostics)
    mine = [line for line in stack if is_user_file(line.filename)]
    found = mine or stack
    return found[-1] if found else None


def _hint(text: str) -> int | float | None:
    """create_symbol's ``val`` is a repr: "24", "1e-05"."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return None


def read_create_symbol(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """``create_symbol``: {symbol, val (the hint), vr (range), source}; ``create_unbacked_symbol`` has no
    val or source (a data-dependent size)."""
    compile_id = record.compile_id
    if compile_id is None:
        return
    unbacked = record.kind == "create_unbacked_symbol"
    fields: dict[str, Any] = (
        {"symbol": str, "vr": str} if unbacked else {"symbol": str, "val": str, "vr": str, "source": str}
    )
    body = _fields(record, diagnostics, **fields)
    if body is None:
        return
    state.summary.frame(compile_id).symbols.append(
        ShapeSymbol(
            name=body["symbol"],
            hint=None if unbacked else _hint(body["val"]),
            hint_from="" if unbacked else "trace",
            source="" if unbacked else body["source"],
            range=body["vr"],
            user_line=_user_line(record, state, diagnostics),
        )
    )


def read_specialization(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """``symbolic_shape_specialization``: {symbol, sources, value, reason}, logged right after the guard
    that made the symbol a constant."""
    compile_id = record.compile_id
    if compile_id is None:
        return
    body = _fields(record, diagnostics, symbol=str, sources=list, value=str, reason=str)
    if body is None:
        return
    frame = state.summary.frame(compile_id)
    symbol = body["symbol"]
    guard = next(
        (g.expr for g in reversed(frame.shape_guards) if re.search(rf"\b{re.escape(symbol)}\b", g.expr)), ""
    )
    value = _hint(body["value"])  # sympy's repr: "512", "1.00000000000000e-5"
    frame.specializations.append(
        ShapeSpecialization(
            symbol=symbol,
            value=body["value"] if value is None else str(value),
            reason=body["reason"],
            sources=tuple(str(source) for source in body["sources"]),
            guard=guard,
            user_line=_user_line(record, state, diagnostics),
        )
    )


def read_guard_added(record: TraceRecord, state: TraceState, diagnostics: Diagnostics) -> None:
    """``guard_added_fast`` (always logged) and ``guard_added`` (with TORCH_DTRACE): {expr, user_stack}.
    Both name the same guard when both are logged, so it is kept once."""
    compile_id = record.compile_id
    if compile_id is None:
        return
    body = _fields(record, diagnostics, expr=str)
    if body is None:
        return
    frame = state.summary.frame(compile_id)
    if any(g.expr == body["expr"] for g in frame.shape_guards):
        return
    frame.shape_guards.append(ShapeGuard(expr=body["expr"], user_line=_user_line(record, state, diagnostics)))
