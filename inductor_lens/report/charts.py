"""Report stage: the timing charts, as small inline SVG written here (no plotting library, no script).

- ``roofline_chart``: kernels that do counted FLOPs (matmuls), at their arithmetic intensity and
  achieved FLOP/s, under the roof min(peak FLOP/s, peak bandwidth x intensity) of this device;
- ``bandwidth_chart``: every kernel with counted bytes, at its achieved GB/s against the measured copy
  bandwidth (pointwise and reduction kernels have no counted FLOPs, so this is their roofline);
- ``time_bar``: one profiled step, one segment per launch, in launch order.
Points and segments link to their kernel pages and carry a tooltip with the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from markupsafe import Markup, escape

from ..records import DeviceCeilings, Roofline

WIDTH, HEIGHT = 640, 320
# Stronger than the graph drawings' pastels: these mark small dots and thin bar segments.
TIME_COLOURS = {
    "pointwise": "#3b82f6",
    "reduction": "#eab308",
    "persistent reduction": "#f97316",
    "template": "#8b5cf6",
    "foreach": "#14b8a6",
    "user": "#ec4899",
    "other": "#94a3b8",
    "extern": "#475569",
    "custom op": "#be123c",
}
RIGHT, TOP, BOTTOM = 16, 16, 44
# The left margin holds the y axis's title (rotated, centred at x=14) and its tick labels, drawn in the
# 10 px monospace font of ``svg.chart .tick`` (lens.css): 0.6 em a character, a little more for safety.
Y_TITLE_WIDTH, TICK_CHAR_WIDTH, TICK_GAP = 24, 6.4, 4


def _left_margin(tick_labels: list[str]) -> int:
    """Room for the y axis's title and its widest tick label."""
    widest = max((len(label) for label in tick_labels), default=0)
    return Y_TITLE_WIDTH + math.ceil(widest * TICK_CHAR_WIDTH) + TICK_GAP


@dataclass(frozen=True)
class ChartPoint:
    label: str
    url: str
    category: str
    roofline: Roofline
    share: float  # of the step's time, sizes the dot


def _scale(low: float, high: float, size: float, offset: float, log: bool = True) -> Callable[[float], float]:
    if log:
        low, high = math.log10(low), math.log10(high)

    def to(value: float) -> float:
        value = math.log10(value) if log else value
        return offset + (value - low) / (high - low) * size

    return to


def _decades(low: float, high: float) -> list[float]:
    return [10.0**e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]


def _label(value: float, unit: str) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:g} {prefix}{unit}"
    return f"{value:g} {unit}"


def _dot(x: float, y: float, point: ChartPoint, tooltip: str) -> str:
    radius = 3.5 + 9 * math.sqrt(max(point.share, 0.0))
    colour = TIME_COLOURS.get(point.category, TIME_COLOURS["other"])
    return (
        f'<a href="{escape(point.url)}"><circle cx="{x:.1f}" cy="{y:.1f}" r="{radius:.1f}" fill="{colour}" '
        f'stroke="#334155" stroke-width="1"><title>{escape(tooltip)}</title></circle></a>'
    )


def _decade_columns(
    sx: Callable[[float], float], low: float, high: float, label: Callable[[float], str]
) -> list[str]:
    """A vertical grid line and a tick label at every power of ten of a logarithmic x axis."""
    bottom = HEIGHT - BOTTOM
    parts = []
    for value in _decades(low, high):
        if low <= value <= high:
            parts.append(
                f'<line x1="{sx(value):.1f}" x2="{sx(value):.1f}" y1="{TOP}" y2="{bottom}" class="grid"/>'
            )
            parts.append(
                f'<text x="{sx(value):.1f}" y="{bottom + 14}" text-anchor="middle" class="tick">{escape(label(value))}</text>'
            )
    return parts


def _tick_rows(
    sy: Callable[[float], float], ticks: list[tuple[float, str]], left: int, plot_w: int
) -> list[str]:
    """A horizontal grid line and a tick label at each value of the y axis."""
    parts = []
    for value, label in ticks:
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(value):.1f}" y2="{sy(value):.1f}" class="grid"/>'
        )
        parts.append(
            f'<text x="{left - TICK_GAP}" y="{sy(value) + 3:.1f}" text-anchor="end" class="tick">{escape(label)}</text>'
        )
    return parts


def _frame(title_x: str, title_y: str, left: int) -> list[str]:
    plot_w, plot_h = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" class="chart" role="img">',
        f'<rect x="{left}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" stroke="#cbd5e1"/>',
        f'<text x="{left + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle" class="axis-title">{escape(title_x)}</text>',
        f'<text x="14" y="{TOP + plot_h / 2}" text-anchor="middle" class="axis-title" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2})">{escape(title_y)}</text>',
    ]


def roofline_chart(points: list[ChartPoint], ceilings: DeviceCeilings) -> Markup | None:
    # (point, intensity, FLOP/s) of the points that have both
    placed = [
        (p, p.roofline.intensity, p.roofline.tflops * 1e12)
        for p in points
        if p.roofline.intensity and p.roofline.tflops
    ]
    if not placed:
        return None
    peak_flops = ceilings.matmul_tflops * 1e12
    peak_bw = ceilings.copy_gb_per_s * 1e9
    ridge = peak_flops / peak_bw
    x_low = min([intensity for _, intensity, _ in placed] + [ridge]) / 4
    x_high = max([intensity for _, intensity, _ in placed] + [ridge]) * 4
    y_high = peak_flops * 2
    y_low = min([flop_s for _, _, flop_s in placed] + [peak_bw * x_low]) / 2
    y_ticks = [
        (value, _label(value, "FLOP/s")) for value in _decades(y_low, y_high) if y_low <= value <= y_high
    ]
    left = _left_margin([label for _, label in y_ticks])
    plot_w, plot_h = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    sx = _scale(x_low, x_high, plot_w, left)
    sy = _scale(y_low, y_high, -plot_h, TOP + plot_h)
    parts = _frame("arithmetic intensity (FLOP / byte)", "achieved FLOP/s", left)
    parts += _decade_columns(sx, x_low, x_high, lambda value: f"{value:g}")
    parts += _tick_rows(sy, y_ticks, left, plot_w)
    roof = [(x_low, peak_bw * x_low), (ridge, peak_flops), (x_high, peak_flops)]
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in roof)
    parts.append(f'<polyline points="{path}" class="roof"/>')
    parts.append(
        f'<text x="{sx(x_high) - 4:.1f}" y="{sy(peak_flops) - 5:.1f}" text-anchor="end" class="roof-label">'
        f"{ceilings.matmul_tflops:.0f} TFLOP/s ({escape(ceilings.matmul_dtype)} matmul)</text>"
    )
    parts.append(
        f'<text x="{sx(x_low) + 6:.1f}" y="{sy(peak_bw * x_low) - 6:.1f}" class="roof-label">'
        f"{ceilings.copy_gb_per_s:,.0f} GB/s</text>"
    )
    for point, intensity, flop_s in sorted(placed, key=lambda item: -item[0].share):
        r = point.roofline
        tooltip = f"{point.label}: {r.tflops:.2f} TFLOP/s at {r.intensity:.1f} FLOP/byte, {r.percent:.0f}% of the roof"
        parts.append(_dot(sx(intensity), sy(flop_s), point, tooltip))
    parts.append("</svg>")
    return Markup("".join(parts))


def bandwidth_chart(points: list[ChartPoint], ceilings: DeviceCeilings) -> Markup | None:
    # (point, bytes, GB/s) of the points that have both
    placed = [
        (p, p.roofline.bytes, p.roofline.gb_per_s) for p in points if p.roofline.bytes and p.roofline.gb_per_s
    ]
    if not placed:
        return None
    peak = ceilings.copy_gb_per_s
    x_low = min(moved for _, moved, _ in placed) / 3
    x_high = max(moved for _, moved, _ in placed) * 3
    y_high = max([peak] + [rate for _, _, rate in placed]) * 1.1
    step = 10 ** math.floor(math.log10(y_high / 2))
    step = step * 2 if y_high / step > 10 else step
    y_ticks = [(n * step, f"{n * step:,.0f}") for n in range(int(y_high // step) + 1)]
    left = _left_margin([label for _, label in y_ticks])
    plot_w, plot_h = WIDTH - left - RIGHT, HEIGHT - TOP - BOTTOM
    sx = _scale(x_low, x_high, plot_w, left)
    sy = _scale(0, y_high, -plot_h, TOP + plot_h, log=False)
    parts = _frame("bytes moved by one launch", "achieved GB/s", left)
    parts += _decade_columns(sx, x_low, x_high, lambda value: _label(value, "B"))
    parts += _tick_rows(sy, y_ticks, left, plot_w)
    for fraction, css in ((1.0, "roof"), (0.8, "roof dashed")):
        y = sy(peak * fraction)
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="{css}"/>')
    parts.append(
        f'<text x="{left + plot_w - 4}" y="{sy(peak) - 5:.1f}" text-anchor="end" class="roof-label">'
        f"measured copy: {peak:,.0f} GB/s (dashed: 80%)</text>"
    )
    for point, moved, rate in sorted(placed, key=lambda item: -item[0].share):
        r = point.roofline
        tooltip = f"{point.label}: {r.gb_per_s:,.0f} GB/s, {r.bytes:,} bytes, {r.percent or 0:.0f}% of copy bandwidth"
        parts.append(_dot(sx(moved), sy(rate), point, tooltip))
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass(frozen=True)
class BarSegment:
    label: str
    url: str
    category: str
    us: float
    percent: float  # of the bar


def time_bar(segments: list[BarSegment]) -> Markup:
    """A stacked bar of one step (HTML, so it stretches with the page)."""
    parts = ['<div class="timebar" role="img" aria-label="device time per launch in one step">']
    for segment in segments:
        style = f"width: {segment.percent:.3f}%"
        if segment.category in TIME_COLOURS:
            style += f"; background: {TIME_COLOURS[segment.category]}"
        parts.append(
            f'<a href="{escape(segment.url)}" class="seg-{escape(segment.category.replace(" ", "-"))}" '
            f'style="{style}" title="{escape(segment.label)}: {segment.us:,.1f} µs ({segment.percent:.1f}%)"></a>'
        )
    parts.append("</div>")
    shown = dict.fromkeys(s.category for s in segments)
    parts.append('<p class="legend">')
    for category in shown:
        colour = TIME_COLOURS.get(category)
        swatch = f' style="background: {colour}"' if colour else ' class="seg-idle"'
        name = "GPU idle" if category == "idle" else category
        parts.append(f"<span><i{swatch}></i>{escape(name)}</span>")
    parts.append("</p>")
    return Markup("".join(parts))
