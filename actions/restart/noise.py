"""How far a before/after difference may move between two runs of one configuration, from each
side's own requests; a difference is marked beyond that noise only when it clears it.

Two runs of the same dials at the same load never give the same numbers: a percentile moves with
which requests happened to be slow, a rate with where the span's edges cut the stream, a count of
rare events with chance. Each side's statistics therefore get a standard error from the side itself:

- Percentiles (TTFT, ITL) and the goodput share: a seeded bootstrap over requests. A replicate
  draws the side's requests with replacement and recomputes the statistic with numpy's linear
  interpolation; a request's ITL gaps are drawn together, since the gaps of one request rise and
  fall together. The replicates' standard deviation is the side's standard error.
- Rates (output tokens/s, requests/s, goodput/s): the side's span is cut into equal sub-windows and
  the rate is taken in each; their standard deviation over √k is the side's standard error.

A difference's noise is then z·√(se_before² + se_after²) with z = 1.96 (about 95% two-sided), shown
as ± beside the difference, and the difference is beyond noise when |after − before| exceeds it.
Two kinds of row follow their own rule instead:

- Counts of rare events (preemptions, failed requests) are Poisson counts over each side's span,
  compared by the exact conditional test: given k₁ + k₂ events in spans t₁ and t₂, the after side's
  share is binomial with p = t₂ / (t₁ + t₂) when the rates are equal; beyond noise when the
  two-sided p-value is under 0.05 (0 against 5 in equal spans is not: p = 0.0625; 0 against 6 is).
- KV capacity (blocks, tokens, sequences at max context) is configuration, not a sample: exact, so
  any difference is beyond noise and none is the same.

The bootstrap is seeded, so the same requests always give the same marks (a pane does not flicker,
a test does not wobble). Sub-window spread assumes the sub-windows vary independently; in a closed
loop neighbouring windows share requests, so it is an estimate, not a bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.stats import GoodputTargets, meets_targets, tokens_in_window

Z_95 = 1.96
"""Standard normal quantile of the noise band: about 95% two-sided."""
COUNTS_ALPHA = 0.05
"""The counts test marks a difference beyond noise below this two-sided p-value."""
REPLICATES = 1000
SEED = 2024
SUBWINDOWS = 10
MIN_REQUESTS = 2
"""A bootstrap needs at least this many requests on a side to say anything."""


class NoiseMethod(Enum):
    """How a row's noise is estimated."""

    BOOTSTRAP = "bootstrap over requests"
    SUBWINDOWS = "spread over sub-windows"
    COUNTS = "exact Poisson test"
    EXACT = "exact"


@dataclass(frozen=True, slots=True)
class Noise:
    """A row's run-to-run noise: a ± half-width (bootstrap, sub-windows), a p-value (counts), or
    none for an exact value; None fields where a side held too little to estimate it."""

    method: NoiseMethod
    half_width: float | None = None
    p_value: float | None = None

    def beyond(self, delta: float) -> bool | None:
        """Whether a difference clears the noise; None when the noise could not be estimated."""
        if self.method is NoiseMethod.EXACT:
            return delta != 0
        if self.method is NoiseMethod.COUNTS:
            return None if self.p_value is None else self.p_value < COUNTS_ALPHA
        return None if self.half_width is None else abs(delta) > self.half_width


def difference_noise(
    se_before: float | None, se_after: float | None, z: float = Z_95
) -> float | None:
    """The ± half-width of a difference of two independent estimates: z·√(se₁² + se₂²)."""
    if se_before is None or se_after is None:
        return None
    return z * math.hypot(se_before, se_after)


def weighted_percentile(sorted_values: np.ndarray, weights: np.ndarray, percentile: float) -> float:
    """numpy's linear percentile of the array that repeats `sorted_values[i]` `weights[i]` times."""
    cumulative = np.cumsum(weights)
    total = int(cumulative[-1])
    position = (total - 1) * percentile / 100.0
    low = math.floor(position)
    high = min(low + 1, total - 1)
    low_value = sorted_values[np.searchsorted(cumulative, low, side="right")]
    high_value = sorted_values[np.searchsorted(cumulative, high, side="right")]
    return float(low_value + (position - low) * (high_value - low_value))


def bootstrap_percentile_se(
    groups: Sequence[Sequence[float]],
    percentiles: Sequence[float],
    *,
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> tuple[float | None, ...]:
    """Standard errors of pooled percentiles, resampling whole groups (requests) with replacement.

    Each replicate draws as many groups as there are, pools their values and takes numpy's linear
    percentile; a group without values (a one-token request's ITL) is left out. None for every
    percentile when fewer than `MIN_REQUESTS` groups hold values.
    """
    held = [np.asarray(group, dtype=float) for group in groups if len(group)]
    if len(held) < MIN_REQUESTS:
        return tuple(None for _ in percentiles)
    values = np.concatenate(held)
    owner = np.repeat(np.arange(len(held)), [group.size for group in held])
    order = np.argsort(values, kind="stable")
    ordered, owner = values[order], owner[order]
    draws = np.random.default_rng(seed).multinomial(
        len(held), np.full(len(held), 1.0 / len(held)), size=replicates
    )
    found = np.empty((replicates, len(percentiles)))
    for index, counts in enumerate(draws):
        weights = counts[owner]
        for column, percentile in enumerate(percentiles):
            found[index, column] = weighted_percentile(ordered, weights, percentile)
    return tuple(float(se) for se in found.std(axis=0, ddof=1))


def bootstrap_share_se(
    flags: Sequence[bool], *, replicates: int = REPLICATES, seed: int = SEED
) -> float | None:
    """Standard error of a share (good requests among those that ended) by resampling requests."""
    if len(flags) < MIN_REQUESTS:
        return None
    hits = np.asarray(flags, dtype=float)
    draws = np.random.default_rng(seed).multinomial(
        hits.size, np.full(hits.size, 1.0 / hits.size), size=replicates
    )
    return float((draws @ hits / hits.size).std(ddof=1))


def subwindow_edges(
    start_s: float, end_s: float, count: int = SUBWINDOWS
) -> list[tuple[float, float]]:
    """`count` equal sub-windows of (start_s, end_s], in order; none for an empty span."""
    if end_s <= start_s or count < 1:
        return []
    step = (end_s - start_s) / count
    return [(start_s + i * step, start_s + (i + 1) * step) for i in range(count)]


def subwindow_se(rates: Sequence[float]) -> float | None:
    """Standard error of a rate from its value in each of k equal sub-windows: sd / √k."""
    if len(rates) < 2:
        return None
    return float(np.std(np.asarray(rates, dtype=float), ddof=1) / math.sqrt(len(rates)))


def _binomial_pmf(k: int, n: int, p: float) -> float:
    return math.comb(n, k) * p**k * (1.0 - p) ** (n - k)


def counts_p_value(
    count_before: float, span_before_s: float, count_after: float, span_after_s: float
) -> float | None:
    """Two-sided p-value that two Poisson counts over their spans share one rate (exact test).

    Given n = k₁ + k₂, k₂ is binomial(n, t₂ / (t₁ + t₂)) under equal rates; the p-value sums the
    probabilities of every k no likelier than the one seen. None without a span on either side.
    """
    if span_before_s <= 0 or span_after_s <= 0:
        return None
    before, after = round(count_before), round(count_after)
    total = before + after
    if total == 0:
        return 1.0
    share = span_after_s / (span_before_s + span_after_s)
    seen = _binomial_pmf(after, total, share)
    likeliest = seen * (1.0 + 1e-7)
    p_value = sum(
        pmf for k in range(total + 1) if (pmf := _binomial_pmf(k, total, share)) <= likeliest
    )
    return min(1.0, p_value)


@dataclass(frozen=True, slots=True)
class SideSpread:
    """Standard errors of one side's statistics, from its own requests; None where too few.

    Percentile errors are keyed by percentile, in seconds; rate errors are per second.
    """

    ttft_s: tuple[tuple[float, float | None], ...] = ()
    itl_s: tuple[tuple[float, float | None], ...] = ()
    goodput_ratio: float | None = None
    output_tokens_per_s: float | None = None
    request_rate_rps: float | None = None
    goodput_rps: float | None = None

    def latency(self, kind: str, percentile: float) -> float | None:
        """The standard error of TTFT ("ttft") or ITL ("itl") at `percentile`, None if unknown."""
        pairs = self.ttft_s if kind == "ttft" else self.itl_s
        return next((se for p, se in pairs if p == percentile), None)


def _rate_se(
    start_s: float, end_s: float, subwindows: int, amount: Callable[[float, float], float]
) -> float | None:
    return subwindow_se(
        [amount(a, b) / (b - a) for a, b in subwindow_edges(start_s, end_s, subwindows)]
    )


def side_spread(
    records: Sequence[ProbeRecord],
    start_s: float,
    end_s: float,
    percentiles: Sequence[float],
    targets: GoodputTargets | None,
    *,
    replicates: int = REPLICATES,
    seed: int = SEED,
    subwindows: int = SUBWINDOWS,
) -> SideSpread:
    """One side's standard errors, counted as its statistics are (`window_stats`): latencies and
    goodput over the requests sent in [start_s, end_s], rates over what arrived inside it."""
    sent = [r for r in records if start_s <= r.sent_at_s <= end_s]
    ok = [r for r in sent if r.ok]
    wanted = tuple(float(p) for p in percentiles)
    ttft = bootstrap_percentile_se(
        [[r.ttft_s] for r in ok if r.ttft_s is not None], wanted, replicates=replicates, seed=seed
    )
    itl = bootstrap_percentile_se([r.itl_s for r in ok], wanted, replicates=replicates, seed=seed)
    ended = [r for r in sent if r.ok or r.counts_as_failure]
    share = (
        bootstrap_share_se(
            [meets_targets(r, targets) for r in ended], replicates=replicates, seed=seed
        )
        if targets is not None
        else None
    )

    def sent_in(a: float, b: float, keep: Callable[[ProbeRecord], bool]) -> float:
        last = b >= end_s
        return float(
            sum(1 for r in sent if a <= r.sent_at_s and (r.sent_at_s < b or last) and keep(r))
        )

    good_rps = (
        _rate_se(
            start_s,
            end_s,
            subwindows,
            lambda a, b: sent_in(a, b, lambda r: meets_targets(r, targets)),
        )
        if targets is not None
        else None
    )
    return SideSpread(
        ttft_s=tuple(zip(wanted, ttft, strict=True)),
        itl_s=tuple(zip(wanted, itl, strict=True)),
        goodput_ratio=share,
        output_tokens_per_s=_rate_se(
            start_s, end_s, subwindows, lambda a, b: tokens_in_window(records, a, b)
        ),
        request_rate_rps=_rate_se(
            start_s, end_s, subwindows, lambda a, b: sent_in(a, b, lambda r: r.ok)
        ),
        goodput_rps=good_rps,
    )
