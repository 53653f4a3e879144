"""The rule that names a replica standing out from its model's other replicas: slow or skewed.

Among the fresh replicas of one model, three or more (the median of two says nothing about which
one is odd), each is compared with the model's median:

- slow: its TTFT at the SLO's percentile is at least `slow_ratio` times the median of theirs,
  and the whole bucket that value fell in lies above the median (lower bound at or over it), so
  a coarse bucket alone never makes a replica slow;
- skewed on KV: its KV usage is at least `skew_kv_ratio` (0..1) away from the median usage;
- skewed on load: it runs at least `skew_running_ratio` times the median's running requests, or
  that many times fewer, and at least `skew_running_requests` requests apart (the router sends
  it more, or less, than its share).

A replica can carry several flags; each says the value, the median and the ratio in words.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from slotop import fmt
from slotop.collectors.histograms import QuantileEstimate
from slotop.config import FleetSettings

MIN_PEERS = 3


@dataclass(frozen=True, slots=True)
class OutlierThresholds:
    """How far from the model's median a replica must be to be flagged."""

    slow_ratio: float = 2.0
    skew_kv_ratio: float = 0.25
    skew_running_ratio: float = 2.0
    skew_running_requests: float = 2.0

    @classmethod
    def from_settings(cls, fleet: FleetSettings) -> OutlierThresholds:
        """The thresholds [fleet] names."""
        return cls(
            slow_ratio=fleet.slow_ratio,
            skew_kv_ratio=fleet.skew_kv_ratio,
            skew_running_ratio=fleet.skew_running_ratio,
        )


@dataclass(frozen=True, slots=True)
class Peer:
    """What the rule looks at in one replica of a model."""

    name: str
    ttft: QuantileEstimate | None
    kv_usage_ratio: float | None
    running: float | None


@dataclass(frozen=True, slots=True)
class Flag:
    """One way a replica stands out: `kind` slow or skewed, `on` which figure, and the words."""

    kind: Literal["slow", "skewed"]
    on: Literal["ttft", "kv_usage_ratio", "running"]
    value: float
    median: float
    text: str


def _median(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if len(present) >= MIN_PEERS else None


def _slow(peer: Peer, median_s: float | None, t: OutlierThresholds, label: str) -> Flag | None:
    estimate = peer.ttft
    if estimate is None or median_s is None or not median_s > 0:
        return None
    if estimate.value >= t.slow_ratio * median_s and estimate.bucket_lower >= median_s:
        ratio = estimate.value / median_s
        return Flag(
            "slow",
            "ttft",
            estimate.value,
            median_s,
            f"slow: TTFT {label} {fmt.ms(estimate.value)}, {ratio:.1f}× the model's median "
            f"{fmt.ms(median_s)}",
        )
    return None


def _kv_skew(peer: Peer, median: float | None, t: OutlierThresholds) -> Flag | None:
    usage = peer.kv_usage_ratio
    if usage is None or median is None or abs(usage - median) < t.skew_kv_ratio:
        return None
    return Flag(
        "skewed",
        "kv_usage_ratio",
        usage,
        median,
        f"skewed: KV {fmt.percent(usage, 0)} vs the model's median {fmt.percent(median, 0)}",
    )


def _running_skew(peer: Peer, median: float | None, t: OutlierThresholds) -> Flag | None:
    running = peer.running
    if running is None or median is None:
        return None
    apart = abs(running - median) >= t.skew_running_requests
    more = running >= t.skew_running_ratio * median
    fewer = running * t.skew_running_ratio <= median
    if not apart or not (more or fewer):
        return None
    return Flag(
        "skewed",
        "running",
        running,
        median,
        f"skewed: {running:g} running vs the model's median {median:g}",
    )


def outlier_flags(
    peers: Sequence[Peer], thresholds: OutlierThresholds, percentile: float
) -> dict[str, tuple[Flag, ...]]:
    """Flag each of one model's replicas that stands out from the model's median, by name.

    Replicas without flags are left out; fewer than three peers flag none.
    """
    if len(peers) < MIN_PEERS:
        return {}
    label = f"p{percentile:g}"
    ttft_median = _median([p.ttft.value if p.ttft is not None else None for p in peers])
    kv_median = _median([p.kv_usage_ratio for p in peers])
    running_median = _median([p.running for p in peers])
    flags: dict[str, tuple[Flag, ...]] = {}
    for peer in peers:
        found = (
            _slow(peer, ttft_median, thresholds, label),
            _kv_skew(peer, kv_median, thresholds),
            _running_skew(peer, running_median, thresholds),
        )
        raised = tuple(flag for flag in found if flag is not None)
        if raised:
            flags[peer.name] = raised
    return flags
