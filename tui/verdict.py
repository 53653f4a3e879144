"""Judgements from live data: SLO pass/breach, client–server gap, what binds, the litmus checklist.

Pure functions over frozen inputs, so each rule has a table-driven test. A judgement that lacks
its inputs says so (None, or an unticked item with the reason) rather than guessing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.snapshot import Snapshot, WindowStats
from slotop.tui.curve import CurvePoint, recommend

GPU_BUSY_PCT = 80.0
KV_FULL_RATIO = 0.95
KV_PRESSURE_RATIO = 0.85


class Verdict(enum.Enum):
    """How one latency stands against its target."""

    PASS = "pass"
    BREACH = "breach"
    UNKNOWN = "unknown"


def judge(value_s: float | None, target_s: float) -> Verdict:
    """Pass when the value is at or under the target; unknown without a value."""
    if value_s is None:
        return Verdict.UNKNOWN
    return Verdict.PASS if value_s <= target_s else Verdict.BREACH


def gap_unexplained(client_s: float | None, server: QuantileEstimate | None) -> bool:
    """Whether client and server disagree by more than the server's bucket explains.

    The server's value is interpolated inside one bucket, so any client value inside that bucket
    agrees with it; a client value outside it (or above the last finite bound) is a real gap.
    """
    if client_s is None or server is None:
        return False
    if server.clamped:
        return client_s < server.bucket_lower
    return not server.bucket_lower <= client_s <= server.bucket_upper


def overall(verdicts: tuple[Verdict, ...]) -> Verdict:
    """Breach if any breaches, pass if all pass, unknown otherwise."""
    if Verdict.BREACH in verdicts:
        return Verdict.BREACH
    if verdicts and all(v is Verdict.PASS for v in verdicts):
        return Verdict.PASS
    return Verdict.UNKNOWN


class Binding(enum.Enum):
    """What limits the replica now."""

    NO_DATA = "no data"
    IDLE = "idle"
    KV_CAPACITY = "KV capacity"
    SEQ_CAP = "seq cap (max_num_seqs)"
    TOKEN_BUDGET = "token budget (max_num_batched_tokens)"
    QUEUEING = "queueing"
    NOTHING = "nothing"


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What binds, and the evidence in words."""

    binding: Binding
    evidence: str


def diagnose(
    snapshot: Snapshot | None,
    stats: WindowStats | None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
) -> Diagnosis:
    """Name what binds from running/waiting, KV usage, preemptions, and the limits when known."""
    if snapshot is None or stats is None:
        return Diagnosis(Binding.NO_DATA, "no scrape has succeeded yet")
    running = snapshot.requests.running
    waiting = snapshot.requests.waiting or 0.0
    usage = snapshot.kv.usage_ratio
    preempting = (stats.preemptions_per_s or 0.0) > 0
    if running is None and usage is None:
        return Diagnosis(Binding.NO_DATA, "the replica reports neither running requests nor KV use")
    if preempting or (usage is not None and usage >= KV_FULL_RATIO and waiting > 0):
        return Diagnosis(
            Binding.KV_CAPACITY,
            f"KV {(usage or 0) * 100:.0f}% used, {waiting:.0f} waiting, "
            f"{stats.preemptions_per_s or 0:.2f} preemptions/s",
        )
    if waiting > 0:
        if max_num_seqs is not None and running is not None and running >= max_num_seqs:
            return Diagnosis(
                Binding.SEQ_CAP, f"{running:.0f} running = max_num_seqs, {waiting:.0f} waiting"
            )
        if max_num_batched_tokens is not None and usage is not None and usage < KV_PRESSURE_RATIO:
            return Diagnosis(
                Binding.TOKEN_BUDGET,
                f"{waiting:.0f} waiting with KV {usage * 100:.0f}% used: prefill is chunked at "
                f"{max_num_batched_tokens:,} tokens per step",
            )
        return Diagnosis(
            Binding.QUEUEING,
            f"{waiting:.0f} waiting with KV {(usage or 0) * 100:.0f}% used"
            + ("" if max_num_seqs is not None else "; max_num_seqs unknown"),
        )
    if not running:
        return Diagnosis(Binding.IDLE, "no request running or waiting")
    return Diagnosis(
        Binding.NOTHING, f"{running:.0f} running, none waiting, KV {(usage or 0) * 100:.0f}% used"
    )


@dataclass(frozen=True, slots=True)
class LitmusItem:
    """One line of the checklist: ticked or not, and why."""

    label: str
    ticked: bool
    detail: str


def litmus(
    *,
    ttft_percentile: float | None,
    itl_percentile: float | None,
    slo_source: str,
    snapshot: Snapshot | None,
    gpu: GpuSnapshot | None,
    slo_verdict: Verdict,
    curve: tuple[CurvePoint, ...],
    ttft_target_s: float,
    itl_target_s: float,
) -> tuple[LitmusItem, ...]:
    """The four litmus tests of the method, each ticked from live data."""
    named = ttft_percentile is not None and itl_percentile is not None
    targets = LitmusItem(
        "targets named with percentiles",
        named,
        f"TTFT p{ttft_percentile:g}, ITL p{itl_percentile:g} ({slo_source})"
        if named
        else "set [slo] ttft_percentile and itl_percentile",
    )
    fit = snapshot.kv.max_concurrency if snapshot is not None else None
    fits = LitmusItem(
        "seqs that fit at max context",
        fit is not None,
        f"{fit:.1f} at max context ({snapshot.kv.cache_dtype or 'dtype N/A'})"
        if fit is not None and snapshot is not None
        else "the replica does not say (cache_config_info lacks it)",
    )
    utils = [d.gpu_util_pct for d in gpu.devices if d.gpu_util_pct is not None] if gpu else []
    if not utils:
        busy = LitmusItem(
            "GPU > 80% with p99 in budget",
            False,
            (gpu.unavailable_reason if gpu is not None else None) or "no GPU reading",
        )
    else:
        low = min(utils)
        ok = low > GPU_BUSY_PCT and slo_verdict is Verdict.PASS
        busy = LitmusItem(
            "GPU > 80% with p99 in budget", ok, f"GPU {low}% min, SLO {slo_verdict.value}"
        )
    point = recommend(curve, ttft_target_s, itl_target_s)
    measured = LitmusItem(
        "batch size set by a measured curve",
        point is not None and point.bent,
        f"{len(curve)} points; "
        + (
            "no passing point yet"
            if point is None
            else f"operating point {point.concurrency}"
            + ("" if point.bent else " (p99 not bent yet)")
        ),
    )
    return (targets, fits, busy, measured)
