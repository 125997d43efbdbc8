"""The comparison stage, the verdict: which configuration is the fastest, if any, in words made from the table's numbers.

The verdict sentence is built here and only here, from the numbers the page's table shows: each
configuration's step (``ConfigResult.step_ms``) and its row "Against the fastest"
(``ConfigResult.against_fastest``: the gap, the noise of the pair, the judgement), formatted with the
same functions the table uses (``ms``, ``signed``, ``percent``). The rule (compare/noise.py) names a
winner only when the runner-up is slower by more than the noise of the pair and every round agrees, and
never where the two run the same code: then the gap is noise by construction, whatever its size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..records import CompileRun, ConfigDiff, ConfigResult, Verdict
from ..units import format_ms, format_percent, format_signed_percent
from .noise import RULE, round_medians


def same_program(diff: ConfigDiff, base: CompileRun, other: CompileRun,
                 base_config: ConfigResult, other_config: ConfigResult) -> tuple[bool, str]:  # fmt: skip
    """Whether two configurations compiled the same program: every launch the same code with the same
    settings, the same graphs, breaks and recompiles, the same CUDA-graph use, the same wrapper code (kernel
    names, comments and paths left out). Returns the answer and what it rests on, in words."""
    if not diff.changes:
        return False, "no launches to compare"
    differing = [c for c in diff.changes if c.kind != "unchanged" or c.note]
    if differing:
        return False, f"{len(differing)} of {len(diff.changes)} launches differ"
    if any(p.before is None or p.after is None for p in diff.graphs):
        return False, "the graphs differ"
    counts = (base_config.graphs, base_config.graph_breaks, base_config.recompiles, base_config.cudagraphs)
    if counts != (other_config.graphs, other_config.graph_breaks, other_config.recompiles, other_config.cudagraphs):
        return False, "the graphs, graph breaks, recompiles or CUDA-graph use differ"
    names = {t for c in diff.changes for side in (c.before, c.after) if side for t in side.targets}
    if [_wrapper(g.output_code, names) for g in base.graphs] != [_wrapper(g.output_code, names) for g in other.graphs]:
        return False, "the same kernels, launched by different wrapper code"
    return True, f"all {len(diff.changes)} launches the same code, the same wrapper and graphs"


def _wrapper(code: str, kernel_names: set[str]) -> str:
    lines = [line.split("#", 1)[0].rstrip() for line in code.splitlines()]
    text = "\n".join(line for line in lines if line.strip())
    for name in sorted(kernel_names, key=len, reverse=True):
        if name.isidentifier():
            text = re.sub(rf"\b{re.escape(name)}\b", "KERNEL", text)
    return re.sub(r"(?:/[\w.+-]+)+/?", "PATH", text)  # cache folders differ between configurations


def verdict(
    configs: Sequence[ConfigResult],
    same: tuple[bool, str] | None,
    compares: str = "",
    noise_how: str = "",
) -> Verdict:
    """The verdict over ``configs`` as ``against_fastest`` judged them; ``same`` answers ``same_program`` for
    the fastest and the runner-up (None where it could not be asked)."""
    timed = sorted((c for c in configs if c.step_ms), key=lambda c: c.step_ms or 0.0)
    if len(timed) < 2:
        return Verdict(None, "not enough configurations were timed to compare them", False, compares=compares, rule=RULE)
    fastest, runner = timed[0], timed[1]
    pair = runner.against_fastest
    assert pair is not None  # every timed configuration but the fastest has one
    gap, noise = pair.fraction, pair.noise

    def said(text: str, winner: str | None = None) -> Verdict:
        return Verdict(winner, text, winner is not None, gap, noise, noise_how, runner.name,
                       same[0] if same else None, RULE, compares)  # fmt: skip

    numbers = f"{format_ms(runner.step_ms)} against {format_ms(fastest.step_ms)}"
    if same is not None and same[0]:
        who = f"({fastest.name} against {runner.name}: {same[1]})"
        if gap <= noise:
            return said(f"no winner: same code; the gap {format_percent(gap)} is within the noise {format_percent(noise)} {who}")
        rounds = min(len(round_medians(fastest.rounds)), len(round_medians(runner.rounds)))
        return said(f"no winner: same code; the gap {format_percent(gap)} is beyond the measured noise {format_percent(noise)}"
                    + (f" of {rounds} rounds" if rounds else "") + f" {who}, which the same code cannot explain: "
                    "the noise was underestimated (more --rounds measure it better)")  # fmt: skip
    if pair.judgement == "slower":
        agree = ", and every round agrees" if pair.rounds_agree else ""
        return said(f"{fastest.name} is the fastest: {runner.name} is {format_signed_percent(gap)} against it ({numbers}), "
                    f"beyond the noise of {format_percent(noise)} between them{agree}", fastest.name)  # fmt: skip
    why = ("the rounds disagree on which is faster" if abs(gap) > noise and pair.rounds_agree is False
           else f"within the noise of {format_percent(noise)} between them")  # fmt: skip
    text = f"no winner: {runner.name} is {format_signed_percent(gap)} against {fastest.name} ({numbers}), {why}"
    also = [(c.name, c.against_fastest) for c in timed[2:] if c.against_fastest and c.against_fastest.judgement == "within noise"]
    if also:
        text += f"; also within the noise of {fastest.name}: " + ", ".join(
            f"{name} ({format_signed_percent(v.fraction)}, noise {format_percent(v.noise)})" for name, v in also if v
        )
    return said(text)
