"""The fleet through a real Prometheus scraping a simulated vLLM replica and a simulated SGLang
replica, both serving one model name, under the probe's load.

Prometheus 2 asks for OpenMetrics first, and the SGLang replica (as SGLang's prometheus_client
does) then escapes its names: Prometheus holds `sglang_time_to_first_token_seconds`, beside
vLLM's `vllm:time_to_first_token_seconds` from the vLLM replica's text format, so one fleet reads
both spellings. Expected values come from outside the fleet code: each replica's direct snapshot
over the same span (load between two quiet ends), its own /metrics, and Prometheus's answers to
PromQL the test writes itself.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from slotop.actions.fleet.table import FleetTable
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
from tests.support.sim_fleet import SimFleet, refreshed_once, run_sim_fleet
from tests.support.vllm_replica import drive_load

pytestmark = pytest.mark.slow

LOAD_S = 12.0
LOAD_DEADLINE_S = 120.0
MIN_REQUESTS = 20
SETTLE_S = 4.0
WINDOW_S = 300.0
MODEL = "shared-model"
ENGINES = ("vllm", "sglang")
FLAGS = (
    ["--served-model-name", MODEL],
    ["--engine", "sglang", "--enable-metrics", "--served-model-name", MODEL],
)
TTFT = {"vllm": "vllm:time_to_first_token_seconds", "sglang": "sglang_time_to_first_token_seconds"}
ITL = {"vllm": "vllm:inter_token_latency_seconds", "sglang": "sglang_inter_token_latency_seconds"}
"""The names Prometheus holds each replica's TTFT and ITL under: vLLM's as served, SGLang's
escaped."""


class Measured:
    """The fleet, each replica's direct snapshot over the loaded span, and one fleet table."""

    def __init__(self, fleet: SimFleet, snapshots: list[Snapshot], table: FleetTable) -> None:
        self.fleet = fleet
        self.snapshots = dict(zip(ENGINES, snapshots, strict=True))
        self.instances = dict(zip(ENGINES, fleet.instances, strict=True))
        self.urls = dict(zip(ENGINES, fleet.urls, strict=True))
        self.table = table

    def row(self, engine: str) -> Any:
        return next(r for r in self.table.rows if r.key.label("instance") == self.instances[engine])


def _shape() -> LoadShape:
    return LoadShape(
        prompt_lengths=LengthDistribution("fixed", 256),
        output_lengths=LengthDistribution("fixed", 32),
        max_concurrency=16,
        max_rate_rps=100.0,
    )


def _direct_snapshot(
    url: str, scraped: threading.Event, quiet: threading.Event, out: list[Snapshot | None], at: int
) -> None:
    """`slotop snapshot`'s own path: a scrape of the replica, then another once it is quiet."""

    def until_quiet(_interval_s: float) -> None:
        scraped.set()
        quiet.wait(LOAD_DEADLINE_S + SETTLE_S)

    with ReplicaClient(url) as client:
        out[at] = snapshot_of_replica(
            client,
            interval_s=LOAD_S,
            long_window_s=WINDOW_S,
            short_window_s=LOAD_S,
            ttft_percentile=99.0,
            itl_percentile=99.0,
            sleep=until_quiet,
        )


def _load(urls: list[str]) -> None:
    """Load every replica for LOAD_S at least, and until each has finished MIN_REQUESTS (the
    probe's workers start slowly on a busy machine)."""
    probes = [Probe.start(ProbeTarget(url, model=MODEL), _shape(), concurrency=2) for url in urls]
    started = time.monotonic()
    try:
        while time.monotonic() - started < LOAD_S or any(
            (status := probe.status()) is None or status.done_total < MIN_REQUESTS
            for probe in probes
        ):
            assert time.monotonic() - started < LOAD_DEADLINE_S, [p.status() for p in probes]
            time.sleep(0.5)
    finally:
        for probe in probes:
            probe.stop()


def _settings(url: str) -> Settings:
    return with_overrides(Settings(), {"fleet.prometheus_url": url, "window.long_s": WINDOW_S})


@pytest.fixture(scope="module")
def measured() -> Iterator[Measured]:
    for fleet in run_sim_fleet(FLAGS):
        snapshots: list[Snapshot | None] = [None] * len(fleet.urls)
        scraped = [threading.Event() for _ in fleet.urls]
        quiet = threading.Event()
        threads = [
            threading.Thread(target=_direct_snapshot, args=(url, scraped[at], quiet, snapshots, at))
            for at, url in enumerate(fleet.urls)
        ]
        for url in fleet.urls:
            # SGLang shows a streamed request's series only once one has come; with one before
            # the first scrapes, the load's observations all fall between the two.
            drive_load(url, concurrency=1, requests=1, max_tokens=2, prompt_tokens=8, model=MODEL)
        time.sleep(2.5)  # Prometheus has scraped them
        for thread in threads:
            thread.start()
        assert all(event.wait(30) for event in scraped), "a first direct scrape failed"
        try:
            _load(fleet.urls)
            time.sleep(SETTLE_S)
        finally:
            quiet.set()
        for thread in threads:
            thread.join(30)
        assert all(s is not None for s in snapshots), "a direct snapshot failed"
        time.sleep(2.5)  # Prometheus has scraped the quiet end too
        settings = _settings(fleet.prometheus.url)
        table = refreshed_once(settings, at_s=time.time() - 1.0)  # every scrape is in
        assert table.error is None
        yield Measured(fleet, [s for s in snapshots if s is not None], table)


def _query(measured: Measured, query: str, at_s: float | None = None) -> list[dict[str, Any]]:
    return measured.fleet.prometheus.query(query, at_s)


def test_prometheus_holds_sglang_escaped_and_vllm_as_served(measured: Measured) -> None:
    for name in TTFT.values():
        held = _query(measured, f'count({{__name__="{name}_bucket"}})')
        assert held and float(held[0]["value"][1]) > 0, name
    assert not _query(measured, 'count({__name__="sglang:time_to_first_token_seconds_bucket"})')


def test_each_row_says_its_engine_and_equals_the_direct_snapshot(measured: Measured) -> None:
    assert len(measured.table.rows) == 2
    prometheus, span = measured.fleet.prometheus, f"{round(WINDOW_S * 1000)}ms"
    for engine in ENGINES:
        row, snapshot = measured.row(engine), measured.snapshots[engine]
        assert snapshot.replica.engine == engine
        assert (row.engine, row.model, row.up, row.stale) == (engine, MODEL, True, None)
        for name, direct in (("ttft", snapshot.window.ttft_s), ("itl", snapshot.window.itl_s)):
            mine, theirs = getattr(row, name).estimate, direct.p99
            assert theirs is not None and mine is not None, (engine, name)
            assert (mine.bucket_lower, mine.bucket_upper) == (
                theirs.bucket_lower,
                theirs.bucket_upper,
            ), (engine, name)
            assert theirs.bucket_lower <= mine.value <= theirs.bucket_upper, (engine, name)
            # The row counts what Prometheus's increase() counts, which extrapolates past the
            # first and last scrapes: never below the direct count, above it within the bound.
            stored = TTFT[engine] if name == "ttft" else ITL[engine]
            bucket = f'{stored}_bucket{{le="+Inf",instance="{measured.instances[engine]}"}}'
            counted, most = prometheus.counted(bucket, span, measured.table.taken_at_s)
            assert getattr(row, name).count == pytest.approx(counted, rel=1e-9), (engine, name)
            assert direct.count and direct.count <= counted <= direct.count * most, (engine, name)
        window = snapshot.window
        assert window.generation_tokens_per_s and window.covered_s is not None
        direct_tokens = window.generation_tokens_per_s * window.covered_s
        assert row.covered_s is not None and row.covered_s < WINDOW_S
        assert row.generation_tokens_per_s * row.covered_s == pytest.approx(direct_tokens, rel=0.1)
        # Nothing was preempted or retracted: SGLang shows no retraction counter until one
        # happens, and both read it as a rate of zero, not as unknown.
        assert window.preemptions_per_s == 0 and row.preemptions_per_s == 0, engine
        assert row.running == snapshot.requests.running == 0
        assert row.waiting == snapshot.requests.waiting == 0
        assert row.kv_usage_ratio == snapshot.kv.usage_ratio == 0


def test_each_engine_has_its_own_model_row_from_its_own_buckets(measured: Measured) -> None:
    models = {model.engine: model for model in measured.table.models}
    assert set(models) == set(ENGINES)
    span = f"{round(WINDOW_S * 1000)}ms"
    for engine, name in TTFT.items():
        model = models[engine]
        assert (model.model, model.replicas, model.fresh) == (MODEL, 1, 1)
        query = f"histogram_quantile(0.99, sum by (le) (increase({name}_bucket[{span}])))"
        (answer,) = _query(measured, query, measured.table.taken_at_s)
        assert model.ttft.estimate is not None
        assert model.ttft.estimate.value == pytest.approx(float(answer["value"][1]), rel=1e-6)
        # Its one replica's observations, not the other engine's as well.
        assert model.ttft.count == measured.row(engine).ttft.count


def test_a_drill_in_reads_the_sglang_replica_through_prometheus(measured: Measured) -> None:
    row = measured.row("sglang")
    with PrometheusClient(measured.fleet.prometheus.url) as client:
        endpoints = PrometheusReplica(client, row.key, name=row.name)
        assert endpoints.identity().engine == "sglang"
        monitor = ReplicaMonitor(endpoints, long_window_s=60, short_window_s=10)
        via_prometheus = monitor.poll()
    with ReplicaClient(measured.urls["sglang"]) as direct:
        reading = read_metrics_text(direct.metrics_text())
    theirs = monitor.window.latest
    assert theirs is not None and theirs.engine == reading.engine == "sglang"
    for key in ("generation_tokens", "prompt_tokens", "requests_finished"):
        assert sum(theirs.counters[key].values()) == sum(reading.counters[key].values()), key
    assert theirs.counters["preemptions"] == {}  # absent, read as zero since the start
    for key in ("ttft", "itl"):
        assert sorted(theirs.histograms[key].values(), key=repr) == sorted(
            reading.histograms[key].values(), key=repr
        ), key
    direct_snapshot = measured.snapshots["sglang"]
    assert via_prometheus.replica.engine == "sglang"
    assert via_prometheus.kv.size_tokens == direct_snapshot.kv.size_tokens
    assert via_prometheus.kv.blocks_total == direct_snapshot.kv.blocks_total
    assert via_prometheus.replica.model_name == MODEL
    # Prometheus has no /v1/loads: the gauges stand, and the dashboard says they lag.
    assert any("which lag" in note for note in via_prometheus.notes), via_prometheus.notes


def test_slotop_fleet_json_lists_both_engines(
    measured: Measured, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    url = measured.fleet.prometheus.url
    code = main(["fleet", "--prometheus", url, "--json", "--window", str(WINDOW_S)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["error"] is None and data["mode"] == "prometheus"
    engines = {row["labels"]["instance"]: row["engine"] for row in data["replicas"]}
    assert engines == {measured.instances[e]: e for e in ENGINES}
    assert sorted((m["engine"], m["model"], m["replicas"]) for m in data["models"]) == [
        ("sglang", MODEL, 1),
        ("vllm", MODEL, 1),
    ]
