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
    (found,) = weighted_percentiles(sorted_values, weights, np.array([percentile]))
    return float(found)


def weighted_percentiles(
    sorted_values: np.ndarray, weights: np.ndarray, percentiles: np.ndarray
) -> np.ndarray:
    """`weighted_percentile` at each of `percentiles`: one running sum, one search."""
    cumulative = np.cumsum(weights)
    position, low, high = _ranks(cumulative[-1], percentiles)
    at = np.searchsorted(cumulative, np.concatenate((low, high)), side="right")
    low_value, high_value = (
        sorted_values[at[: percentiles.size]],
        sorted_values[at[percentiles.size :]],
    )
    found: np.ndarray = low_value + (position - low) * (high_value - low_value)
    return found


def _ranks(
    totals: np.ndarray, percentiles: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where numpy's linear percentile falls among `totals` values in order: its fractional
    position, and the 0-based ranks of the values either side of it."""
    position = (totals - 1) * percentiles / 100.0
    low = np.floor(position)
    return position, low, np.minimum(low + 1, totals - 1)


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
    wanted = np.asarray(percentiles, dtype=float)
    blocks = _block_count(ordered.size, present.size, wanted.size)
    if blocks < 2:
        found = _by_running_sums(ordered, owner, draws, wanted)
    else:
        members = _members(owner, present.size, blocks)
        rows = max(1, _HELD_WEIGHTS // (ordered.size // blocks + 1))
        found = np.concatenate(
            [
                _by_blocks(ordered, owner, draws[first : first + rows], wanted, members)
                for first in range(0, replicates, rows)
            ]
        )
    return Replicates(tuple(float(p) for p in percentiles), found, int(present.size))


_PRODUCT_ADVANTAGE = 100.0
"""About how many multiply-adds of a matrix product cost what one step of a running sum does."""
_MIN_BLOCK = 64
"""Fewest samples in a block: below that one running sum a replicate is as cheap."""
_SAMPLES_A_CLUSTER = 4
"""Fewest samples a cluster, on average, for blocks to pay: with one or two (TTFT by request)
the product weighs nearly every cluster in every block."""
_SERIAL_PRODUCT = 1 << 17
"""Most multiply-adds in one matrix product. numpy's OpenBLAS works a product under 262,144 on
the calling thread; a larger one goes to a pool of threads that then spin waiting for more work,
which cost more CPU than the product (a tune test's CPU rose 6% while its time fell a third)."""
_HELD_WEIGHTS = 1 << 20
"""Most weights gathered at once while searching inside blocks (replicates × block size)."""


def _block_count(samples: int, clusters: int, percentiles: int) -> int:
    """How many blocks `_by_blocks` cuts the sorted samples into, balancing the product that
    weighs every block (replicates × clusters × blocks) against the search inside one (replicates
    × 2 per percentile × samples / blocks); under 2 where a running sum a replicate is cheaper."""
    if clusters * _SAMPLES_A_CLUSTER > samples:
        return 1
    balanced = math.sqrt(2 * percentiles * samples * _PRODUCT_ADVANTAGE / clusters)
    return min(int(balanced), samples // _MIN_BLOCK, _SERIAL_PRODUCT // clusters)


def _by_running_sums(
    ordered: np.ndarray, owner: np.ndarray, draws: np.ndarray, wanted: np.ndarray
) -> np.ndarray:
    """`weighted_percentiles` of each replicate."""
    found = np.empty((len(draws), wanted.size))
    for index, counts in enumerate(draws):
        found[index] = weighted_percentiles(ordered, counts[owner], wanted)
    return found


@dataclass(frozen=True, slots=True)
class _Members:
    """The sorted samples cut into consecutive blocks: where each starts, and how many samples of
    each cluster it holds (blocks × clusters)."""

    edges: np.ndarray
    counts: np.ndarray


def _members(owner: np.ndarray, clusters: int, blocks: int) -> _Members:
    edges = np.arange(blocks + 1, dtype=np.int64) * owner.size // blocks
    block_of = np.repeat(np.arange(blocks, dtype=np.int64), np.diff(edges))
    counts = np.bincount(block_of * clusters + owner, minlength=blocks * clusters)
    return _Members(edges, counts.reshape(blocks, clusters).astype(float))


def _by_blocks(
    ordered: np.ndarray,
    owner: np.ndarray,
    draws: np.ndarray,
    wanted: np.ndarray,
    members: _Members,
) -> np.ndarray:
    """`weighted_percentile` of each replicate at every percentile, the same numbers found with
    less work: each block's weight in every replicate comes from one matrix product (whole
    numbers, exact in floating point), and only the block holding a position is summed sample by
    sample."""
    count = len(draws)
    edges = members.edges
    weights = draws.astype(float)
    serial = max(1, _SERIAL_PRODUCT // members.counts.size)  # replicates a product
    running = np.cumsum(
        np.concatenate(
            [
                weights[first : first + serial] @ members.counts.T
                for first in range(0, count, serial)
            ]
        ),
        axis=1,
    )
    position, low, high = _ranks(running[:, -1:], wanted)
    rows = np.arange(count)[:, None]
    offsets = np.arange(int(np.diff(edges).max()))

    def first_above(targets: np.ndarray) -> np.ndarray:
        """The first sample whose running weight passes each replicate's target."""
        block = (running <= targets[:, None]).sum(axis=1)
        before = np.where(block > 0, running[rows[:, 0], block - 1], 0.0)
        start = edges[block]
        inside = offsets < (edges[block + 1] - start)[:, None]
        at = np.minimum(start[:, None] + offsets, owner.size - 1)
        drawn = np.where(inside, draws[rows, owner[at]], 0)
        passed = before[:, None] + np.cumsum(drawn, axis=1) <= targets[:, None]
        index: np.ndarray = start + passed.sum(axis=1)
        return index

    found = np.empty((count, wanted.size))
    for column in range(wanted.size):
        low_value = ordered[first_above(low[:, column])]
        high_value = ordered[first_above(high[:, column])]
        step = position[:, column] - low[:, column]
        found[:, column] = low_value + step * (high_value - low_value)
    return found


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
