"""A configuration (the dials a replica ran with, from when) and the points of its curve (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slotop.actions.replica.spec import Dials
from slotop.actions.slo import (
    OperatingPoint,
    Verdict,
    counting_failures,
    judge,
    operating_point,
    overall,
)

DialPairs = tuple[tuple[str, str], ...]
"""Dials as `vllm serve` flags and their values, e.g. (("--kv-cache-dtype", "fp8"),)."""

LABEL_WORDS: dict[str, str] = {
    "--kv-cache-dtype": "kv",
    "--max-num-seqs": "seqs",
    "--max-num-batched-tokens": "mbt",
}
"""The short word a label shows for a flag; any other flag shows without its dashes."""


def dial_pairs(dials: Dials) -> DialPairs:
    """Dials as (flag, value) pairs, those left at the replica's default left out."""
    pairs = (arg.partition("=") for arg in dials.flag_args())
    return tuple((flag, value) for flag, _, value in pairs)


def configuration_label(index: int, dials: DialPairs) -> str:
    """A configuration in a few words: `#2 kv fp8 · seqs 64 · mbt 2048`."""
    if not dials:
        return f"#{index} dials unknown"
    words = " · ".join(
        f"{LABEL_WORDS.get(flag, flag.removeprefix('--'))} {value}" for flag, value in dials
    )
    return f"#{index} {words}"


@dataclass(frozen=True, slots=True)
class Configuration:
    """The dials a replica ran with from `started_at_s` (Unix) until the next configuration.

    `index` counts from 1 in the order configurations opened; `dials` is empty when the session
    did not know them (a replica slotop may not restart).
    """

    index: int
    dials: DialPairs
    started_at_s: float
    label: str


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One load level of one configuration, as the client saw it.

    Latencies are at the SLO's percentiles; `output_tokens_per_s` and `goodput_rps` (requests
    per second that met both goodput targets; None without targets) are over the span from the
    first request's send to the last one's end. `requests` ended well, `requests_failed` did not.
    """

    concurrency: int
    ttft_s: float | None
    itl_s: float | None
    requests: int
    output_tokens_per_s: float | None = None
    goodput_rps: float | None = None
    requests_failed: int = 0


@dataclass(frozen=True, slots=True)
class ConfigurationCurve:
    """A configuration and its curve, one point per concurrency in ascending order."""

    configuration: Configuration
    points: tuple[CurvePoint, ...]


def point_verdict(
    point: CurvePoint,
    ttft_target_s: float,
    itl_target_s: float,
    percentiles: tuple[float, float] | None = None,
) -> Verdict:
    """Both of a point's latencies against their targets, combined; given the SLO's
    `percentiles` (TTFT, ITL), its failed requests count against each target too."""
    ttft = judge(point.ttft_s, ttft_target_s)
    itl = judge(point.itl_s, itl_target_s)
    if percentiles is not None:
        ok, failed = point.requests, point.requests_failed
        ttft = counting_failures(ttft, percentiles[0], ok, failed)
        itl = counting_failures(itl, percentiles[1], ok, failed)
    return overall((ttft, itl))


def curve_operating_point(
    points: Sequence[CurvePoint],
    ttft_target_s: float,
    itl_target_s: float,
    percentiles: tuple[float, float] | None = None,
) -> OperatingPoint:
    """The curve's operating point by the method's one rule (`slotop.actions.slo`)."""
    return operating_point(
        (point.concurrency, point_verdict(point, ttft_target_s, itl_target_s, percentiles))
        for point in points
    )
