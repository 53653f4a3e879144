"""What a sweep runs (its steps, their timing, the SLO, the stop rules), from settings, in words.

The command line and the dashboard plan a sweep with these, so both ask about the same steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slotop.actions.errors import SweepError
from slotop.actions.sweep.decide import ReplicaLimits, StopRules, plan_steps
from slotop.collectors.engines import parse_engine
from slotop.collectors.names import Engine
from slotop.config import Settings
from slotop.slo import Slo


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """How one sweep runs: its steps, their timing, the SLO, the stop rules and known limits."""

    plan: tuple[int, ...]
    slo: Slo
    warmup_s: float = 5.0
    dwell_s: float = 20.0
    min_requests: int = 10
    max_dwell_s: float = 120.0
    tick_s: float = 1.0
    rules: StopRules = field(default_factory=StopRules)
    limits: ReplicaLimits = field(default_factory=ReplicaLimits)
    max_follow_s: float | None = None
    """The longest wait past the dwell for its requests to end; None waits as long as the dwell."""
    refine: bool = False
    """After the ramp breaks, bisect between the operating point and the break (`refine_next`)."""
    refine_resolution_ratio: float = 0.1
    """A refined sweep stops once the two lie this share of the operating point apart, or adjacent."""

    @property
    def follow_limit_s(self) -> float:
        """The longest wait past the dwell, with None read as the dwell's length."""
        return self.dwell_s if self.max_follow_s is None else self.max_follow_s

    def __post_init__(self) -> None:
        if not self.plan:
            raise SweepError("the sweep has no steps; give at least one concurrency")
        if self.warmup_s < 0 or not self.dwell_s > 0 or not self.tick_s > 0:
            raise SweepError(
                f"warm-up {self.warmup_s:g} s, dwell {self.dwell_s:g} s, tick {self.tick_s:g} s; "
                "the warm-up must be ≥ 0 and the others above 0"
            )
        if self.max_dwell_s < self.dwell_s:
            raise SweepError(
                f"max dwell {self.max_dwell_s:g} s is shorter than the dwell {self.dwell_s:g} s"
            )
        if self.min_requests < 1:
            raise SweepError(f"min requests {self.min_requests}; it must be at least 1")
        if self.max_follow_s is not None and not self.max_follow_s >= 0:
            raise SweepError(f"max follow {self.max_follow_s:g} s; it must be ≥ 0")
        if not 0 <= self.refine_resolution_ratio < 1:
            raise SweepError(
                f"refine resolution {self.refine_resolution_ratio:g}; it must be in [0, 1)"
            )


def spec_from_settings(settings: Settings) -> SweepSpec:
    """The sweep's plan, timing, SLO, stop rules and known limits from [sweep], [slo], [load]."""
    sweep, load, launch = settings.sweep, settings.load, settings.launch
    cap = sweep.max_concurrency or load.max_concurrency
    plan = plan_steps(
        cap,
        given=sweep.concurrency,
        start=min(sweep.start_concurrency, cap),
        growth_factor=sweep.growth_factor,
    )
    return SweepSpec(
        plan=plan,
        slo=settings.slo,
        warmup_s=sweep.warmup_s,
        dwell_s=sweep.dwell_s,
        min_requests=sweep.min_requests,
        max_dwell_s=sweep.max_dwell_s,
        max_follow_s=sweep.max_follow_s or None,
        tick_s=settings.replica.scrape_interval_s,
        refine=sweep.refine,
        refine_resolution_ratio=sweep.refine_resolution_ratio,
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
            engine=_named_engine(settings.replica.engine),
        ),
    )


def _named_engine(named: str) -> Engine:
    """[replica] engine when it names one; else vLLM until the runner's first scrape tells."""
    return "vllm" if named.strip().lower() == "auto" else parse_engine(named)


def plan_words(spec: SweepSpec, url: str, todo: tuple[int, ...]) -> str:
    """What the sweep will send and for how long, shown before it starts."""
    shortest_min = len(todo) * (spec.warmup_s + spec.dwell_s) / 60
    longest_min = len(todo) * (spec.warmup_s + spec.max_dwell_s + spec.follow_limit_s) / 60
    return (
        f"Sweep {url} at concurrency {', '.join(str(c) for c in todo)}, each step "
        f"{spec.warmup_s:g} s of warm-up (or until the load settles) then "
        f"{spec.dwell_s:g}–{spec.max_dwell_s:g} s measured (until the 95% intervals of TTFT and "
        f"ITL clear their targets, from {spec.min_requests} requests at least) and up to "
        f"{spec.follow_limit_s:g} s more for its last requests to end: "
        f"{shortest_min:.1f}–{longest_min:.1f} min unless a stop rule ends it sooner"
        + (
            "; then it bisects between the operating point and the step that broke, a step "
            "each, until they are adjacent or within "
            f"{spec.refine_resolution_ratio:.0%} of each other."
            if spec.refine
            else "."
        )
    )
