"""A tune's plan from settings and options, and in words before it starts (pure).

The command line and the dashboard plan a tune with these, so both ask about the same tune.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.starts import StartSpread
from slotop.actions.sweep.plan import spec_from_settings
from slotop.actions.tune.model import TuneSpec
from slotop.config import Settings


@dataclass(frozen=True, slots=True)
class TuneOptions:
    """What the command line adds to the settings: keep the chosen dials, skip the quality
    check, go on from a recording, and where the report goes (None: beside the recording)."""

    keep: bool = False
    check_quality: bool = True
    resume_path: Path | None = None
    report_dir: Path | None = None
    write_report: bool = True


def tune_spec(
    settings: Settings, options: TuneOptions, start_spread: StartSpread | None = None
) -> TuneSpec:
    """The tune's plan from [sweep] (refined), [slo], [load] and [tune], the options, and the
    replica's start-to-start spread where its state file keeps one."""
    tune = settings.tune
    return TuneSpec(
        sweep=dataclasses.replace(spec_from_settings(settings), refine=True),
        dials=frozenset(tune.dials),
        budget_s=tune.budget_min * 60,
        max_candidates=tune.max_candidates,
        quality_min_match_ratio=tune.quality_min_match_ratio,
        check_quality=options.check_quality,
        keep=options.keep,
        start_spread=start_spread,
    )


def plan_words(spec: TuneSpec, url: str, original: Dials) -> list[str]:
    """What the tune will do and what it may cost, shown before it starts."""
    sweep = spec.sweep
    per_step = sweep.warmup_s + sweep.dwell_s
    return [
        f"Tune {url}, now {' '.join(original.flag_args())}: a refined sweep at these dials "
        f"(concurrency {', '.join(map(str, sweep.plan))}, about {per_step:g}–"
        f"{sweep.warmup_s + sweep.max_dwell_s + sweep.follow_limit_s:g} s a step), then up to "
        f"{spec.max_candidates} candidates, each a restart and a sweep, the dial named by what "
        f"binds ({', '.join(sorted(spec.dials)) or 'none may change'}).",
        f"Time budget {spec.budget_s / 60:g} min; the load stays within [load] caps. Ctrl-C "
        "stops it; the replica then goes back to "
        + (
            "its original dials."
            if not spec.keep
            else "the chosen dials (--keep), or its original ones after an interrupt."
        ),
    ]
