"""How sure a probe statistic is: a seeded bootstrap that resamples whole clusters of samples (pure).

Samples that move together are drawn together: a request's ITL gaps (one slow step slows every
request in it), or the requests of one stretch of a closed loop. A replicate draws as many
clusters as there are, with replacement, pools their samples and recomputes numpy's linear
percentile (or the share); the spread of the replicates is the statistic's error, and their
2.5% and 97.5% points its 95% interval. The seed is fixed, so the same samples always give the
same answer: a pane does not flicker, a decision does not wobble.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

REPLICATES = 1000
SEED = 2024
Z_95 = 1.96
"""Standard normal quantile of a 95% band, reached with many batches."""
_T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179)
"""Student's t 97.5% points for 1 to 12 degrees of freedom."""


def t_975(degrees_of_freedom: int) -> float:
    """Student's t 97.5% point: the two-sided 95% multiplier of an error from so many degrees."""
    if degrees_of_freedom < 1:
        raise ValueError(f"{degrees_of_freedom} degrees of freedom; need at least 1")
    if degrees_of_freedom <= len(_T_975):
        return _T_975[degrees_of_freedom - 1]
    # The Cornish-Fisher expansion in 1/df: within 0.002 of the exact point from 13 on.
    z, df = Z_95, degrees_of_freedom
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


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


def cluster_draws(clusters: int, replicates: int, seed: int) -> np.ndarray:
    """How many times each cluster is drawn, per replicate (`replicates` × `clusters`)."""
    draws: np.ndarray = np.random.default_rng(seed).multinomial(
        clusters, np.full(clusters, 1.0 / clusters), size=replicates
    )
    return draws


def small_sample_scale(clusters: int) -> float:
    """The bootstrap's variance over k clusters is (k−1)/k of the usual estimate: √ of its undoing."""
    return math.sqrt(clusters / (clusters - 1))


@dataclass(frozen=True, slots=True)
class Replicates:
    """A bootstrap's replicates of some percentiles (one column each) from `clusters` clusters."""

    percentiles: tuple[float, ...]
    values: np.ndarray
    clusters: int

    def se(self, column: int) -> float:
        """The standard error of one percentile, corrected for few clusters."""
        spread = float(self.values[:, column].std(ddof=1))
        return spread * small_sample_scale(self.clusters)

    def interval(self, column: int, level: float = 0.95) -> tuple[float, float]:
        """The percentile bootstrap's interval of one percentile at `level` (0.95: 2.5%–97.5%)."""
        tail = (1.0 - level) / 2.0 * 100.0
        low, high = np.percentile(self.values[:, column], (tail, 100.0 - tail))
        return float(low), float(high)


def percentile_replicates(
    values: Sequence[float],
    clusters: Sequence[int],
    percentiles: Sequence[float],
    *,
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> Replicates | None:
    """Bootstrap replicates of pooled percentiles, resampling whole clusters with replacement.

    `clusters[i]` names the cluster of `values[i]` (any integers; only those holding values take
    part). None with fewer than two clusters: one cluster says nothing of its own spread.
    """
    if not len(values):
        return None
    owner = np.asarray(clusters, dtype=np.int64)
    present = np.unique(owner)
    if present.size < 2:
        return None
    owner = np.searchsorted(present, owner)
    data = np.asarray(values, dtype=float)
    order = np.argsort(data, kind="stable")
    ordered, owner = data[order], owner[order]
    draws = cluster_draws(present.size, replicates, seed)
    found = np.empty((replicates, len(percentiles)))
    for index, counts in enumerate(draws):
        weights = counts[owner]
        for column, percentile in enumerate(percentiles):
            found[index, column] = weighted_percentile(ordered, weights, percentile)
    return Replicates(tuple(float(p) for p in percentiles), found, int(present.size))


def cluster_percentile_se(
    values: Sequence[float],
    clusters: Sequence[int],
    percentiles: Sequence[float],
    *,
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> tuple[float | None, ...]:
    """Standard errors of pooled percentiles from a cluster bootstrap (`percentile_replicates`);
    None for every percentile with fewer than two clusters."""
    found = percentile_replicates(values, clusters, percentiles, replicates=replicates, seed=seed)
    if found is None:
        return tuple(None for _ in percentiles)
    return tuple(found.se(column) for column in range(len(percentiles)))


def cluster_share_se(
    flags: Sequence[bool],
    clusters: Sequence[int],
    *,
    replicates: int = REPLICATES,
    seed: int = SEED,
) -> float | None:
    """Standard error of a share (good requests among those that ended), resampling clusters."""
    owner = np.asarray(clusters, dtype=np.int64)
    present = np.unique(owner)
    if present.size < 2:
        return None
    owner = np.searchsorted(present, owner)
    hits = np.bincount(owner, weights=np.asarray(flags, dtype=float), minlength=present.size)
    sizes = np.bincount(owner, minlength=present.size).astype(float)
    draws = cluster_draws(present.size, replicates, seed)
    shares = (draws @ hits) / (draws @ sizes)
    return float(shares.std(ddof=1)) * small_sample_scale(present.size)
