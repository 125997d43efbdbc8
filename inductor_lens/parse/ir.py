"""Parse stage: ``ir_pre_fusion.txt`` / ``ir_post_fusion.txt`` -> scheduler nodes and fused groups.

The dump lists one block per scheduler node, headed at column 0::

    op0_op1_op3: FusedSchedulerNode(SchedulerNode,SchedulerNode,SchedulerNode)
    op0_op1_op3.writes = [MemoryDep('buf0', ...), ...]
    op0_op1_op3.snodes[0] =
    op0: SchedulerNode(ComputedBuffer)
    op0.writes = ...
    class op0_loop_body:
        ...

A block right after ``X.snodes[i] =`` is a member of the fused node X, not a node of its own. A graph
that only views its inputs (slices, transposes) has no scheduler nodes: Inductor writes empty dumps
(seen 2.13), which ``graph.py`` checks against the graph's launches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..records import IRDump, IRNode
from .diagnostics import Diagnostics

_HEADER = re.compile(r"^(?P<name>\w+): (?P<type>\w+)\((?P<detail>.*)\)\s*$")
_SNODE = re.compile(r"^(?P<owner>\w+)\.snodes\[\d+\]\s*=\s*$")
_ATTRIBUTE = re.compile(r"^(?P<name>\w+)\.(?P<attr>[\w.]+)\s*=\s?(?P<value>.*)$")
_LAYOUT = re.compile(r"^\w+_layout\s*=")
_LOOP_BODY = re.compile(r"^class \w+:\s*$")
_BUFFER = re.compile(
    r"(?:MemoryDep\('(?P<a>[^']+)'|StarDep\(name='(?P<b>[^']+)'|WeakDep\(name='(?P<c>[^']+)')"
)


@dataclass
class _Block:
    name: str
    node_type: str
    detail: str
    member_of: str | None
    attrs: dict[str, list[str]] = field(default_factory=dict)


def parse_ir(
    text: str, stage: Literal["pre_fusion", "post_fusion"], where: str, diagnostics: Diagnostics
) -> IRDump:
    blocks: list[_Block] = []
    pending_owner: str | None = None
    current_attr: list[str] | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if raw[0] in " \t":
            if current_attr is not None:
                current_attr.append(raw.strip())
            continue
        line = raw.rstrip()
        current_attr = None
        if match := _HEADER.match(line):
            blocks.append(_Block(match["name"], match["type"], match["detail"], pending_owner))
            pending_owner = None
        elif match := _SNODE.match(line):
            pending_owner = match["owner"]
        elif (match := _ATTRIBUTE.match(line)) and blocks:
            owner = next((b for b in reversed(blocks) if b.name == match["name"]), None)
            if owner is None:
                diagnostics.warn(where, f"attribute of an unknown node: {line[:80]}")
                continue
            current_attr = owner.attrs.setdefault(match["attr"], [])
            current_attr.append(match["value"])
        elif _LAYOUT.match(line) or _LOOP_BODY.match(line) or line in ("]", ")", "}"):
            continue
        else:
            diagnostics.warn(where, f"unrecognised IR line: {line[:80]}")
    members: dict[str, list[str]] = {}
    for block in blocks:
        if block.member_of is not None:
            members.setdefault(block.member_of, []).append(block.name)
    by_name = {b.name: b for b in blocks}
    nodes = tuple(
        _node(b, [by_name[m] for m in members.get(b.name, ()) if m in by_name])
        for b in blocks
        if b.member_of is None
    )
    if not nodes and text.strip():
        diagnostics.warn(where, "no scheduler nodes found")
    return IRDump(stage=stage, nodes=nodes, text=text)


def _attr(block: _Block, name: str) -> str | None:
    return " ".join(block.attrs.get(name, [])).strip() or None


def _node(block: _Block, members: list[_Block]) -> IRNode:
    def buffers(*attrs: str) -> tuple[str, ...]:
        text = " ".join(" ".join(block.attrs.get(a, [])) for a in attrs)
        return tuple(dict.fromkeys(m["a"] or m["b"] or m["c"] for m in _BUFFER.finditer(text)))

    kernel = _attr(block, "node.kernel")
    # A fused node has no device of its own; its members do.
    device = next((d for d in (_attr(b, "group.device") for b in [block, *members]) if d), None)
    return IRNode(
        name=block.name,
        node_type=block.node_type,
        detail=block.detail,
        members=tuple(m.name for m in members) or (block.name,),
        writes=buffers("writes"),
        reads=buffers("unmet_dependencies", "met_dependencies"),
        extern_kernel=None if kernel == "None" else kernel,
        device=device,
    )
