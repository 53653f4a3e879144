"""Judgements from live data: the client–server gap, what binds now, the litmus checklist.

Pure functions over frozen inputs, so each rule has a table-driven test; the method's rules
themselves (within target, operating point, what binds) live in `slotop.actions.slo`. A judgement
that lacks its inputs says so (None, or an unticked item with the reason) rather than guessing.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop.actions.experiment.model import CurvePoint, curve_operating_point
from slotop.actions.slo import (
    DEFAULT_THRESHOLDS,
    Binding,
    BindingEvidence,
    Diagnosis,
    SloThresholds,
    Verdict,
    engine_terms,
    what_binds,
)
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.snapshot import Snapshot, WindowStats


def gap_unexplained(
    client_s: float | None,
    server: QuantileEstimate | None,
    client_interval_s: tuple[float, float] | None = None,
) -> bool:
    """Whether client and server disagree by more than the server's bucket and the client's own
    sampling error explain.

    The server's value is interpolated inside one bucket, bounds included (`le` is inclusive
    above), so a client value inside it agrees; the client's value is itself uncertain at its
    sample count, so the gap is real only when its whole confidence interval (or, without one,
    its value) lies outside the bucket (or below the last finite bound of a clamped one).
    """
    if client_s is None or server is None:
        return False
    low, high = client_interval_s if client_interval_s is not None else (client_s, client_s)
    low, high = min(low, client_s), max(high, client_s)
    return high < server.bucket_lower or low > server.bucket_upper


def diagnose(
    snapshot: Snapshot | None,
    stats: WindowStats | None,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    thresholds: SloThresholds = DEFAULT_THRESHOLDS,
) -> Diagnosis:
    """What binds now: the live reading and the known limits as evidence for `what_binds`, in
    the replica's engine's terms (as the sweep reads the same replica)."""
    if snapshot is None or stats is None:
        return Diagnosis(Binding.NO_DATA, "no scrape has succeeded yet")
    evidence = BindingEvidence(
        running=snapshot.requests.running,
        waiting=snapshot.requests.waiting or 0.0,
        kv_usage_ratio=snapshot.kv.usage_ratio,
        preemptions_per_s=stats.preemptions_per_s,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        terms=engine_terms(snapshot.replica.engine),
    )
    return what_binds(evidence, thresholds)


@dataclass(frozen=True, slots=True)
class LitmusItem:
    """One line of the checklist: ticked or not, and why; `simulated`: judged on simulated data."""

    label: str
    ticked: bool
    detail: str
    simulated: bool = False


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
    thresholds: SloThresholds = DEFAULT_THRESHOLDS,
    gpu_simulated: bool = False,
) -> tuple[LitmusItem, ...]:
    """The four litmus tests of the method, each ticked from live data.

    With `gpu_simulated` the GPU test is judged on the simulated replica's modelled GPUs (the
    demo), and says so.
    """
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
    busy_label = f"GPU > {thresholds.gpu_busy_pct:g}% with p99 in budget"
    if not utils:
        busy = LitmusItem(
            busy_label,
            False,
            (gpu.unavailable_reason if gpu is not None else None) or "no GPU reading",
        )
    else:
        low = min(utils)
        ok = low > thresholds.gpu_busy_pct and slo_verdict is Verdict.PASS
        which = "SIMULATED GPU" if gpu_simulated else "GPU"
        busy = LitmusItem(
            busy_label, ok, f"{which} {low}% min, SLO {slo_verdict.value}", gpu_simulated
        )
    percentiles = (
        (ttft_percentile, itl_percentile)
        if ttft_percentile is not None and itl_percentile is not None
        else None
    )
    point = curve_operating_point(curve, ttft_target_s, itl_target_s, percentiles)
    measured = LitmusItem(
        "batch size set by a measured curve",
        point.concurrency is not None and point.bent,
        ("1 point; " if len(curve) == 1 else f"{len(curve)} points; ")
        + (
            "no passing point yet"
            if point.concurrency is None
            else f"operating point {point.concurrency}"
            + ("" if point.bent else " (p99 not bent yet)")
        ),
    )
    return (targets, fits, busy, measured)
