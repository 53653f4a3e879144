"""The quality check around a KV-dtype restart: a greedy baseline before, a comparison after.

The command line and the app call the same two functions: `quality_baseline` before the restart
is applied and `quality_check` once it has ended. Neither raises for a replica that refuses the
prompts: the check is advice about the change, so a failure becomes the reason it was not run.
Both sides should run while no other load reaches the replica (batch composition can change the
numerics) and outside any measured dwell (the greedy requests would count as load there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import Outcome
from slotop.actions.restart.prompts import QualityError, QualityPrompt, prompts_or_default
from slotop.actions.restart.quality import (
    GreedyRun,
    QualityReport,
    compare_greedy_runs,
    greedy_run_of_replica,
)
from slotop.actions.restart.quality_report import format_quality_text, quality_to_json


def quality_applies(before: Dials, after: Dials) -> bool:
    """Whether a restart from `before` to `after` gets the quality check: its KV dtype changes."""
    return before.kv_cache_dtype != after.kv_cache_dtype


def configured_prompts(quality_prompts_file: str) -> tuple[QualityPrompt, ...]:
    """The `[launch] quality_prompts_file` prompts, or the built-in set when it is empty."""
    return prompts_or_default(Path(quality_prompts_file) if quality_prompts_file else None)


@dataclass(frozen=True, slots=True)
class QualityBaseline:
    """The greedy run before a restart, or why it could not be taken."""

    prompts: tuple[QualityPrompt, ...]
    run: GreedyRun | None
    failure: str | None


@dataclass(frozen=True, slots=True)
class QualityCheck:
    """The quality check of one restart: its report, or the reason it was not run."""

    report: QualityReport | None
    not_run: str | None

    def text(self) -> str:
        """The check as text: the report, or one line saying why there is none."""
        if self.report is not None:
            return format_quality_text(self.report)
        return f"quality check: not run: {self.not_run}\n"

    def to_json(self) -> dict[str, object]:
        """The check as JSON-ready data; `not_run` is null when it ran."""
        if self.report is None:
            return {"not_run": self.not_run}
        return {"not_run": None, **quality_to_json(self.report)}


def quality_baseline(
    url: str,
    api_key: str | None,
    prompts: Sequence[QualityPrompt],
    *,
    timeout_s: float = 120.0,
) -> QualityBaseline:
    """Run the prompts greedily against the replica before its restart."""
    kept = tuple(prompts)
    try:
        run = greedy_run_of_replica(url, kept, api_key=api_key, timeout_s=timeout_s)
    except QualityError as exc:
        return QualityBaseline(kept, None, f"the run before the restart failed: {exc}")
    return QualityBaseline(kept, run, None)


def _not_run_after(outcome: Outcome) -> str | None:
    if outcome == "rolled_back":
        return (
            "the restart rolled back, so the replica runs its previous KV dtype again and "
            "there is no changed replica to compare"
        )
    if outcome == "down":
        return "the replica is down after a failed restart and rollback"
    return None


def quality_check(
    url: str,
    api_key: str | None,
    baseline: QualityBaseline,
    outcome: Outcome,
    *,
    timeout_s: float = 120.0,
) -> QualityCheck:
    """After a restart ended with `outcome`: run the same prompts again and compare, or say why not."""
    reason = _not_run_after(outcome) or baseline.failure
    if reason is not None or baseline.run is None:
        return QualityCheck(None, reason or "no run before the restart")
    try:
        after = greedy_run_of_replica(url, baseline.prompts, api_key=api_key, timeout_s=timeout_s)
        return QualityCheck(compare_greedy_runs(baseline.run, after), None)
    except QualityError as exc:
        return QualityCheck(None, f"the run after the restart failed: {exc}")
