"""Snapshot → JSON (unit-named keys, null for missing, no NaN) and → plain-text table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.report import (
    SCHEMA,
    format_snapshot_text,
    percentile_key,
    snapshot_to_json,
)
from tests.support.paths import CAPTURES

HANDMADE = Path(__file__).resolve().parent / "data"


def _dump(path: Path, ttft_percentile: float | None = 95.0) -> dict[str, object]:
    snapshot = snapshot_of_dump(
        path.read_text(encoding="utf-8"),
        where=path.name,
        ttft_percentile=ttft_percentile,
        itl_percentile=99.0,
        taken_at_s=1.0,
    )
    gpu = GpuSnapshot(taken_at_s=1.0, unavailable_cause="NVML library not found")
    data = snapshot_to_json(snapshot, source="metrics-file", gpu=gpu)
    # Strict JSON: a NaN or infinity anywhere would raise here.
    return json.loads(json.dumps(data, allow_nan=False))  # type: ignore[no-any-return]


def test_json_shape_has_the_documented_unit_named_keys() -> None:
    data = _dump(CAPTURES / "vllm-0.32-cpu-preempt.txt")
    assert data["schema"] == SCHEMA and data["source"] == "metrics-file"
    ttft = data["ttft_s"]
    assert isinstance(ttft, dict)
    assert set(ttft) >= {"p50", "p90", "p95", "p99", "count", "mean", "buckets"}
    assert ttft["configured_percentile"] == 95.0
    assert set(ttft["buckets"]["p99"]) == {"lower", "upper", "width", "clamped"}
    kv = data["kv"]
    assert isinstance(kv, dict)
    assert (kv["blocks_total"], kv["blocks_used"], kv["blocks_free"]) == (8, 6, 1)
    assert kv["cache_dtype"] == "auto" and kv["block_size_tokens"] == 128
    requests = data["requests"]
    assert isinstance(requests, dict)
    assert (requests["running"], requests["waiting"]) == (3.0, 10.0)
    assert data["window"] == {"requested_s": None, "covered_s": None, "since_start": True}
    assert data["throughput"] == {
        "prompt_tokens_per_s": None,
        "generation_tokens_per_s": None,
        "requests_per_s": None,
        "preemptions_per_s": None,
    }
    assert data["gpu"] == {
        "taken_at_s": 1.0,
        "visible": False,
        "reason": "no NVIDIA GPU visible (NVML library not found)",
    }
    assert data["missing"] == [] and data["unknown"] == []


def test_json_says_when_the_replica_started_and_its_uptime() -> None:
    snapshot = snapshot_of_dump(
        (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8"),
        where="dump",
        taken_at_s=1_796_023_578.19 + 3 * 3600 + 12 * 60,
    )
    replica = snapshot_to_json(snapshot, source="metrics-file")["replica"]
    assert replica["started_at_s"] == 1_796_023_578.19
    assert replica["uptime_s"] == pytest.approx(3 * 3600 + 12 * 60)
    assert "up 3h 12m" in format_snapshot_text(snapshot)


def test_json_of_an_old_replica_says_what_it_lacks_with_nulls() -> None:
    data = _dump(HANDMADE / "vllm-0.6-v0-handmade.txt", ttft_percentile=None)
    queue = data["queue_s"]
    assert isinstance(queue, dict)
    assert queue["p99"] is None and queue["count"] is None and queue["buckets"]["p99"] is None
    assert "vllm:request_queue_time_seconds" in data["missing"]  # type: ignore[operator]
    assert data["replica"]["started_at_s"] is None  # type: ignore[index]
    assert data["replica"]["uptime_s"] is None  # type: ignore[index]
    assert data["requests"]["swapped"] == 1.0  # type: ignore[index]
    assert "p95" not in data["ttft_s"]  # type: ignore[operator]


def test_clamped_quantile_has_no_width_and_no_infinity() -> None:
    data = _dump(HANDMADE / "vllm-multi-engine-handmade.txt")
    p99 = data["ttft_s"]["buckets"]["p99"]  # type: ignore[index]
    assert p99 == {"lower": 0.5, "upper": None, "width": None, "clamped": True}
    assert data["ttft_s"]["p99"] == 0.5  # type: ignore[index]


def test_text_table_names_every_row_and_says_na() -> None:
    snapshot = snapshot_of_dump(
        (HANDMADE / "vllm-0.6-v0-handmade.txt").read_text(encoding="utf-8"), where="dump"
    )
    text = format_snapshot_text(snapshot)
    for label in ("TTFT", "ITL", "e2e", "queue", "prefill", "decode", "KV cache", "GPU: not read"):
        assert label in text
    assert "swapped 1" in text
    assert "missing: " in text and "N/A" in text
    assert "up N/A" in text
    assert "27,153 total" in text


CLAMPED_E2E = """\
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{le="0.05"} 60
vllm:e2e_request_latency_seconds_bucket{le="2560.0"} 60
vllm:e2e_request_latency_seconds_bucket{le="+Inf"} 100
vllm:e2e_request_latency_seconds_count 100
vllm:e2e_request_latency_seconds_sum 9000
"""


def test_text_table_keeps_clamped_quantiles_apart_and_under_their_headings() -> None:
    text = format_snapshot_text(snapshot_of_dump(CLAMPED_E2E, where="dump"))
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("latency (s)"))
    row = next(line for line in lines if line.startswith("e2e"))
    # p50: rank 50 of 60 in (0, 0.05] is 0.0417; p90 and p99 fall past the 2560 s bucket.
    assert row.split()[1:5] == ["0.0417", ">2560.0000", ">2560.0000", "100"]
    for heading in ("p50", "p90", "p99", "count"):
        end = head.index(heading) + len(heading)
        assert row[end - 1] != " " and row[end] == " ", heading


def test_percentile_keys() -> None:
    assert [percentile_key(p) for p in (50.0, 99.0, 99.9)] == ["p50", "p99", "p99.9"]


def test_json_gives_the_servers_verdict_on_each_target_with_its_bucket() -> None:
    import dataclasses

    from slotop.collectors.histograms import quantile_estimate
    from slotop.collectors.snapshot import LatencyQuantiles

    # 985 of 1000 at ≤ 250 ms and 15 at 490 ms: p99 interpolates to 333 ms inside (0.25, 0.5].
    buckets = [(0.1, 0.0), (0.25, 985.0), (0.5, 1000.0), (1.0, 1000.0), (float("inf"), 1000.0)]
    ttft = LatencyQuantiles(((99.0, quantile_estimate(0.99, buckets)),), 99.0, 1000.0, None)
    snapshot = snapshot_of_dump(
        (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8"),
        where="dump",
        ttft_percentile=99.0,
        itl_percentile=99.0,
        taken_at_s=1.0,
    )
    snapshot = dataclasses.replace(
        snapshot, window=dataclasses.replace(snapshot.window, ttft_s=ttft)
    )
    bucket = {"lower": 0.25, "upper": 0.5, "width": 0.25, "clamped": False}
    for target_s, verdict in ((0.35, "undecided"), (0.5, "pass"), (0.25, "breach")):
        data = snapshot_to_json(snapshot, source="metrics-file", ttft_target_s=target_s)
        assert data["ttft_s"]["slo"] == {
            "percentile": 99.0,
            "target": target_s,
            "verdict": verdict,
            "bucket": bucket,
        }
        assert data["itl_s"]["slo"] is None and data["e2e_s"]["slo"] is None  # no target given
    assert snapshot_to_json(snapshot, source="metrics-file")["ttft_s"]["slo"] is None
