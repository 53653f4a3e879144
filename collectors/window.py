"""Sliding windows over scrapes: a bounded ring of reset-adjusted totals, and views over spans.

Each push turns the newest reading into running totals that only grow: per series, the step
from the previous reading is its increase (a decrease is a counter reset, so the value after it
is the increase), and the steps are summed across series (engines, pids). A window's increase is
then the difference of two totals, so any span costs one subtraction, never a negative rate. A
series met for the first time starts from its first reading, as in Prometheus.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from slotop.collectors.histograms import (
    Bucket,
    QuantileEstimate,
    bucket_deltas,
    quantile_estimate,
    step_increase,
)
from slotop.collectors.parse import LabelSet
from slotop.collectors.reading import HistogramSeries, Reading

# A reading this much (as a share of the span) older than the span still opens the window, so
# that scrape jitter does not cost a whole interval.
SPAN_SLACK_RATIO = 0.02
DEFAULT_MAX_READINGS = 1024


@dataclass(frozen=True, slots=True)
class HistogramDelta:
    """A histogram's observations over a window: cumulative bucket counts, count and sum."""

    buckets: tuple[Bucket, ...]
    count: float
    sum: float

    def quantile(self, q: float) -> QuantileEstimate | None:
        """Estimate the q-quantile over the window; None when the window holds no observation."""
        return quantile_estimate(q, self.buckets)

    @property
    def mean(self) -> float | None:
        """Return the mean observation, None when the window holds none."""
        return self.sum / self.count if self.count > 0 else None


@dataclass(frozen=True, slots=True)
class WindowView:
    """Increases over one span; `covered_s` is None when they run from the replica's start."""

    requested_s: float | None
    covered_s: float | None
    counters: Mapping[str, float]
    histograms: Mapping[str, HistogramDelta]

    def increase(self, key: str) -> float | None:
        """Return a counter's increase over the span, None when the replica lacks it."""
        return self.counters.get(key)

    def rate_per_s(self, key: str) -> float | None:
        """Return a counter's increase per second, None when absent or the span is unknown."""
        increase = self.counters.get(key)
        if increase is None or not self.covered_s:
            return None
        return increase / self.covered_s

    def histogram(self, key: str) -> HistogramDelta | None:
        """Return a histogram's observations over the span, None when the replica lacks it."""
        return self.histograms.get(key)


@dataclass(frozen=True, slots=True)
class _HistogramTotals:
    buckets: Mapping[float, float]
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class _Entry:
    time_s: float
    counters: Mapping[str, float]
    histograms: Mapping[str, _HistogramTotals]


def _counter_step(before: Mapping[LabelSet, float], now: Mapping[LabelSet, float]) -> float:
    return sum(step_increase(before[key], value) for key, value in now.items() if key in before)


def _histogram_step(
    before: Mapping[LabelSet, HistogramSeries],
    now: Mapping[LabelSet, HistogramSeries],
    totals: _HistogramTotals | None,
) -> _HistogramTotals:
    buckets = dict(totals.buckets) if totals is not None else {}
    count = totals.count if totals is not None else 0.0
    total_sum = totals.sum if totals is not None else 0.0
    for key, series in now.items():
        for bound, _ in series.buckets:
            buckets.setdefault(bound, 0.0)
        previous = before.get(key)
        if previous is None:
            continue
        for bound, step in bucket_deltas(previous.buckets, series.buckets):
            buckets[bound] += step
        if series.count is not None and previous.count is not None:
            count += step_increase(previous.count, series.count)
        if series.sum is not None and previous.sum is not None:
            total_sum += step_increase(previous.sum, series.sum)
    return _HistogramTotals(MappingProxyType(buckets), count, total_sum)


def _delta(now: _HistogramTotals, base: _HistogramTotals | None) -> HistogramDelta:
    if base is None:
        return HistogramDelta(tuple(sorted(now.buckets.items())), now.count, now.sum)
    return HistogramDelta(
        tuple(sorted((b, v - base.buckets.get(b, 0.0)) for b, v in now.buckets.items())),
        now.count - base.count,
        now.sum - base.sum,
    )


class Window:
    """A bounded ring of readings' running totals; memory does not grow with session length."""

    def __init__(self, longest_s: float, *, max_readings: int = DEFAULT_MAX_READINGS) -> None:
        if not longest_s > 0 or max_readings < 2:
            raise ValueError("a window needs a positive span and room for two readings")
        self.longest_s = longest_s
        self._entries: deque[_Entry] = deque(maxlen=max_readings)
        self._latest: Reading | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest(self) -> Reading | None:
        """Return the newest reading pushed, None before the first."""
        return self._latest

    def push(self, time_s: float, reading: Reading) -> None:
        """Add a reading taken at ``time_s`` (a monotonic clock, strictly increasing)."""
        previous = self._entries[-1] if self._entries else None
        if previous is not None and not time_s > previous.time_s:
            raise ValueError(f"reading at {time_s} is not after the last one ({previous.time_s})")
        before = self._latest
        counters: dict[str, float] = {}
        histograms: dict[str, _HistogramTotals] = {}
        for key, series in reading.counters.items():
            step = 0.0
            if before is not None and key in before.counters:
                step = _counter_step(before.counters[key], series)
            base = previous.counters.get(key, 0.0) if previous is not None else 0.0
            counters[key] = base + step
        for key, hist in reading.histograms.items():
            old = before.histograms.get(key, {}) if before is not None else {}
            totals = previous.histograms.get(key) if previous is not None else None
            histograms[key] = _histogram_step(old, hist, totals)
        self._entries.append(
            _Entry(time_s, MappingProxyType(counters), MappingProxyType(histograms))
        )
        self._latest = reading
        self._prune(time_s)

    def _prune(self, now_s: float) -> None:
        oldest_needed = now_s - self.longest_s * (1 + SPAN_SLACK_RATIO)
        while len(self._entries) > 2 and self._entries[0].time_s < oldest_needed:
            self._entries.popleft()

    def view(self, span_s: float) -> WindowView | None:
        """Return increases over the newest ``span_s`` seconds; None before two readings."""
        if len(self._entries) < 2:
            return None
        last = self._entries[-1]
        start = last.time_s - span_s * (1 + SPAN_SLACK_RATIO)
        base = next((entry for entry in self._entries if entry.time_s >= start), last)
        if base is last:
            base = self._entries[-2]
        counters = {
            key: total - base.counters.get(key, 0.0) for key, total in last.counters.items()
        }
        histograms = {
            key: _delta(totals, base.histograms.get(key)) for key, totals in last.histograms.items()
        }
        return WindowView(
            requested_s=span_s,
            covered_s=last.time_s - base.time_s,
            counters=MappingProxyType(counters),
            histograms=MappingProxyType(histograms),
        )


def cumulative_view(reading: Reading) -> WindowView:
    """Return a reading's totals since the replica started (series summed, no rates)."""
    counters = {key: math.fsum(series.values()) for key, series in reading.counters.items()}
    histograms: dict[str, HistogramDelta] = {}
    for key, all_series in reading.histograms.items():
        buckets: dict[float, float] = {}
        count = total_sum = 0.0
        for series in all_series.values():
            for bound, value in series.buckets:
                buckets[bound] = buckets.get(bound, 0.0) + value
            count += series.count or 0.0
            total_sum += series.sum or 0.0
        histograms[key] = HistogramDelta(tuple(sorted(buckets.items())), count, total_sum)
    return WindowView(None, None, MappingProxyType(counters), MappingProxyType(histograms))
