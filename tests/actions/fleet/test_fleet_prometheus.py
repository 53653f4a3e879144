"""The fleet through a real Prometheus scraping three simulated replicas under the probe's load.

Expected values come from outside the fleet code: the direct single-replica snapshot of each
replica over the same span (load between two quiet ends, so both hold the same observations),
and Prometheus's own answers to PromQL the test writes itself.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from slotop.actions.fleet.wiring import FleetWatch, prometheus_fleet
from slotop.actions.slo import Verdict, judge_estimate
from slotop.cli import main
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.oneshot import snapshot_of_replica
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.prometheus import PrometheusClient
from slotop.collectors.prometheus_replica import PrometheusReplica
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import Snapshot
from slotop.config import Settings, with_overrides
from tests.support.prometheus_server import run_prometheus
from tests.support.sim_fleet import SimFleet, refreshed_once, run_sim_fleet

pytestmark = pytest.mark.slow

LOAD_S = 12.0
SETTLE_S = 4.0
WINDOW_S = 300.0
CONCURRENCY = (2, 2, 4)
PROMPT_TOKENS = (256, 256, 1024)
SLOW = 2  # the L4 replica, given the longest prompts


def _shape(prompt_tokens: int) -> LoadShape:
    return LoadShape(
        prompt_lengths=LengthDistribution("fixed", prompt_tokens),
        output_lengths=LengthDistribution("fixed", 32),
        max_concurrency=16,
        max_rate_rps=100.0,
    )


HISTOGRAMS = {"ttft": "time_to_first_token_seconds", "itl": "inter_token_latency_seconds"}


class Measured:
    """The fleet, and each replica's direct snapshot over the loaded span."""

    def __init__(self, fleet: SimFleet, snapshots: list[Snapshot]) -> None:
        self.fleet = fleet
        self.snapshots = snapshots


def _direct_snapshot(url: str, span_s: float, out: list[Snapshot | None], index: int) -> None:
    """`slotop snapshot`'s own path: two scrapes of the replica `span_s` apart."""
    with ReplicaClient(url) as client:
        out[index] = snapshot_of_replica(
            client,
            interval_s=span_s,
            long_window_s=span_s * 2,
            short_window_s=span_s,
            ttft_percentile=99.0,
            itl_percentile=99.0,
        )


@pytest.fixture(scope="module")
def measured() -> Iterator[Measured]:
    for fleet in run_sim_fleet([[], [], ["--gpu", "l4"]]):
        snapshots: list[Snapshot | None] = [None] * len(fleet.urls)
        span_s = LOAD_S + SETTLE_S

        threads = [
            threading.Thread(target=_direct_snapshot, args=(url, span_s, snapshots, index))
            for index, url in enumerate(fleet.urls)
        ]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # each first scrape is taken before any load
        probes = [
            Probe.start(ProbeTarget(url), _shape(tokens), concurrency=concurrency)
            for url, concurrency, tokens in zip(fleet.urls, CONCURRENCY, PROMPT_TOKENS, strict=True)
        ]
        time.sleep(LOAD_S)
        for probe in probes:
            probe.stop()
        for thread in threads:
            thread.join(span_s + 30)
        assert all(s is not None for s in snapshots), "a direct snapshot failed"
        time.sleep(2.5)  # Prometheus has scraped the quiet end too
        yield Measured(fleet, [s for s in snapshots if s is not None])


def _settings(url: str, **overrides: Any) -> Settings:
    return with_overrides(
        Settings(),
        {"fleet.prometheus_url": url, "window.long_s": WINDOW_S, **overrides},
    )


def _rows_by_instance(measured: Measured) -> dict[str, Any]:
    # A second back, where every scrape is in, so the tests' own queries at the same time read
    # the same samples (a scrape ingested between two queries moves increase()'s extrapolation).
    table = refreshed_once(_settings(measured.fleet.prometheus.url), at_s=time.time() - 1.0)
    assert table.error is None
    return {"table": table, **{row.key.label("instance"): row for row in table.rows}}


def test_each_row_equals_the_direct_snapshot_within_the_bucket(measured: Measured) -> None:
    found = _rows_by_instance(measured)
    table = found["table"]
    assert len(table.rows) == 3 and len(table.models) == 1
    targets = {"ttft": Settings().slo.ttft_s, "itl": Settings().slo.itl_s}
    prometheus, span = measured.fleet.prometheus, f"{round(WINDOW_S * 1000)}ms"
    for instance, snapshot in zip(measured.fleet.instances, measured.snapshots, strict=True):
        row = found[instance]
        assert row.up is True and row.stale is None
        for name, direct in (("ttft", snapshot.window.ttft_s), ("itl", snapshot.window.itl_s)):
            mine, theirs = getattr(row, name).estimate, direct.p99
            assert theirs is not None and mine is not None, name
            assert (mine.bucket_lower, mine.bucket_upper) == (
                theirs.bucket_lower,
                theirs.bucket_upper,
            ), name
            assert theirs.bucket_lower <= mine.value <= theirs.bucket_upper, name
            assert getattr(row, name).verdict is judge_estimate(theirs, targets[name])
            # The row counts what Prometheus's increase() counts, which extrapolates past the
            # first and last scrapes: never below the direct count, above it within the bound.
            bucket = f'vllm:{HISTOGRAMS[name]}_bucket{{le="+Inf",instance="{instance}"}}'
            counted, most = prometheus.counted(bucket, span, table.taken_at_s)
            assert getattr(row, name).count == pytest.approx(counted, rel=1e-9), name
            assert direct.count and direct.count <= counted <= direct.count * most, name
        window = snapshot.window
        assert window.generation_tokens_per_s is not None and window.covered_s is not None
        direct_tokens = window.generation_tokens_per_s * window.covered_s
        # The server started within the window: its rates are over the span it holds.
        assert row.covered_s is not None and row.covered_s < WINDOW_S
        assert row.generation_tokens_per_s * row.covered_s == pytest.approx(direct_tokens, rel=0.1)
        assert row.running == snapshot.requests.running == 0
        assert row.kv_usage_ratio == snapshot.kv.usage_ratio


def test_the_model_row_merges_buckets_as_prometheus_does(measured: Measured) -> None:
    found = _rows_by_instance(measured)
    model = found["table"].models[0]
    span = f"{round(WINDOW_S * 1000)}ms"
    query = (
        "histogram_quantile(0.99, sum by (le) "
        f"(increase(vllm:time_to_first_token_seconds_bucket[{span}])))"
    )
    # at the instant the fleet's own queries ran at
    answer = measured.fleet.prometheus.query(query, found["table"].taken_at_s)
    prometheus_p99 = float(answer[0]["value"][1])
    assert model.replicas == 3 and model.fresh == 3
    assert model.ttft.estimate is not None
    assert model.ttft.estimate.value == pytest.approx(prometheus_p99, rel=1e-6)
    counts = [row.ttft.count for row in found["table"].rows]
    assert model.ttft.count == pytest.approx(sum(counts))


def test_the_replica_on_the_slow_gpu_with_long_prompts_is_flagged_slow(measured: Measured) -> None:
    found = _rows_by_instance(measured)
    slow = found[measured.fleet.instances[SLOW]]
    assert [flag.kind for flag in slow.flags if flag.on == "ttft"] == ["slow"]
    for index, instance in enumerate(measured.fleet.instances):
        if index != SLOW:
            assert not [flag for flag in found[instance].flags if flag.on == "ttft"]
    assert found["table"].models[0].flagged == (slow.name,)


def test_a_query_that_fails_keeps_its_last_values_stale(measured: Measured) -> None:
    url = measured.fleet.prometheus.url
    failing = threading.Event()

    class Refusing(httpx.HTTPTransport):
        """Prometheus, except that it refuses histogram_quantile while `failing` is set."""

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if failing.is_set() and b"histogram_quantile" in request.read():
                body = {"status": "error", "errorType": "execution", "error": "out of memory"}
                return httpx.Response(422, json=body)
            return super().handle_request(request)

    settings = _settings(url)
    source = prometheus_fleet(settings)
    source.client = PrometheusClient(url, transport=Refusing())
    watch = FleetWatch(source, settings)
    try:
        before = {row.name: row for row in watch.refresh().rows}
        failing.set()
        after = watch.refresh()
    finally:
        watch.close()
    assert after.error is None
    for row in after.rows:
        assert set(row.stale_fields) == {"ttft", "itl"}
        assert "out of memory" in (row.stale or "")
        assert row.ttft.estimate == before[row.name].ttft.estimate  # the last good value
        assert row.verdict is Verdict.UNKNOWN  # stale data gives no verdict
        assert row.running == 0 and "running" not in row.stale_fields


def test_a_server_that_goes_down_leaves_every_row_stale_never_a_crash(measured: Measured) -> None:
    targets = measured.fleet.instances
    for server in run_prometheus(targets):
        server.wait_for_up(len(targets))
        time.sleep(2.5)  # two scrapes more, so rates exist
        settings = _settings(server.url)
        watch = FleetWatch(prometheus_fleet(settings), settings)
        try:
            fresh = watch.refresh()
            server.process.terminate()
            server.process.wait(15)
            stale = watch.refresh()
        finally:
            watch.close()
    assert fresh.error is None and len(fresh.rows) == 3
    assert stale.error is not None and "cannot connect" in stale.error
    assert len(stale.rows) == 3
    for row in stale.rows:
        assert row.stale == stale.error and row.verdict is Verdict.UNKNOWN
        before = next(r for r in fresh.rows if r.key == row.key)
        assert row.generation_tokens_per_s is not None  # the last good values, kept
        assert (row.generation_tokens_per_s, row.running) == (
            before.generation_tokens_per_s,
            before.running,
        )


def test_a_drill_in_reads_the_same_series_through_prometheus(measured: Measured) -> None:
    found = _rows_by_instance(measured)
    instance = measured.fleet.instances[0]
    row = found[instance]
    with PrometheusClient(measured.fleet.prometheus.url) as client:
        endpoints = PrometheusReplica(client, row.key, name=row.name)
        monitor = ReplicaMonitor(endpoints, long_window_s=60, short_window_s=10)
        via_prometheus = monitor.poll()
        assert endpoints.health().healthy
    with ReplicaClient(measured.fleet.urls[0]) as direct:
        reading = read_metrics_text(direct.metrics_text())
    theirs = monitor.window.latest
    assert theirs is not None
    for key in ("generation_tokens", "prompt_tokens", "requests_finished"):
        assert sum(theirs.counters[key].values()) == sum(reading.counters[key].values()), key
    ttft = next(iter(theirs.histograms["ttft"].values()))
    direct_ttft = next(iter(reading.histograms["ttft"].values()))
    assert ttft.buckets == direct_ttft.buckets
    assert via_prometheus.kv.blocks_total == measured.snapshots[0].kv.blocks_total
    assert via_prometheus.replica.model_name == measured.snapshots[0].replica.model_name
    assert via_prometheus.replica.url is not None and instance in via_prometheus.replica.url


def test_slotop_fleet_json_through_prometheus(
    measured: Measured, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    url = measured.fleet.prometheus.url
    code = main(["fleet", "--prometheus", url, "--json", "--window", str(WINDOW_S)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["schema"] == "slotop.fleet/1" and data["mode"] == "prometheus"
    assert data["error"] is None and data["window_s"] == WINDOW_S
    by_instance = {row["labels"]["instance"]: row for row in data["replicas"]}
    assert set(by_instance) == set(measured.fleet.instances)
    for instance, snapshot in zip(measured.fleet.instances, measured.snapshots, strict=True):
        ttft = by_instance[instance]["ttft_s"]
        direct = snapshot.window.ttft_s.p99
        assert direct is not None
        bucket = ttft["buckets"]["p99"]
        assert (bucket["lower"], bucket["upper"]) == (direct.bucket_lower, direct.bucket_upper)
        assert ttft["slo"]["verdict"] == by_instance[instance]["verdict"]
    slow = by_instance[measured.fleet.instances[SLOW]]
    assert [flag["kind"] for flag in slow["flags"] if flag["on"] == "ttft"] == ["slow"]
    assert data["models"][0]["replicas"] == 3


def test_slotop_fleet_json_scraping_directly(
    measured: Measured, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    code = main(["fleet", *measured.fleet.urls, "--json", "--window", "0.5"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["mode"] == "direct"
    assert {row["url"] for row in data["replicas"]} == set(measured.fleet.urls)
    assert data["error"] is None and data["replicas_answered"] == len(measured.fleet.urls)
    for row in data["replicas"]:
        assert row["up"] is True and row["stale"] is False
        assert row["model"] == measured.snapshots[0].replica.model_name
        assert row["requests"]["running"] == 0
