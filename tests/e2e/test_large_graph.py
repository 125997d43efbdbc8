"""A 24-layer transformer, forward and backward, compiled on CPU: thousands of FX nodes.

The report must stay usable and be written in bounded time: op-level drawings give way to the
kernel-level view, Graphviz layouts are capped, and very long code is shown without highlighting.
The time to write the report is printed by the CLI (`report written in X s`); it is not asserted.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..conftest import require_graphviz


def test_24_layer_transformer_report(large_report: Path) -> None:
    require_graphviz()
    run = json.loads((large_report / "lens.json").read_text())["run"]
    forward, backward = run["graphs"]
    assert (forward["kind"], backward["kind"]) == ("forward", "backward")
    assert len(forward["fx_graphs"][0]["nodes"]) > 1000 and len(backward["fx_graphs"][0]["nodes"]) > 2000
    for graph in run["graphs"]:
        page = (large_report / "graphs" / f"{graph['id']}.html").read_text()
        assert page.count('<div class="drawing"><svg') == 1, "the kernel-level view is drawn"
        assert "op-level drawings stop at" in page
        assert all(f"<title>launch{launch['position']}</title>" in page for launch in graph["launches"])
