"""The sweep's plan from settings, and that plan in words before it starts.

The command line and the dashboard plan a sweep with these, so both ask about the same steps.
"""

from __future__ import annotations

from slotop.actions.sweep.decide import ReplicaLimits, StopRules, SweepSlo, plan_steps
from slotop.actions.sweep.runner import SweepSpec
from slotop.config import Settings


def spec_from_settings(settings: Settings) -> SweepSpec:
    """The sweep's plan, timing, SLO, stop rules and known limits from [sweep], [slo], [load]."""
    sweep, slo, load, launch = settings.sweep, settings.slo, settings.load, settings.launch
    cap = sweep.max_concurrency or load.max_concurrency
    plan = plan_steps(
        cap,
        given=sweep.concurrency,
        start=min(sweep.start_concurrency, cap),
        growth_factor=sweep.growth_factor,
    )
    return SweepSpec(
        plan=plan,
        slo=SweepSlo(
            ttft_s=slo.ttft_ms / 1000,
            itl_s=slo.itl_ms / 1000,
            ttft_percentile=slo.ttft_percentile,
            itl_percentile=slo.itl_percentile,
        ),
        warmup_s=sweep.warmup_s,
        dwell_s=sweep.dwell_s,
        min_requests=sweep.min_requests,
        max_dwell_s=sweep.max_dwell_s,
        max_follow_s=sweep.max_follow_s or None,
        tick_s=settings.replica.scrape_interval_s,
        rules=StopRules(
            knee_gain_ratio=sweep.knee_gain_ratio,
            queue_waiting_requests=sweep.queue_waiting_requests,
            kv_full_ratio=sweep.kv_full_ratio,
            max_error_ratio=sweep.max_error_ratio,
            allow_preemptions=sweep.allow_preemptions,
        ),
        limits=ReplicaLimits(
            max_num_seqs=launch.max_num_seqs or None,
            max_num_batched_tokens=launch.max_num_batched_tokens or None,
        ),
    )


def plan_words(spec: SweepSpec, url: str, todo: tuple[int, ...]) -> str:
    """What the sweep will send and for how long, shown before it starts."""
    shortest_min = len(todo) * (spec.warmup_s + spec.dwell_s) / 60
    longest_min = len(todo) * (spec.warmup_s + spec.max_dwell_s + spec.follow_limit_s) / 60
    return (
        f"Sweep {url} at concurrency {', '.join(str(c) for c in todo)}, each step "
        f"{spec.warmup_s:g} s of warm-up then {spec.dwell_s:g}–{spec.max_dwell_s:g} s measured "
        f"(until {spec.min_requests} requests end) and up to {spec.follow_limit_s:g} s more "
        f"for its last requests to end: {shortest_min:.1f}–{longest_min:.1f} min unless a stop "
        "rule ends it sooner."
    )
