"""Records, ranks (normalisation): what differs between the processes of one healthy job without the compile
being different, written as placeholders or left out before the ranks are compared (``NORMALISED`` says it in
words): device indices, object addresses and ids, the rank's own number and seeds in guards, the paths of kernel
files; and the graphs of one compile id paired across two ranks, by their code first, then by their order.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from .ranks import RankGraph

# What differs between processes of one job without the compile being different (NORMALISED says it in words).
# ``___check_obj_id(G['dist'], 140607858087696)``, and the ids Dynamo names globals after: ``G['_140003668582832_c14']``,
# ``__dtensor_spec_140003668582832``, ``___check_opaque_guard_fn_139750064709264_c0`` (FSDP2, tensor parallel)
_OBJECT_ID = re.compile(r"(?:\b|(?<=_))\d{6,}(?=\b|_)")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")  # ``<code object inner at 0x7f74...>``
_DEVICE_INDEX = re.compile(
    r"\b(?P<name>(?:cuda|xpu|hpu|npu|mps):|(?:device|device_index)=|type='\w+', index=|"
    r"(?:get_raw_stream|_DeviceGuard|set_device|device)\(|stream(?=\d+\b))\d+"
)  # ``stream1 = get_raw_stream(1)``: Inductor names a GPU's stream variable after its index (torch 2.11, H100)
_RANK_VALUE = re.compile(r"(?P<source>\w*rank\w*['\"]?\]?)\s*(?P<op>==|!=)\s*(?P<value>\d+)\b", re.I)
_SEED_VALUE = re.compile(r"(?P<source>\w*seed\w*['\"]?\]?)\s*(?P<op>==|!=)\s*(?P<value>\d+)\b", re.I)
_GUARD_COMMENT = re.compile(r"\s+#\s.*$")  # the user line the guard came from, after the guard
_KERNEL_PATH = re.compile(r"^\s*# kernel path: .*$", re.MULTILINE)
_QUOTED_PATH = re.compile(r"(['\"])/[^'\"\n]*\1")

NORMALISED = (
    "device indices (cuda:1, device=1, index=1, stream1 = get_raw_stream(1)) read as the rank's own device",
    "object addresses (0x7f74...) and object ids in guards, also in the names Dynamo gives globals "
    "(G['_140003668582832_c14']), left out",
    "rank numbers and seeds in guards (G['rank'] == 1, L['self'].seed == 1234) read as <rank>, <seed>: a "
    "branch on the rank shows as other code",
    "the paths of kernel files in output code left out (each process has its own cache folders)",
    "graphs of one compile id (DDP's optimizer splits a frame into several) paired by their code first, "
    "then by their order within the compile id",
)


def code_hash(output_code: str) -> str:
    """The output code's hash, blind to what differs between processes compiling the same graph: the paths of
    their kernel files in their own caches, their device index, object addresses."""
    text = _QUOTED_PATH.sub(r"\1<path>\1", _KERNEL_PATH.sub("", output_code))
    return hashlib.sha1(_per_process(text).strip().encode()).hexdigest()[:12]


def _per_process(text: str) -> str:
    """``text`` with its object addresses and device indices written as placeholders."""
    if "0x" in text:
        text = _ADDRESS.sub("0x<addr>", text)
    return _DEVICE_INDEX.sub(lambda m: m["name"] + "<i>", text)


def normalized_guards(text: str) -> tuple[str, ...]:
    """A frame's guards, one per line, without the tree drawing and what differs in every process: object ids
    and addresses, the device index, the rank's number and seeds (a branch on the rank shows as other code)."""
    lines = []
    for line in text.splitlines():
        guard = _GUARD_COMMENT.sub("", line.lstrip("| +-")).strip()
        if guard and not guard.startswith(
            ("GuardManager:", "RootGuardManager", "TREE_GUARD_MANAGER", "Guard latency")
        ):
            guard = _per_process(guard)
            lowered = guard.lower()  # the patterns below are slow: tried only where they can match
            if "rank" in lowered:
                guard = _RANK_VALUE.sub(lambda m: f"{m['source']} {m['op']} <rank>", guard)
            if "seed" in lowered:
                guard = _SEED_VALUE.sub(lambda m: f"{m['source']} {m['op']} <seed>", guard)
            lines.append(_OBJECT_ID.sub("<id>", guard))
    return tuple(lines)


def paired(
    mine: Sequence[RankGraph], theirs: Sequence[RankGraph]
) -> list[tuple[RankGraph | None, RankGraph | None]]:
    """The graphs of two ranks paired within each compile id: equal code first (the order DDP's split graphs were
    compiled in may differ), then the same kind in order, then the rest in order (a cache hit's trace may not
    say a graph's kind); a graph without a partner is paired with None."""
    pairs: list[tuple[RankGraph | None, RankGraph | None]] = []
    for compile_id in dict.fromkeys([compile_of(g) for g in mine] + [compile_of(g) for g in theirs]):
        left = [g for g in mine if compile_of(g) == compile_id]
        right = [g for g in theirs if compile_of(g) == compile_id]
        for match in (
            lambda a, b: a.key == b.key and a.code_hash == b.code_hash,
            lambda a, b: a.code_hash == b.code_hash,
            lambda a, b: a.key == b.key,
            lambda a, b: True,
        ):
            for graph in list(left):
                partner = next((g for g in right if match(graph, g)), None)
                if partner is not None:
                    left.remove(graph)
                    right.remove(partner)
                    pairs.append((graph, partner))
        pairs.extend([(g, None) for g in left] + [(None, g) for g in right])
    return pairs


def compile_of(graph: RankGraph) -> str:
    return graph.key.split(" ")[0]
