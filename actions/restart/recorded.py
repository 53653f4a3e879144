"""A dashboard restart as recording lines (pure).

The dashboard records a restart as `slotop restart` does (a `restart_planned` action when it
begins, a `restart` action when it ends, with the dials before, after and now, the outcome, the
downtime and the outcome in words) and adds the changes, the probe's load the plan paused, and
every phase with its time; its before/after panel is recorded apart (`live_record`). The
quality check of a KV-dtype change runs after the restart has ended, so it follows as a
`restart_quality` action whose `quality` is what `slotop restart` puts in its `restart` action.
"""

from __future__ import annotations

from typing import Any

from slotop.actions.restart.apply import RestartPlan, RestartResult
from slotop.actions.restart.quality_check import QualityCheck

QUALITY_ACTION = "restart_quality"


def plan_json(plan: RestartPlan) -> dict[str, Any]:
    """A `restart_planned` action's data: the dials before and after, the plan in words, the
    changes and the load the restart pauses."""
    load = plan.probe_load
    return {
        "dials_before": plan.before.to_json(),
        "dials_after": plan.after.to_json(),
        "how": plan.how,
        "plan": list(plan.lines()),
        "changes": [list(change) for change in plan.changes],
        "probe_load": (
            {"mode": load.mode, "concurrency": load.concurrency, "rate_rps": load.rate_rps}
            if load is not None
            else None
        ),
    }


def result_json(result: RestartResult) -> dict[str, Any]:
    """A `restart` action's data: the plan's dials, the dials now, the outcome, the downtime,
    the outcome in words and every phase (at_s, elapsed_s, phase, detail)."""
    plan = result.plan
    return {
        "dials_before": plan.before.to_json(),
        "dials_after": plan.after.to_json(),
        "how": plan.how,
        "dials_now": result.dials.to_json() if result.dials is not None else None,
        "outcome": result.outcome,
        "downtime_s": result.downtime_s,
        "failure": result.failure,
        "lines": list(result.lines()),
        "events": [[e.at_s, e.elapsed_s, e.phase, e.detail] for e in result.events],
        "comparison": None,
        "table": None,
        "quality": None,
    }


def quality_json(check: QualityCheck) -> dict[str, Any]:
    """A `restart_quality` action's data: the check of the restart just recorded, encoded as
    `slotop restart` encodes its `quality`."""
    return {"quality": check.to_json()}
