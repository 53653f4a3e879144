"""The fleet table's rules on hand-made figures: verdicts, worst first, model rows, staleness."""

from __future__ import annotations

import pytest

from slotop.actions.fleet.outliers import OutlierThresholds
from slotop.actions.fleet.table import FleetTable, Standing, display_names, fleet_table
from slotop.actions.fleet.tracker import FleetTracker
from slotop.actions.slo import Verdict
from slotop.collectors.fleet import (
    FleetPoll,
    ReplicaFigures,
    ReplicaKey,
    latency_figure,
    unread_figures,
)
from slotop.slo import Slo

SLO = Slo(ttft_s=0.5, itl_s=0.05, ttft_percentile=99.0, itl_percentile=99.0)
INF = float("inf")


def key(instance: str, model: str = "m") -> ReplicaKey:
    return ReplicaKey((("job", "vllm"), ("instance", instance), ("model_name", model)))


def replica(
    instance: str,
    ttft: tuple[tuple[float, float], ...],
    *,
    model: str = "m",
    running: float = 1.0,
    kv: float = 0.5,
    up: bool = True,
    tokens: float = 100.0,
) -> ReplicaFigures:
    itl = ((0.01, 100.0), (0.025, 100.0), (INF, 100.0))  # p99 in (0, 10 ms]: passes 50 ms
    return ReplicaFigures(
        key=key(instance, model),
        model=model,
        window_s=60.0,
        ttft=latency_figure(99.0, ttft),
        itl=latency_figure(99.0, itl),
        generation_tokens_per_s=tokens,
        preemptions_per_s=0.0,
        running=running,
        waiting=0.0,
        kv_usage_ratio=kv,
        up=up,
    )


FAST = ((0.1, 100.0), (0.25, 100.0), (0.5, 100.0), (1.0, 100.0), (INF, 100.0))
# 99 of 100 under 250 ms, one in (250, 500]: p99 rank 99 lands at the top of (0.1, 0.25].
EDGE = ((0.1, 90.0), (0.25, 99.0), (0.5, 100.0), (1.0, 100.0), (INF, 100.0))
# Half the requests over a second: p99 in (1, +Inf), clamped to 1 s: wholly above 500 ms.
SLOW = ((0.1, 50.0), (0.25, 50.0), (0.5, 50.0), (1.0, 50.0), (INF, 100.0))
# p99 rank 99 falls in (0.25, 1.0], which holds the 500 ms target: the buckets cannot tell.
STRADDLE = ((0.25, 50.0), (1.0, 100.0), (INF, 100.0))


def table(*figures: ReplicaFigures, at_s: float = 1000.0) -> FleetTable:
    state = FleetTracker().update(FleetPoll(at_s, figures, "test"))
    return fleet_table(state, SLO, OutlierThresholds())


def test_verdicts_follow_the_bucket_and_rows_sort_worst_first() -> None:
    found = table(
        replica("a:1", FAST),
        replica("b:1", SLOW),
        replica("c:1", STRADDLE),
        replica("d:1", FAST, up=False),
    )
    by_name = {row.name: row for row in found.rows}
    assert by_name["a:1"].verdict is Verdict.PASS
    assert by_name["b:1"].verdict is Verdict.BREACH
    assert by_name["c:1"].ttft.estimate is not None
    assert (
        by_name["c:1"].ttft.estimate.bucket_lower,
        by_name["c:1"].ttft.estimate.bucket_upper,
    ) == (
        0.25,
        1.0,
    )
    assert by_name["c:1"].verdict is Verdict.UNDECIDED
    assert [row.name for row in found.rows] == ["d:1", "b:1", "c:1", "a:1"]
    assert [row.standing for row in found.rows] == [
        Standing.DOWN,
        Standing.BREACH,
        Standing.UNDECIDED,
        Standing.PASS,
    ]


def test_the_model_row_merges_buckets_never_averages_percentiles() -> None:
    # A: 100 requests, all at most 100 ms. B: 100 requests, 50 of them over a second.
    found = table(replica("a:1", FAST, tokens=10.0), replica("b:1", SLOW, tokens=30.0))
    model = found.models[0]
    # Merged: 200 requests, 150 at most 100 ms, 50 over 1 s. Rank 0.99 × 200 = 198 falls in
    # the +Inf bucket (counts 150 up to 1 s), so p99 is clamped at 1 s: a breach. Averaging
    # A's p99 (99 ms) and B's (1 s, clamped) would have said 550 ms.
    assert model.ttft.count == 200.0
    assert model.ttft.estimate is not None and model.ttft.estimate.clamped
    assert model.ttft.estimate.value == 1.0
    assert model.verdict is Verdict.BREACH
    assert model.generation_tokens_per_s == 40.0
    assert (model.replicas, model.fresh, model.up) == (2, 2, 2)


def test_the_merged_median_is_worked_by_hand() -> None:
    # A: 10 in (0, 0.1]. B: 30 in (0.1, 0.25]. Merged p50: rank 20 of 40; 10 below 0.1, so
    # 10 of B's 30 into (0.1, 0.25]: 0.1 + 0.15 × 10 / 30 = 0.15.
    a = ReplicaFigures(
        key("a:1"), "m", ttft=latency_figure(50.0, ((0.1, 10.0), (0.25, 10.0), (INF, 10.0)))
    )
    b = ReplicaFigures(
        key("b:1"), "m", ttft=latency_figure(50.0, ((0.1, 0.0), (0.25, 30.0), (INF, 30.0)))
    )
    slo = Slo(ttft_s=0.5, itl_s=0.05, ttft_percentile=50.0)
    state = FleetTracker().update(FleetPoll(1.0, (a, b), "test"))
    model = fleet_table(state, slo, OutlierThresholds()).models[0]
    assert model.ttft.estimate is not None
    assert model.ttft.estimate.value == pytest.approx(0.15)


def test_a_failed_query_keeps_the_last_value_stale_and_gives_no_verdict() -> None:
    tracker = FleetTracker()
    tracker.update(FleetPoll(1.0, (replica("a:1", SLOW),), "test"))
    partial = ReplicaFigures(
        key("a:1"),
        "m",
        running=3.0,
        up=True,
        unread=(("ttft", "query refused"), ("itl", "query refused")),
    )
    state = tracker.update(FleetPoll(2.0, (partial,), "test"))
    row = fleet_table(state, SLO, OutlierThresholds()).rows[0]
    assert row.running == 3.0 and "running" not in row.stale_fields
    assert row.stale_fields == ("ttft", "itl") and row.stale == "query refused"
    assert row.ttft.estimate is not None and row.ttft.estimate.clamped  # SLOW's, kept
    assert row.verdict is Verdict.UNKNOWN and row.standing is Standing.STALE


def test_a_whole_failed_poll_and_an_absent_replica_stay_stale_then_are_forgotten() -> None:
    tracker = FleetTracker(forget_after_s=100.0)
    tracker.update(FleetPoll(1.0, (replica("a:1", FAST), replica("b:1", FAST)), "src"))
    down = tracker.failed("cannot connect to the server", 2.0)
    assert down.error == "cannot connect to the server"
    assert all(r.stale_reason == "cannot connect to the server" for r in down.replicas)
    assert all(r.figures.running == 1.0 for r in down.replicas)
    later = tracker.update(FleetPoll(50.0, (replica("a:1", FAST),), "src"))
    b = next(r for r in later.replicas if r.figures.key == key("b:1"))
    assert b.stale_reason is not None and "absent" in b.stale_reason
    gone = tracker.update(FleetPoll(200.0, (replica("a:1", FAST),), "src"))
    assert [r.figures.key for r in gone.replicas] == [key("a:1")]


def test_a_replica_never_read_is_a_row_of_nothing_saying_why() -> None:
    figures = unread_figures(ReplicaKey((("url", "http://h:1"),), url="http://h:1"), "refused")
    row = table(figures).rows[0]
    assert row.name == "http://h:1"
    assert row.running is None and row.ttft.estimate is None
    assert row.stale == "refused" and row.verdict is Verdict.UNKNOWN


def test_display_names_are_short_unless_shared() -> None:
    keys = [
        ReplicaKey((("job", "a"), ("instance", "h:1"), ("model_name", "m"))),
        ReplicaKey((("job", "b"), ("instance", "h:1"), ("model_name", "m"))),
        ReplicaKey((("job", "a"), ("instance", "h:2"), ("model_name", "m"))),
        ReplicaKey((("job", "a"), ("instance", "h:3"), ("model_name", "m"))),
        ReplicaKey((("job", "a"), ("instance", "h:3"), ("model_name", "n"))),
    ]
    names = display_names(keys, "model_name")
    assert [names[k] for k in keys] == ["a/h:1", "b/h:1", "h:2", "a/h:3 m", "a/h:3 n"]


def test_the_table_says_when_no_replica_answered() -> None:
    def state_table(tracker: FleetTracker, at_s: float, *figures: ReplicaFigures) -> FleetTable:
        return fleet_table(tracker.update(FleetPoll(at_s, figures, "s")), SLO, OutlierThresholds())

    tracker = FleetTracker()
    down = unread_figures(key("b"), "cannot connect", up=False)
    mixed = state_table(tracker, 10.0, replica("a", FAST), down)
    assert {row.name: row.answered for row in mixed.rows} == {"a": True, "b": False}
    assert mixed.unanswered is None
    refused = unread_figures(key("a"), "refused", up=False)
    none = state_table(tracker, 20.0, refused, down)
    assert [row.answered for row in none.rows] == [False, False]
    assert none.unanswered == "none of the 2 replicas answered: refused"
    assert state_table(tracker, 30.0).unanswered is not None  # both absent from the answer
    assert state_table(FleetTracker(), 40.0).unanswered is None  # the server lists none
