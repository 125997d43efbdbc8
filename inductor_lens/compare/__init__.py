"""The comparison stage (records of several runs -> one Comparison): what ``compare`` and ``diff`` show.

configs.py   which configurations to compile (``--mode``, ``--config NAME:KEY=VALUE,...``)
kernels.py   the kernel diff: launches matched across two runs by the FX nodes they compute
summary.py   each configuration's numbers, the verdict against run-to-run noise, the evidence

Running the configurations (cold, then warm caches) is the API's job (``api.compare_models``);
everything here works on records only, so ``diff`` of two existing reports uses the same code.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

from ..records import Comparison
from ..version import __version__
from .configs import ConfigRequest, parse_config, requested_configs
from .kernels import diff_runs
from .summary import ConfigRun, against_baseline, config_result, evidence, judge_changes, pair_noise, verdict

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
    configs = against_baseline([config_result(e) for e in entries])
    runs = {e.name: e.run for e in entries if e.run is not None}
    base = entries[0]
    diffs = tuple(
        judge_changes(diff_runs(base.name, base.run, e.name, e.run), pair_noise(configs[0], config))
        for e, config in zip(entries[1:], configs[1:], strict=True)
        if base.run is not None and e.run is not None
    )
    return Comparison(
        title=title,
        created=created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__,
        kind=kind,  # type: ignore[arg-type]
        model_path=model_path,
        configs=configs,
        diffs=diffs,
        verdict=verdict(configs),
        evidence=evidence(configs, runs, diffs),
        notes=tuple(notes),
    )
