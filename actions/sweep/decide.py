"""The concurrency sweep's decisions: the step plan, when to stop, and the operating point.

Pure functions over measured steps. The method: ramp concurrency until the SLO percentile bends
(an SLO breaks, throughput stops rising, the queue or preemptions grow), then back off one step.
The recommendation is the last step that raised none of those flags below the first that raised
one (`slotop.actions.slo.operating_point`); that first flagged step says what binds
(`slotop.actions.slo.what_binds`), and the recommended step how much headroom is left, and how
sure the sweep is of both.

A step meets an SLO target only when the 95% interval of its percentile (a bootstrap over its own
requests for TTFT, over its ITL gaps drawn request by request: `step.py`) lies wholly at or under
the target, and breaks it only when the interval lies wholly above. An interval that straddles
the target leaves the step undecided: the runner dwells on while a step is undecided, up to the
longest dwell, and a step still undecided then is never recommended, but is not a break either
(the next, busier step is likelier to decide), so the sweep goes on. A step that ended fewer
requests than the sweep's floor (`min_requests`) is undecided too. Steps read from a file older
than these intervals are judged on their values alone, as they were then.

Steps are judged in concurrency order, whatever order they were measured in: each against the
measured step just below it (the knee's throughput gain), the operating point below the lowest
that broke. A refined sweep measures steps between the operating point and the first break after
the ramp (`refine_next`), so its run order and its concurrency order differ.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from slotop import fmt
from slotop.actions.errors import SweepError
from slotop.actions.slo import (
    Binding,
    BindingEvidence,
    EngineTerms,
    OperatingPoint,
    SloThresholds,
    TargetReading,
    Verdict,
    as_verdict,
    engine_terms,
    failures_allow,
    judge_interval,
    operating_point,
    overall,
    what_binds,
    within_target,
)
from slotop.actions.sweep.model import StepResult
from slotop.collectors.names import Engine
from slotop.slo import Slo


class StopReason(enum.Enum):
    """Why the sweep ended, or why a step is past the operating point or cannot be it.

    UNDECIDED alone never ends a sweep: it marks a step that cannot yet be judged.
    """

    SLO_BROKEN = "slo_broken"
    KNEE = "knee"
    PREEMPTIONS = "preemptions"
    QUEUE = "queue"
    ERRORS = "errors"
    CAP = "cap"
    INTERRUPTED = "interrupted"
    UNDECIDED = "undecided"

    @classmethod
    def _missing_(cls, value: object) -> StopReason | None:
        """A file from before the intervals calls an undecided step under-sampled."""
        return cls.UNDECIDED if value == "under_sampled" else None


STEP_FLAG_ORDER: tuple[StopReason, ...] = (
    StopReason.ERRORS,
    StopReason.SLO_BROKEN,
    StopReason.PREEMPTIONS,
    StopReason.QUEUE,
    StopReason.KNEE,
    StopReason.UNDECIDED,
)
"""The flags a measured step can raise, most serious first; all but the last one break the step."""

UNJUDGED_FLAGS = frozenset({StopReason.UNDECIDED})
"""Flags that keep a step from being recommended without making it a break."""

_FLAG_WORDS: dict[StopReason, str] = {StopReason.UNDECIDED: "undecided"}


def flag_words(flag: StopReason, terms: EngineTerms) -> str:
    """A step's flag in words, in the engine's terms (SGLang's retractions for preemptions)."""
    if flag is StopReason.PREEMPTIONS:
        return terms.preemptions
    return _FLAG_WORDS.get(flag, str(flag.value).replace("_", " "))


@dataclass(frozen=True, slots=True)
class StopRules:
    """Thresholds that end a sweep before its cap.

    `knee_gain_ratio`: a step is past the knee when throughput rose by less than this share of the
    concurrency's rise (0.1: doubling the load bought under 10% more tokens/s).
    `queue_waiting_requests`: mean requests waiting over the dwell at which the queue counts as
    grown. `kv_full_ratio`: KV usage at which the cache counts as full.
    """

    knee_gain_ratio: float = 0.1
    queue_waiting_requests: float = 1.0
    kv_full_ratio: float = 0.9
    max_error_ratio: float = 0.05
    allow_preemptions: bool = False

    @property
    def thresholds(self) -> SloThresholds:
        """The shared rules' thresholds these stop rules set (KV full, queue grown)."""
        return SloThresholds(
            kv_full_ratio=self.kv_full_ratio, queue_waiting_requests=self.queue_waiting_requests
        )


@dataclass(frozen=True, slots=True)
class ReplicaLimits:
    """Batch limits the replica is known to run with (None where slotop does not know them), and
    the engine whose they are: its words for them, and what it can report of them."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    engine: Engine = "vllm"

    @property
    def terms(self) -> EngineTerms:
        """The engine's words for the limits and what it reports (`slotop.actions.slo.engine_terms`)."""
        return engine_terms(self.engine)


@dataclass(frozen=True, slots=True)
class SloVerdict:
    """How one step stands against each target: pass, breach, undecided (its interval straddles
    the target) or unknown (no sample to judge)."""

    ttft: Verdict
    itl: Verdict

    @property
    def verdict(self) -> Verdict:
        """Both targets combined: breach if either breaks, pass only if both are met."""
        return overall((self.ttft, self.itl))

    @property
    def met(self) -> bool:
        """Both targets met (a target without samples is not met)."""
        return self.verdict is Verdict.PASS

    @property
    def decided(self) -> bool:
        """Whether each target is decided: met or broken, neither straddled nor unknown."""
        return self.verdict is Verdict.BREACH or self.met


@dataclass(frozen=True, slots=True)
class Headroom:
    """What is left at the recommended step: SLO margins, free KV cache and free sequence slots."""

    ttft_ratio: float | None
    itl_ratio: float | None
    kv_free_ratio: float | None
    seqs_free: int | None


@dataclass(frozen=True, slots=True)
class Recommendation:
    """The operating point: the largest good concurrency, what binds next, and what is left."""

    concurrency: int | None
    next_concurrency: int | None
    binding: Binding | None
    binding_detail: str
    headroom: Headroom | None
    certainty: str = ""
    """How sure the sweep is of the pick and of the break above it, in words."""


def plan_steps(
    max_concurrency: int,
    *,
    given: Sequence[int] = (),
    start: int = 1,
    growth_factor: float = 2.0,
) -> tuple[int, ...]:
    """The concurrencies to visit: `given` (sorted, checked), or geometric from `start` to the cap.

    A geometric plan ends on the cap itself when the last power falls short of it.
    """
    if max_concurrency < 1:
        raise SweepError(f"max concurrency {max_concurrency}; it must be at least 1")
    if given:
        bad = [c for c in given if isinstance(c, bool) or not isinstance(c, int) or c < 1]
        if bad:
            raise SweepError(f"concurrency steps {bad}; each must be a whole number ≥ 1")
        above = [c for c in given if c > max_concurrency]
        if above:
            raise SweepError(
                f"concurrency steps {above} are above the cap of {max_concurrency}; "
                "raise --max-concurrency (or [load] max_concurrency) to go higher"
            )
        return tuple(sorted(set(given)))
    if not 1 <= start <= max_concurrency:
        raise SweepError(f"start concurrency {start} is outside 1..{max_concurrency}")
    if not (math.isfinite(growth_factor) and growth_factor > 1):
        raise SweepError(f"growth factor {growth_factor!r}; it must be a finite number above 1")
    steps = [start]
    while steps[-1] < max_concurrency:
        steps.append(min(max(math.ceil(steps[-1] * growth_factor), steps[-1] + 1), max_concurrency))
    return tuple(steps)


def _target_verdict(
    step: StepResult,
    value_s: float | None,
    interval: tuple[float | None, float | None],
    target_s: float,
    percentile: float,
) -> Verdict:
    if not failures_allow(percentile, step.client.requests_ok, step.client.requests_failed):
        return Verdict.BREACH
    if not step.judged_on_intervals:
        return as_verdict(within_target(value_s, target_s))
    return judge_interval(*interval, target_s)


def slo_verdict(step: StepResult, slo: Slo) -> SloVerdict:
    """Judge a step on the 95% intervals of its client-side values at the SLO's percentiles
    (`slotop.actions.slo.judge_interval`; a file without them, on the values, equal counting as
    met), its failed requests counted against each target (`slotop.actions.slo.failures_allow`)."""
    return SloVerdict(
        _target_verdict(
            step,
            step.client.ttft_slo_s,
            (step.client.ttft_slo_low_s, step.client.ttft_slo_high_s),
            slo.ttft_s,
            slo.ttft_percentile,
        ),
        _target_verdict(
            step,
            step.client.itl_slo_s,
            (step.client.itl_slo_low_s, step.client.itl_slo_high_s),
            slo.itl_s,
            slo.itl_percentile,
        ),
    )


def throughput_gain_share(step: StepResult, previous: StepResult) -> float | None:
    """Throughput's relative rise over the concurrency's relative rise between two steps."""
    before, after = previous.client.output_tokens_per_s, step.client.output_tokens_per_s
    if before is None or after is None or before <= 0 or step.concurrency <= previous.concurrency:
        return None
    load_rise = step.concurrency / previous.concurrency - 1
    return (after / before - 1) / load_rise


def step_flags(
    step: StepResult, previous: StepResult | None, slo: Slo, rules: StopRules
) -> tuple[StopReason, ...]:
    """The reasons a step is past the operating point, most serious first; empty when it is good."""
    flags: set[StopReason] = set()
    errors = step.client.error_ratio
    if step.client.requests_ok == 0 or (errors is not None and errors > rules.max_error_ratio):
        flags.add(StopReason.ERRORS)
    standing = slo_verdict(step, slo)
    if standing.verdict is Verdict.BREACH or (not step.judged_on_intervals and not standing.met):
        flags.add(StopReason.SLO_BROKEN)
    elif not standing.met:
        flags.add(StopReason.UNDECIDED)
    if (
        not rules.allow_preemptions
        and step.server.preemptions is not None
        and step.server.preemptions > 0
    ):
        flags.add(StopReason.PREEMPTIONS)
    if (
        step.server.waiting_mean is not None
        and step.server.waiting_mean >= rules.queue_waiting_requests
    ):
        flags.add(StopReason.QUEUE)
    if previous is not None:
        gain = throughput_gain_share(step, previous)
        if gain is not None and gain < rules.knee_gain_ratio:
            flags.add(StopReason.KNEE)
    if not step.min_requests_met and StopReason.SLO_BROKEN not in flags:
        flags.add(StopReason.UNDECIDED)  # thin data may show a break, never a pass
    return tuple(reason for reason in STEP_FLAG_ORDER if reason in flags)


def step_judgement(flags: Sequence[StopReason]) -> Verdict:
    """A step's standing for the operating point: breach on a breaking flag, pass on none.

    An undecided step is unknown: thin data may show a break, never a pass.
    """
    if any(flag not in UNJUDGED_FLAGS for flag in flags):
        return Verdict.BREACH
    return Verdict.UNKNOWN if flags else Verdict.PASS


def by_concurrency(steps: Sequence[StepResult]) -> tuple[StepResult, ...]:
    """Steps in ascending concurrency (a refined sweep measures them out of that order)."""
    return tuple(sorted(steps, key=lambda step: step.concurrency))


def all_step_flags(
    steps: Sequence[StepResult], slo: Slo, rules: StopRules
) -> tuple[tuple[StopReason, ...], ...]:
    """`step_flags` for every step, in the order given, each judged against the measured step
    just below it in concurrency (not the one measured before it)."""
    order = sorted(range(len(steps)), key=lambda i: steps[i].concurrency)
    below: dict[int, StepResult | None] = {}
    previous: StepResult | None = None
    for index in order:
        below[index] = previous
        previous = steps[index]
    return tuple(step_flags(step, below[i], slo, rules) for i, step in enumerate(steps))


def next_stop(
    steps: Sequence[StepResult], plan: Sequence[int], slo: Slo, rules: StopRules
) -> StopReason | None:
    """Why the ramp ends: the most serious flag of the lowest step that broke, else CAP once every
    planned step is measured; None while it goes on to the next one."""
    ordered = by_concurrency(steps)
    for flags in all_step_flags(ordered, slo, rules):
        if step_judgement(flags) is Verdict.BREACH:
            return flags[0]
    done = {step.concurrency for step in steps}
    return None if any(c not in done for c in plan) else StopReason.CAP


def _judged(
    steps: Sequence[StepResult], slo: Slo, rules: StopRules
) -> tuple[tuple[StepResult, ...], tuple[tuple[StopReason, ...], ...], OperatingPoint]:
    """Steps in concurrency order, their flags, and the operating point they give."""
    ordered = by_concurrency(steps)
    flags = all_step_flags(ordered, slo, rules)
    point = operating_point(
        (step.concurrency, step_judgement(step_flags_))
        for step, step_flags_ in zip(ordered, flags, strict=True)
    )
    return ordered, flags, point


def refine_next(
    steps: Sequence[StepResult], slo: Slo, rules: StopRules, resolution_ratio: float
) -> int | None:
    """The next concurrency a refined sweep measures: the unmeasured whole number nearest the
    middle of the operating point and the first step that broke, or None once no step broke, none
    met the SLO below the break, or the two lie within the resolution (adjacent, or at most
    `resolution_ratio` of the operating point apart).

    A sweep of 1, 2, 4, 8, 16 that breaks at 16 measures 12; if 12 holds, 14; if 14 breaks, 13.
    """
    _, _, point = _judged(steps, slo, rules)
    low, high = point.concurrency, point.first_break
    if low is None or high is None or high - low <= max(1.0, resolution_ratio * low):
        return None
    measured = {step.concurrency for step in steps}
    between = [c for c in range(low + 1, high) if c not in measured]
    if not between:
        return None
    middle = (low + high) / 2
    return min(between, key=lambda c: (abs(c - middle), c))


def remaining_steps(plan: Sequence[int], steps: Sequence[StepResult]) -> tuple[int, ...]:
    """The planned concurrencies above the highest one already measured (what a resume runs)."""
    highest = max((step.concurrency for step in steps), default=0)
    return tuple(c for c in plan if c > highest)


def step_evidence(step: StepResult, slo: Slo, limits: ReplicaLimits) -> BindingEvidence:
    """A measured step as evidence for `what_binds`: its peaks and means, how long running held
    its peak, load, limits and SLO.

    The batch size counts only with its bucket: an interpolated p99 read as exact misleads.
    """
    bucket_known = step.server.batch_tokens_p99_lower is not None
    return BindingEvidence(
        running=step.server.running_max,
        waiting=step.server.waiting_mean,
        kv_usage_ratio=step.server.kv_usage_max_ratio,
        preemptions=step.server.preemptions,
        concurrency=step.concurrency,
        batch_tokens=step.server.batch_tokens_p99 if bucket_known else None,
        batch_tokens_lower=step.server.batch_tokens_p99_lower,
        batch_tokens_upper=step.server.batch_tokens_p99_upper,
        max_num_seqs=limits.max_num_seqs,
        max_num_batched_tokens=limits.max_num_batched_tokens,
        targets=(
            TargetReading(
                Binding.TTFT, "TTFT", slo.ttft_percentile, step.client.ttft_slo_s, slo.ttft_s
            ),
            TargetReading(Binding.ITL, "ITL", slo.itl_percentile, step.client.itl_slo_s, slo.itl_s),
        ),
        over_span=True,
        running_peak_share=step.server.running_peak_share,
        waiting_peak=step.server.waiting_max,
        waiting_band=step.server.waiting_band,
        terms=limits.terms,
    )


def binding_constraint(
    step: StepResult, slo: Slo, rules: StopRules, limits: ReplicaLimits
) -> tuple[Binding, str]:
    """Which constraint binds at a step, with the evidence in words (`what_binds` on the step)."""
    diagnosis = what_binds(step_evidence(step, slo, limits), rules.thresholds)
    return diagnosis.binding, diagnosis.evidence


def headroom(step: StepResult, slo: Slo, limits: ReplicaLimits) -> Headroom:
    """What is left at a step: 1 − value/target per SLO, free KV share, free sequence slots."""
    ttft = 1 - step.client.ttft_slo_s / slo.ttft_s if step.client.ttft_slo_s is not None else None
    itl = 1 - step.client.itl_slo_s / slo.itl_s if step.client.itl_slo_s is not None else None
    kv = 1 - step.server.kv_usage_max_ratio if step.server.kv_usage_max_ratio is not None else None
    seqs = (
        max(limits.max_num_seqs - math.ceil(step.server.running_max), 0)
        if limits.max_num_seqs is not None and step.server.running_max is not None
        else None
    )
    return Headroom(ttft, itl, kv, seqs)


def recommend(
    steps: Sequence[StepResult],
    slo: Slo,
    rules: StopRules,
    limits: ReplicaLimits = ReplicaLimits(),
) -> Recommendation:
    """The last step that raised no flag below the first that broke, and what binds there.

    An undecided step is neither: it is never the pick, and the pick may lie above it.
    """
    ordered, flags, point = _judged(steps, slo, rules)
    at = {step.concurrency: (step, f) for step, f in zip(ordered, flags, strict=True)}
    chosen = at[point.concurrency][0] if point.concurrency is not None else None
    if point.first_break is None:
        thin = [
            step.concurrency
            for step, step_flags_ in zip(ordered, flags, strict=True)
            if StopReason.UNDECIDED in step_flags_
        ]
        if not ordered:
            detail = "no step was measured"
        elif thin:
            detail = (
                f"no step broke the SLO up to concurrency {ordered[-1].concurrency}, but "
                f"concurrency {', '.join(str(c) for c in thin)} stayed undecided (an interval "
                "straddled a target, or too few requests ended); a longer max_dwell_s decides them"
            )
        else:
            detail = (
                f"every step met the SLO up to concurrency {ordered[-1].concurrency}; "
                "raise the cap to look further"
            )
        binding: Binding | None = None
    else:
        after, after_flags = at[point.first_break]
        binding, evidence = binding_constraint(after, slo, rules, limits)
        why = ", ".join(flag_words(r, limits.terms) for r in after_flags)
        detail = f"at concurrency {after.concurrency} ({why}): {evidence}"
    broke = at[point.first_break][0] if point.first_break is not None else None
    return Recommendation(
        concurrency=point.concurrency,
        next_concurrency=point.first_break,
        binding=binding,
        binding_detail=detail,
        headroom=headroom(chosen, slo, limits) if chosen is not None else None,
        certainty=certainty_words(chosen, broke, slo),
    )


def _target_words(
    name: str,
    percentile: float,
    value_s: float | None,
    interval: tuple[float | None, float | None],
    target_s: float,
) -> str:
    low, high = interval
    around = (
        f" (95% interval {fmt.ms(low)}–{fmt.ms(high)})"
        if low is not None and high is not None
        else ""
    )
    return f"{name} p{percentile:g} {fmt.ms(value_s)}{around} against {fmt.ms(target_s)}"


def _targets_words(step: StepResult, slo: Slo) -> str:
    return (
        _target_words(
            "TTFT",
            slo.ttft_percentile,
            step.client.ttft_slo_s,
            (step.client.ttft_slo_low_s, step.client.ttft_slo_high_s),
            slo.ttft_s,
        )
        + "; "
        + _target_words(
            "ITL",
            slo.itl_percentile,
            step.client.itl_slo_s,
            (step.client.itl_slo_low_s, step.client.itl_slo_high_s),
            slo.itl_s,
        )
    )


def certainty_words(chosen: StepResult | None, broke: StepResult | None, slo: Slo) -> str:
    """How sure the pick and the break are: each target's value with its 95% interval."""
    parts = []
    if chosen is not None:
        how = (
            "each 95% interval wholly under its target"
            if chosen.judged_on_intervals
            else "judged on its values alone (this file holds no intervals)"
        )
        parts.append(
            f"concurrency {chosen.concurrency} meets both targets, {how} "
            f"({chosen.client.requests_ok} requests): {_targets_words(chosen, slo)}"
        )
    if broke is not None:
        standing = slo_verdict(broke, slo)
        if standing.verdict is Verdict.BREACH and broke.judged_on_intervals:
            how = "its 95% interval wholly over a target"
        elif standing.verdict is Verdict.BREACH:
            how = "over a target"
        else:
            how = "on a rule of the sweep, not on the SLO (see what binds)"
        parts.append(
            f"concurrency {broke.concurrency} breaks, {how} ({broke.client.requests_ok} requests): "
            f"{_targets_words(broke, slo)}"
        )
    return ". ".join(parts)
