"""How far a before/after difference may move between two runs of one configuration, from each
side's own requests; a difference is marked beyond that noise only when it clears it.

Two runs of the same dials at the same load never give the same numbers: a percentile moves with
which requests happened to be slow, a rate with where the span's edges cut the stream, and in a
closed loop both move with how the streams happen to lie against each other (which of them
prefill in the same engine step). That last part is shared by requests close in time, so the
requests of a side are not independent draws, and an error that treats them so comes out far too
small (a restart that changed nothing reads as "worse").

Each side is therefore cut into batches: consecutive stretches of its span, each at least
`BATCH_CYCLES` of the loop's own cycle long (the median request's end-to-end time: a stream sends
its next request when its last one ends, so what one request meets, the next few meet too), and
at most `MAX_BATCHES` of them. Batches that far apart vary about independently, so:

- Percentiles (TTFT, ITL) and the goodput share: a seeded bootstrap over batches. A replicate
  draws the side's batches with replacement, pools their requests (a request's ITL gaps with it)
  and recomputes the statistic with numpy's linear interpolation; the replicates' standard
  deviation, scaled by √(k/(k−1)) for the k batches drawn from, is the side's standard error.
- Rates (output tokens/s, requests/s, goodput/s): batch means. The rate in each batch; their
  standard deviation over √k is the side's standard error.

A difference's noise is then t·√(se_before² + se_after²), where t is Student's 97.5% point for
k − 1 degrees of freedom, k the fewer batches of the two sides (1.96 only with many batches): a
side of five batches gives a wider band than one of ten, as it should. The difference is beyond
noise when |after − before| exceeds it. A side too short for `MIN_BATCHES` batches, or a
percentile with fewer than `MIN_TAIL_SAMPLES` samples above it on a side, has no noise (the row
says "noise unknown"): a p99 of 50 requests is about their largest, and no interval drawn from
them says how far the next run's largest will be.

Two kinds of row follow their own rule instead:

- Counts of rare events (preemptions, failed requests) are Poisson counts over each side's span,
  compared by the exact conditional test: given k₁ + k₂ events in spans t₁ and t₂, the after side's
  share is binomial with p = t₂ / (t₁ + t₂) when the rates are equal; beyond noise when the
  two-sided p-value is under 0.05 (0 against 5 in equal spans is not: p = 0.0625; 0 against 6 is).
- KV capacity (blocks, tokens, sequences at max context) is configuration, not a sample: exact, so
  any difference is beyond noise and none is the same.

The bootstrap is seeded, so the same requests always give the same marks (a pane does not flicker,
a test does not wobble). Whether the band holds its promise is checked the only way that counts:
restarts that change nothing (`python -m bench.bench_aa`; docs/before-after.md quotes it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.resample import (
    REPLICATES,
    SEED,
    Z_95,
    cluster_percentile_se,
    cluster_share_se,
    t_975,
)
from slotop.collectors.probe.stats import meets_targets, tokens_in_windows
from slotop.slo import GoodputTargets

COUNTS_ALPHA = 0.05
"""The counts test marks a difference beyond noise below this two-sided p-value."""
BATCH_CYCLES = 2.0
"""A batch spans at least this many of the loop's cycles (median end-to-end times)."""
MAX_BATCHES = 10
MIN_BATCHES = 3
"""A side needs this many batches for an error: fewer say next to nothing of their spread."""
SIDE_CYCLES = 12.0
"""A side spans at least this many of its requests' lifetimes: six batches of two, so its band
rests on five degrees of freedom (t = 2.57) at the least."""
MIN_TAIL_SAMPLES = 2.0
"""A percentile is judged on a side only when this many samples lie above it there, about: a p99
needs 200 requests (or ITL gaps), a p90 20, a median 4."""


class NoiseMethod(Enum):
    """How a row's noise is estimated."""

    BOOTSTRAP = "bootstrap over batches"
    BATCH_MEANS = "batch means"
    COUNTS = "exact Poisson test"
    EXACT = "exact"


@dataclass(frozen=True, slots=True)
class Noise:
    """A row's run-to-run noise: a ± half-width (bootstrap, batch means), a p-value (counts), or
    none for an exact value; None fields where a side held too little to estimate it, and then
    `unknown` says why."""

    method: NoiseMethod
    half_width: float | None = None
    p_value: float | None = None
    unknown: str = ""
    between_starts: float | None = None
    """Of `half_width`, the replica's start-to-start part (`starts`), where one was measured."""

    def beyond(self, delta: float) -> bool | None:
        """Whether a difference clears the noise; None when the noise could not be estimated."""
        if self.method is NoiseMethod.EXACT:
            return delta != 0
        if self.method is NoiseMethod.COUNTS:
            return None if self.p_value is None else self.p_value < COUNTS_ALPHA
        return None if self.half_width is None else abs(delta) > self.half_width


def band_multiplier(batches_before: int | None, batches_after: int | None) -> float | None:
    """The t multiplier of a difference's band: from the side with fewer batches; None if unknown."""
    if batches_before is None or batches_after is None:
        return None
    return t_975(min(batches_before, batches_after) - 1)


def difference_noise(
    se_before: float | None, se_after: float | None, multiplier: float | None = Z_95
) -> float | None:
    """The ± half-width of a difference of two independent estimates: multiplier·√(se₁² + se₂²)."""
    if se_before is None or se_after is None or multiplier is None:
        return None
    return multiplier * math.hypot(se_before, se_after)


def batch_means_se(values: Sequence[float]) -> float | None:
    """Standard error of a mean from its value in each of k batches: sd / √k (None under 2)."""
    if len(values) < 2:
        return None
    return float(np.std(np.asarray(values, dtype=float), ddof=1) / math.sqrt(len(values)))


def batch_edges(start_s: float, end_s: float, cycle_s: float | None) -> list[tuple[float, float]]:
    """Equal consecutive batches of (start_s, end_s], each at least `BATCH_CYCLES` cycles long,
    at most `MAX_BATCHES`; none for an empty span, one when the cycle is unknown."""
    span = end_s - start_s
    if span <= 0:
        return []
    shortest = BATCH_CYCLES * cycle_s if cycle_s is not None and cycle_s > 0 else span
    count = max(1, min(MAX_BATCHES, math.floor(span / shortest)))
    step = span / count
    return [(start_s + i * step, start_s + (i + 1) * step) for i in range(count)]


def batch_of(sent_at_s: float, edges: Sequence[tuple[float, float]]) -> int:
    """The batch a request sent at `sent_at_s` falls in (the first holds its start, the last its
    end)."""
    start_s, end_s = edges[0][0], edges[-1][1]
    step = (end_s - start_s) / len(edges)
    return min(len(edges) - 1, max(0, math.floor((sent_at_s - start_s) / step)))


def loop_cycle_s(records: Sequence[ProbeRecord]) -> float | None:
    """The loop's cycle: the median end-to-end time of the requests that ended well."""
    ends = [r.e2e_s for r in records if r.ok and r.e2e_s is not None]
    return float(np.median(ends)) if ends else None


def tail_is_thin(samples: int, percentile: float) -> bool:
    """Whether too few samples lie above `percentile` to judge it (`MIN_TAIL_SAMPLES`)."""
    return samples * (100.0 - percentile) / 100.0 < MIN_TAIL_SAMPLES


@dataclass(frozen=True, slots=True)
class SideSpread:
    """Standard errors of one side's statistics, from its own batches; None where too few.

    Percentile errors are keyed by percentile, in seconds; rate errors are per second. `batches`
    is how many batches the side was cut into (the errors' degrees of freedom are one fewer),
    each `batch_s` long; None when the side was too short to cut. `thin` names the percentiles
    (as "ttft p99") with too few samples above them to judge.
    """

    ttft_s: tuple[tuple[float, float | None], ...] = ()
    itl_s: tuple[tuple[float, float | None], ...] = ()
    goodput_ratio: float | None = None
    output_tokens_per_s: float | None = None
    request_rate_rps: float | None = None
    goodput_rps: float | None = None
    batches: int | None = None
    batch_s: float | None = None
    thin: tuple[str, ...] = ()

    def latency(self, kind: str, percentile: float) -> float | None:
        """The standard error of TTFT ("ttft") or ITL ("itl") at `percentile`, None if unknown."""
        pairs = self.ttft_s if kind == "ttft" else self.itl_s
        return next((se for p, se in pairs if p == percentile), None)

    def is_thin(self, kind: str, percentile: float) -> bool:
        """Whether a percentile had too few samples above it to be judged on this side."""
        return f"{kind} p{percentile:g}" in self.thin


def side_spread(
    records: Sequence[ProbeRecord],
    start_s: float,
    end_s: float,
    percentiles: Sequence[float],
    targets: GoodputTargets | None,
    *,
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> SideSpread:
    """One side's standard errors, counted as its statistics are (`measured_window_stats`):
    latencies and goodput over the requests sent in [start_s, end_s], rates over what arrived
    inside it; each from the side's batches (`batch_edges`)."""
    sent = [r for r in records if start_s <= r.sent_at_s <= end_s]
    ok = [r for r in sent if r.ok]
    edges = batch_edges(start_s, end_s, loop_cycle_s(ok))
    if len(edges) < MIN_BATCHES:
        return SideSpread()
    wanted = tuple(float(p) for p in percentiles)
    with_ttft = [r for r in ok if r.ttft_s is not None]
    ttft = cluster_percentile_se(
        [r.ttft_s for r in with_ttft if r.ttft_s is not None],
        [batch_of(r.sent_at_s, edges) for r in with_ttft],
        wanted,
        replicates=replicates,
        seed=seed,
    )
    batches = [batch_of(r.sent_at_s, edges) for r in ok]
    itl = cluster_percentile_se(
        [gap for r in ok for gap in r.itl_s],
        [batch for batch, r in zip(batches, ok, strict=True) for _ in r.itl_s],
        wanted,
        replicates=replicates,
        seed=seed,
    )
    gaps = sum(len(r.itl_s) for r in ok)
    thin = tuple(
        f"{kind} p{p:g}"
        for kind, samples in (("ttft", len(with_ttft)), ("itl", gaps))
        for p in wanted
        if tail_is_thin(samples, p)
    )
    ended = [r for r in sent if r.ok or r.counts_as_failure]
    share = (
        cluster_share_se(
            [meets_targets(r, targets) for r in ended],
            [batch_of(r.sent_at_s, edges) for r in ended],
            replicates=replicates,
            seed=seed,
        )
        if targets is not None
        else None
    )

    def rate_se(amount: Callable[[float, float], float]) -> float | None:
        return batch_means_se([amount(a, b) / (b - a) for a, b in edges])

    def sent_in(a: float, b: float, keep: Callable[[ProbeRecord], bool]) -> float:
        last = b >= end_s
        return float(
            sum(1 for r in sent if a <= r.sent_at_s and (r.sent_at_s < b or last) and keep(r))
        )

    # each record's chunk times worked out once for every batch
    tokens = dict(zip(edges, tokens_in_windows(records, edges), strict=True))
    return SideSpread(
        ttft_s=tuple(zip(wanted, ttft, strict=True)),
        itl_s=tuple(zip(wanted, itl, strict=True)),
        goodput_ratio=share,
        output_tokens_per_s=rate_se(lambda a, b: tokens[(a, b)]),
        request_rate_rps=rate_se(lambda a, b: sent_in(a, b, lambda r: r.ok)),
        goodput_rps=(
            rate_se(lambda a, b: sent_in(a, b, lambda r: meets_targets(r, targets)))
            if targets is not None
            else None
        ),
        batches=len(edges),
        batch_s=edges[0][1] - edges[0][0],
        thin=thin,
    )


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
