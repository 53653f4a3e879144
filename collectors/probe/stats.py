"""Client-side latency statistics over probe records, with `vllm bench serve`'s definitions.

TTFT and e2e are per request; ITL pools every gap between token chunks across requests; TPOT per
request is (e2e − TTFT) / (output tokens − 1) where output > 1. Percentiles use numpy's linear
interpolation. Only requests that streamed to their end count in the latencies; failures are
counted by class, and stopped (cancelled) requests are left out of both.

A measured window (`measured_window_stats`, what a sweep step and each side of a before/after
are) counts two things apart, so neither depends on how long a request lasts: its latencies are
those of the requests sent inside it, each followed to its end; its throughput is the tokens that
arrived inside it, whichever request carried them.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

import numpy as np

from slotop.collectors.probe.lag import ClientError, RecordArrays, arrays_of, client_error_of
from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.slo import GoodputTargets

DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)

CONFIDENCE_Z = 1.96
"""Standard normal quantile of the percentile intervals: about 95% two-sided."""


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Count, mean and chosen percentiles of one latency, in seconds; None where no sample."""

    count: int
    mean_s: float | None
    percentiles: tuple[float, ...]
    values_s: tuple[float | None, ...]
    intervals_s: tuple[tuple[float, float] | None, ...] = ()
    """Per percentile, where the true value lies at about 95% confidence given `count` samples
    (`percentile_interval`); empty when not computed, None where no sample."""

    def _index(self, percentile: float) -> int:
        try:
            return self.percentiles.index(percentile)
        except ValueError:
            raise KeyError(
                f"percentile {percentile:g} was not computed; have {self.percentiles}"
            ) from None

    def at(self, percentile: float) -> float | None:
        """The value at `percentile` (one of those computed), or None without samples."""
        return self.values_s[self._index(percentile)]

    def interval(self, percentile: float) -> tuple[float, float] | None:
        """The confidence interval at `percentile`, or None without samples or not computed."""
        index = self._index(percentile)
        return self.intervals_s[index] if index < len(self.intervals_s) else None


def percentile_interval(
    sorted_s: np.ndarray,
    percentile: float,
    z: float = CONFIDENCE_Z,
    value: float | None = None,
) -> tuple[float, float]:
    """A distribution-free confidence interval for a percentile from sorted samples.

    The order statistics at ranks n·q ∓ z·√(n·q·(1−q)) (1-based, floored and ceiled, held within
    1..n) bound the true quantile at about the normal's confidence; the interval is widened to
    hold numpy's interpolated value (`value`, when already worked out), so a small sample's
    interval is at least its neighbours.
    """
    n = int(sorted_s.size)
    q = percentile / 100.0
    spread = z * math.sqrt(n * q * (1.0 - q))
    low_rank = min(max(math.floor(n * q - spread), 1), n)
    high_rank = min(max(math.ceil(n * q + spread), 1), n)
    if value is None:
        value = float(np.percentile(sorted_s, percentile))
    return (
        min(float(sorted_s[low_rank - 1]), value),
        max(float(sorted_s[high_rank - 1]), value),
    )


def summarize_latency(
    samples_s: Sequence[float] | np.ndarray,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    *,
    intervals: bool = True,
) -> LatencySummary:
    """Summarise samples with numpy's linear-interpolation percentiles and, unless told not to,
    their intervals (a sort of the samples)."""
    wanted = tuple(float(q) for q in percentiles)
    values = np.asarray(samples_s, dtype=float)
    if values.size == 0:
        return LatencySummary(0, None, wanted, tuple(None for _ in wanted))
    mean = float(values.mean())  # summed in the samples' own order
    if not intervals:
        found = np.percentile(values, wanted) if wanted else np.empty(0)
        return LatencySummary(int(values.size), mean, wanted, tuple(float(v) for v in found))
    # a percentile is the same order statistics whatever the order: one sort serves them all
    ordered = np.sort(values)
    found = np.percentile(ordered, wanted) if wanted else np.empty(0)
    return LatencySummary(
        int(values.size),
        mean,
        wanted,
        tuple(float(v) for v in found),
        tuple(
            percentile_interval(ordered, q, value=float(v))
            for q, v in zip(wanted, found, strict=True)
        ),
    )


def output_tokens_of(record: ProbeRecord) -> int:
    """Output tokens from the usage chunk, else the count of token chunks."""
    return record.output_tokens if record.output_tokens is not None else record.chunk_count


def tpot_s(record: ProbeRecord) -> float | None:
    """Time per output token after the first, or None for a failed or one-token request."""
    if not record.ok or record.e2e_s is None or record.ttft_s is None:
        return None
    output = output_tokens_of(record)
    if output <= 1:
        return None
    return (record.e2e_s - record.ttft_s) / (output - 1)


def meets_targets(record: ProbeRecord, targets: GoodputTargets) -> bool:
    """Whether a request streamed to its end within every target (a target equal counts as met).

    A one-token request has a TPOT of 0 here, as `vllm bench serve` counts it for goodput.
    """
    if not record.ok or record.ttft_s is None or record.e2e_s is None:
        return False
    checks = (
        (targets.ttft_s, record.ttft_s),
        (targets.tpot_s, tpot_s(record) or 0.0),
        (targets.e2e_s, record.e2e_s),
    )
    return all(target is None or value <= target for target, value in checks)


@dataclass(frozen=True, slots=True)
class Goodput:
    """How many requests met every target, as a share of all that ended and as a rate."""

    good_requests: int
    ended_requests: int
    ratio: float | None
    rate_rps: float | None


def goodput(
    records: Iterable[ProbeRecord], targets: GoodputTargets, duration_s: float | None
) -> Goodput:
    """Count good requests; a failed request ended without meeting the SLO, a stopped one did not end."""
    ended = [r for r in records if r.ok or r.counts_as_failure]
    good = sum(1 for r in ended if meets_targets(r, targets))
    ratio = good / len(ended) if ended else None
    rate = good / duration_s if duration_s and duration_s > 0 else None
    return Goodput(good, len(ended), ratio, rate)


@dataclass(frozen=True, slots=True)
class ProbeStats:
    """The client's view of a span of time: latencies, throughput, errors and goodput."""

    start_s: float
    end_s: float
    requests_ok: int
    requests_failed: int
    requests_cancelled: int
    errors: tuple[tuple[ErrorClass, int], ...]
    ttft: LatencySummary
    itl: LatencySummary
    tpot: LatencySummary
    e2e: LatencySummary
    request_rate_rps: float | None
    output_tokens_per_s: float | None
    chunks_per_s: float | None
    goodput: Goodput | None
    requests_cut: int | None = None
    """Requests sent before the end still streaming when the wait for them ran out (None: unknown)."""
    client: ClientError | None = None
    """How far the probe's own lag moved TTFT and ITL at the highest percentile computed (None
    where its chunks' arrival times were not observable): past 1 ms, the numbers are bent."""

    @property
    def duration_s(self) -> float:
        """Length of the span the rates are taken over."""
        return self.end_s - self.start_s


def probe_stats(
    records: Sequence[ProbeRecord],
    start_s: float,
    end_s: float,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    targets: GoodputTargets | None = None,
) -> ProbeStats:
    """Statistics of `records` (already chosen for the span), with rates over start_s..end_s."""
    return stats_of_arrays([arrays_of(r) for r in records], start_s, end_s, percentiles, targets)


def stats_of_arrays(
    arrays: Sequence[RecordArrays],
    start_s: float,
    end_s: float,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    targets: GoodputTargets | None = None,
    *,
    detail: bool = True,
) -> ProbeStats:
    """`probe_stats` of records already made arrays (`arrays_of`); without `detail`, no
    percentile intervals and no client error (a curve's point needs neither)."""
    records = [a.record for a in arrays]
    ok_arrays = [a for a in arrays if a.record.ok]
    ok = [a.record for a in ok_arrays]
    failures = Counter(r.error for r in records if r.counts_as_failure and r.error is not None)
    cancelled = sum(1 for r in records if r.error is ErrorClass.CANCELLED)
    ttfts = [r.ttft_s for r in ok if r.ttft_s is not None]
    e2es = [r.e2e_s for r in ok if r.e2e_s is not None]
    tpots = [t for t in (tpot_s(r) for r in ok) if t is not None]
    itls = np.concatenate([a.itl_s for a in ok_arrays]) if ok_arrays else np.empty(0)
    duration = end_s - start_s
    per_s = 1.0 / duration if duration > 0 else None
    return ProbeStats(
        start_s=start_s,
        end_s=end_s,
        requests_ok=len(ok),
        requests_failed=sum(failures.values()),
        requests_cancelled=cancelled,
        errors=tuple(sorted(failures.items(), key=lambda item: item[0].value)),
        ttft=summarize_latency(ttfts, percentiles, intervals=detail),
        itl=summarize_latency(itls, percentiles, intervals=detail),
        tpot=summarize_latency(tpots, percentiles, intervals=detail),
        e2e=summarize_latency(e2es, percentiles, intervals=detail),
        request_rate_rps=len(ok) * per_s if per_s is not None else None,
        output_tokens_per_s=(
            sum(output_tokens_of(r) for r in ok) * per_s if per_s is not None else None
        ),
        chunks_per_s=sum(r.chunk_count for r in ok) * per_s if per_s is not None else None,
        goodput=goodput(records, targets, duration) if targets is not None else None,
        client=(
            client_error_of(ok_arrays, max(percentiles), max(percentiles))
            if percentiles and detail
            else None
        ),
    )


THROUGHPUT_AGREEMENT_RATIO = 0.10
"""The client's and the replica's token rates over one span agree within this share."""


def chunk_times_s(record: ProbeRecord) -> tuple[float, ...]:
    """When each token chunk arrived: send + TTFT, then every gap added in turn."""
    if record.ttft_s is None:
        return ()
    return tuple(accumulate(record.itl_s, initial=record.sent_at_s + record.ttft_s))


def tokens_in_window(records: Iterable[ProbeRecord], start_s: float, end_s: float) -> float:
    """Output tokens that arrived in (start_s, end_s], whichever request carried them.

    The stream does not say how many tokens a chunk held when several coalesced, so a request's
    output tokens are spread evenly over its chunks; a request's chunks add up to its total.
    """
    (total,) = tokens_in_windows(records, [(start_s, end_s)])
    return total


def tokens_in_windows(
    records: Iterable[ProbeRecord], windows: Sequence[tuple[float, float]]
) -> list[float]:
    """`tokens_in_window` for each (start_s, end_s] of `windows`, each record's chunk times
    worked out once for all of them (a before/after's batches ask for dozens)."""
    totals = [0.0] * len(windows)
    for record in records:
        times = sorted(chunk_times_s(record))  # already in order: gaps are never negative
        if not times:
            continue
        per_chunk = output_tokens_of(record) / len(times)
        for index, (start_s, end_s) in enumerate(windows):
            if record.sent_at_s > end_s or times[-1] <= start_s:
                continue
            inside = bisect_right(times, end_s) - bisect_right(times, start_s)
            if inside:
                totals[index] += inside * per_chunk
    return totals


def measured_window_stats(
    records: Sequence[ProbeRecord],
    start_s: float,
    end_s: float,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    targets: GoodputTargets | None = None,
    requests_cut: int | None = None,
) -> ProbeStats:
    """A measured window: latencies of the requests sent in [start_s, end_s], each to its end;
    tokens and chunks per second of what arrived inside it, from every record that touched it."""
    sent = [r for r in records if start_s <= r.sent_at_s <= end_s]
    stats = probe_stats(sent, start_s, end_s, percentiles, targets)
    duration = end_s - start_s
    if duration <= 0:
        return replace(stats, requests_cut=requests_cut)
    chunks = sum(
        sum(1 for at in chunk_times_s(r) if start_s < at <= end_s)
        for r in records
        if r.sent_at_s <= end_s
    )
    return replace(
        stats,
        output_tokens_per_s=tokens_in_window(records, start_s, end_s) / duration,
        chunks_per_s=chunks / duration,
        requests_cut=requests_cut,
    )


def throughput_gap_ratio(
    client_tokens_per_s: float | None, server_tokens_per_s: float | None
) -> float | None:
    """How far the client's token rate sits from the replica's counter rate, as a share of the
    latter (−0.2: the client saw 20% fewer); None without both or when the replica made none."""
    if client_tokens_per_s is None or not server_tokens_per_s:
        return None
    return client_tokens_per_s / server_tokens_per_s - 1.0


def throughput_disagrees(
    client_tokens_per_s: float | None, server_tokens_per_s: float | None
) -> bool:
    """Whether the two token rates differ by more than `THROUGHPUT_AGREEMENT_RATIO`."""
    if client_tokens_per_s is None or not server_tokens_per_s:
        return False
    return abs(client_tokens_per_s - server_tokens_per_s) > (
        THROUGHPUT_AGREEMENT_RATIO * abs(server_tokens_per_s)
    )


def records_in_window(
    records: Iterable[ProbeRecord], now_s: float, window_s: float
) -> list[ProbeRecord]:
    """Records that ended in the window (now − window, now], as server histograms count them."""
    return [r for r in records if ended_in(r.done_at_s, now_s, window_s)]


def ended_in(done_at_s: float, now_s: float, window_s: float) -> bool:
    """Whether a request that ended at `done_at_s` counts in the window (now − window, now]."""
    return now_s - window_s < done_at_s <= now_s


def stats_by_step(
    records: Iterable[ProbeRecord],
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
    targets: GoodputTargets | None = None,
) -> dict[int, ProbeStats]:
    """Statistics per load step, each record in the step it was sent in; rates over first send to last end."""
    grouped: dict[int, list[ProbeRecord]] = {}
    for record in records:
        grouped.setdefault(record.step, []).append(record)
    return {
        step: probe_stats(
            group,
            min(r.sent_at_s for r in group),
            max(r.done_at_s for r in group),
            percentiles,
            targets,
        )
        for step, group in sorted(grouped.items())
    }


class RecordWindow:
    """The recent records, kept for `keep_s` seconds of end times, summarised over any window."""

    def __init__(self, keep_s: float) -> None:
        self._keep_s = keep_s
        self._records: deque[RecordArrays] = deque()  # each made arrays once, as it came
        self._first_sent_s: float | None = None

    def add(self, records: Iterable[ProbeRecord]) -> None:
        """Append newly ended records (they arrive in about end-time order)."""
        for record in records:
            self._records.append(arrays_of(record))
            if self._first_sent_s is None or record.sent_at_s < self._first_sent_s:
                self._first_sent_s = record.sent_at_s

    def evict(self, now_s: float) -> None:
        """Forget records that ended more than `keep_s` before now."""
        horizon = now_s - self._keep_s
        while self._records and self._records[0].record.done_at_s <= horizon:
            self._records.popleft()

    def __len__(self) -> int:
        return len(self._records)

    def frozen(self) -> RecordWindow:
        """A copy of what it holds now, which later adds and evictions leave alone (the
        records themselves are frozen, so they are shared)."""
        copy = RecordWindow(self._keep_s)
        copy._records = deque(self._records)
        copy._first_sent_s = self._first_sent_s
        return copy

    def stats(
        self,
        now_s: float,
        window_s: float,
        percentiles: Sequence[float] = DEFAULT_PERCENTILES,
        targets: GoodputTargets | None = None,
    ) -> ProbeStats:
        """Statistics of the records that ended in (now − window, now]; rates over the window,
        or over the part of it since the first request was sent."""
        start = now_s - window_s
        if self._first_sent_s is not None:
            start = max(start, self._first_sent_s)
        chosen = [a for a in self._records if ended_in(a.record.done_at_s, now_s, window_s)]
        return stats_of_arrays(chosen, start, now_s, percentiles, targets)
