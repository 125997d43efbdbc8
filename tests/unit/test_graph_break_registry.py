"""Graph breaks with torch's graph-break registry: the code, explanation and hints of each, and the breaks
deduplicated by where they happened, on a real capture (torch 2.13, CPU: ``.item()`` breaks the graph at
one line, in two compiles) and on messages in the formats torch writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from inductor_lens.analysis import analyze
from inductor_lens.parse import parse_debug_folder
from inductor_lens.parse.graph_break_registry import registry_entry
from inductor_lens.report import render_report
from inductor_lens.report.compile_view import break_sites

CAPTURE = "cpu-torch2.13-graphbreak-recompile"
ITEM_HINT = (
    "Set `torch._dynamo.config.capture_scalar_outputs = True` or `export TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS=1` "
    "to include these operations in the captured graph."
)


def test_each_break_carries_its_registry_code_explanation_and_hints(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked(CAPTURE), strict=True)
    assert [(b.compile_id, b.code) for b in run.graph_breaks] == [("0/0_1", "GB0124"), ("0/1_1", "GB0124")]
    for b in run.graph_breaks:
        assert b.explanation == "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False."
        assert b.hints == (ITEM_HINT,)


def test_breaks_are_deduplicated_by_place_with_a_count(unpacked: Callable[[str], Path]) -> None:
    run = parse_debug_folder(unpacked(CAPTURE), strict=True)
    (site,) = break_sites(run.graph_breaks)
    assert site.count == 2 and site.compile_ids == ("0/0_1", "0/1_1")
    assert site.first.location is not None and site.first.location.label.endswith("graphbreak_recompile.py:17")
    page = render_report(run, analyze(run), draw=False)["compile.html"]
    table = page.split('<table class="data break-sites">', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr>") == 2 and "<b>GB0124</b>" in table and ">2</td>" in table
    assert "capture_scalar_outputs = True" in table


def test_a_message_without_a_link_is_found_by_its_type_and_a_multi_line_field_is_joined() -> None:
    message = (
        "Graph Break Reason: Encountered graph break when attempting to trace CALL:\n\n"
        "Unsupported Tensor.item() call with capture_scalar_outputs=False\n"
        "  Explanation: Dynamo does not support tracing\n      `Tensor.item()` here.\n"
        "  Hint: first hint\n  Hint: second hint,\n      continued\n\n"
        "  Developer debug context: call_method TensorVariable() item () {}\n"
    )
    entry = registry_entry(message)
    assert entry is not None and entry.code == "GB0124"  # from the installed torch's registry
    assert entry.explanation == "Dynamo does not support tracing `Tensor.item()` here."
    assert entry.hints == ("first hint", "second hint, continued")
    assert registry_entry("Graph break: something torch never registered") is None
