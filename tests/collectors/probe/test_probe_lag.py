"""The probe's own lag: the error it puts into TTFT and ITL, the client-bound rule, loop delay."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from slotop.collectors.probe.lag import (
    CLIENT_ERROR_BOUND_S,
    LagMeter,
    TimedSelector,
    arrays_of,
    client_error,
    client_error_of,
    status_words,
)
from slotop.collectors.probe.process import run_on_timed_loop
from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.collectors.probe.stream import StreamMeter
from tests.support.lagged import stamped


def test_one_late_chunk_moves_two_gaps_and_the_error_is_worked_by_hand() -> None:
    # chunks arrive 30, 50, 70 ms after the send; the middle one is stamped 4 ms late
    record = stamped(0, 0.0, [0.030, 0.050, 0.070], [0.0, 0.004, 0.0])
    error = client_error([record])
    assert error is not None
    # measured gaps 24 and 16 ms, arrival gaps 20 and 20: numpy's p99 of two values
    # interpolates 99% of the way from the lower to the upper: 16 + 0.99 * 8 = 23.92 ms
    assert error.itl_error_s == pytest.approx(0.02392 - 0.020)
    assert error.ttft_error_s == pytest.approx(0.0)
    assert error.chunk_lag_max_s == pytest.approx(0.004)
    assert error.client_bound
    assert "ITL p99 +3.92 ms" in error.words()


def test_records_of_one_two_and_three_chunks_pool_their_gaps_without_crossing_between() -> None:
    # one chunk 2 ms late (no gap); 24 ms measured for 20 arriving; 19 and 20 ms for 20 and 20
    records = [
        stamped(0, 0.0, [0.030], [0.002]),
        stamped(1, 0.0, [0.030, 0.050], [0.0, 0.004]),
        stamped(2, 0.0, [0.030, 0.050, 0.070], [0.001, 0.0, 0.0]),
    ]
    error = client_error(records)
    assert error is not None
    # gaps measured 19, 20, 24 ms: p99 sits 98% of the way from 20 to 24, 23.92 ms; arrivals' 20
    assert error.itl_error_s == pytest.approx(0.02392 - 0.020)
    # TTFTs measured 30, 31, 32 ms: p99 is 31.98 ms; every arrival at 30 ms
    assert error.ttft_error_s == pytest.approx(0.03198 - 0.030)
    assert error.chunks == 6
    assert error.chunk_lag_max_s == pytest.approx(0.004)
    arrays = [arrays_of(record) for record in records]
    assert client_error_of(arrays) == error


def test_the_error_is_the_measured_percentile_less_the_arrivals_own() -> None:
    rng = np.random.default_rng(7)
    records = []
    truth_gaps: list[float] = []
    measured_gaps: list[float] = []
    ttfts, truth_ttfts = [], []
    for request_id in range(200):
        sent = request_id * 0.5
        arrivals = list(sent + 0.030 + 0.020 * np.arange(20) + rng.uniform(0, 0.002, 20))
        lags = list(rng.uniform(0, 0.0003, 20))
        lags[int(rng.integers(20))] += float(rng.choice([0.0, 0.003], p=[0.9, 0.1]))
        records.append(stamped(request_id, sent, arrivals, lags))
        truth_gaps += list(np.diff(arrivals))
        measured_gaps += list(np.diff(np.add(arrivals, lags)))
        truth_ttfts.append(arrivals[0] - sent)
        ttfts.append(arrivals[0] + lags[0] - sent)
    error = client_error(records, ttft_percentile=90.0, itl_percentile=99.0)
    assert error is not None
    assert error.itl_error_s == pytest.approx(
        np.percentile(measured_gaps, 99) - np.percentile(truth_gaps, 99)
    )
    assert error.ttft_error_s == pytest.approx(
        np.percentile(ttfts, 90) - np.percentile(truth_ttfts, 90)
    )
    assert error.chunks == 200 * 20


def test_lag_well_under_the_bound_is_not_client_bound() -> None:
    records = [
        stamped(i, i * 1.0, [i + 0.03 + 0.02 * k for k in range(10)], [0.0002] * 9 + [0.0004])
        for i in range(50)
    ]
    error = client_error(records)
    assert error is not None
    assert not error.client_bound
    assert error.itl_error_s is not None and error.itl_error_s < CLIENT_ERROR_BOUND_S


def test_requests_without_arrival_times_or_that_failed_say_nothing() -> None:
    lagged = stamped(0, 0.0, [0.03, 0.05], [0.0, 0.01])
    unobserved = stamped(1, 0.0, [0.03, 0.05], [0.0, 0.0])
    unobserved = ProbeRecord(**{**_fields(unobserved), "lag_s": None})
    failed = ProbeRecord(**{**_fields(lagged), "error": ErrorClass.STREAM_CUT})
    assert client_error([unobserved]) is None
    assert client_error([failed]) is None
    error = client_error([unobserved, failed, lagged])
    assert error is not None and error.chunks == 2


def _fields(record: ProbeRecord) -> dict[str, object]:
    return {name: getattr(record, name) for name in ProbeRecord.__dataclass_fields__}


def test_a_blocked_loop_is_measured_late_and_client_bound_without_chunks() -> None:
    selector = TimedSelector()
    meter = LagMeter(3, selector)

    async def main() -> None:
        meter.start()
        await asyncio.sleep(0.1)
        time.sleep(0.03)  # a callback that holds the loop: every timer due meanwhile runs late
        await asyncio.sleep(0.1)
        meter.stop()

    run_on_timed_loop(main(), selector)
    summary = meter.summary()
    assert summary is not None
    assert summary.worker == 3
    assert summary.loop_delay_max_s is not None and summary.loop_delay_max_s >= 0.02
    assert summary.chunk_lag_p99_s is None and summary.reads == 0
    assert summary.client_bound  # no arrival times: the loop delay's p99 decides
    assert "loop delay p99" in status_words([summary])


def chunk_event(finish: str = "null") -> bytes:
    return (
        b'data: {"choices":[{"index":0,"text":"x","finish_reason":' + finish.encode() + b"}]}\n\n"
    )


def test_chunks_read_together_are_spread_back_at_the_stream_s_steady_gap() -> None:
    meter = StreamMeter(sent_at_s=0.0)
    for arrived in (0.03, 0.05, 0.07, 0.09, 0.11):  # read as they came, 0.1 ms late
        meter.feed(chunk_event(), arrived + 0.0001, 0.0001)
    # the client stalls: chunks come at 0.13, 0.15, 0.17 and are read together at 0.171,
    # the read carrying the arrival time of the last only
    meter.feed(chunk_event() * 3, 0.171, 0.001)
    assert meter.lags_s is not None
    assert meter.lags_s[-3:] == pytest.approx([0.041, 0.021, 0.001])
    assert meter.lags_s[:5] == pytest.approx([0.0001] * 5)


def test_a_stream_without_a_steady_gap_yet_keeps_the_lower_bound() -> None:
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(chunk_event() * 2, 0.05, 0.002)  # its first two chunks in one read
    assert meter.lags_s == [0.002, 0.002]
