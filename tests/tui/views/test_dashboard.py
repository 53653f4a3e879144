"""Views from inputs: an idle replica's views stay equal from one second to the next."""

from __future__ import annotations

import dataclasses

from slotop.actions.slo import Binding
from slotop.config import Settings, settings_from_mapping
from slotop.tui.messages import LatencyTrend
from slotop.tui.views.dashboard import build_views
from slotop.tui.views.header import header_view
from slotop.tui.views.inputs import Inputs
from tests.support.tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh, with_load


def _idle_trend(points: int) -> LatencyTrend:
    nothing = (None,) * points
    return LatencyTrend(
        tuple(FROZEN_NOW_S - points + i for i in range(points)),
        nothing,
        nothing,
        nothing,
        nothing,
        nothing,
        nothing,
    )


def test_an_idle_replica_gives_equal_views_as_seconds_pass() -> None:
    snapshot = capture_snapshot()
    inputs = Inputs(
        settings=Settings(),
        now_s=FROZEN_NOW_S,
        started_s=FROZEN_NOW_S - 5,
        poll=fresh(snapshot),
        last_poll_at_s=FROZEN_NOW_S,
        trend=_idle_trend(10),
    )
    later = dataclasses.replace(
        inputs,
        now_s=FROZEN_NOW_S + 1,
        last_poll_at_s=FROZEN_NOW_S + 1,
        trend=_idle_trend(11),
        poll=fresh(dataclasses.replace(snapshot, taken_at_s=FROZEN_NOW_S + 1)),
    )
    assert build_views(later) == build_views(inputs)


def test_a_new_value_changes_only_the_views_that_show_it() -> None:
    snapshot = capture_snapshot()
    inputs = Inputs(
        settings=Settings(),
        now_s=FROZEN_NOW_S,
        started_s=FROZEN_NOW_S,
        poll=fresh(snapshot),
        last_poll_at_s=FROZEN_NOW_S,
    )
    busier = dataclasses.replace(
        snapshot, requests=dataclasses.replace(snapshot.requests, waiting=3.0)
    )
    before = build_views(inputs)
    after = build_views(dataclasses.replace(inputs, poll=fresh(busier)))
    changed = {
        f.name
        for f in dataclasses.fields(before)
        if getattr(before, f.name) != getattr(after, f.name)
    }
    assert changed == {"kv", "diagnosis"}


def _header_cache_line(started_at_s: float | None, now_s: float = FROZEN_NOW_S) -> str:
    snapshot = capture_snapshot()
    replica = dataclasses.replace(snapshot.replica, started_at_s=started_at_s)
    inputs = Inputs(
        settings=Settings(),
        now_s=now_s,
        started_s=FROZEN_NOW_S - 90,
        poll=fresh(dataclasses.replace(snapshot, replica=replica)),
        last_poll_at_s=FROZEN_NOW_S,
    )
    return header_view(inputs).cache


def test_the_header_shows_the_replicas_uptime_by_the_apps_clock() -> None:
    started = FROZEN_NOW_S - (3 * 3600 + 12 * 60 + 30)
    assert "up 3h12m  attached 1m" in _header_cache_line(started)
    assert "up 3h13m" in _header_cache_line(started, now_s=FROZEN_NOW_S + 30)
    assert "up <1m" in _header_cache_line(FROZEN_NOW_S - 20)  # restarted: a fresh uptime
    assert "up N/A" in _header_cache_line(None)


def test_the_capture_replica_uptime_comes_from_its_process_start() -> None:
    # vllm-0.32-cpu-load.txt: process_start_time_seconds 1.79602357819e+09.
    assert capture_snapshot().replica.started_at_s == 1_796_023_578.19
    assert "up 46d00h" in _header_cache_line(1_796_023_578.19)


def test_the_configured_kv_full_ratio_sets_the_dashboards_diagnosis_and_kv_bar() -> None:
    snapshot = with_load(capture_snapshot(), running=8, waiting=3, usage=0.85)
    inputs = Inputs(
        settings=Settings(),
        now_s=FROZEN_NOW_S,
        started_s=FROZEN_NOW_S,
        poll=fresh(snapshot),
        last_poll_at_s=FROZEN_NOW_S,
    )
    lowered = settings_from_mapping({"sweep": {"kv_full_ratio": 0.8}}, "t")
    default_views = build_views(inputs)
    lowered_views = build_views(dataclasses.replace(inputs, settings=lowered))
    assert default_views.diagnosis.binding is Binding.QUEUEING  # 85% is under the default 90%
    assert not default_views.kv.full
    assert lowered_views.diagnosis.binding is Binding.KV_CAPACITY
    assert lowered_views.kv.full


def _issue_inputs(
    client_ttft_s: float | None = None, ok: int = 0, failed: int = 0, stale_feed: bool = False
) -> Inputs:
    """The issue's server TTFT p99 (985 of 1000 at ≤ 250 ms, 15 at 490 ms) against 350 ms."""
    from slotop.collectors.histograms import quantile_estimate
    from slotop.collectors.probe.stats import ProbeStats, summarize_latency
    from slotop.collectors.snapshot import LatencyQuantiles
    from slotop.tui.messages import ProbeView
    from tests.support.tui_fakes import stale

    buckets = [(0.1, 0.0), (0.25, 985.0), (0.5, 1000.0), (1.0, 1000.0), (float("inf"), 1000.0)]
    ttft = LatencyQuantiles(((99.0, quantile_estimate(0.99, buckets)),), 99.0, 1000.0, None)
    itl = LatencyQuantiles(((99.0, None),), 99.0, 0.0, None)  # no ITL: that row is unknown
    snapshot = capture_snapshot()
    window = dataclasses.replace(snapshot.window, ttft_s=ttft, itl_s=itl)
    snapshot = dataclasses.replace(snapshot, window=window)
    settings = settings_from_mapping({"slo": {"ttft_ms": 350, "itl_ms": 50}}, "test")
    probe = ProbeView(running=False)
    if ok or failed:
        ttfts = [] if client_ttft_s is None else [client_ttft_s] * ok
        summary = summarize_latency(ttfts, (99.0,))
        stats = ProbeStats(
            0.0, 60.0, ok, failed, 0, (), summary, summarize_latency([], (99.0,)),
            summary, summary, None, None, None, None,
        )  # fmt: skip
        probe = ProbeView(running=True, long_stats=stats)
    return Inputs(
        settings=settings,
        now_s=FROZEN_NOW_S,
        started_s=FROZEN_NOW_S,
        poll=stale(snapshot, "connection refused") if stale_feed else fresh(snapshot),
        last_poll_at_s=FROZEN_NOW_S,
        probe=probe,
    )


def test_the_slo_pane_shows_a_straddled_target_as_undecided_until_the_probe_decides() -> None:
    from slotop.actions.slo import Verdict

    alone = build_views(_issue_inputs()).slo
    ttft = alone.rows[0]
    assert ttft.verdict is Verdict.UNDECIDED and alone.verdict is Verdict.UNDECIDED
    assert ttft.server == "333 ms" and ttft.bucket == "bucket 250 ms–500 ms holds the target"
    assert build_views(_issue_inputs(0.490, ok=1000)).slo.rows[0].verdict is Verdict.BREACH
    assert build_views(_issue_inputs(0.300, ok=1000)).slo.rows[0].verdict is Verdict.PASS


def test_failed_requests_count_against_the_slo_and_stale_data_gives_no_verdict() -> None:
    from slotop.actions.slo import Verdict

    # 100 requests, 2 failed, the other 98 fast: p99 allows 1% to miss, so it is broken.
    broken = build_views(_issue_inputs(0.100, ok=98, failed=2)).slo
    assert broken.rows[0].verdict is Verdict.BREACH and broken.verdict is Verdict.BREACH
    assert broken.note == "failed 2 of 100: p99 allows 1%"
    # 1 of 200 failed (0.5%): the fast client p99 decides the straddled bucket, and passes.
    held = build_views(_issue_inputs(0.100, ok=199, failed=1)).slo
    assert held.rows[0].verdict is Verdict.PASS and held.note == ""
    stale_view = build_views(_issue_inputs(0.100, ok=199, failed=1, stale_feed=True)).slo
    assert stale_view.stale and stale_view.verdict is Verdict.UNKNOWN
