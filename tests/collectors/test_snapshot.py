"""Snapshots built from real and hand-made dumps: KV blocks, requests, quantiles, what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.collectors.reading import CacheConfig, read_metrics_text
from slotop.collectors.snapshot import (
    Snapshot,
    build_snapshot,
    kv_blocks,
    latency_quantiles,
    replica_started_at_s,
    uptime_s,
)
from slotop.collectors.window import Window, cumulative_view
from tests.support.paths import CAPTURES

HANDMADE = Path(__file__).resolve().parent / "data"


def _snapshot(path: Path, ttft_percentile: float | None = 95.0) -> Snapshot:
    reading = read_metrics_text(path.read_text(encoding="utf-8"))
    return build_snapshot(
        taken_at_s=0.0,
        reading=reading,
        view=cumulative_view(reading),
        ttft_percentile=ttft_percentile,
        itl_percentile=99.0,
    )


def _config(engine: str, blocks: int | None) -> CacheConfig:
    return CacheConfig(engine, 16, blocks, "auto", 0.9, None, None)


KV_CASES = [
    pytest.param(
        {"0": 12 / 255}, (_config("0", 256),), False, (256, 12, 243), id="v1: null block aside"
    ),
    pytest.param({"": 0.25}, (_config("", 100),), True, (100, 25, 75), id="v0: every block"),
    pytest.param(
        {"0": 0.5, "1": 0.25},
        (_config("0", 1001), _config("1", 1001)),
        False,
        (2002, 750, 1250),
        id="two engines summed",
    ),
    pytest.param({"0": 1.0}, (_config("", 9),), False, (9, 8, 0), id="one unlabelled config"),
    pytest.param({"0": 0.5}, (_config("0", None),), False, None, id="no block count"),
    pytest.param({"0": 0.5, "1": 0.5}, (_config("0", 9),), False, None, id="engine lacks config"),
    pytest.param({}, (_config("0", 9),), False, None, id="no usage"),
]


@pytest.mark.parametrize(("usage", "configs", "v0", "expected"), KV_CASES)
def test_kv_blocks(
    usage: dict[str, float],
    configs: tuple[CacheConfig, ...],
    v0: bool,
    expected: tuple[int, int, int] | None,
) -> None:
    blocks = kv_blocks(usage, configs, v0_engine=v0)
    if expected is None:
        assert blocks is None
    else:
        assert blocks is not None
        assert (blocks.total, blocks.used, blocks.free) == expected


# Facts from tests/fixtures/metrics/README.md, and the KV usage each capture reports.
CAPTURE_FACTS = [
    pytest.param("vllm-0.32-cpu-idle.txt", 256, 0, 32768, "auto", 0, 0, id="idle"),
    pytest.param("vllm-0.32-cpu-load.txt", 256, 24, 32768, "auto", 8, 0, id="load"),
    pytest.param("vllm-0.32-cpu-queue.txt", 256, 12, 32768, "auto", 4, 12, id="queue"),
    pytest.param("vllm-0.32-cpu-preempt.txt", 8, 6, 1024, "auto", 3, 10, id="preempt"),
    pytest.param("vllm-0.32-cpu-fp8-idle.txt", 1024, 0, 131072, "fp8", 0, 0, id="fp8"),
]


@pytest.mark.parametrize(
    ("name", "total", "used", "tokens", "dtype", "running", "waiting"), CAPTURE_FACTS
)
def test_real_captures(
    name: str, total: int, used: int, tokens: int, dtype: str, running: int, waiting: int
) -> None:
    snapshot = _snapshot(CAPTURES / name)
    kv = snapshot.kv
    assert (kv.blocks_total, kv.blocks_used, kv.size_tokens, kv.cache_dtype) == (
        total,
        used,
        tokens,
        dtype,
    )
    assert kv.blocks_free == total - 1 - used
    assert kv.usage_ratio is not None
    assert round(kv.usage_ratio * (total - 1)) == used
    assert kv.block_size_tokens == 128
    assert (snapshot.requests.running, snapshot.requests.waiting) == (running, waiting)
    assert dict(snapshot.requests.waiting_by_reason)["capacity"] == waiting
    assert snapshot.missing == () and snapshot.unknown == ()
    assert snapshot.replica.engine_generation == "v1" and snapshot.replica.model_name == (
        "tiny-llama"
    )


def test_preempt_capture_counts_preemptions_and_has_quantiles_with_their_buckets() -> None:
    window = _snapshot(CAPTURES / "vllm-0.32-cpu-preempt.txt").window
    assert window.preemptions == 5
    for quantiles in (window.ttft_s, window.itl_s):
        assert quantiles.count and quantiles.count > 0
        for percentile in (50.0, 90.0, 99.0):
            estimate = quantiles.at(percentile)
            assert estimate is not None
            assert estimate.bucket_lower <= estimate.value <= estimate.bucket_upper
            assert estimate.observations == quantiles.count


def test_configured_percentile_joins_the_standard_ones() -> None:
    ttft = _snapshot(CAPTURES / "vllm-0.32-cpu-load.txt", ttft_percentile=95.0).window.ttft_s
    assert [p for p, _ in ttft.percentiles] == [50.0, 90.0, 95.0, 99.0]
    assert ttft.configured is ttft.at(95.0)
    assert ttft.p50 is not None and ttft.p90 is not None and ttft.p99 is not None
    assert ttft.p50.value <= ttft.configured.value <= ttft.p99.value  # type: ignore[union-attr]


def test_v0_dump_hand_computed_quantiles_and_kv() -> None:
    snapshot = _snapshot(HANDMADE / "vllm-0.6-v0-handmade.txt", ttft_percentile=None)
    ttft = snapshot.window.ttft_s
    # 200 TTFTs: rank 100 ends bucket (0.08, 0.1]; rank 180 ends (0.1, 0.25]; 198 ends (0.5, 0.75].
    assert [e.value if e else None for _, e in ttft.percentiles] == pytest.approx([0.1, 0.25, 0.75])
    # ITL from time_per_output_token: rank 25,500 of 51,000 in (0.01, 0.025] holding 25,600.
    assert snapshot.window.itl_s.p50 is not None
    assert snapshot.window.itl_s.p50.value == pytest.approx(0.01 + 0.015 * 25500 / 25600)
    assert (snapshot.kv.blocks_total, snapshot.kv.blocks_used, snapshot.kv.blocks_free) == (
        27153,
        6788,
        20365,
    )
    assert snapshot.requests.swapped == 1.0
    assert snapshot.window.prefix_cache_hit_ratio is None  # the v0 gauge says -1: caching off
    assert snapshot.window.queue_s.p99 is None and snapshot.window.queue_s.count is None
    assert snapshot.replica.engine_generation == "v0"
    assert "vllm:request_queue_time_seconds" in snapshot.missing


def test_multi_engine_dump() -> None:
    snapshot = _snapshot(HANDMADE / "vllm-multi-engine-handmade.txt")
    assert snapshot.replica.engines == 2
    assert snapshot.kv.usage_ratio_by_engine == (("0", 0.5), ("1", 0.25))
    assert snapshot.kv.usage_ratio == pytest.approx(0.375)
    assert snapshot.kv.max_concurrency == pytest.approx(15.6)
    assert snapshot.window.prefix_cache_hit_ratio == pytest.approx(1000 / 4000)
    assert snapshot.window.requests_finished == 10.0
    # TTFT summed over engines: cumulative (2, 6, 8, 10) at 0.1, 0.25, 0.5, +Inf.
    assert snapshot.window.ttft_s.p50 is not None
    assert snapshot.window.ttft_s.p50.value == pytest.approx(0.1 + 0.15 * (5 - 2) / (6 - 2))
    assert snapshot.window.ttft_s.p99 is not None and snapshot.window.ttft_s.p99.clamped


def test_live_window_rates() -> None:
    load = read_metrics_text((CAPTURES / "vllm-0.32-cpu-load.txt").read_text("utf-8"))
    done = read_metrics_text((CAPTURES / "vllm-0.32-cpu-restart-a.txt").read_text("utf-8"))
    window = Window(60)
    window.push(100.0, load)
    window.push(110.0, done)
    view = window.view(60)
    assert view is not None
    snapshot = build_snapshot(taken_at_s=0.0, reading=done, view=view)
    total_before = cumulative_view(load).counters["generation_tokens"]
    total_after = cumulative_view(done).counters["generation_tokens"]
    assert snapshot.window.generation_tokens_per_s == pytest.approx(
        (total_after - total_before) / 10.0
    )
    assert snapshot.window.covered_s == 10.0


def test_latency_quantiles_of_an_absent_histogram_are_none() -> None:
    view = cumulative_view(read_metrics_text("# TYPE vllm:num_requests_running gauge\n"))
    quantiles = latency_quantiles(view, "ttft", 99.0)
    assert quantiles.count is None and quantiles.p99 is None and quantiles.configured is None


def _process_start_line(path: Path) -> float:
    (line,) = [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("process_start_time_seconds ")
    ]
    return float(line.split()[1])


@pytest.mark.parametrize(
    "name", ["vllm-0.32-cpu-load.txt", "vllm-0.32-cpu-restart-a.txt", "vllm-0.32-cpu-restart-b.txt"]
)
def test_started_at_is_the_captures_process_start_time(name: str) -> None:
    snapshot = _snapshot(CAPTURES / name)
    assert snapshot.replica.started_at_s == _process_start_line(CAPTURES / name)


def test_a_restart_gives_a_later_start() -> None:
    before = _snapshot(CAPTURES / "vllm-0.32-cpu-restart-a.txt").replica.started_at_s
    after = _snapshot(CAPTURES / "vllm-0.32-cpu-restart-b.txt").replica.started_at_s
    assert before is not None and after is not None and after > before


@pytest.mark.parametrize("name", ["vllm-0.6-v0-handmade.txt", "vllm-multiprocess-handmade.txt"])
def test_a_dump_without_a_process_start_has_none_and_does_not_call_it_missing(name: str) -> None:
    snapshot = _snapshot(HANDMADE / name)
    assert snapshot.replica.started_at_s is None
    assert not any("process" in missing for missing in snapshot.missing)


@pytest.mark.parametrize(
    ("lines", "started"),
    [
        pytest.param(["process_start_time_seconds 1700000000.5"], 1700000000.5, id="one"),
        pytest.param(
            [
                'process_start_time_seconds{pid="2"} 1700000300',
                'process_start_time_seconds{pid="1"} 1700000000',
            ],
            1700000000.0,
            id="several: the earliest",
        ),
        pytest.param(["process_start_time_seconds NaN"], None, id="NaN"),
        pytest.param(["process_start_time_seconds 0"], None, id="zero"),
        pytest.param([], None, id="absent"),
    ],
)
def test_replica_started_at(lines: list[str], started: float | None) -> None:
    text = "\n".join(["# TYPE process_start_time_seconds gauge", *lines]) + "\n"
    assert replica_started_at_s(read_metrics_text(text)) == started


@pytest.mark.parametrize(
    ("started", "now", "uptime"),
    [(100.0, 160.5, 60.5), (100.0, 100.0, 0.0), (100.0, 99.0, None), (None, 100.0, None)],
)
def test_uptime(started: float | None, now: float, uptime: float | None) -> None:
    assert uptime_s(started, now) == uptime
