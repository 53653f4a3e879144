"""Pure maths on cumulative series: counter increases across resets, histogram quantiles.

Both follow Prometheus. An increase treats any decrease as a counter reset (a restarted replica)
and counts the value after it as new, so it is never negative. `histogram_quantile` interpolates
linearly inside the bucket the rank falls in, takes 0 as the lower bound of a first bucket whose
upper bound is positive, returns the last finite bound when the rank falls in the +Inf bucket,
and forces cumulative counts to be monotonic before it searches.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Bucket = tuple[float, float]
"""One classic histogram bucket: (upper bound `le`, cumulative count)."""

# Relative differences between neighbouring cumulative counts at or below this are float noise.
_PRECISION_TOLERANCE = 1e-12


def holds_counter_value(value: float) -> bool:
    """Say whether a counter can hold a value: finite and not below zero (NaN cannot)."""
    return 0 <= value < math.inf


def step_increase(previous: float, current: float) -> float:
    """Return how much a counter grew between two readings; a decrease is a reset."""
    return current - previous if current >= previous else current


def counter_increase(values: Iterable[float]) -> float:
    """Return a counter's increase over consecutive readings, resets handled as Prometheus does."""
    total = 0.0
    previous: float | None = None
    for value in values:
        if previous is not None:
            total += step_increase(previous, value)
        previous = value
    return total


@dataclass(frozen=True, slots=True)
class QuantileEstimate:
    """A quantile from buckets, with how coarse it is: the bucket it fell in and the count."""

    q: float
    value: float
    bucket_lower: float
    bucket_upper: float
    observations: float
    clamped: bool = False
    forced_monotonic: bool = False

    @property
    def at_floor(self) -> bool:
        """Clamped to a first bucket whose bound is 0 or less (SGLang's queue time starts at
        `le="0.0"`): the quantile is at most that bound, not above the last."""
        return self.clamped and not math.isinf(self.bucket_upper)

    @property
    def mark(self) -> str:
        """What goes before the value: ">" above the last finite bound, "≤" at the floor."""
        return ("≤" if self.at_floor else ">") if self.clamped else ""

    @property
    def bucket_width(self) -> float | None:
        """Return the width of the bucket the value was interpolated in; None when unbounded."""
        if self.clamped or math.isinf(self.bucket_upper) or math.isinf(self.bucket_lower):
            return None
        return self.bucket_upper - self.bucket_lower

    def bucket_within(self, limit: float) -> bool | None:
        """Whether the bucket the quantile fell in lies at or under `limit` (True), wholly above
        it (False), or straddles it (None), which is all the histogram can say about the quantile.

        A bucket holds the values in (lower, upper], `le` inclusive above, so an upper bound equal
        to the limit is within it and a lower bound equal to it is above; a clamped estimate's
        bucket runs from its lower bound to +Inf.
        """
        if self.bucket_upper <= limit:
            return True
        if self.bucket_lower >= limit:
            return False
        return None


def _prepared(buckets: Iterable[Bucket]) -> tuple[list[float], list[float], bool] | None:
    """Sort, merge equal bounds, fix float noise and force monotonic counts; None if unusable."""
    ordered = sorted(buckets, key=lambda bucket: bucket[0])
    if not ordered or not math.isinf(ordered[-1][0]) or ordered[-1][0] < 0:
        return None
    bounds: list[float] = []
    counts: list[float] = []
    for bound, count in ordered:
        if bounds and bound == bounds[-1]:
            counts[-1] += count
        else:
            bounds.append(bound)
            counts.append(count)
    previous = counts[0]
    for index in range(1, len(counts)):
        delta = abs(counts[index] - previous)
        if delta == 0:
            continue
        if counts[index] != 0 and delta / counts[index] <= _PRECISION_TOLERANCE:
            counts[index] = previous
        else:
            previous = counts[index]
    forced = False
    running_max = counts[0]
    for index in range(1, len(counts)):
        if counts[index] > running_max:
            running_max = counts[index]
        elif counts[index] < running_max:
            counts[index] = running_max
            forced = True
    if len(bounds) < 2:
        return None
    return bounds, counts, forced


def quantile_estimate(q: float, buckets: Iterable[Bucket]) -> QuantileEstimate | None:
    """Estimate the q-quantile, 0 ≤ q ≤ 1; None wherever PromQL's histogram_quantile gives NaN.

    NaN comes from: no +Inf bucket, fewer than two distinct bounds, zero observations, and an
    empty first bucket at q = 0 (0/0). Raises ValueError for q outside [0, 1] or NaN.
    """
    return quantile_estimates((q,), buckets)[0]


def quantile_estimates(
    qs: Sequence[float], buckets: Iterable[Bucket]
) -> tuple[QuantileEstimate | None, ...]:
    """quantile_estimate at each of several quantiles, the buckets prepared once."""
    for q in qs:
        if not 0 <= q <= 1:
            raise ValueError(f"quantile {q!r} is outside [0, 1]")
    prepared = _prepared(buckets)
    if prepared is None:
        return tuple(None for _ in qs)
    return tuple(_estimate(q, *prepared) for q in qs)


def _estimate(
    q: float, bounds: list[float], counts: list[float], forced: bool
) -> QuantileEstimate | None:
    observations = counts[-1]
    if not 0 < observations < math.inf:
        return None
    rank = q * observations
    last = len(bounds) - 1
    index = bisect.bisect_left(counts, rank, 0, last)
    if index == last:
        lower = bounds[last - 1]
        return QuantileEstimate(q, lower, lower, math.inf, observations, True, forced)
    upper = bounds[index]
    if index == 0 and upper <= 0:
        return QuantileEstimate(q, upper, -math.inf, upper, observations, True, forced)
    lower = 0.0
    in_bucket = counts[index]
    if index > 0:
        lower = bounds[index - 1]
        in_bucket -= counts[index - 1]
        rank -= counts[index - 1]
    if not in_bucket > 0:
        return None
    value = lower + (upper - lower) * (rank / in_bucket)
    if math.isnan(value):
        return None
    return QuantileEstimate(q, value, lower, upper, observations, False, forced)


def histogram_quantile(q: float, buckets: Iterable[Bucket]) -> float:
    """Return exactly what PromQL's histogram_quantile returns, NaN and ±Inf included."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    estimate = quantile_estimate(q, buckets)
    return math.nan if estimate is None else estimate.value
