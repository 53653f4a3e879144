"""A dashboard restart as recording lines, and back (pure).

The dashboard records a restart as `slotop restart` does (a `restart_planned` action when it
begins, a `restart` action when it ends, with the dials before, after and now, the outcome, the
downtime and the outcome in words) and adds what its before/after follows: the changes, the
probe's load the plan paused, and every phase with its time. A replay reads the plan and the
result back from them for the same before/after code; what the lines do not hold (the capacity
change, the verification) comes back empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import ProbeLoad, RestartEvent, RestartPlan, RestartResult

OUTCOMES = ("applied", "rolled_back", "down")


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


def plan_from_json(data: Mapping[str, Any], url: str) -> RestartPlan:
    """The plan a `restart_planned` action recorded (its capacity change left out)."""
    load = data.get("probe_load")
    how = data.get("how")
    return RestartPlan(
        url=url,
        how="command" if how == "command" else "managed",
        before=Dials.from_json(data["dials_before"]),
        after=Dials.from_json(data["dials_after"]),
        changes=tuple((str(n), str(old), str(new)) for n, old, new in data.get("changes", ())),
        capacity=None,
        capacity_words="",
        expected_downtime_s=None,
        probe_load=(
            ProbeLoad(load["mode"], load.get("concurrency"), load.get("rate_rps"))
            if load is not None
            else None
        ),
        drain_timeout_s=0.0,
        health_timeout_s=0.0,
    )


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


def result_from_json(data: Mapping[str, Any], plan: RestartPlan) -> RestartResult:
    """The result a `restart` action recorded, for `plan` (its verification left out)."""
    outcome = data["outcome"]
    if outcome not in OUTCOMES:
        raise ValueError(f"unknown restart outcome {outcome!r}")
    now = data.get("dials_now")
    downtime = data.get("downtime_s")
    return RestartResult(
        plan=plan,
        outcome=outcome,
        dials=Dials.from_json(now) if now is not None else None,
        verification=None,
        downtime_s=float(downtime) if downtime is not None else None,
        failure=data.get("failure"),
        failure_log_tail="",
        events=tuple(
            RestartEvent(float(at), float(elapsed), str(phase), str(detail))
            for at, elapsed, phase, detail in data.get("events", ())
        ),
    )
