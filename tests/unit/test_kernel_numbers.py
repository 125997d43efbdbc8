"""Numbers a reader can trust on the kernel and graph pages (issue 31, point 5), and one unit system for
memory (point 4), on the real ResNet-50 --train capture from an H100 (tests/fixtures/h100-resnet50-train).

What the pages say is checked against the capture's raw files, read here without inductor_lens: each
kernel's source and Inductor's ``kernel_num_gb`` in the graph's output_code.py (with the tensors of its
``get_args()``), its device durations in profile_trace.json, its isolated time and the copy bandwidth in
capture.json.
"""

from __future__ import annotations

import html
import json
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from inductor_lens import __version__
from inductor_lens.analysis import analyze
from inductor_lens.bench.roofline import flag_tone
from inductor_lens.capture import find_capture_dir
from inductor_lens.pipeline import build_run
from inductor_lens.records import CompileRun, GraphRecord
from inductor_lens.report.env import environment
from inductor_lens.report.graph_view import graph_page
from inductor_lens.report.highlight import stylesheet
from inductor_lens.report.kernel_view import kernel_pages
from inductor_lens.units import format_bytes

pytestmark = pytest.mark.unit

CASE = "h100-resnet50-train"
FORWARD = "model__0_forward_1.0"
MAX_POOL = "triton_poi_fused_max_pool2d_with_indices_19"  # 9 window loads of a 4x larger input
ADD_RELU_L2 = "triton_poi_fused__native_batch_norm_legit_no_training_add_relu_55"  # fast in the step only
# fast with L2 cleared too
ADD_RELU_ROOF = "triton_poi_fused__native_batch_norm_legit_no_training_add_relu_22"
_ITEMSIZE = {"float32": 4, "int8": 1, "int64": 8, "bfloat16": 2, "float16": 2}
_CARD = re.compile(
    r'<div class="card ?([a-z]*)">\s*<dt>(.*?)</dt>\s*<dd>(.*?)</dd>'
    r'(?:\s*<dd class="detail">(.*?)</dd>)?',
    re.S,
)
_BINARY_UNITS = re.compile(r"\d ?[KMGT]iB\b")
Unpacked = Callable[[str], Path]


@dataclass(frozen=True)
class RawKernel:
    """One kernel as the capture's files give it."""

    inductor_bytes: int  # kernel_num_gb of its inductor_meta
    passed_bytes: int  # the tensors of its get_args(), each once (one updated in place twice)
    in_context_us: float  # median device duration over the profiled steps (launched once per step)
    isolated_us: float


Raw = Callable[[str], RawKernel]


@pytest.fixture(scope="module")
def resnet(unpacked: Unpacked) -> CompileRun:
    root = unpacked(CASE)
    return build_run(root, find_capture_dir(root), strict=True)


@pytest.fixture(scope="module")
def raw(unpacked: Unpacked) -> Raw:
    root = unpacked(CASE)
    (code_file,) = root.glob(f"torch_compile_debug/run_*/torchinductor/{FORWARD}/output_code.py")
    code = code_file.read_text(encoding="utf-8")
    trace = json.loads((root / "profile_trace.json").read_text(encoding="utf-8"))
    bench = json.loads((root / "capture.json").read_text(encoding="utf-8"))["bench"]

    def get(name: str) -> RawKernel:
        start = code.index(f"{name} = async_compile.triton(")
        block = code[start : code.index("''', device_str=", start)]
        num_gb = float(re.search(r"'kernel_num_gb': ([\d.e-]+)", block).group(1))  # type: ignore[union-attr]
        params = re.search(rf"def {name}\((.*?)\)", block).group(1).split(", ")  # type: ignore[union-attr]
        tensors = re.findall(r"rand_strided\(\(([\d, ]+)\), \([\d, ]+\), .*?dtype=torch\.(\w+)\)", block)
        # get_args() passes the tensors in the order of the parameters; one updated in place is read and
        # written
        passed = sum(
            math.prod(int(d) for d in shape.split(",") if d.strip())
            * _ITEMSIZE[dtype]
            * (2 if param.startswith("in_out") else 1)
            for param, (shape, dtype) in zip(params, tensors, strict=False)
        )
        events = trace["traceEvents"]
        durations = [e["dur"] for e in events if e.get("name") == name and e.get("cat") == "kernel"]
        assert len(durations) == bench["profile"]["steps"]  # once per profiled step
        (entry,) = bench["isolated"][name]
        return RawKernel(
            inductor_bytes=round(num_gb * 1e9),
            passed_bytes=passed,
            in_context_us=statistics.median(durations),
            isolated_us=entry["isolated"]["median_ms"] * 1e3,
        )

    return get


def _copy_gb_per_s(unpacked: Unpacked) -> float:
    capture = json.loads((unpacked(CASE) / "capture.json").read_text(encoding="utf-8"))
    return float(capture["bench"]["ceilings"]["copy_gb_per_s"])


def _graph(run: CompileRun, graph_id: str) -> GraphRecord:
    return next(g for g in run.graphs if g.id == graph_id)


def _render(template: str, root: str, run: CompileRun, page: object) -> str:
    values = {"run": run, "version": __version__, "pygments_css": stylesheet(), "root": root, "page": page}
    return environment().get_template(template).render(**values)


def _kernel_html(run: CompileRun, name: str) -> str:
    (page,) = [p for p in kernel_pages(run, _graph(run, FORWARD), analyze(run)) if p.kernel.name == name]
    return _render("kernel.html.j2", "../../", run, page)


def _text(fragment: str | None) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", fragment or ""))).strip()


def _cards(page: str) -> dict[str, list[tuple[str, str, str]]]:
    """label -> [(tone, value, detail)] of the page's summary cards."""
    found: dict[str, list[tuple[str, str, str]]] = {}
    for tone, label, value, detail in _CARD.findall(page):
        found.setdefault(_text(label), []).append((tone, _text(value), _text(detail)))
    return found


def test_max_pool_byte_count_is_said_to_overestimate_not_alarmed(
    resnet: CompileRun, raw: Raw, unpacked: Unpacked
) -> None:
    """Inductor counts each of the nine window loads of the max-pool's 4x larger input: 1.95x the bytes of the
    tensors passed, 157% of the copy bandwidth with L2 cleared. The page says the count overestimates, gives
    the rate at the tensors' bytes, and raises no alarm."""
    kernel = raw(MAX_POOL)
    assert kernel.inductor_bytes > 1.9 * kernel.passed_bytes
    copy = _copy_gb_per_s(unpacked)
    assert kernel.inductor_bytes / kernel.isolated_us / 1e3 > copy  # over the copy bandwidth, L2 cleared
    cards = _cards(_kernel_html(resnet, MAX_POOL))

    ((tone, flag, detail),) = cards["Flag"]
    assert flag == "the byte count overestimates (repeated loads: each window's loads are counted)"
    assert tone == ""  # neutral, neither bad nor warn
    rate = kernel.passed_bytes / kernel.isolated_us / 1e3
    assert detail == (
        f"at the {kernel.passed_bytes / 1e6:.1f} MB of the tensors passed: {rate:,.0f} GB/s isolated, "
        f"{100 * rate / copy:.0f}% of the memory-bound roofline"
    )
    ((_, moved, why),) = cards["Bytes moved"]
    assert moved == f"{kernel.inductor_bytes:,} B ({kernel.inductor_bytes / 1e6:.1f} MB)"
    assert f"{kernel.inductor_bytes / kernel.passed_bytes:.2f}x the {kernel.passed_bytes:,} bytes" in why
    assert all(tone not in ("bad", "warn") for entries in cards.values() for tone, _, _ in entries)


def test_times_say_per_step_and_per_launch(resnet: CompileRun, raw: Raw) -> None:
    kernel = raw(MAX_POOL)
    cards = _cards(_kernel_html(resnet, MAX_POOL))
    ((_, in_context, _),) = cards["In context, per step"]
    ((_, isolated, detail),) = cards["Isolated, per launch"]
    assert in_context == f"{kernel.in_context_us:,.1f} µs per step"
    assert isolated == f"{kernel.isolated_us:,.1f} µs per launch"
    assert "L2 cleared" in detail
    ((_, _, achieved),) = cards["Achieved (isolated, one launch)"]
    assert achieved.startswith(f"{format_bytes(kernel.inductor_bytes)} in {kernel.isolated_us:,.1f} µs; ")


def test_fast_in_the_step_only_is_explained_by_l2_and_compared_per_launch(
    resnet: CompileRun, raw: Raw, unpacked: Unpacked
) -> None:
    """A batch-norm + add + ReLU over the copy bandwidth in the step but at 81% with L2 cleared: its inputs
    come from L2 in the step, and the in-context flag says what it compares, with both times."""
    kernel = raw(ADD_RELU_L2)
    assert kernel.inductor_bytes == kernel.passed_bytes  # the count is right
    copy = _copy_gb_per_s(unpacked)
    in_step = kernel.inductor_bytes / kernel.in_context_us / 1e3 / copy
    cleared = kernel.inductor_bytes / kernel.isolated_us / 1e3 / copy
    assert in_step > 1 > cleared
    flags = _cards(_kernel_html(resnet, ADD_RELU_L2))["Flag"]
    less = 100 * (1 - kernel.in_context_us / kernel.isolated_us)
    assert [(tone, flag) for tone, flag, _ in flags] == [
        ("", "above the copy bandwidth in the step: inputs served from L2 "
             f"(isolated, L2 cleared: {100 * cleared:.0f}%)"),
        ("", f"one launch takes {less:.0f}% less time in the step than isolated (L2 cleared): "
             f"{kernel.in_context_us:,.1f} vs {kernel.isolated_us:,.1f} µs"),
    ]  # fmt: skip


def test_over_the_copy_bandwidth_with_l2_cleared_and_an_exact_count_is_at_the_roof(
    resnet: CompileRun, raw: Raw, unpacked: Unpacked
) -> None:
    kernel = raw(ADD_RELU_ROOF)
    assert kernel.inductor_bytes == kernel.passed_bytes
    assert kernel.inductor_bytes / kernel.isolated_us / 1e3 > _copy_gb_per_s(unpacked)
    flags = _cards(_kernel_html(resnet, ADD_RELU_ROOF))["Flag"]
    assert [(tone, flag) for tone, flag, _ in flags] == [
        ("", "at the memory roof: faster than the measured copy even with L2 cleared")
    ]


def test_no_flag_over_the_copy_bandwidth_is_an_alarm(resnet: CompileRun) -> None:
    """Of every timed kernel of both graphs, a flag is an alarm only where the kernel is far under the
    roofline ("bad") or slower in the step than alone ("warn")."""
    flags = [f for g in resnet.graphs for k in g.kernels if k.timing for f in k.timing.flags]
    assert len(flags) > 50
    for flag in flags:
        far_under = re.match(r"at \d+% of the roofline", flag)
        expected = "bad" if far_under else "warn" if "more time" in flag else ""
        assert flag_tone(flag) == expected, flag
    assert not any("copy bandwidth" in f and flag_tone(f) for f in flags)


def test_graph_page_labels_launch_times_per_step(resnet: CompileRun) -> None:
    graph = _graph(resnet, FORWARD)
    page = _render("graph.html.j2", "../", resnet, graph_page(resnet, graph, analyze(resnet)))
    table = page[page.index('id="launch-table"') :]
    headers = [_text(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table[: table.index("</thead>")])]
    assert headers[2:4] == ["Time per step", "Share of step"]
    first = next(launch for launch in graph.launches if launch.timing is not None)
    row = table[table.index(f'id="launch-{first.position}"') :]
    assert f"{first.timing.median_us:,.1f} µs" in row[: row.index("</tr>")]  # type: ignore[union-attr]


def test_memory_is_in_decimal_units() -> None:
    assert [format_bytes(v) for v in (None, 0, 999, 999.6, 1_000, 1_499, 999_949, 999_960, 263_323_648)] == [
        "—", "0 B", "999 B", "1.0 KB", "1.0 KB", "1.5 KB", "999.9 KB", "1.0 MB", "263.3 MB",
    ]  # fmt: skip
    assert [format_bytes(v) for v in (2**31, 999_960_000_000, 5e15, -2_048)] == [
        "2.1 GB", "1.0 TB", "5,000.0 TB", "-2.0 KB",
    ]  # fmt: skip


def test_kernel_and_graph_pages_show_no_binary_units(resnet: CompileRun) -> None:
    graph = _graph(resnet, FORWARD)
    pages = [_render("graph.html.j2", "../", resnet, graph_page(resnet, graph, analyze(resnet)))]
    pages += [_render("kernel.html.j2", "../../", resnet, p) for p in kernel_pages(resnet, graph, analyze(resnet))[:40]]
    assert all(_BINARY_UNITS.search(_text(page)) is None for page in pages)
