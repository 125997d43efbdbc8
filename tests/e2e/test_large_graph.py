"""A 24-layer transformer, forward and backward, compiled on CPU: thousands of FX nodes.

The report must stay usable and be written in bounded time: every graph is drawn, large ones in parts
(each part on a page of its own, an overview on the graph page), long texts on pages of their own, and no
page grows past a few MB. The time to write the report is printed by the CLI (`report written in X s`); it is
not asserted (benchmarks/report_speed.py measures it).
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
        folder = large_report / "graphs" / graph["id"]
        kernel_parts = sorted(folder.glob("drawing-kernels-*.html"))
        fx_parts = sorted(folder.glob("drawing-fx-*.html"))
        assert len(kernel_parts) >= 3 and len(fx_parts) >= 8, graph["id"]
        # the graph page: the overview drawing, linking down to every part
        assert page.count('<div class="drawing"><svg') == 1
        for part in kernel_parts:
            assert f'{graph["id"]}/{part.name}' in page
        # every part drawn, every launch drawn in a part
        parts = [p.read_text() for p in kernel_parts]
        assert all('<div class="drawing"><svg' in p for p in parts)
        assert all('<div class="drawing"><svg' in p.read_text() for p in fx_parts)
        drawn = "".join(parts)
        assert all(f"<title>launch{launch['position']}</title>" in drawn for launch in graph["launches"])
        for name in ("fx_graph_transformed", "ir_post_fusion", "output_code"):
            assert (folder / f"{name}.html").is_file(), name
    assert max(p.stat().st_size for p in large_report.rglob("*.html")) < 5_000_000
