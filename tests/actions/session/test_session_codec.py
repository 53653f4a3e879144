"""Session lines, table by table: each encoder against lines written out by hand, and back."""

from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType

import pytest

from slotop.actions.session.lines import (
    decode_gpu,
    decode_probe_event,
    decode_probe_records,
    gpu_line,
    header_line,
    probe_event_line,
    probe_records_line,
    settings_json,
)
from slotop.actions.session.readings import ReadingDecoder, ReadingEncoder, bucket_change
from slotop.collectors.gpu.reader import GpuDevice, GpuProcess, GpuSnapshot
from slotop.collectors.histograms import Bucket
from slotop.collectors.monitor import MonitorPoll
from slotop.collectors.probe.records import ErrorClass, EventKind, ProbeEvent, ProbeRecord
from slotop.collectors.reading import CacheConfig, HistogramSeries, Reading
from slotop.collectors.snapshot import ReplicaInfo, build_snapshot
from slotop.collectors.window import cumulative_view
from slotop.config import LaunchSettings, ReplicaSettings, Settings
from slotop.redact import REDACTED

E0 = (("engine", "0"),)
INF = math.inf


def reading(
    *,
    tokens: float | None = 10.0,
    running: float = 2.0,
    ttft: tuple[Bucket, ...] = ((0.1, 1.0), (INF, 2.0)),
    count: float | None = 2.0,
    total: float = 0.25,
    models: tuple[str, ...] = ("m",),
) -> Reading:
    """A small hand-made reading: one counter, one gauge, one histogram, one engine."""
    counters = {} if tokens is None else {"generation_tokens": {E0: tokens}}
    return Reading(
        counters=MappingProxyType(counters),
        histograms=MappingProxyType({"ttft": {E0: HistogramSeries(ttft, count, total)}}),
        gauges=MappingProxyType({"requests_running": {E0: running}}),
        cache_configs=(CacheConfig("0", 16, 100, "auto", 0.9, 1600, 4.0),),
        model_names=models,
        engines=("0",),
        found_names=MappingProxyType({"generation_tokens": "vllm:generation_tokens"}),
        missing=(),
        unknown=(),
        v0_engine=False,
    )


def poll(value: Reading, mono_s: float, info: ReplicaInfo | None = None) -> MonitorPoll:
    info = info or ReplicaInfo(url="http://h:1")
    snapshot = build_snapshot(
        taken_at_s=1000.0 + mono_s, reading=value, view=cumulative_view(value), replica=info
    )
    return MonitorPoll(mono_s, value, info, (), snapshot)


INFO = {
    "url": "http://h:1",
    "model_name": None,
    "served_models": [],
    "version": None,
    "healthy": None,
    "health_detail": None,
    "engine_generation": None,
    "engines": None,
    "started_at_s": None,
    "engine": "vllm",
    "kv_cache_dtype": None,
    "model_dtype": None,
    "kv_tokens_cap": None,
}
META = {
    "cache_configs": [
        {
            "engine": "0",
            "block_size_tokens": 16,
            "num_gpu_blocks": 100,
            "cache_dtype": "auto",
            "gpu_memory_utilization": 0.9,
            "kv_cache_size_tokens": 1600,
            "max_concurrency": 4.0,
        }
    ],
    "model_names": ["m"],
    "engines": ["0"],
    "found_names": {"generation_tokens": "vllm:generation_tokens"},
    "missing": [],
    "unknown": [],
    "v0_engine": False,
    "engine": "vllm",
}
FIRST = {
    "kind": "reading",
    "t_s": 1001.0,
    "mono_s": 1.0,
    "new": [
        [0, "counter", "generation_tokens", [["engine", "0"]]],
        [1, "gauge", "requests_running", [["engine", "0"]]],
        [2, "count", "ttft", [["engine", "0"]]],
        [3, "sum", "ttft", [["engine", "0"]]],
        [4, "buckets", "ttft", [["engine", "0"]], ["0.1", "+Inf"]],
    ],
    "set": [0, 10, 1, 2, 2, 2, 3, 0.25],
    "buckets": [[4, "=", [1, 2]]],
    "meta": META,
    "info": INFO,
    "notes": [],
}

# Each case: the readings polled after the first one, and the line each must give.
CASES = [
    pytest.param(
        [reading()],
        [{"kind": "reading", "t_s": 1002.0, "mono_s": 2.0}],
        id="nothing changed: times only",
    ),
    pytest.param(
        [reading(tokens=14.0, ttft=((0.1, 2.0), (INF, 5.0)), count=5.0, total=0.5)],
        [
            {
                "kind": "reading",
                "t_s": 1002.0,
                "mono_s": 2.0,
                "set": [0, 14, 2, 5, 3, 0.5],
                "buckets": [[4, "+", [0, 1, 1, 2]]],
            }
        ],
        id="counts grew: new observations per bucket, one in 0.1 and two above",
    ),
    pytest.param(
        [reading(tokens=None), reading(tokens=3.0)],
        [
            {"kind": "reading", "t_s": 1002.0, "mono_s": 2.0, "gone": [0]},
            {"kind": "reading", "t_s": 1003.0, "mono_s": 3.0, "set": [0, 3]},
        ],
        id="a counter missing from a scrape is gone, then back (a reset to 3)",
    ),
    pytest.param(
        [reading(running=math.nan, ttft=((0.1, 1.5), (INF, 2.0)))],
        [
            {
                "kind": "reading",
                "t_s": 1002.0,
                "mono_s": 2.0,
                "set": [1, None],
                "buckets": [[4, "=", [1.5, 2]]],
            }
        ],
        id="NaN is null; a bucket that is no whole count is written whole",
    ),
    pytest.param(
        [reading(models=("m", "n"))],
        [{"kind": "reading", "t_s": 1002.0, "mono_s": 2.0, "meta": {"model_names": ["m", "n"]}}],
        id="only the context that changed",
    ),
]


@pytest.mark.parametrize(("later", "expected"), CASES)
def test_reading_lines_hold_what_changed(later: list[Reading], expected: list[dict]) -> None:
    encoder = ReadingEncoder()
    assert encoder.encode(poll(reading(), 1.0)) == FIRST
    lines = [encoder.encode(poll(value, 2.0 + n)) for n, value in enumerate(later)]
    assert lines == expected


@pytest.mark.parametrize(("later", "expected"), CASES)
def test_reading_lines_decode_to_the_very_readings(later: list[Reading], expected: list) -> None:
    encoder, decoder = ReadingEncoder(), ReadingDecoder()
    for n, value in enumerate([reading(), *later]):
        decoded = decoder.decode(encoder.encode(poll(value, 1.0 + n)))
        assert decoded.mono_s == 1.0 + n and decoded.t_s == 1001.0 + n
        assert decoded.info == ReplicaInfo(url="http://h:1")
        assert _plain(decoded.reading) == _plain(value)


def _plain(value: Reading) -> object:
    """A reading with NaN made comparable and mappings made dicts."""

    def number(x: float | None) -> object:
        return "nan" if x is not None and math.isnan(x) else x

    return (
        {k: {lab: number(v) for lab, v in s.items()} for k, s in value.counters.items()},
        {k: {lab: number(v) for lab, v in s.items()} for k, s in value.gauges.items()},
        {k: dict(s) for k, s in value.histograms.items()},
        value.cache_configs,
        value.model_names,
        value.engines,
        dict(value.found_names),
        value.missing,
        value.unknown,
        value.v0_engine,
    )


@pytest.mark.parametrize(
    ("before", "now", "change"),
    [
        ((1.0, 2.0, 2.0), (1.0, 2.0, 2.0), None),
        ((1.0, 2.0, 2.0), (1.0, 4.0, 5.0), ["+", [1, 2, 2, 1]]),
        ((5.0, 9.0), (1.0, 2.0), ["+", [0, -4, 1, -3]]),  # a reset, still exact
        (None, (1.0, 2.0), ["=", [1, 2]]),
        ((1.0, 2.0), (1.0, 2.0, 3.0), ["=", [1, 2, 3]]),
        ((0.5, 1.0), (1.5, 2.0), ["=", [1.5, 2]]),
    ],
)
def test_bucket_changes(before: tuple | None, now: tuple, change: list | None) -> None:
    assert bucket_change(before, now) == change


RECORD = ProbeRecord(
    request_id=7,
    step=2,
    sent_at_s=100.5,
    done_at_s=101.75,
    in_flight_at_send=3,
    planned_prompt_tokens=512,
    planned_output_tokens=5,
    ttft_s=0.0123456789,
    itl_s=(0.001, 0.001, 0.002, 0.0),
    e2e_s=1.25,
    chunk_count=5,
    prompt_tokens=512,
    output_tokens=5,
    finish_reason="length",
    error=None,
    http_status=200,
)
FAILED = ProbeRecord(
    8, 2, 101.0, 101.5, 4, None, 5, None, (), None, 0, None, None, None,
    ErrorClass.HTTP_STATUS, "HTTP 503", 503,
)  # fmt: skip


ROW_OK = [7, 2, 0.5, 1.75, 3, 512, 5, 0.012346, 1.25, 5, 512, 5, "length", 200]
ROW_FAILED = [8, 2, 1.0, 1.5, 4, None, 5, None, None, 0, None, None, None, 503, "http_status", "HTTP 503"]  # fmt: skip


def test_probe_records_line_by_hand() -> None:
    line = probe_records_line(200.0, [RECORD, FAILED], started_at_s=100.0)
    assert line == {
        "kind": "probe_records",
        "t_s": 200.0,
        "rows": [
            [7, 2, 0.5, 1.75, 3, 512, 5, 0.012346, 1.25, 5, 512, 5, "length", 200],
            [
                8,
                2,
                1.0,
                1.5,
                4,
                None,
                5,
                None,
                None,
                0,
                None,
                None,
                None,
                503,
                "http_status",
                "HTTP 503",
            ],
        ],
        # 1 ms falls in 1.01^694 µs, 2 ms in 1.01^763 (694 + 69); the 0 gap is counted apart
        "itl_buckets": [694, 2, 69, 1],
        "itl_under_1us": 1,
    }
    rows = decode_probe_records(line, started_at_s=100.0)
    assert rows.records[1] == FAILED
    assert rows.records[0].itl_s == ()
    assert rows.records[0].sent_at_s == 100.5 and rows.records[0].ttft_s == 0.012346
    samples = sorted(rows.itl_samples_s())
    assert samples[0] == 0.0 and len(samples) == 4
    assert samples[1:] == pytest.approx([0.001, 0.001, 0.002], rel=0.006)


def test_probe_records_keep_every_gap_when_asked() -> None:
    line = probe_records_line(200.0, [RECORD], started_at_s=100.0, keep_gaps=True)
    assert line["rows"][0][-1] == [0.001, 0.001, 0.002, 0.0]
    assert "itl_buckets" not in line
    rows = decode_probe_records(line, started_at_s=100.0)
    assert rows.records[0].itl_s == RECORD.itl_s and rows.itl_buckets is None


def test_a_closed_loops_stream_and_opening_ride_at_the_end_of_a_row() -> None:
    opening = dataclasses.replace(RECORD, stream=0, opening=True)
    later = dataclasses.replace(RECORD, request_id=9, stream=3)
    line = probe_records_line(200.0, [opening, later, RECORD], started_at_s=100.0)
    # pooled gaps: the gaps column holds null, then the stream and the opening flag
    assert line["rows"][0] == [*ROW_OK, None, "", None, 0, True]
    assert line["rows"][1] == [9, *ROW_OK[1:], None, "", None, 3]  # not an opening: left off
    assert line["rows"][2] == ROW_OK  # an open loop's request: nothing past its status
    rows = decode_probe_records(line, started_at_s=100.0)
    assert [(r.stream, r.opening) for r in rows.records] == [(0, True), (3, False), (None, False)]


def test_a_row_of_an_older_slotop_reads_as_an_open_loops_request() -> None:
    line = {"kind": "probe_records", "t_s": 200.0, "rows": [ROW_OK, ROW_FAILED]}
    rows = decode_probe_records(line, started_at_s=100.0)
    assert rows.records[1] == FAILED
    assert (rows.records[0].stream, rows.records[0].opening) == (None, False)


def test_probe_event_line_by_hand() -> None:
    event = ProbeEvent(12.5, EventKind.CONCURRENCY_SET, 3, "closed", 8, None, None, "")
    line = probe_event_line(event)
    assert line == {
        "kind": "probe_event",
        "t_s": 12.5,
        "event": "concurrency_set",
        "step": 3,
        "mode": "closed",
        "concurrency": 8,
        "rate_rps": None,
        "burstiness": None,
        "detail": "",
    }
    assert decode_probe_event(line) == event


H100 = GpuDevice(
    0, "GPU-1", "H100", 93, 40, 10, 80, 650.5, 700.0, 1980, 61, ("sw_power_cap",),
    (GpuProcess(42, "vllm", 10),),
)  # fmt: skip


@pytest.mark.parametrize(
    "snapshot",
    [
        GpuSnapshot(5.0, unavailable_cause="driver not loaded"),
        GpuSnapshot(
            6.0,
            devices=(
                GpuDevice(
                    0,
                    "GPU-1",
                    "H100",
                    93,
                    40,
                    10,
                    80,
                    650.5,
                    700.0,
                    1980,
                    61,
                    ("sw_power_cap",),
                    (GpuProcess(42, "vllm", 10),),
                ),
            ),
            driver_version="550.1",
        ),
    ],
)
def test_gpu_lines_round_trip(snapshot: GpuSnapshot) -> None:
    line = gpu_line(snapshot)
    assert line["kind"] == "gpu" and line["t_s"] == snapshot.taken_at_s
    assert decode_gpu(line) == snapshot


def test_settings_keep_no_secret() -> None:
    settings = Settings(
        replica=ReplicaSettings(url="http://user:pw@h:8000", api_key="k-123"),
        launch=LaunchSettings(command=("vllm", "--api-key", "k-123"), env=(("HF_TOKEN", "t-9"),)),
    )
    data = settings_json(settings)
    assert "api_key" not in data["replica"] and data["replica"]["api_key_env"] == "VLLM_API_KEY"
    assert data["replica"]["url"] == "http://h:8000"
    assert data["launch"]["env"] == {"HF_TOKEN": REDACTED}
    assert data["launch"]["command"] == ["vllm", "--api-key", REDACTED]


def test_header_names_its_schema() -> None:
    header = header_line(command="sweep", settings=Settings(), started_at_s=5.0)
    assert header["schema"] == "slotop.session/1"
    assert header["command"] == "sweep" and header["started_at_s"] == 5.0
    assert header["replica"] == {"url": "http://127.0.0.1:8000"}
    assert header["settings"]["session"] == {
        "record": True,
        "folder": "",
        "itl_gaps": False,
        "max_file_mb": 64.0,
        "max_folder_mb": 1024.0,
    }
