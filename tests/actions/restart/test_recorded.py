"""A dashboard restart's plan and result survive the recording: JSON and back, field by field."""

from __future__ import annotations

import json

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import ProbeLoad, RestartEvent, RestartResult, plan_restart
from slotop.actions.restart.recorded import (
    plan_from_json,
    plan_json,
    result_from_json,
    result_json,
)
from slotop.collectors.probe.records import ProbeStatus

URL = "http://127.0.0.1:8000"


def _plan() -> object:
    status = ProbeStatus(100.0, 1, "closed", 4, None, 4, 40, 36, 0)
    return plan_restart(
        Dials("auto", 64, None),
        Dials("fp8", 64, None),
        url=URL,
        how="managed",
        kv=None,
        last_downtime_s=None,
        probe_status=status,
        drain_timeout_s=30.0,
        health_timeout_s=60.0,
    )


def test_a_plan_comes_back_with_what_a_before_after_follows() -> None:
    plan = _plan()
    data = json.loads(json.dumps(plan_json(plan)))  # type: ignore[arg-type]
    assert data["dials_before"]["kv_cache_dtype"] == "auto"
    assert data["changes"] == [["kv_cache_dtype", "auto", "fp8"]]
    back = plan_from_json(data, URL)
    assert back.before == Dials("auto", 64, None) and back.after == Dials("fp8", 64, None)
    assert back.changes == (("kv_cache_dtype", "auto", "fp8"),)
    assert back.probe_load == ProbeLoad("closed", 4, None)
    assert back.how == "managed"


def test_a_result_comes_back_with_its_phases_and_outcome() -> None:
    plan = _plan()
    events = (
        RestartEvent(101.5, 0.0, "pause", "probe paused"),
        RestartEvent(104.25, 2.75, "up", "replica answers /health"),
    )
    result = RestartResult(plan, "applied", Dials("fp8", 64, None), None, 2.5, None, "", events)  # type: ignore[arg-type]
    data = json.loads(json.dumps(result_json(result)))
    assert data["outcome"] == "applied"
    assert data["lines"][0] == "Restarted with the new dials, verified; downtime 2.5 s."
    back = result_from_json(data, plan)  # type: ignore[arg-type]
    assert back.plan is plan and back.applied
    assert back.dials == Dials("fp8", 64, None)
    assert back.events == events
    assert back.downtime_s == 2.5


def test_an_unknown_outcome_is_refused() -> None:
    data = {"outcome": "sideways", "dials_now": None}
    with pytest.raises(ValueError, match="unknown restart outcome 'sideways'"):
        result_from_json(data, _plan())  # type: ignore[arg-type]
