"""A dashboard restart's recording lines hold what slotop restart's hold, and what it adds."""

from __future__ import annotations

import json

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import RestartEvent, RestartPlan, RestartResult, plan_restart
from slotop.actions.restart.recorded import plan_json, result_json
from slotop.collectors.probe.records import ProbeStatus

URL = "http://127.0.0.1:8000"


def _plan() -> RestartPlan:
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


def test_a_plan_line_holds_the_dials_the_changes_and_the_paused_load() -> None:
    data = json.loads(json.dumps(plan_json(_plan())))
    assert data["dials_before"] == {
        "kv_cache_dtype": "auto",
        "max_num_seqs": 64,
        "max_num_batched_tokens": None,
    }
    assert data["dials_after"]["kv_cache_dtype"] == "fp8"
    assert data["how"] == "managed"
    assert data["changes"] == [["kv_cache_dtype", "auto", "fp8"]]
    assert data["probe_load"] == {"mode": "closed", "concurrency": 4, "rate_rps": None}
    assert (
        data["plan"][0]
        == f"Restart {URL}: stop the replica slotop started and start it again, with"
    )


def test_a_result_line_holds_the_outcome_in_words_and_every_phase() -> None:
    events = (
        RestartEvent(101.5, 0.0, "pause", "probe paused"),
        RestartEvent(104.25, 2.75, "up", "replica answers /health"),
    )
    result = RestartResult(_plan(), "applied", Dials("fp8", 64, None), None, 2.5, None, "", events)
    data = json.loads(json.dumps(result_json(result)))
    assert data["outcome"] == "applied"
    assert data["dials_now"]["kv_cache_dtype"] == "fp8"
    assert data["downtime_s"] == 2.5
    assert data["lines"][0] == "Restarted with the new dials, verified; downtime 2.5 s."
    assert data["events"] == [
        [101.5, 0.0, "pause", "probe paused"],
        [104.25, 2.75, "up", "replica answers /health"],
    ]
    assert data["table"] is None  # the dashboard's before/after is its panel's own action
