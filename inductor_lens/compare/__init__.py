"""The comparison stage (records of several runs -> one Comparison): what ``compare`` and ``diff`` show.

configs.py        which configurations to compile (``--mode``, ``--config NAME:KEY=VALUE,...``)
runner.py         running them: a cold process each, then interleaved warm rounds (``compare``); or two reports (``diff``)
kernels.py        the kernel diff: launches matched across two runs by the FX nodes they compute
comparability.py  what the runs differ in besides mode and options (dtype, --train, dynamic, device, versions, inputs)
noise.py          the noise model: round medians, paired round ratios, when a gap counts
summary.py        each configuration's numbers judged against the noise, the evidence
verdict.py        the verdict, in words made from the table's numbers

Everything but runner.py works on records only, so ``diff`` of two existing reports uses the same code.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from ..records import Comparison
from ..version import __version__
from .comparability import compares, differences
from .configs import ConfigRequest, parse_config, requested_configs
from .kernels import diff_runs
from .noise import noise_how
from .summary import ConfigRun, config_result, evidence, judge_changes, judged, pair_noise, tried_here
from .verdict import same_program, verdict

__all__ = ["ConfigRequest", "ConfigRun", "build_comparison", "parse_config", "requested_configs"]


def build_comparison(
    entries: Sequence[ConfigRun],
    *,
    kind: str,
    title: str,
    model_path: str,
    notes: Sequence[str] = (),
    created: str | None = None,
) -> Comparison:
    """The first entry is the baseline every other configuration's kernels are diffed against."""
    configs = tried_here(judged([config_result(e) for e in entries]))
    runs = {e.name: e.run for e in entries if e.run is not None}
    base = entries[0]
    diffs = tuple(
        judge_changes(diff_runs(base.name, base.run, e.name, e.run), pair_noise(configs[0], config))
        for e, config in zip(entries[1:], configs[1:], strict=True)
        if base.run is not None and e.run is not None
    )
    facts = {c.name: c.facts for c in configs if c.name in runs}
    found = tuple(d for c in configs[1:] if c.name in facts and configs[0].name in facts
                  for d in differences(configs[0].name, facts[configs[0].name], c.name, facts[c.name]))  # fmt: skip
    timed = sorted((c for c in configs if c.step_ms), key=lambda c: c.step_ms or 0.0)
    same = None
    if len(timed) >= 2 and timed[0].name in runs and timed[1].name in runs:
        first, second = runs[timed[0].name], runs[timed[1].name]
        same = same_program(diff_runs(timed[0].name, first, timed[1].name, second), first, second, timed[0], timed[1])
    return Comparison(
        title=title,
        created=created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        kind=kind,  # type: ignore[arg-type]
        model_path=model_path,
        configs=configs,
        diffs=diffs,
        verdict=verdict(configs, same, compares([c.name for c in configs], facts, found), noise_how(configs)),
        evidence=evidence(configs, runs, diffs),
        notes=tuple(notes),
        differences=found,
        rounds=max((len(c.rounds) for c in configs), default=0),
    )
