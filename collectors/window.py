"""Sliding windows over scrapes: a bounded ring of reset-adjusted totals, and views over spans.

Each push turns the newest reading into running totals that only grow: per series, the step
from its last value is its increase (a decrease is a counter reset, so the value after it is the
increase), and the steps are summed across series (engines, pids). A window's increase is then
the difference of two totals, so any span costs one subtraction, never a negative rate.

A series' last value is carried across scrapes that lack it (a page cut short, a family briefly
gone), as a Prometheus range keeps the samples it holds, and a value no counter can hold (NaN,
±Inf, below zero) is skipped as if absent. A series met for the first time starts from its first
reading, as in Prometheus. One unseen for longer than the longest span is forgotten, so memory
stays bounded when a restarted replica brings new labels (pids, engines); its growth across so
long a gap then falls in no window. A view holds a metric only when its span holds a sample of it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from slotop.collectors.histograms import (
    Bucket,
    QuantileEstimate,
    holds_counter_value,
    quantile_estimate,
    quantile_estimates,
    step_increase,
)
from slotop.collectors.parse import LabelSet
from slotop.collectors.reading import HistogramSeries, Reading

# A reading this much (as a share of the span) older than the span still opens the window, so
# that scrape jitter does not cost a whole interval.
SPAN_SLACK_RATIO = 0.02
DEFAULT_MAX_READINGS = 1024
_VALUE = "value"
_COUNT = "count"
_SUM = "sum"
_K = TypeVar("_K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class HistogramDelta:
    """A histogram's observations over a window: cumulative bucket counts, count and sum."""

    buckets: tuple[Bucket, ...]
    count: float
    sum: float

    def quantile(self, q: float) -> QuantileEstimate | None:
        """Estimate the q-quantile over the window; None when the window holds no observation."""
        return quantile_estimate(q, self.buckets)

    def quantiles(self, qs: Sequence[float]) -> tuple[QuantileEstimate | None, ...]:
        """Estimate several quantiles at once (the buckets prepared once)."""
        return quantile_estimates(qs, self.buckets)

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
    """Running totals after one push, of every metric ever pushed, and when each had a sample."""

    time_s: float
    counters: Mapping[str, float]
    histograms: Mapping[str, _HistogramTotals]
    seen_s: Mapping[str, float]


class _LastValues:
    """The last value of each counter of one metric's series, carried across scrapes that lack it.

    A counter metric's series holds one counter; a histogram's holds one per bucket, its count and
    its sum, since each bucket is a counter of its own. A series unseen for too long is forgotten.
    """

    __slots__ = ("_seen_s", "_taken", "_values")

    def __init__(self) -> None:
        self._values: dict[LabelSet, dict[Hashable, float]] = {}
        self._seen_s: dict[LabelSet, float] = {}
        self._taken = False

    def __len__(self) -> int:
        return len(self._values)

    def add_steps(
        self,
        labels: LabelSet,
        counters: Iterable[tuple[_K, float]],
        time_s: float,
        totals: dict[_K, float],
    ) -> None:
        """Add each counter's increase since its last value to ``totals``, keeping the new value.

        A value no counter can hold is skipped: the last one is kept and the step is zero.
        """
        last = self._values.setdefault(labels, {})
        taken = False
        for counter, value in counters:
            step = 0.0
            if holds_counter_value(value):
                before = last.get(counter)
                last[counter] = value
                taken = True
                if before is not None:
                    step = step_increase(before, value)
            totals[counter] = totals.get(counter, 0.0) + step
        if taken:
            self._seen_s[labels] = time_s
            self._taken = True

    def settle(self, oldest_s: float) -> bool:
        """End a push: forget series last seen before ``oldest_s``; say whether any was seen."""
        taken, self._taken = self._taken, False
        stale = [
            labels for labels in self._values if self._seen_s.get(labels, -math.inf) < oldest_s
        ]
        for labels in stale:
            del self._values[labels]
            self._seen_s.pop(labels, None)
        return taken


def _counter_step(
    last: _LastValues, now: Mapping[LabelSet, float], total: float, time_s: float
) -> float:
    totals = {_VALUE: total}
    for labels, value in now.items():
        last.add_steps(labels, ((_VALUE, value),), time_s, totals)
    return totals[_VALUE]


def _histogram_step(
    last: _LastValues,
    now: Mapping[LabelSet, HistogramSeries],
    totals: _HistogramTotals | None,
    time_s: float,
) -> _HistogramTotals:
    buckets = dict(totals.buckets) if totals is not None else {}
    tails = {_COUNT: totals.count, _SUM: totals.sum} if totals is not None else {}
    for labels, series in now.items():
        last.add_steps(labels, series.buckets, time_s, buckets)
        present = ((_COUNT, series.count), (_SUM, series.sum))
        last.add_steps(labels, [(k, v) for k, v in present if v is not None], time_s, tails)
    return _HistogramTotals(MappingProxyType(buckets), tails.get(_COUNT, 0.0), tails.get(_SUM, 0.0))


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
        self._last: dict[str, _LastValues] = {}

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
        counters = dict(previous.counters) if previous is not None else {}
        histograms = dict(previous.histograms) if previous is not None else {}
        seen_s = dict(previous.seen_s) if previous is not None else {}
        for key, series in reading.counters.items():
            last = self._last.setdefault(key, _LastValues())
            counters[key] = _counter_step(last, series, counters.get(key, 0.0), time_s)
            if not series:  # declared with no series yet (SGLang's until set): zero, and known
                seen_s[key] = time_s
        for key, hist in reading.histograms.items():
            last = self._last.setdefault(key, _LastValues())
            histograms[key] = _histogram_step(last, hist, histograms.get(key), time_s)
        oldest_s = time_s - self.longest_s * (1 + SPAN_SLACK_RATIO)
        for key, last in self._last.items():
            if last.settle(oldest_s):
                seen_s[key] = time_s
        self._entries.append(
            _Entry(
                time_s,
                MappingProxyType(counters),
                MappingProxyType(histograms),
                MappingProxyType(seen_s),
            )
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
        held = {key for key, seen_s in last.seen_s.items() if seen_s >= base.time_s}
        counters = {
            key: total - base.counters.get(key, 0.0)
            for key, total in last.counters.items()
            if key in held
        }
        histograms = {
            key: _delta(totals, base.histograms.get(key))
            for key, totals in last.histograms.items()
            if key in held
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
