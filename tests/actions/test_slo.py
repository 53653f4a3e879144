"""The method's rules in one home: within target, the operating point, what binds, KV full."""

from __future__ import annotations

import dataclasses

import pytest

from slotop.actions.slo import (
    Binding,
    BindingEvidence,
    Certainty,
    OperatingPoint,
    QueueStanding,
    SloThresholds,
    TargetReading,
    Verdict,
    counting_failures,
    engine_terms,
    failures_allow,
    judge,
    judge_estimate,
    kv_full,
    operating_point,
    overall,
    queue_standing,
    token_budget_binds,
    what_binds,
    within_target,
)
from slotop.collectors.histograms import QuantileEstimate, quantile_estimate
from slotop.config import SAMPLE_PATH, Settings, SweepSettings, load_settings, settings_from_mapping

PASS, BREACH, UNKNOWN = Verdict.PASS, Verdict.BREACH, Verdict.UNKNOWN
UNDECIDED = Verdict.UNDECIDED


@pytest.mark.parametrize(
    ("value_s", "target_s", "met", "verdict"),
    [
        (0.2, 0.5, True, PASS),
        (0.5, 0.5, True, PASS),  # equal to the target counts as met
        (0.5001, 0.5, False, BREACH),
        (None, 0.5, None, UNKNOWN),  # no value is unknown, neither met nor broken
        (0.0, 0.05, True, PASS),
    ],
)
def test_within_target(
    value_s: float | None, target_s: float, met: bool | None, verdict: Verdict
) -> None:
    assert within_target(value_s, target_s) is met
    assert judge(value_s, target_s) is verdict


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ((PASS, PASS), PASS),
        ((PASS, BREACH), BREACH),
        ((UNKNOWN, BREACH), BREACH),
        ((PASS, UNKNOWN), UNKNOWN),
        ((UNKNOWN, UNKNOWN), UNKNOWN),
        ((), UNKNOWN),
        # breach beats undecided, which beats unknown and keeps a pass from being one
        ((UNDECIDED, BREACH), BREACH),
        ((PASS, UNDECIDED), UNDECIDED),
        ((UNDECIDED, UNKNOWN), UNDECIDED),
    ],
)
def test_overall(verdicts: tuple[Verdict, ...], expected: Verdict) -> None:
    assert overall(verdicts) is expected


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        # the issue's case: 2 broke, so 4 meeting again above it does not count
        ([(1, PASS), (2, BREACH), (4, PASS)], OperatingPoint(1, 2)),
        # every level met: the highest, and p99 has not bent
        ([(1, PASS), (2, PASS), (4, PASS)], OperatingPoint(4, None)),
        # the first level broke: no operating point
        ([(1, BREACH), (2, PASS)], OperatingPoint(None, 1)),
        ([(1, PASS), (2, PASS), (4, BREACH), (8, BREACH)], OperatingPoint(2, 4)),
        # an unknown level neither meets nor breaks
        ([(1, PASS), (2, UNKNOWN), (4, PASS), (8, BREACH)], OperatingPoint(4, 8)),
        ([(1, UNKNOWN)], OperatingPoint(None, None)),
        # an undecided level neither: it is not the point, and the ramp goes past it
        ([(1, PASS), (2, UNDECIDED), (4, BREACH)], OperatingPoint(1, 4)),
        ([], OperatingPoint(None, None)),
        # the order the levels come in does not matter
        ([(4, PASS), (2, BREACH), (1, PASS)], OperatingPoint(1, 2)),
    ],
)
def test_operating_point(levels: list[tuple[int, Verdict]], expected: OperatingPoint) -> None:
    assert operating_point(levels) == expected


# The issue's case: 985 of 1000 requests at ≤ 250 ms, 15 at 490 ms. Rank 990 falls 5/15 into
# (0.25, 0.5], so the p99 interpolates to 0.25 + 0.25·5/15 = 0.3333 s, under a 350 ms target,
# while the true p99 is 490 ms.
ISSUE_BUCKETS = [(0.1, 0.0), (0.25, 985.0), (0.5, 1000.0), (1.0, 1000.0), (float("inf"), 1000.0)]


def test_the_servers_333_ms_p99_is_undecided_against_350_ms_until_the_probe_decides() -> None:
    estimate = quantile_estimate(0.99, ISSUE_BUCKETS)
    assert estimate is not None and estimate.value == pytest.approx(0.33333, abs=1e-5)
    assert judge_estimate(estimate, 0.350) is UNDECIDED
    assert judge_estimate(estimate, 0.350, client_s=0.490) is BREACH
    assert judge_estimate(estimate, 0.350, client_s=0.300) is PASS


def _bucket(lower: float, upper: float, clamped: bool = False) -> QuantileEstimate:
    value = lower if clamped else (lower + upper) / 2
    return QuantileEstimate(0.99, value, lower, upper, 100.0, clamped=clamped)


@pytest.mark.parametrize(
    ("estimate", "client_s", "verdict"),
    [
        (_bucket(0.1, 0.25), None, PASS),  # the whole bucket under 350 ms
        (_bucket(0.25, 0.35), None, PASS),  # `le` inclusive: every value is ≤ 350 ms
        (_bucket(0.35, 0.5), None, BREACH),  # every value is > 350 ms
        (_bucket(0.1, 0.25), 0.9, PASS),  # a decided bucket is not overruled by the client
        (_bucket(0.5, float("inf"), clamped=True), None, BREACH),  # > 500 ms
        (_bucket(0.35, float("inf"), clamped=True), None, BREACH),  # > 350 ms
        (_bucket(0.25, float("inf"), clamped=True), None, UNDECIDED),  # > 250 ms: either side
        (_bucket(0.25, float("inf"), clamped=True), 0.3, PASS),
        (None, 0.3, PASS),  # no server estimate: the client alone
        (None, 0.4, BREACH),
        (None, None, UNKNOWN),
    ],
)
def test_judge_estimate_by_its_whole_bucket(
    estimate: QuantileEstimate | None, client_s: float | None, verdict: Verdict
) -> None:
    assert judge_estimate(estimate, 0.350, client_s) is verdict


@pytest.mark.parametrize(
    ("percentile", "ok", "failed", "allowed"),
    [
        (99.0, 98, 2, False),  # 2% failed: more than the 1% a p99 leaves
        (99.0, 199, 1, True),  # 0.5% failed
        (99.0, 99, 1, True),  # exactly 1%: the 99% that remain may all meet it
        (99.9, 999, 1, True),  # exactly 0.1%
        (99.9, 998, 2, False),
        (50.0, 50, 50, True),
        (99.0, 0, 3, False),  # nothing reached the replica
        (99.0, 0, 0, True),  # nothing ended: nothing against it
    ],
)
def test_failures_allow_a_target_only_within_its_percentiles_share(
    percentile: float, ok: int, failed: int, allowed: bool
) -> None:
    assert failures_allow(percentile, ok, failed) is allowed


def test_failures_count_against_a_passing_or_unknown_verdict() -> None:
    # 100 requests, 2 failed and the other 98 fast: a p99 target is broken.
    assert counting_failures(PASS, 99.0, 98, 2) is BREACH
    # 0.5% failed: the fast ones still make the p99.
    assert counting_failures(PASS, 99.0, 199, 1) is PASS
    assert counting_failures(UNKNOWN, 99.0, 0, 206) is BREACH  # a killed replica
    assert counting_failures(UNDECIDED, 99.0, 199, 1) is UNDECIDED


@pytest.mark.parametrize(
    ("point", "bent"),
    [
        (OperatingPoint(1, 2), True),
        (OperatingPoint(4, None), False),
        (OperatingPoint(None, 1), True),
    ],
)
def test_bent_means_a_level_broke(point: OperatingPoint, bent: bool) -> None:
    assert point.bent is bent


def _live(**changes: object) -> BindingEvidence:
    """A live reading: 8 running, none waiting, KV 40% used, no preemption, no limits known."""
    base = BindingEvidence(running=8, waiting=0, kv_usage_ratio=0.4, preemptions_per_s=0.0)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


TTFT_AT_450MS = TargetReading(Binding.TTFT, "TTFT", 99.0, 0.45, 0.5)  # 90% of its target
ITL_AT_20MS = TargetReading(Binding.ITL, "ITL", 99.0, 0.02, 0.04)  # 50% of its target
ITL_AT_39MS = TargetReading(Binding.ITL, "ITL", 99.0, 0.039, 0.04)  # 97.5% of its target
TTFT_UNKNOWN = TargetReading(Binding.TTFT, "TTFT", 99.0, None, 0.5)


def _step(**changes: object) -> BindingEvidence:
    """A measured step at concurrency 8: peaks and means over its dwell, TTFT and ITL readings."""
    base = BindingEvidence(
        running=8,
        waiting=0.0,
        kv_usage_ratio=0.3,
        preemptions=0.0,
        concurrency=8,
        targets=(TTFT_AT_450MS, ITL_AT_20MS),
        over_span=True,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


HELD: dict[str, object] = {"running": 4, "max_num_seqs": 4, "waiting": 0.9, "waiting_peak": 1.0}
"""A step whose 4 running sat at max_num_seqs 4 with under one request waiting on average."""


@pytest.mark.parametrize(
    ("evidence", "binding", "words"),
    [
        (_live(running=None, kv_usage_ratio=None), Binding.NO_DATA, "neither running"),
        (_live(running=0, kv_usage_ratio=0.0), Binding.IDLE, "no request running or waiting"),
        (_live(), Binding.NOTHING, "8 running, none waiting, KV 40% used"),
        # KV full counts only while requests queue; preempting always counts
        (_live(waiting=3, kv_usage_ratio=0.95), Binding.KV_CAPACITY, "KV 95% used, 3 waiting"),
        (_live(kv_usage_ratio=0.95), Binding.NOTHING, "none waiting"),
        (_live(preemptions_per_s=0.5), Binding.KV_CAPACITY, "0.50 preemptions/s"),
        (
            _live(running=16, waiting=5, max_num_seqs=16),
            Binding.SEQ_CAP,
            "16 running = max_num_seqs, 5 waiting",
        ),
        (_live(running=10, waiting=5, max_num_seqs=16), Binding.QUEUEING, "5 waiting with KV 40%"),
        (_live(running=10, waiting=5), Binding.QUEUEING, "max_num_seqs unknown"),
        (
            _live(running=10, waiting=5, max_num_batched_tokens=2048),
            Binding.TOKEN_BUDGET,
            "prefill is chunked at 2,048 tokens per step",
        ),
        # a sweep step: peaks and means, and the SLO target nearest its limit when nothing else
        (_step(preemptions=5.0, kv_usage_ratio=0.97), Binding.KV_CAPACITY, "peaked at 97%, 5 pre"),
        (
            _step(waiting=4.0, running=4),
            Binding.SEQ_CAP,
            "running held at 4 while 4.0 waited on average",
        ),
        (
            _step(waiting=4.0, running=4, max_num_seqs=4),
            Binding.SEQ_CAP,
            "running held at 4 (max_num_seqs 4)",
        ),
        (_step(waiting=4.0, running=6, max_num_seqs=16), Binding.TTFT, "TTFT p99 450.0 ms vs 500"),
        # the seats full for 19 of 20 samples, one request waiting in 18 of them: 0.9 on average,
        # under the queue mark of 1, yet every request past the fourth waited for a seat
        (
            _step(**HELD, running_peak_share=0.95),
            Binding.SEQ_CAP,
            "running held at 4 (max_num_seqs 4) for 95% of the span while 0.9 waited on average",
        ),
        (_step(**HELD, running_peak_share=0.5), Binding.SEQ_CAP, "for 50% of the span"),
        # full for under half the span, nobody waiting, no share measured, or the cap unknown
        (_step(**HELD, running_peak_share=0.45), Binding.TTFT, "TTFT p99 450.0 ms vs 500"),
        (
            _step(**{**HELD, "waiting": 0.0, "waiting_peak": 0.0}, running_peak_share=1.0),
            Binding.TTFT,
            "TTFT p99 450.0 ms vs 500",
        ),
        (_step(**HELD), Binding.TTFT, "TTFT p99 450.0 ms vs 500"),
        (
            _step(**{**HELD, "max_num_seqs": None}, running_peak_share=1.0),
            Binding.TTFT,
            "TTFT p99 450.0 ms vs 500",
        ),
        # below the cap the seats are not what held
        (
            _step(**{**HELD, "max_num_seqs": 6}, running_peak_share=1.0),
            Binding.TTFT,
            "TTFT p99 450.0 ms vs 500",
        ),
        (
            _step(batch_tokens=1946.0, max_num_batched_tokens=2048),  # 95.0% of the budget
            Binding.TOKEN_BUDGET,
            "1,946 tokens of a 2,048 budget",
        ),
        (_step(batch_tokens=1945.0, max_num_batched_tokens=2048), Binding.TTFT, "TTFT p99 450.0"),
        (_step(targets=(TTFT_AT_450MS, ITL_AT_39MS)), Binding.ITL, "ITL p99 39.0 ms vs 40 ms"),
        (_step(targets=(TTFT_UNKNOWN, ITL_AT_39MS)), Binding.TTFT, "no TTFT samples"),
    ],
)
def test_what_binds(evidence: BindingEvidence, binding: Binding, words: str) -> None:
    found = what_binds(evidence, SloThresholds())
    assert found.binding is binding
    assert words in found.evidence


SGLANG = engine_terms("sglang")


@pytest.mark.parametrize(
    ("evidence", "binding", "words"),
    [
        (_live(preemptions_per_s=0.5, terms=SGLANG), Binding.KV_CAPACITY, "0.50 retractions/s"),
        (
            _step(preemptions=5.0, kv_usage_ratio=0.97, terms=SGLANG),
            Binding.KV_CAPACITY,
            "peaked at 97%, 5 retractions",
        ),
        (
            _live(running=16, waiting=5, max_num_seqs=16, terms=SGLANG),
            Binding.SEQ_CAP,
            "16 running = max_running_requests, 5 waiting",
        ),
        (
            _step(waiting=4.0, running=4, max_num_seqs=4, terms=SGLANG),
            Binding.SEQ_CAP,
            "running held at 4 (max_running_requests 4)",
        ),
        # a queue under the cap with the pool not full names the token budget on vLLM (the
        # batch size unknown); SGLang cannot report the batch size at all, so nothing is named
        (
            _live(running=10, waiting=5, max_num_batched_tokens=2048, terms=SGLANG),
            Binding.QUEUEING,
            "5 waiting with KV 40% used; max_running_requests unknown; whether "
            "chunked_prefill_size 2,048 binds cannot be read (tokens per step: SGLang has no "
            "such metric)",
        ),
        # an exact batch size a file might hold is not SGLang's to have: the budget stays unread
        (
            _step(batch_tokens=2048.0, max_num_batched_tokens=2048, terms=SGLANG),
            Binding.TTFT,
            "TTFT p99 450.0 ms vs 500 ms; whether chunked_prefill_size 2,048 binds cannot be read",
        ),
    ],
)
def test_what_binds_in_sglangs_terms(
    evidence: BindingEvidence, binding: Binding, words: str
) -> None:
    found = what_binds(evidence, SloThresholds())
    assert found.binding is binding
    assert words in found.evidence
    assert "preempt" not in found.evidence and "max_num_" not in found.evidence


def test_kv_full_at_or_above_the_mark() -> None:
    thresholds = SloThresholds(kv_full_ratio=0.9)
    assert kv_full(0.9, thresholds)
    assert not kv_full(0.89, thresholds)
    assert not kv_full(None, thresholds)


def test_thresholds_come_from_the_settings() -> None:
    assert SloThresholds.from_settings(Settings()) == SloThresholds(
        kv_full_ratio=0.9, queue_waiting_requests=1.0
    )
    settings = settings_from_mapping(
        {"sweep": {"kv_full_ratio": 0.8, "queue_waiting_requests": 2}}, "t"
    )
    assert SloThresholds.from_settings(settings) == SloThresholds(
        kv_full_ratio=0.8, queue_waiting_requests=2.0
    )


def test_a_lower_kv_full_ratio_changes_the_dashboards_diagnosis_at_85_percent() -> None:
    reading = _live(waiting=3, kv_usage_ratio=0.85)
    default = SloThresholds.from_settings(Settings())
    lowered = SloThresholds.from_settings(
        dataclasses.replace(Settings(), sweep=SweepSettings(kv_full_ratio=0.8))
    )
    assert what_binds(reading, default).binding is Binding.QUEUEING
    assert what_binds(reading, lowered).binding is Binding.KV_CAPACITY


def test_the_sample_settings_give_the_default_thresholds() -> None:
    assert SloThresholds.from_settings(load_settings(SAMPLE_PATH)) == SloThresholds()


# Steps of 2,100 tokens all fall in vLLM's doubling bucket (2048, 4096]; the p99 interpolated in
# it is 2048 + 2048 × 99/100 = 4,075.52, which says nothing of where the steps really were.
IN_2048_TO_4096 = {
    "batch_tokens": 4075.52,
    "batch_tokens_lower": 2048.0,
    "batch_tokens_upper": 4096.0,
}


@pytest.mark.parametrize(
    ("budget", "binding", "words"),
    [
        # 0.95 × 2,000 = 1,900 ≤ 2,048, the bucket's lower bound: every step in it reaches the share
        (
            2000,
            Binding.TOKEN_BUDGET,
            "steps batched at least 2,048 tokens (bucket 2,048–4,096) of a 2,000 budget",
        ),
        # 0.95 × 3,000 = 2,850 lies inside (2048, 4096]: the bucket cannot tell
        (
            3000,
            Binding.TTFT,
            "TTFT p99 450.0 ms vs 500 ms; steps batched at most 4,096 tokens "
            "(bucket 2,048–4,096) against a 3,000 budget: the buckets cannot tell whether it binds",
        ),
        # 0.95 × 5,000 = 4,750 > 4,096, the upper bound: no step in the bucket reaches it
        (5000, Binding.TTFT, "TTFT p99 450.0 ms vs 500 ms"),
    ],
)
def test_the_token_budget_is_judged_by_the_bucket_not_the_interpolated_value(
    budget: int, binding: Binding, words: str
) -> None:
    found = what_binds(_step(**IN_2048_TO_4096, max_num_batched_tokens=budget), SloThresholds())
    assert found.binding is binding
    assert found.evidence == words
    assert "4,076" not in found.evidence


@pytest.mark.parametrize(
    ("lower", "upper", "binds"),
    [
        # budget 2,000: the share is 0.95 × 2,000 = 1,900 tokens; a bucket holds (lower, upper]
        (1900.0, 4096.0, True),  # every value is above 1,900
        (1024.0, 1900.0, None),  # 1,900 itself may be in it, and so may 1,025
        (1024.0, 1899.0, False),  # none reaches 1,900
        (1024.0, None, None),  # the +Inf bucket above 1,024: anything from 1,025 up
    ],
)
def test_token_budget_binds_at_the_bucket_edges(
    lower: float, upper: float | None, binds: bool | None
) -> None:
    evidence = _step(batch_tokens=lower, batch_tokens_lower=lower, batch_tokens_upper=upper)
    assert token_budget_binds(evidence, 2000, SloThresholds()) is binds


@pytest.mark.parametrize(
    ("budget", "binding", "words"),
    [
        # 0.95 × 8,192 = 7,782.4 ≤ 8,192: steps past the last finite bound batched the share
        (8192, Binding.TOKEN_BUDGET, "steps batched at least 8,192 tokens (bucket 8,192–+Inf)"),
        # 0.95 × 10,000 = 9,500 > 8,192, and the +Inf bucket has no upper bound: cannot tell
        (
            10000,
            Binding.TTFT,
            "steps batched over 8,192 tokens (bucket 8,192–+Inf) against a "
            "10,000 budget: the buckets cannot tell",
        ),
    ],
)
def test_a_p99_above_the_last_bucket_is_only_a_lower_bound(
    budget: int, binding: Binding, words: str
) -> None:
    evidence = _step(
        batch_tokens=8192.0,
        batch_tokens_lower=8192.0,
        batch_tokens_upper=None,
        max_num_batched_tokens=budget,
    )
    found = what_binds(evidence, SloThresholds())
    assert found.binding is binding
    assert words in found.evidence


# The queue read with its noise: a mark of 1 waiting request; the mean ± its 95% band.
@pytest.mark.parametrize(
    ("waiting", "band", "standing"),
    [
        (1.5, 0.3, QueueStanding.OVER),  # 1.2 at the least: over
        (1.3, 0.3, QueueStanding.OVER),  # 1.0 at the least: at the mark counts as over
        (0.9, 0.3, QueueStanding.WITHIN_NOISE),  # 0.6 to 1.2: the mark inside
        (1.1, 0.3, QueueStanding.WITHIN_NOISE),  # 0.8 to 1.4
        (0.6, 0.3, QueueStanding.UNDER),  # 0.9 at the most: under
        (0.9, None, QueueStanding.UNDER),  # no band: the mean as it is
        (1.0, None, QueueStanding.OVER),
        (None, 0.3, QueueStanding.UNKNOWN),
    ],
)
def test_the_queue_is_read_with_its_noise(
    waiting: float | None, band: float | None, standing: QueueStanding
) -> None:
    evidence = _step(waiting=waiting, waiting_band=band)
    assert queue_standing(evidence, SloThresholds()) is standing


# At a knee the six seats are full (max_num_seqs 6) and TTFT broke; the seats were full for only
# 30% of the span (under the seats-held share), so the queue decides what binds.
KNEE = {"running": 6, "max_num_seqs": 6, "running_peak_share": 0.3, "waiting_peak": 2.0}


@pytest.mark.parametrize(
    ("waiting", "band", "binding", "certainty"),
    [
        # 0.9 ± 0.3 against a mark of 1: a queue just under its mark is not the SLO alone
        (0.9, 0.3, Binding.SEQ_CAP, Certainty.WITHIN_NOISE),
        # 1.6 ± 0.3: the queue grew beyond its noise
        (1.6, 0.3, Binding.SEQ_CAP, Certainty.CLEAR),
        # 0.5 ± 0.2: the queue stayed under its mark beyond its noise: the SLO binds
        (0.5, 0.2, Binding.TTFT, Certainty.CLEAR),
        # a file from before the band: the mean as it is, and the call says its noise is unknown
        (1.6, None, Binding.SEQ_CAP, Certainty.NOISE_UNKNOWN),
    ],
)
def test_what_binds_says_how_sure_it_is(
    waiting: float, band: float | None, binding: Binding, certainty: Certainty
) -> None:
    ttft_broke = TargetReading(Binding.TTFT, "TTFT", 99.0, 0.6, 0.5)
    evidence = _step(waiting=waiting, waiting_band=band, targets=(ttft_broke,), **KNEE)
    found = what_binds(evidence, SloThresholds())
    assert (found.binding, found.certainty) == (binding, certainty)


def test_a_queue_within_its_noise_words_the_cap_with_its_band() -> None:
    evidence = _step(waiting=0.9, waiting_band=0.3, **KNEE)
    found = what_binds(evidence, SloThresholds())
    assert found.evidence == (
        "running held at 6 (max_num_seqs 6) for 30% of the span while 0.90 ± 0.30 waiting on "
        "average against a mark of 1"
    )


def test_the_slo_with_a_queue_within_noise_and_seats_to_spare_says_a_resource_may_bind() -> None:
    ttft_broke = TargetReading(Binding.TTFT, "TTFT", 99.0, 0.6, 0.5)
    evidence = _step(waiting=0.9, waiting_band=0.3, targets=(ttft_broke,), max_num_seqs=16)
    found = what_binds(evidence, SloThresholds())
    assert (found.binding, found.certainty) == (Binding.TTFT, Certainty.WITHIN_NOISE)
    assert found.evidence == (
        "TTFT p99 600.0 ms vs 500 ms; the queue (0.90 ± 0.30 waiting on average against a mark "
        "of 1) cannot be told from its mark, so a resource may bind as well"
    )


def test_a_full_cache_with_a_queue_within_noise_binds_likely() -> None:
    evidence = _step(waiting=0.9, waiting_band=0.3, kv_usage_ratio=0.95)
    found = what_binds(evidence, SloThresholds())
    assert (found.binding, found.certainty) == (Binding.KV_CAPACITY, Certainty.WITHIN_NOISE)
