"""SGLang's /metrics read under the canonical keys: the engine told from the families, the cache
in tokens, counters SGLang shows only once set read as zero, ranks that repeat a batch not summed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from slotop.cli import main
from slotop.collectors.engines import engine_of_names, parse_engine
from slotop.collectors.oneshot import snapshot_of_dump, snapshot_of_replica
from slotop.collectors.reading import gauge_total, read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.report import format_snapshot_text, snapshot_to_json
from slotop.collectors.snapshot import Snapshot
from slotop.collectors.window import Window
from tests.support.http_answers import Answer, Request, http_answers
from tests.support.paths import CAPTURES

LOAD = (CAPTURES / "sglang-0.5.23-cpu-load.txt").read_text(encoding="utf-8")
LABELS = 'engine_type="unified",model_name="tiny-llama",moe_ep_rank="0",pp_rank="0"'


def test_the_engine_is_told_from_the_families_and_can_be_named() -> None:
    assert read_metrics_text(LOAD).engine == "sglang"
    vllm = (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8")
    assert read_metrics_text(vllm).engine == "vllm"
    as_vllm = read_metrics_text(LOAD, "vllm")
    assert as_vllm.engine == "vllm" and "vllm:num_requests_running" in as_vllm.missing
    assert engine_of_names(["vllm:a", "sglang:b"]) is None
    assert parse_engine(" SGLang ") == "sglang"
    with pytest.raises(ValueError, match="expected one of vllm, sglang"):
        parse_engine("trtllm")


def test_a_loaded_sglang_reads_whole_with_its_cache_in_tokens() -> None:
    reading = read_metrics_text(LOAD)
    assert reading.missing == () and reading.unknown == ()
    assert (gauge_total(reading, "requests_running"), gauge_total(reading, "requests_waiting")) == (
        4.0,
        4.0,
    )
    kv = snapshot_of_dump(LOAD, where="capture").kv
    assert (kv.size_tokens, kv.block_size_tokens, kv.blocks_total) == (4096, 1, 4096)
    assert (kv.blocks_used, kv.blocks_free, kv.usage_ratio) == (1116, 2980, 0.27)
    assert kv.max_concurrency == 2.0  # 4,096 tokens over a context of 2,048
    assert kv.cache_dtype is None  # SGLang's metrics do not say it; /get_server_info does


def test_counters_sglang_shows_only_once_set_read_as_zero_not_missing() -> None:
    reading = read_metrics_text(LOAD)
    assert reading.counters["preemptions"] == {} and reading.counters["prefix_cache_hits"] == {}
    retracted = LOAD + (
        "# HELP sglang:num_retracted_requests_total Total number of retracted requests.\n"
        "# TYPE sglang:num_retracted_requests_total counter\n"
        f'sglang:num_retracted_requests_total{{{LABELS},tp_rank="0"}} 3.0\n'
    )
    window = Window(60.0)
    window.push(0.0, reading)
    window.push(10.0, read_metrics_text(retracted))
    view = window.view(60.0)
    assert view is not None
    # A series appearing at 3 is counted from there, as Prometheus's increase() counts it.
    assert view.increase("preemptions") == 0.0 and view.increase("prefix_cache_hits") == 0.0
    stats = snapshot_of_dump(LOAD, where="capture").window
    assert stats.preemptions == 0.0 and stats.prefix_cache_hit_ratio == 0.0


def test_ranks_that_report_one_batch_are_not_summed() -> None:
    both = LOAD.replace(
        f'sglang:num_running_reqs{{{LABELS},tp_rank="0"}} 4.0',
        f'sglang:num_running_reqs{{{LABELS},tp_rank="0"}} 4.0\n'
        f'sglang:num_running_reqs{{{LABELS},tp_rank="1"}} 4.0',
    )
    assert both != LOAD
    assert gauge_total(read_metrics_text(both), "requests_running") == 4.0


def test_a_family_sglang_added_later_is_reported_unknown() -> None:
    newer = LOAD + "# TYPE sglang:brand_new_gauge gauge\nsglang:brand_new_gauge 1.0\n"
    assert read_metrics_text(newer).unknown == ("sglang:brand_new_gauge",)


def test_the_snapshot_speaks_sglang() -> None:
    snapshot = snapshot_of_dump(LOAD, where="capture")
    data = snapshot_to_json(snapshot, source="metrics-file")
    assert data["replica"]["engine"] == "sglang" and data["replica"]["engine_generation"] is None
    text = format_snapshot_text(snapshot)
    assert "SGLang N/A" in text and "decode      SGLang has no such metric" in text
    assert "tokens 1,116 used / 2,980 free / 4,096 total" in text and "retractions" in text


def test_snapshot_reads_an_sglang_dump_and_engine_names_the_catalogue(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dump = str(CAPTURES / "sglang-0.5.23-cpu-load.txt")
    assert main(["snapshot", "--metrics-file", dump, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["replica"]["engine"] == "sglang"
    assert main(["snapshot", "--metrics-file", dump, "--engine", "vllm"]) == 2
    assert "holds no vllm: or sglang: metric" in capsys.readouterr().err


def _sglang_answers(loads: dict[str, Any] | None) -> Callable[[Request], Answer]:
    def answer(request: Request) -> Answer:
        if request.path == "/metrics":
            return Answer(200, LOAD.encode())
        if request.path == "/v1/loads" and loads is not None:
            return Answer(200, json.dumps(loads).encode())
        if request.path == "/get_server_info":
            return Answer(200, (CAPTURES / "sglang-0.5.23-cpu-server-info.json").read_bytes())
        if request.path == "/v1/models":
            return Answer(200, (CAPTURES / "sglang-0.5.23-cpu-models.json").read_bytes())
        if request.path == "/health":
            return Answer(200)
        return Answer(404, b'{"detail":"Not Found"}')

    return answer


def _snapshot(loads: dict[str, Any] | None) -> Snapshot:
    with http_answers(_sglang_answers(loads)) as server, ReplicaClient(server.url) as client:
        return snapshot_of_replica(
            client, interval_s=0.01, long_window_s=60.0, short_window_s=10.0, sleep=lambda s: None
        )


def test_running_and_queued_come_from_v1_loads_where_the_gauges_lag() -> None:
    loads = json.loads((CAPTURES / "sglang-0.5.23-cpu-loads-idle.json").read_text("utf-8"))
    rank = loads["loads"][0]
    rank.update(num_running_reqs=3, num_waiting_reqs=5, num_used_tokens=2048)
    two_ranks = {**loads, "loads": [rank, {**rank, "dp_rank": 1}]}
    snapshot = _snapshot(two_ranks)
    # The /metrics capture says 4 running, 4 queued, 1,116 tokens; the scheduler, asked, more.
    assert (snapshot.requests.running, snapshot.requests.waiting) == (6, 10)
    assert (snapshot.kv.blocks_used, snapshot.kv.size_tokens, snapshot.kv.usage_ratio) == (
        4096,
        8192,
        0.5,
    )
    assert snapshot.replica.kv_cache_dtype == "auto" and snapshot.replica.version == "0.5.23"


def test_without_v1_loads_the_gauges_stand_and_a_note_says_they_lag() -> None:
    snapshot = _snapshot(None)
    assert (snapshot.requests.running, snapshot.requests.waiting) == (4, 4)
    assert any("from /metrics, which lag" in note for note in snapshot.notes)


def test_a_quantile_at_sglangs_zero_floor_reads_at_most_zero() -> None:
    floor = "\n".join(
        f'sglang:queue_time_seconds_bucket{{{LABELS},tp_rank="0",le="{le}"}} 16.0'
        for le in ("0.0", "0.001", "+Inf")
    )
    text = LOAD.split("# HELP sglang:queue_time_seconds")[0] + (
        "# HELP sglang:queue_time_seconds Histogram of queueing time in seconds.\n"
        "# TYPE sglang:queue_time_seconds histogram\n"
        f"{floor}\n"
        f'sglang:queue_time_seconds_sum{{{LABELS},tp_rank="0"}} 0.0\n'
        f'sglang:queue_time_seconds_count{{{LABELS},tp_rank="0"}} 16.0\n'
    )
    estimate = snapshot_of_dump(text, where="capture").window.queue_s.p50
    assert estimate is not None and estimate.at_floor and estimate.mark == "≤"
    line = next(
        line
        for line in format_snapshot_text(snapshot_of_dump(text, where="capture")).splitlines()
        if line.startswith("queue")
    )
    assert "≤0.0000" in line and "(-Inf, 0]" in line


def test_a_v1_loads_that_fails_once_is_asked_again() -> None:
    loads = json.loads((CAPTURES / "sglang-0.5.23-cpu-loads-idle.json").read_text("utf-8"))
    asked: list[int] = []

    def answer(request: Request) -> Answer:
        if request.path == "/v1/loads":
            asked.append(1)
            if len(asked) == 1:
                return Answer(500, b"busy")
        return _sglang_answers(loads)(request)

    with http_answers(answer) as server, ReplicaClient(server.url) as client:
        snapshot = snapshot_of_replica(
            client, interval_s=0.01, long_window_s=60.0, short_window_s=10.0, sleep=lambda s: None
        )
    assert len(asked) == 2 and snapshot.requests.running == 0  # the second ask was answered
    assert not any("which lag" in note for note in snapshot.notes)
