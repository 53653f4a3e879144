"""The fleet through a real Prometheus 2 in front of the real SGLang CPU server: the server
escapes its names for Prometheus's OpenMetrics scrape, and slotop's row still equals the direct
snapshot and Prometheus's own histogram_quantile."""

from __future__ import annotations

import time

import pytest

from slotop.collectors.oneshot import snapshot_of_replica
from slotop.collectors.replica import ReplicaClient
from slotop.config import Settings, with_overrides
from tests.support.prometheus_server import run_prometheus
from tests.support.sglang_replica import SglangReplica
from tests.support.sim_fleet import refreshed_once
from tests.support.vllm_replica import drive_load

pytestmark = [pytest.mark.sglang, pytest.mark.slow]

WINDOW_S = 300.0


def test_a_real_sglang_row_through_prometheus(sglang_replica: SglangReplica) -> None:
    url = sglang_replica.url
    # Streamed requests first, as the measured load but fewer: SGLang shows a streamed request's
    # series only once one came, and each bucket the load fills must hold some count at
    # Prometheus's first scrape. increase() extrapolates a counter's rise back to the window's
    # start, but not below zero: a bucket still at zero is not extrapolated while those above it
    # are, and the p99 climbs into a bucket with no request of the load in it (seen on a busy
    # machine after one short request: a p99 in 0.1-0.2 through Prometheus, in 0-0.1 direct).
    drive_load(url, concurrency=4, requests=4, max_tokens=32, prompt_tokens=64)
    for prometheus in run_prometheus([url.removeprefix("http://")], interval_s=0.5):
        prometheus.wait_for_up(1)
        time.sleep(1.5)  # a few scrapes of the quiet server

        def load_then_quiet(_interval_s: float) -> None:
            drive_load(url, concurrency=4, requests=16, max_tokens=32, prompt_tokens=64)
            time.sleep(2.0)  # Prometheus has scraped the quiet end

        with ReplicaClient(url) as client:
            direct = snapshot_of_replica(
                client,
                interval_s=10.0,
                long_window_s=WINDOW_S,
                short_window_s=10.0,
                ttft_percentile=99.0,
                itl_percentile=99.0,
                sleep=load_then_quiet,
            )
        settings = with_overrides(
            Settings(), {"fleet.prometheus_url": prometheus.url, "window.long_s": WINDOW_S}
        )
        # Evaluated a second back, where every scrape is in: a scrape stamped just before
        # "now" can be ingested between the row's query and the test's, moving increase()'s
        # extrapolation (18.20 against 17.05 was seen), so both ask at the same settled time.
        table = refreshed_once(settings, at_s=time.time() - 1.0)
        assert table.error is None
        (row,) = table.rows
        assert (row.engine, row.model, row.up) == ("sglang", "tiny-llama", True)
        span, at_s = f"{round(WINDOW_S * 1000)}ms", table.taken_at_s
        # Prometheus 2 holds the real server's names escaped.
        assert prometheus.query("count(sglang_num_requests_total)", at_s)
        for name, theirs in (("ttft", direct.window.ttft_s), ("itl", direct.window.itl_s)):
            stored = {
                "ttft": "sglang_time_to_first_token_seconds",
                "itl": "sglang_inter_token_latency_seconds",
            }[name]
            query = f"histogram_quantile(0.99, sum by (le) (increase({stored}_bucket[{span}])))"
            (answer,) = prometheus.query(query, at_s)
            mine, p99 = getattr(row, name).estimate, theirs.p99
            assert mine is not None and p99 is not None, name
            assert mine.value == pytest.approx(float(answer["value"][1]), rel=1e-9), name
            bounds = (mine.bucket_lower, mine.bucket_upper)
            assert bounds == (p99.bucket_lower, p99.bucket_upper), name
            # The row counts what Prometheus's increase() counts, which extrapolates past the
            # first and last scrapes: never below the direct count, above it within the bound.
            counted, most = prometheus.counted(f'{stored}_bucket{{le="+Inf"}}', span, at_s)
            assert theirs.count and theirs.count <= counted <= theirs.count * most, name
            assert getattr(row, name).count == pytest.approx(counted, rel=1e-9), name
        assert row.running == direct.requests.running == 0
        assert row.preemptions_per_s == 0
