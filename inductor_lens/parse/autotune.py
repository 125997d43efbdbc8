"""Parse stage: the AUTOTUNE tables Inductor prints while choosing between implementations.

Under max-autotune, every matmul-like op is benchmarked with each candidate: the library (extern)
call and Triton template configs. The process log holds, per op::

    Autotune Choices Stats:
    {"num_choices": 18, "num_triton_choices": 16, "best_kernel": "addmm", ...}
    AUTOTUNE addmm(256x4096, 256x1024, 1024x4096)
    strides: [0, 1], [1024, 1], [1, 1024]
    dtypes: torch.float32, torch.float32, torch.float32
      addmm 0.0749 ms 100.0%
      triton_mm_9 0.1364 ms 54.9% ACC_TYPE='tl.float32', ..., BLOCK_M=64, num_stages=3, num_warps=4
    SingleProcess AUTOTUNE benchmarking takes 0.6446 seconds and 5.2533 seconds precompiling for 18 choices

Tables belong to the graph whose ``debug trace:`` line comes next in the log (Inductor logs it when
the graph's compile ends). Choices that fail (a Triton config out of shared memory) are logged before the
table of their op, either at precompilation (``Exception ... for benchmark choice TritonTemplateCaller(...)``)
or at benchmarking (``Runtime error during autotuning:``, the error, ``Ignoring this choice.``): they go to
the next table. ``link_tables`` then finds what the winner became: a Triton template
kernel with the winner's config, or the extern call of that op.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import PurePath
from typing import Any

from ..records import AutotuneChoice, AutotuneFailure, AutotuneTable, ChoiceKind, GraphRecord
from . import compat

_GLOG_PREFIX = re.compile(r"^[VIWEC]\d{4} [\d:.]+\s+\d+ [^\]]*\]\s?(?:\[[^\]]*\]\s)?")
_HEADER = re.compile(r"^AUTOTUNE (?P<op>[\w.]+)\((?P<shapes>.*)\)\s*$")
_NUMBER = r"\d+(?:\.\d+)?"  # what float() reads: "0.0749", never "0.07.49"
_CHOICE = re.compile(
    rf"^\s+(?P<name>\S+) (?P<ms>{_NUMBER}|inf|nan) ms (?P<percent>{_NUMBER}|inf|nan)%\s*(?P<config>.*)$"
)
_SUMMARY = re.compile(
    rf"AUTOTUNE benchmarking takes (?P<bench>{_NUMBER}) seconds and (?P<pre>{_NUMBER}) seconds precompiling"
    r"(?: for (?P<n>\d+) choices)?"
)
_CONFIG_ITEM = re.compile(r"(\w+)=('[^']*'|\"[^\"]*\"|[^,)]+)")
_PRECOMPILE_FAILURE = re.compile(r"^Exception (?P<message>.+?) for benchmark choice (?P<choice>.*)$")
_BENCHMARK_FAILURE = "Runtime error during autotuning:"
_SHARED_MEMORY = re.compile(r"OutOfMemoryError: out of resource: .*?Required: (?P<need>\d+) Hardware limit: ?(?P<limit>\d+)")


def parse_autotune_tables(log_text: str) -> list[AutotuneTable]:
    """Every table in the log, each tagged with the graph folder name it belongs to (``graph_id``)."""
    tables: list[AutotuneTable] = []
    open_graph: list[int] = []  # indexes of tables not yet assigned to a graph
    stats: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    expect_stats = False
    failed: list[AutotuneFailure] = []  # failures logged since the last table: they belong to the next
    error: list[str] | None = None  # the lines of a benchmarking error being read
    for raw in log_text.splitlines():
        line = _GLOG_PREFIX.sub("", raw.rstrip())
        if error is not None:
            if line.strip() == "Ignoring this choice.":
                failed.append(_failure(" ".join(error), "benchmark", ""))
                error = None
            elif line.strip():
                error.append(line.strip())
            continue
        if line.startswith(_BENCHMARK_FAILURE):
            error = [line.removeprefix(_BENCHMARK_FAILURE).strip()] if line.strip() != _BENCHMARK_FAILURE else []
            continue
        if match := _PRECOMPILE_FAILURE.match(line):
            failed.append(_failure(match["message"], "precompile", match["choice"]))
            continue
        if expect_stats:
            expect_stats = False
            try:
                stats = json.loads(line)
            except (ValueError, RecursionError):
                stats = {}
            if not isinstance(stats, dict):
                stats = {}
            continue
        if line.startswith("Autotune Choices Stats:"):
            expect_stats = True
            continue
        if match := _HEADER.match(line):
            current = {
                "op": match["op"], "shapes": _shapes(match["shapes"]), "choices": [], "stats": stats, "failed": failed
            }  # fmt: skip
            stats, failed = {}, []
            tables.append(_table(current))
            open_graph.append(len(tables) - 1)
            continue
        if current is not None:
            if line.startswith("strides:"):
                current["strides"] = line.partition(":")[2].strip()
            elif line.startswith("dtypes:"):
                current["dtypes"] = line.partition(":")[2].strip()
            elif match := _CHOICE.match(line):
                current["choices"].append(_choice(match))
            elif match := _SUMMARY.search(line):
                current["bench"], current["pre"] = float(match["bench"]), float(match["pre"])
                if match["n"]:
                    current["n"] = int(match["n"])
                tables[-1] = _table(current)
                current = None
                continue
            else:
                current = None
            if current is not None:
                tables[-1] = _table(current)
        if "debug trace:" in raw and (match := compat.DEBUG_TRACE_LINE.search(raw)):
            folder = PurePath(match["path"].strip()).name
            for index in open_graph:
                tables[index] = replace(tables[index], graph_id=folder)
            open_graph = []
    if failed and tables:  # failures after the last table: most likely of its op
        tables[-1] = replace(tables[-1], failed=tables[-1].failed + tuple(failed))
    return tables


def _failure(message: str, stage: str, choice: str) -> AutotuneFailure:
    message = message.strip().rstrip(".").strip()
    if match := _SHARED_MEMORY.search(message):
        reason = f"out of shared memory: needs {int(match['need']):,} bytes, the limit is {int(match['limit']):,}"
    else:
        reason = message.removeprefix("No valid triton configs. ")[:200]
    config = {key: _value(value.strip()) for key, value in _CONFIG_ITEM.findall(choice)}
    return AutotuneFailure(
        reason=reason,
        message=message,
        stage="benchmark" if stage == "benchmark" else "precompile",
        config=config,
    )


def _shapes(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _choice(match: re.Match[str]) -> AutotuneChoice:
    name = match["name"]
    config = {key: _value(value.strip()) for key, value in _CONFIG_ITEM.findall(match["config"])}
    kind: ChoiceKind = "triton" if name.startswith("triton_") else "other" if name.startswith("cpp_") else "extern"
    return AutotuneChoice(
        name=name, ms=float(match["ms"]), percent=float(match["percent"]), kind=kind, config=config
    )


def _value(text: str) -> Any:
    if text[:1] in "'\"" and text[-1:] == text[:1]:
        return text[1:-1]
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        return text


def _table(current: dict[str, Any]) -> AutotuneTable:
    stats = current["stats"]
    return AutotuneTable(
        op=current["op"],
        shapes=current["shapes"],
        choices=tuple(current["choices"]),
        strides=current.get("strides", ""),
        dtypes=current.get("dtypes", ""),
        num_choices=current.get("n") or stats.get("num_choices"),
        benchmark_s=current.get("bench"),
        precompile_s=current.get("pre"),
        failed=tuple(current.get("failed", ())),
    )


def link_tables(tables: list[AutotuneTable], graphs: tuple[GraphRecord, ...]) -> tuple[AutotuneTable, ...]:
    """Tag each table with its graph's id and with the kernel or launch its winner became."""
    by_folder = {PurePath(g.folder).name: g for g in graphs}
    claimed: set[tuple[str, str]] = set()
    linked = []
    for table in tables:
        graph = by_folder.get(table.graph_id or "")
        if graph is None:
            linked.append(replace(table, graph_id=None))
            continue
        table = replace(table, graph_id=graph.id)
        winner = table.winner
        if winner is not None and winner.kind == "triton":
            kernel = next(
                (
                    k
                    for k in _templates(graph)
                    if (graph.id, k.name) not in claimed and _same_config(k.launch_config, winner.config)
                ),
                None,
            )
            if kernel is not None:
                claimed.add((graph.id, kernel.name))
                table = replace(table, chosen_kernel=kernel.name)
        elif winner is not None:
            launch = next(
                (
                    launch
                    for launch in graph.launches
                    if launch.kind == "extern"
                    and (graph.id, f"launch{launch.position}") not in claimed
                    and _same_op(launch.aten_op or "", table.op, winner.name)
                ),
                None,
            )
            if launch is not None:
                claimed.add((graph.id, f"launch{launch.position}"))
                table = replace(table, chosen_launch=launch.position)
        linked.append(table)
    return tuple(linked)


def _templates(graph: GraphRecord) -> list:
    ordered = sorted(graph.kernels, key=lambda k: k.launches[0] if k.launches else 1 << 30)
    return [k for k in ordered if k.category == "template"]


def _same_config(launch_config: Any, choice_config: Any) -> bool:
    """A template kernel was built from a choice when its block sizes, warps and stages match."""
    args = launch_config.get("config_args") if isinstance(launch_config, dict) else None
    if not isinstance(args, dict) or not choice_config:
        return False
    keys = [k for k in choice_config if k in args]
    if not keys:
        return False
    same_args = all(str(args[k]) == str(choice_config[k]) for k in keys)
    same_launch = all(
        str(launch_config.get(k)) == str(choice_config[k])
        for k in ("num_warps", "num_stages")
        if k in choice_config
    )
    return same_args and same_launch


def _same_op(aten_op: str, table_op: str, winner: str) -> bool:
    """``aten.addmm`` ran the ``addmm`` table's extern winner (``addmm``, ``bias_addmm``, ``mm``...)."""
    base = aten_op.removeprefix("aten.").split(".")[0]
    return base in (table_op, winner) or winner.endswith(base) or table_op.endswith(base)
