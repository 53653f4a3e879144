"""Client-side stats: numpy-linear percentiles, vllm bench serve's TPOT and goodput, windows, steps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.collectors.probe.stats import (
    GoodputTargets,
    RecordWindow,
    goodput,
    meets_targets,
    probe_stats,
    records_in_window,
    stats_by_step,
    summarize_latency,
    tpot_s,
)


def record(
    ttft_s: float = 0.1,
    itl_s: tuple[float, ...] = (0.02, 0.02),
    output_tokens: int | None = 3,
    *,
    step: int = 0,
    sent_at_s: float = 100.0,
    error: ErrorClass | None = None,
    request_id: int = 0,
) -> ProbeRecord:
    e2e = ttft_s + sum(itl_s)
    return ProbeRecord(
        request_id=request_id,
        step=step,
        sent_at_s=sent_at_s,
        done_at_s=sent_at_s + e2e,
        in_flight_at_send=1,
        planned_prompt_tokens=10,
        planned_output_tokens=3,
        ttft_s=None if error else ttft_s,
        itl_s=() if error else itl_s,
        e2e_s=None if error else e2e,
        chunk_count=0 if error else len(itl_s) + 1,
        prompt_tokens=10,
        output_tokens=output_tokens,
        finish_reason=None if error else "length",
        error=error,
    )


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("size", [1, 2, 7, 100, 1001])
def test_percentiles_equal_numpy_linear_on_recorded_samples(seed: int, size: int) -> None:
    samples = np.random.default_rng(seed).lognormal(-3, 1, size)
    wanted = (1.0, 25.0, 50.0, 90.0, 99.0, 99.9)
    summary = summarize_latency(samples.tolist(), wanted)
    expected = np.percentile(samples, wanted, method="linear")
    assert summary.count == size
    assert summary.values_s == pytest.approx(expected.tolist(), rel=1e-12)
    assert summary.mean_s == pytest.approx(samples.mean())
    assert summary.at(99.0) == pytest.approx(float(np.percentile(samples, 99)))


def test_percentiles_interpolate_between_ranks() -> None:
    summary = summarize_latency([1.0, 2.0, 3.0, 4.0], (50.0, 90.0))
    assert summary.values_s == (2.5, pytest.approx(3.7))


def test_no_samples_give_none_not_zero() -> None:
    summary = summarize_latency([], (50.0, 99.0))
    assert (summary.count, summary.mean_s, summary.values_s) == (0, None, (None, None))
    with pytest.raises(KeyError, match="percentile 75 was not computed"):
        summary.at(75.0)


@pytest.mark.parametrize(
    ("ttft", "gaps", "output", "expected"),
    [
        (0.1, (0.02, 0.04), 3, 0.03),  # (e2e − ttft) / (out − 1)
        (0.1, (0.02, 0.04), 7, 0.01),  # usage counts beat chunk counts: 0.06 / 6
        (0.1, (0.02, 0.04), None, 0.03),  # no usage: fall back to the 3 chunks
        (0.1, (), 1, None),  # one token: no TPOT
    ],
)
def test_tpot_follows_vllm_bench_serve(
    ttft: float, gaps: tuple[float, ...], output: int | None, expected: float | None
) -> None:
    value = tpot_s(record(ttft, gaps, output))
    assert value == (pytest.approx(expected) if expected is not None else None)


def test_failed_requests_have_no_tpot() -> None:
    assert tpot_s(record(error=ErrorClass.STREAM_CUT)) is None


@pytest.mark.parametrize(
    ("targets", "good"),
    [
        (GoodputTargets(), [True, True, True, False, False]),
        (GoodputTargets(ttft_s=0.2), [True, True, False, False, False]),
        (GoodputTargets(ttft_s=0.3, tpot_s=0.05), [True, False, True, False, False]),
        (GoodputTargets(e2e_s=0.35), [True, False, True, False, False]),
        (GoodputTargets(tpot_s=0.0), [False, False, True, False, False]),  # one token: TPOT 0
    ],
)
def test_goodput_against_hand_computed_cases(targets: GoodputTargets, good: list[bool]) -> None:
    cases = [
        record(0.1, (0.05, 0.05), 3),  # ttft 0.1, tpot 0.05 (equal counts as met), e2e 0.2
        record(0.2, (0.1, 0.1), 3),  # ttft 0.2, tpot 0.1, e2e 0.4
        record(0.3, (), 1),  # ttft 0.3, one token, e2e 0.3
        record(error=ErrorClass.HTTP_STATUS),
        record(error=ErrorClass.CANCELLED),
    ]
    assert [meets_targets(r, targets) for r in cases] == good
    result = goodput(cases, targets, duration_s=2.0)
    assert result.good_requests == sum(good)
    assert result.ended_requests == 4  # the cancelled request never ended
    assert result.ratio == pytest.approx(sum(good) / 4)
    assert result.rate_rps == pytest.approx(sum(good) / 2.0)


def test_goodput_of_nothing_is_none() -> None:
    result = goodput([], GoodputTargets(ttft_s=1.0), duration_s=0.0)
    assert (result.ratio, result.rate_rps) == (None, None)


def test_stats_pool_itl_across_requests_and_count_errors_by_class() -> None:
    records = [
        record(0.1, (0.01, 0.03), 3, request_id=0),
        record(0.3, (0.05,), 2, request_id=1),
        record(error=ErrorClass.TIMEOUT, request_id=2),
        record(error=ErrorClass.TIMEOUT, request_id=3),
        record(error=ErrorClass.CONNECT, request_id=4),
        record(error=ErrorClass.CANCELLED, request_id=5),
    ]
    stats = probe_stats(records, 100.0, 102.0, (50.0,), GoodputTargets(ttft_s=0.2))
    assert stats.requests_ok == 2
    assert stats.requests_failed == 3
    assert stats.requests_cancelled == 1
    assert stats.errors == ((ErrorClass.CONNECT, 1), (ErrorClass.TIMEOUT, 2))
    assert stats.itl.count == 3
    assert stats.itl.at(50.0) == pytest.approx(0.03)
    assert stats.ttft.values_s == (pytest.approx(0.2),)
    assert stats.tpot.count == 2
    assert stats.e2e.at(50.0) == pytest.approx((0.14 + 0.35) / 2)
    assert stats.request_rate_rps == pytest.approx(1.0)
    assert stats.output_tokens_per_s == pytest.approx(2.5)
    assert stats.chunks_per_s == pytest.approx(2.5)
    assert stats.goodput is not None and stats.goodput.good_requests == 1
    assert stats.duration_s == pytest.approx(2.0)


def test_an_empty_span_has_no_rates() -> None:
    stats = probe_stats([], 5.0, 5.0)
    assert (stats.request_rate_rps, stats.chunks_per_s, stats.goodput) == (None, None, None)
    assert stats.ttft.mean_s is None


def test_window_holds_records_that_ended_inside_it() -> None:
    early = record(sent_at_s=10.0)  # ends at 10.14
    late = record(sent_at_s=19.0)  # ends at 19.14
    assert records_in_window([early, late], now_s=20.0, window_s=10.0) == [early, late]
    assert records_in_window([early, late], now_s=20.14, window_s=10.0) == [late]
    assert records_in_window([early, late], now_s=19.0, window_s=5.0) == []


def test_steps_take_the_records_sent_in_them() -> None:
    records = [
        record(0.1, step=0, sent_at_s=0.0, request_id=0),
        record(0.2, step=1, sent_at_s=5.0, request_id=1),
        record(0.4, step=1, sent_at_s=6.0, request_id=2),
    ]
    by_step = stats_by_step(records, (50.0,))
    assert sorted(by_step) == [0, 1]
    assert by_step[1].ttft.at(50.0) == pytest.approx(0.3)
    assert by_step[1].start_s == 5.0
    assert by_step[1].end_s == pytest.approx(6.44)


def test_record_window_evicts_old_records_and_rates_start_at_the_first_send() -> None:
    window = RecordWindow(keep_s=60.0)
    window.add([record(sent_at_s=100.0, request_id=i) for i in range(4)])
    stats = window.stats(now_s=102.0, window_s=10.0, percentiles=(50.0,))
    assert stats.requests_ok == 4
    assert stats.start_s == 100.0  # the probe ran 2 s of the 10 s window
    assert stats.request_rate_rps == pytest.approx(2.0)
    window.evict(now_s=160.0)
    assert len(window) == 4
    window.evict(now_s=160.2)
    assert len(window) == 0


def test_records_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        record().step = 3  # type: ignore[misc]
