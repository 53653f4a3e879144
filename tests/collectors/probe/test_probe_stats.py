"""Client-side stats: numpy-linear percentiles, vllm bench serve's TPOT and goodput, windows, steps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slotop.collectors.probe.lag import arrays_of
from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.collectors.probe.stats import (
    GoodputTargets,
    RecordWindow,
    goodput,
    measured_window_stats,
    meets_targets,
    percentile_interval,
    probe_stats,
    records_in_window,
    stats_by_step,
    stats_of_arrays,
    summarize_latency,
    throughput_disagrees,
    throughput_gap_ratio,
    tokens_in_window,
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


@pytest.mark.parametrize("intervals", [True, False])
def test_percentiles_and_mean_are_numpy_s_own_to_the_last_bit_in_any_order(intervals: bool) -> None:
    samples = np.random.default_rng(3).lognormal(-4, 0.5, 20_001)
    wanted = (50.0, 90.0, 99.0, 99.9)
    summary = summarize_latency(samples, wanted, intervals=intervals)
    assert summary.values_s == tuple(float(v) for v in np.percentile(samples, wanted))
    assert summary.mean_s == float(np.mean(samples))  # summed in the samples' order
    if intervals:
        ordered = np.sort(samples)
        assert summary.intervals_s == tuple(percentile_interval(ordered, q) for q in wanted)
    else:
        assert summary.intervals_s == ()
        assert summary.interval(99.0) is None


def test_a_window_s_statistics_pool_the_gaps_of_the_requests_that_ended_in_it() -> None:
    rng = np.random.default_rng(11)
    records = []
    for i in range(300):
        gaps = tuple(float(g) for g in rng.lognormal(-4, 0.4, int(rng.integers(0, 40))))
        error = ErrorClass.STREAM_CUT if i % 17 == 0 else None
        records.append(record(float(rng.uniform(0.05, 0.3)), gaps, len(gaps) + 1,
                              sent_at_s=100.0 + i * 0.2, error=error, request_id=i))  # fmt: skip
    window = RecordWindow(keep_s=60.0)
    window.add(records[:150])
    window.add(records[150:])
    now, span = 160.0, 30.0
    inside = [r for r in records if now - span < r.done_at_s <= now]
    stats = window.stats(now, span, (50.0, 99.0))
    pooled = np.array([g for r in inside if r.ok for g in r.itl_s])
    assert stats.itl.count == pooled.size
    assert stats.itl.values_s == tuple(float(v) for v in np.percentile(pooled, (50.0, 99.0)))
    assert stats.itl.mean_s == float(pooled.mean())
    ttfts = [r.ttft_s for r in inside if r.ok]
    assert stats.ttft.values_s == tuple(float(v) for v in np.percentile(ttfts, (50.0, 99.0)))
    assert stats.requests_ok == len(ttfts)
    assert stats.requests_failed == len(inside) - len(ttfts)
    # the view's statistics equal those of the same records taken one by one
    assert stats == probe_stats(inside, stats.start_s, now, (50.0, 99.0))
    # a curve's point asks for no intervals and no client error; the rest is the same
    lean = stats_of_arrays(
        [arrays_of(r) for r in inside], stats.start_s, now, (50.0, 99.0), detail=False
    )
    assert lean.itl.values_s == stats.itl.values_s and lean.itl.intervals_s == ()
    assert lean.client is None
    assert dataclasses.replace(lean, ttft=stats.ttft, itl=stats.itl, tpot=stats.tpot,
                               e2e=stats.e2e, client=stats.client) == stats  # fmt: skip


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


# A hand-worked window (2.5, 6.0] and the chunks of four requests:
#   A sent 0.0, TTFT 1.0, gaps 1, 1, 1: chunks at 1, 2, 3, 4; 8 tokens, so 2 a chunk; 3 and 4 inside.
#   B sent 5.0, TTFT 0.5, gaps .25, .25, .5: chunks at 5.5, 5.75, 6.0, 6.5; no usage chunk, so
#     1 token a chunk (its chunk count); 5.5, 5.75 and 6.0 (the end is inside) count.
#   C sent 6.5, after the window: none.   D failed before its first chunk: none.
# Tokens inside: 2 × 2 + 3 × 1 = 7, over 3.5 s: 2.0 tok/s. Chunks inside: 2 + 3 = 5.
# Latencies: only B was sent inside, so one request with TTFT 0.5 s.
WINDOW = (2.5, 6.0)
STRADDLING = [
    record(1.0, (1.0, 1.0, 1.0), 8, sent_at_s=0.0, request_id=1),
    record(0.5, (0.25, 0.25, 0.5), None, sent_at_s=5.0, request_id=2),
    record(0.1, (0.1,), 2, sent_at_s=6.5, request_id=3),
    record(sent_at_s=0.0, error=ErrorClass.STREAM_CUT, request_id=4),
]


def test_tokens_in_a_window_count_the_chunks_that_arrived_inside_it() -> None:
    assert tokens_in_window(STRADDLING, *WINDOW) == pytest.approx(7.0)


@pytest.mark.parametrize(
    ("start_s", "end_s", "expected_tokens"),
    [
        (0.0, 1.0, 2.0),  # A's first chunk lands on the end: inside
        (1.0, 2.0, 2.0),  # ... and on the start: outside
        (4.0, 5.5, 1.0),  # only B's first chunk
        (0.0, 10.0, 8.0 + 4.0 + 2.0),  # every request's whole output
        (6.5, 100.0, 2.0),  # C's chunks at 6.6 and 6.7; B's last at 6.5 sits on the start
    ],
)
def test_tokens_in_window_edges(start_s: float, end_s: float, expected_tokens: float) -> None:
    assert tokens_in_window(STRADDLING, start_s, end_s) == pytest.approx(expected_tokens)


def test_a_window_holds_the_latencies_of_requests_sent_in_it_and_the_tokens_that_arrived() -> None:
    stats = measured_window_stats(STRADDLING, *WINDOW, percentiles=(50.0,), requests_cut=0)
    assert stats.requests_ok == 1 and stats.requests_failed == 0
    assert stats.ttft.at(50.0) == pytest.approx(0.5)
    assert stats.output_tokens_per_s == pytest.approx(7.0 / 3.5)
    assert stats.chunks_per_s == pytest.approx(5.0 / 3.5)
    assert stats.request_rate_rps == pytest.approx(1.0 / 3.5)
    assert stats.requests_cut == 0


def test_a_window_whose_requests_outlast_it_still_counts_all_it_delivered() -> None:
    # Closed loop, one slot, every request 10 s long with a token a second after a 1 s TTFT:
    # in the 12 s window (20, 32] the requests sent at 10, 20 and 30 deliver at 21..30 and 31, 32
    # (the one sent at 10 ended at 20, on the start: outside). 12 tokens in 12 s: 1 tok/s, where
    # counting only requests both sent and ended inside would find none.
    chain = [
        record(1.0, (1.0,) * 9, 10, sent_at_s=t, request_id=i)
        for i, t in enumerate((10.0, 20.0, 30.0))
    ]
    stats = measured_window_stats(chain, 20.0, 32.0)
    assert stats.output_tokens_per_s == pytest.approx(1.0)
    assert stats.requests_ok == 2  # sent at 20 and 30, each followed to its end
    assert stats.e2e.count == 2


@pytest.mark.parametrize(
    ("client", "server", "gap", "disagrees"),
    [
        (247.0, 298.0, 247 / 298 - 1, True),  # the concurrency 2: −17%
        (95.0, 100.0, -0.05, False),
        (110.0, 100.0, 0.10, False),  # exactly 10%: still agrees
        (111.0, 100.0, 0.11, True),
        (None, 100.0, None, False),
        (100.0, 0.0, None, False),
    ],
)
def test_the_throughput_gap_is_a_share_of_the_replicas_rate(
    client: float | None, server: float | None, gap: float | None, disagrees: bool
) -> None:
    found = throughput_gap_ratio(client, server)
    assert found == (None if gap is None else pytest.approx(gap))
    assert throughput_disagrees(client, server) is disagrees


TEN = np.arange(1.0, 11.0)  # 1, 2, …, 10


@pytest.mark.parametrize(
    ("percentile", "interval"),
    [
        # n·q = 5, 1.96·√(10·0.5·0.5) = 3.10: ranks ⌊1.90⌋ = 1 and ⌈8.10⌉ = 9.
        (50.0, (1.0, 9.0)),
        # n·q = 9, 1.96·√(10·0.9·0.1) = 1.86: ranks ⌊7.14⌋ = 7 and ⌈10.86⌉ = 11, held at 10.
        (90.0, (7.0, 10.0)),
        # n·q = 9.9, 1.96·√(10·0.99·0.01) = 0.62: ranks ⌊9.28⌋ = 9 and ⌈10.52⌉ = 11, held at 10.
        (99.0, (9.0, 10.0)),
    ],
)
def test_a_percentiles_interval_comes_from_the_order_statistics_at_its_ranks(
    percentile: float, interval: tuple[float, float]
) -> None:
    assert percentile_interval(TEN, percentile) == interval
    summary = summarize_latency(TEN, (percentile,))
    assert summary.interval(percentile) == interval


def test_one_sample_has_its_value_as_its_interval_and_none_has_none() -> None:
    assert summarize_latency([0.25], (99.0,)).interval(99.0) == (0.25, 0.25)
    assert summarize_latency([], (99.0,)).interval(99.0) is None
