"""The sweep's pure decisions: step plans, step flags, stop rules, operating point, binding, headroom."""

from __future__ import annotations

import dataclasses

import pytest

from slotop.actions.errors import SweepError
from slotop.actions.slo import Binding, Verdict
from slotop.actions.sweep.decide import (
    ReplicaLimits,
    StopReason,
    StopRules,
    all_step_flags,
    binding_constraint,
    headroom,
    next_stop,
    plan_steps,
    recommend,
    refine_next,
    remaining_steps,
    slo_verdict,
    step_flags,
    throughput_gain_share,
)
from slotop.actions.sweep.model import StepResult
from tests.support.sweep_steps import SLO, step

RULES = StopRules()


@pytest.mark.parametrize(
    ("cap", "kwargs", "expected"),
    [
        (8, {}, (1, 2, 4, 8)),
        (48, {}, (1, 2, 4, 8, 16, 32, 48)),
        (1, {}, (1,)),
        (10, {"start": 3}, (3, 6, 10)),
        (20, {"growth_factor": 1.5}, (1, 2, 3, 5, 8, 12, 18, 20)),
        (64, {"given": [8, 1, 4, 4]}, (1, 4, 8)),
        (8, {"given": [8]}, (8,)),
    ],
)
def test_step_plans(cap: int, kwargs: dict[str, object], expected: tuple[int, ...]) -> None:
    assert plan_steps(cap, **kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cap", "kwargs", "words"),
    [
        (0, {}, "max concurrency 0"),
        (8, {"given": [1, 16]}, r"\[16\] are above the cap of 8; raise --max-concurrency"),
        (8, {"given": [0, 2]}, "each must be a whole number ≥ 1"),
        (8, {"start": 9}, "start concurrency 9 is outside 1..8"),
        (8, {"growth_factor": 1.0}, "growth factor 1.0; it must be a finite number above 1"),
    ],
)
def test_bad_plans_are_refused_with_the_value(
    cap: int, kwargs: dict[str, object], words: str
) -> None:
    with pytest.raises(SweepError, match=words):
        plan_steps(cap, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ok", "failed", "met"),
    [
        (98, 2, False),  # 2 of 100 failed: more than the 1% p99 leaves, however fast the rest
        (199, 1, True),  # 0.5% failed: within the 1%
        (0, 5, False),  # nothing reached the replica: no latency, yet a breach, not unknown
    ],
)
def test_failed_requests_count_against_each_target(ok: int, failed: int, met: bool) -> None:
    verdict = slo_verdict(step(4, ok=ok, failed=failed, ttft_s=0.01, itl_s=0.001), SLO)
    expected = Verdict.PASS if met else Verdict.BREACH
    assert (verdict.ttft, verdict.itl, verdict.met) == (expected, expected, met)


PASS, BREACH, UNDECIDED, UNKNOWN = (
    Verdict.PASS,
    Verdict.BREACH,
    Verdict.UNDECIDED,
    Verdict.UNKNOWN,
)


@pytest.mark.parametrize(
    ("ttft_s", "itl_s", "ttft", "itl", "met"),
    [
        (0.1, 0.02, PASS, PASS, True),
        (0.5, 0.04, PASS, PASS, True),  # equal to the target counts as met
        (0.51, 0.02, BREACH, PASS, False),
        (0.1, 0.041, PASS, BREACH, False),
        (None, 0.02, UNKNOWN, PASS, False),  # no sample is not a pass
    ],
)
def test_slo_verdicts_of_a_file_without_intervals(
    ttft_s: float | None, itl_s: float | None, ttft: Verdict, itl: Verdict, met: bool
) -> None:
    verdict = slo_verdict(step(4, ttft_s=ttft_s, itl_s=itl_s), SLO)
    assert (verdict.ttft, verdict.itl, verdict.met) == (ttft, itl, met)


# Targets: TTFT 500 ms, ITL 40 ms. A step meets a target when its whole 95% interval lies at or
# under it, breaks it when the whole interval lies above, and is undecided while it straddles.
@pytest.mark.parametrize(
    ("ttft_interval", "itl_interval", "ttft", "itl", "decided"),
    [
        ((0.30, 0.50), (0.030, 0.039), PASS, PASS, True),
        ((0.30, 0.51), (0.030, 0.039), UNDECIDED, PASS, False),
        ((0.501, 0.90), (0.030, 0.039), BREACH, PASS, True),  # one breach decides the step
        ((0.30, 0.45), (0.039, 0.041), PASS, UNDECIDED, False),
        ((0.30, 0.45), (0.0401, 0.05), PASS, BREACH, True),
    ],
)
def test_slo_verdicts_on_intervals(
    ttft_interval: tuple[float, float],
    itl_interval: tuple[float, float],
    ttft: Verdict,
    itl: Verdict,
    decided: bool,
) -> None:
    # The values themselves sit under both targets: the intervals alone decide.
    found = step(4, ttft_s=0.2, itl_s=0.02, ttft_interval=ttft_interval, itl_interval=itl_interval)
    verdict = slo_verdict(found, SLO)
    assert (verdict.ttft, verdict.itl, verdict.decided) == (ttft, itl, decided)


def test_an_undecided_step_is_flagged_neither_good_nor_broken() -> None:
    undecided = step(4, ttft_interval=(0.3, 0.6), itl_interval=(0.01, 0.03))
    assert step_flags(undecided, step(2), SLO, RULES) == (StopReason.UNDECIDED,)
    broken = step(4, ttft_interval=(0.6, 0.7), itl_interval=(0.01, 0.03))
    assert step_flags(broken, step(2), SLO, RULES) == (StopReason.SLO_BROKEN,)


def test_a_sweep_file_of_an_older_slotop_reads_its_under_sampled_steps_as_undecided() -> None:
    assert StopReason("under_sampled") is StopReason.UNDECIDED


def _without_tokens(measured: StepResult) -> StepResult:
    """The step with no token rate measured."""
    client = dataclasses.replace(measured.client, output_tokens_per_s=None)
    return dataclasses.replace(measured, client=client)


@pytest.mark.parametrize(
    ("before", "after", "share"),
    [
        (step(1, tokens_per_s=100), step(2, tokens_per_s=200), 1.0),
        (step(2, tokens_per_s=200), step(4, tokens_per_s=210), 0.05),
        (step(4, tokens_per_s=400), step(6, tokens_per_s=500), 0.5),
        (step(4, tokens_per_s=400), step(8, tokens_per_s=300), -0.25),
        (step(4, tokens_per_s=0), step(8, tokens_per_s=300), None),
        (_without_tokens(step(4)), step(8, tokens_per_s=300), None),
    ],
)
def test_throughput_gain_share(before: StepResult, after: StepResult, share: float | None) -> None:
    assert throughput_gain_share(after, before) == (
        pytest.approx(share) if share is not None else None
    )


@pytest.mark.parametrize(
    ("current", "previous", "flags"),
    [
        (step(4), step(2), ()),
        (step(4, ttft_s=0.9), step(2), (StopReason.SLO_BROKEN,)),
        # Failed requests met no target: 10% failed breaks p99 as well as the error tolerance,
        # and 5% failed (within the tolerance) still breaks p99, which allows 1%.
        (step(4, failed=10, ok=90), step(2), (StopReason.ERRORS, StopReason.SLO_BROKEN)),
        (step(4, failed=5, ok=95), step(2), (StopReason.SLO_BROKEN,)),
        (step(4, failed=1, ok=99), step(2), ()),  # 1% failed: p99 still reachable
        (step(4, ok=0, ttft_s=None, itl_s=None), None, (StopReason.ERRORS, StopReason.SLO_BROKEN)),
        (step(4, preemptions=3), step(2), (StopReason.PREEMPTIONS,)),
        (step(4, waiting=1.0), step(2), (StopReason.QUEUE,)),
        (step(4, waiting=0.9), step(2), ()),
        (step(4, tokens_per_s=210), step(2), (StopReason.KNEE,)),
        (
            step(8, tokens_per_s=800, ttft_s=0.7, waiting=4, kv=0.95, preemptions=2),
            step(4, tokens_per_s=800),
            (StopReason.SLO_BROKEN, StopReason.PREEMPTIONS, StopReason.QUEUE, StopReason.KNEE),
        ),
        (step(4, preemptions=None, waiting=None, kv=None), step(2), ()),  # unknown is no flag
        # too few requests ended: a flag of its own, the least serious, beside any other
        (step(4, sampled=False), step(2), (StopReason.UNDECIDED,)),
        # ... but thin data may show a break: then it is a break, not undecided
        (step(4, ttft_s=0.9, sampled=False), step(2), (StopReason.SLO_BROKEN,)),
    ],
)
def test_step_flags(
    current: StepResult, previous: StepResult | None, flags: tuple[StopReason, ...]
) -> None:
    assert step_flags(current, previous, SLO, RULES) == flags


def test_preemptions_can_be_allowed() -> None:
    rules = dataclasses.replace(RULES, allow_preemptions=True)
    assert step_flags(step(4, preemptions=3), step(2), SLO, rules) == ()


@pytest.mark.parametrize(
    ("steps", "stop"),
    [
        ([], None),
        ([step(1)], None),
        ([step(1), step(2), step(4)], None),
        ([step(1), step(2), step(4), step(8)], StopReason.CAP),
        ([step(1), step(2, itl_s=0.05)], StopReason.SLO_BROKEN),
        ([step(1), step(2), step(4, tokens_per_s=200)], StopReason.KNEE),
        ([step(1), step(2, ok=0, ttft_s=None, itl_s=None)], StopReason.ERRORS),
        ([step(1), step(2), step(4), step(8, waiting=3)], StopReason.QUEUE),
        # an under-sampled step does not end the sweep; the next step ends more requests
        ([step(1), step(2, sampled=False)], None),
        ([step(1), step(2), step(4), step(8, sampled=False)], StopReason.CAP),
        # but a break it shows does
        ([step(1), step(2, sampled=False, ttft_s=0.9)], StopReason.SLO_BROKEN),
    ],
)
def test_next_stop(steps: list[StepResult], stop: StopReason | None) -> None:
    assert next_stop(steps, (1, 2, 4, 8), SLO, RULES) == stop


def test_remaining_steps_continue_above_the_highest_measured() -> None:
    assert remaining_steps((1, 2, 4, 8, 16), [step(1), step(2)]) == (4, 8, 16)
    assert remaining_steps((1, 2, 4), []) == (1, 2, 4)
    assert remaining_steps((1, 2, 4), [step(1), step(2), step(4)]) == ()


@pytest.mark.parametrize(
    ("current", "limits", "constraint", "words"),
    [
        (step(8, preemptions=5, kv=0.97), ReplicaLimits(), Binding.KV_CAPACITY, "97%, 5 pre"),
        (step(8, kv=0.92, waiting=3), ReplicaLimits(), Binding.KV_CAPACITY, "peaked at 92%"),
        (
            step(8, kv=0.3, waiting=4, running=4),
            ReplicaLimits(),
            Binding.SEQ_CAP,
            "running held at 4 while 4.0 waited",
        ),
        (
            step(8, kv=0.3, waiting=4, running=4),
            ReplicaLimits(max_num_seqs=4),
            Binding.SEQ_CAP,
            "(max_num_seqs 4)",
        ),
        # waiting while the batch runs below the known cap is not the cap
        (
            step(8, waiting=4, running=6, ttft_s=0.9),
            ReplicaLimits(max_num_seqs=16),
            Binding.TTFT,
            "TTFT p99 900.0 ms vs 500 ms",
        ),
        (
            step(8, batch_tokens=2040, batch_bucket=(2000.0, 2048.0), itl_s=0.06),
            ReplicaLimits(max_num_batched_tokens=2048),
            Binding.TOKEN_BUDGET,
            "at least 2,000 tokens (bucket 2,000–2,048) of a 2,048 budget",
        ),
        # a p99 without its bucket (a sweep file from before buckets were kept) is not judged
        (
            step(8, batch_tokens=2040, itl_s=0.06),
            ReplicaLimits(max_num_batched_tokens=2048),
            Binding.ITL,
            "ITL p99 60.0",
        ),
        (step(8, batch_tokens=2040, itl_s=0.06), ReplicaLimits(), Binding.ITL, "ITL p99 60.0"),
        (step(8, ttft_s=0.45, itl_s=0.02), ReplicaLimits(), Binding.TTFT, "TTFT p99 450.0"),
        (step(8, ttft_s=0.1, itl_s=0.039), ReplicaLimits(), Binding.ITL, "ITL p99 39.0"),
        (step(8, ttft_s=None, itl_s=0.01), ReplicaLimits(), Binding.TTFT, "no TTFT samples"),
    ],
)
def test_binding_constraint(
    current: StepResult, limits: ReplicaLimits, constraint: Binding, words: str
) -> None:
    found, evidence = binding_constraint(current, SLO, RULES, limits)
    assert found is constraint
    assert words in evidence


def test_headroom_is_what_is_left_of_each_limit() -> None:
    room = headroom(step(4, ttft_s=0.2, itl_s=0.03, kv=0.75, running=3.4), SLO, ReplicaLimits(8))
    assert room.ttft_ratio == pytest.approx(0.6)
    assert room.itl_ratio == pytest.approx(0.25)
    assert room.kv_free_ratio == pytest.approx(0.25)
    assert room.seqs_free == 4
    unknown = headroom(step(4, ttft_s=None, kv=None), SLO, ReplicaLimits())
    assert (unknown.ttft_ratio, unknown.kv_free_ratio, unknown.seqs_free) == (None, None, None)


@pytest.mark.parametrize(
    ("steps", "chosen", "following", "binding"),
    [
        # the SLO breaks at 8: back off to 4, TTFT binds
        ([step(1), step(2), step(4), step(8, ttft_s=0.8)], 4, 8, Binding.TTFT),
        # the knee at 8 (throughput flat) is past the operating point even within the SLO
        ([step(1), step(2), step(4), step(8, tokens_per_s=420, itl_s=0.03)], 4, 8, Binding.ITL),
        # the seq cap: the queue grows at 8 while KV is free
        (
            [step(1), step(2), step(4), step(8, waiting=4, running=4, tokens_per_s=410)],
            4,
            8,
            Binding.SEQ_CAP,
        ),
        # KV capacity: preemptions at 4
        ([step(1), step(2), step(4, preemptions=12, kv=0.98)], 2, 4, Binding.KV_CAPACITY),
        # every step good: the top one, nothing measured binds
        ([step(1), step(2), step(4)], 4, None, None),
        # none good
        ([step(1, ttft_s=0.9)], None, 1, Binding.TTFT),
        ([], None, None, None),
        # order of measurement does not matter
        ([step(4, ttft_s=0.8), step(1), step(2)], 2, 4, Binding.TTFT),
        # an under-sampled step is never the pick, nor a break: the pick may lie above it
        ([step(1), step(2, sampled=False), step(4), step(8, ttft_s=0.8)], 4, 8, Binding.TTFT),
        ([step(1), step(2), step(4, sampled=False)], 2, None, None),
        ([step(1, sampled=False)], None, None, None),
        # one that shows a break is a break
        ([step(1), step(2, sampled=False, ttft_s=0.8), step(4)], 1, 2, Binding.TTFT),
    ],
)
def test_recommendation(
    steps: list[StepResult],
    chosen: int | None,
    following: int | None,
    binding: Binding | None,
) -> None:
    found = recommend(steps, SLO, RULES)
    assert found.concurrency == chosen
    assert found.next_concurrency == following
    assert found.binding is binding
    assert (found.headroom is None) == (chosen is None)


def test_recommendation_words_name_the_next_step_and_its_flags() -> None:
    found = recommend([step(1), step(2), step(4, ttft_s=0.8, waiting=2, running=2)], SLO, RULES)
    assert found.binding_detail.startswith("at concurrency 4 (slo broken, queue): running held")
    top = recommend([step(1), step(2)], SLO, RULES)
    assert "every step met the SLO up to concurrency 2" in top.binding_detail


def test_the_operating_point_is_never_above_a_step_that_broke_the_slo() -> None:
    found = recommend([step(1), step(2, ttft_s=0.9), step(4)], SLO, RULES)
    assert (found.concurrency, found.next_concurrency) == (1, 2)
    assert found.binding_detail.startswith("at concurrency 2 (slo broken): TTFT p99 900.0 ms")
    assert "every step met" not in found.binding_detail


def test_the_recommendation_names_undecided_steps_it_could_not_judge() -> None:
    found = recommend([step(1), step(2), step(4, sampled=False)], SLO, RULES)
    assert found.binding_detail == (
        "no step broke the SLO up to concurrency 4, but concurrency 4 stayed undecided (an "
        "interval straddled a target, or too few requests ended); a longer max_dwell_s decides "
        "them"
    )
    broke = recommend([step(1), step(2, sampled=False, ttft_s=0.9)], SLO, RULES)
    assert broke.binding_detail.startswith("at concurrency 2 (slo broken): TTFT")


def test_the_recommendation_says_how_sure_it_is() -> None:
    steps = [
        step(1, ttft_s=0.2, itl_s=0.02, ttft_interval=(0.18, 0.25), itl_interval=(0.019, 0.021)),
        step(2, ttft_s=0.3, itl_s=0.03, ttft_interval=(0.25, 0.45), itl_interval=(0.028, 0.033)),
        step(4, ttft_s=0.9, itl_s=0.03, ttft_interval=(0.7, 1.1), itl_interval=(0.029, 0.032)),
    ]
    found = recommend(steps, SLO, RULES)
    assert (found.concurrency, found.next_concurrency) == (2, 4)
    assert found.certainty == (
        "concurrency 2 meets both targets, each 95% interval wholly under its target (100 "
        "requests): TTFT p99 300 ms (95% interval 250 ms–450 ms) against 500 ms; ITL p99 30.0 ms "
        "(95% interval 28.0 ms–33.0 ms) against 40.0 ms. concurrency 4 breaks, its 95% interval "
        "wholly over a target (100 requests): TTFT p99 900 ms (95% interval 700 ms–1,100 ms) "
        "against 500 ms; ITL p99 30.0 ms (95% interval 29.0 ms–32.0 ms) against 40.0 ms"
    )


def test_the_operating_point_stays_below_a_break_with_an_undecided_step_between() -> None:
    found = recommend([step(1), step(2, ttft_s=0.9), step(4, sampled=False), step(8)], SLO, RULES)
    assert (found.concurrency, found.next_concurrency) == (1, 2)


def _passing_to(top: int, *, breaking: dict[int, float]) -> list[StepResult]:
    """Steps 1, 2, 4, … up to `top` that meet the SLO, but a TTFT of `breaking[c]` where given."""
    steps, c = [], 1
    while c <= top:
        steps.append(step(c, ttft_s=breaking.get(c, 0.1)))
        c *= 2
    return steps


@pytest.mark.parametrize(
    ("extra", "ratio", "expected"),
    [
        # 1, 2, 4, 8 hold and 16 breaks: halfway between 8 and 16
        ([], 0.1, 12),
        # 12 holds: halfway between 12 and 16
        ([step(12)], 0.1, 14),
        # 14 breaks: between 12 and 14 only 13 is left
        ([step(12), step(14, ttft_s=0.9)], 0.1, 13),
        # 13 breaks: 12 and 13 are adjacent, nothing left to bisect
        ([step(12), step(14, ttft_s=0.9), step(13, ttft_s=0.9)], 0.1, None),
        # 12 holds and 14 breaks: 2 apart is within 25% of 12, so that is close enough
        ([step(12), step(14, ttft_s=0.9)], 0.25, None),
        # 12 broke: halfway between 8 and 12
        ([step(12, ttft_s=0.9)], 0.1, 10),
        # 12 was too thin to judge: the nearest unmeasured concurrency to 12 instead
        ([step(12, sampled=False)], 0.1, 11),
    ],
)
def test_refine_bisects_between_the_operating_point_and_the_break(
    extra: list[StepResult], ratio: float, expected: int | None
) -> None:
    steps = [*_passing_to(16, breaking={16: 0.9}), *extra]
    assert refine_next(steps, SLO, RULES, ratio) == expected


def test_refine_has_nothing_to_bisect_without_a_break_or_a_good_step() -> None:
    assert refine_next(_passing_to(16, breaking={}), SLO, RULES, 0.1) is None
    assert refine_next(_passing_to(16, breaking={1: 0.9}), SLO, RULES, 0.1) is None
    assert refine_next([], SLO, RULES, 0.1) is None


def test_steps_are_judged_in_concurrency_order_not_run_order() -> None:
    # Measured 1, 2, 4, 8, 16, then 12 (a refine step). 8 → 12 gains 25% for 50% more load
    # (share 0.5); 12 → 16 gains 1% for 33% more (share 0.03 < 0.1): 16 is past the knee.
    # Judged in run order, 16 would be held against 8 (26% for 100%: share 0.26, no knee) and 12
    # against 16 (a lower concurrency: no share at all).
    tokens = {1: 100.0, 2: 200.0, 4: 400.0, 8: 800.0, 16: 1010.0, 12: 1000.0}
    steps = [step(c, tokens_per_s=t) for c, t in tokens.items()]
    flags = dict(zip(tokens, all_step_flags(steps, SLO, RULES), strict=True))
    assert flags[16] == (StopReason.KNEE,)
    assert flags[12] == ()
    assert next_stop(steps, (1, 2, 4, 8, 16), SLO, RULES) is StopReason.KNEE
    recommendation = recommend(steps, SLO, RULES)
    assert (recommendation.concurrency, recommendation.next_concurrency) == (12, 16)
