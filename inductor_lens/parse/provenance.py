"""Parse stage: Inductor's provenance tracking maps -> Provenance.

``inductor_provenance_tracking_node_mappings.json`` (in forward/inference graph folders; the
TORCH_TRACE log also carries it for backward graphs) maps pre-grad FX nodes to post-grad nodes and
kernel debug handles (``triton_poi_fused_gelu_1:2``) to the post-grad nodes each kernel computes.
``inductor_provenance_tracking_kernel_stack_traces`` (trace only) maps the same handles to the user
source lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..records import Provenance
from . import compat
from .diagnostics import Diagnostics


def load_json_object(text: str, where: str, diagnostics: Diagnostics) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        diagnostics.warn(where, f"not valid JSON ({exc.msg} at line {exc.lineno})")
        return None
    except (ValueError, RecursionError) as exc:  # an integer too long, nesting too deep
        diagnostics.warn(where, f"not valid JSON ({exc})")
        return None
    if not isinstance(data, dict):
        diagnostics.warn(where, f"expected a JSON object, found {type(data).__name__}")
        return None
    return data


def build_provenance(
    mappings: Mapping[str, Any] | None,
    stack_traces: Mapping[str, Any] | None,
    source: str,
    where: str,
    diagnostics: Diagnostics,
) -> Provenance:
    mappings = mappings or {}
    for key in mappings:
        if key not in compat.PROVENANCE_KNOWN_KEYS:
            diagnostics.warn(where, f"unknown provenance map {key!r}")
    kernel_to_post: dict[str, tuple[str, ...]] = {}
    for key in compat.PROVENANCE_KERNEL_TO_POST_KEYS:
        kernel_to_post.update(_string_lists(mappings.get(key)))
    return Provenance(
        source=source,
        pre_to_post=_string_lists(mappings.get("preToPost")),
        post_to_pre=_string_lists(mappings.get("postToPre")),
        kernel_to_post=kernel_to_post,
        kernel_stack_traces=_string_lists(stack_traces),
    )


def _string_lists(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        return {}
    return {
        str(key): tuple(str(v) for v in items) if isinstance(items, list) else (str(items),)
        for key, items in value.items()
    }
