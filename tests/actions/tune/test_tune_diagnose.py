"""The tune's pure rules on hand-worked sweeps: the dial what binds names, its value, stop, choose."""

from __future__ import annotations

import dataclasses

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.starts import StartSpread
from slotop.actions.slo import Binding, Certainty
from slotop.actions.sweep.model import StepResult
from slotop.actions.tune.diagnose import base_trial, choose, next_decision
from slotop.actions.tune.model import Decision, Move
from tests.support.sweep_steps import step
from tests.support.tune_trials import CAPACITY, TUNE, trial

AUTO6 = Dials("auto", 6)

# 1, 2, 4 hold; at 5 four run with one waiting and the cache full: KV capacity binds
KV_FULL = [step(1), step(2), step(4, kv=0.92), step(5, running=4, waiting=1.0, kv=0.92)]
# 1..6 hold; at 7 six run (= max_num_seqs) with one waiting, the cache 75% used: the cap binds
SEQ_CAP = [step(c) for c in (1, 2, 4, 6)] + [step(7, running=6, waiting=1.0, kv=0.75)]
# at 8 ITL p99 is 60 ms against 40 while TTFT holds at 100 ms
ITL_BROKE = [step(1), step(2), step(4), step(8, itl_s=0.06)]
TTFT_BROKE = [step(1), step(2), step(4), step(8, ttft_s=0.9)]
NO_BREAK = [step(1), step(2), step(4), step(8), step(16)]


def test_kv_capacity_names_fp8_with_its_budget() -> None:
    decision = next_decision([trial(0, AUTO6, KV_FULL, 4.0)], CAPACITY, TUNE)
    assert decision.binding is Binding.KV_CAPACITY
    assert decision.move is Move.SMALLER_KV_DTYPE
    assert decision.dials == Dials("fp8", 6)
    assert "KV usage peaked at 92%" in decision.words
    assert "4,608 → 9,216 KV tokens" in decision.words
    assert "2.2 → 4.5 sequences at max context" in decision.words
    assert "4.4 → 8.7 of the load's 1,056 tokens" in decision.words


def test_the_sequence_cap_names_a_higher_cap_within_the_kv_budget() -> None:
    # fp8 holds floor(8.73) = 8 of the load's sequences; twice the cap would be 12
    decision = next_decision([trial(0, Dials("fp8", 6), SEQ_CAP, 6.0)], CAPACITY, TUNE)
    assert decision.binding is Binding.SEQ_CAP
    assert (decision.move, decision.dials) == (Move.MORE_SEQS, Dials("fp8", 8))
    assert "the KV cache holds 8 sequences of the load's 1,056 tokens at fp8" in decision.words
    assert "max_num_seqs 6 → 8" in decision.words


@pytest.mark.parametrize(
    ("dials", "capacity", "expected"),
    [
        # the cache holds more than twice the cap: twice the cap
        (Dials("fp8", 3), CAPACITY, Dials("fp8", 6)),
        # without a budget: twice the cap
        (Dials("fp8", 6), None, Dials("fp8", 12)),
        # vLLM wants max_num_batched_tokens ≥ max_num_seqs: the budget caps the cap
        (Dials("fp8", 6, 7), CAPACITY, Dials("fp8", 7, 7)),
    ],
)
def test_the_raised_cap_is_at_most_twice_the_old_and_what_fits(
    dials: Dials, capacity: object, expected: Dials
) -> None:
    steps = [step(1), step(2), step(dials.max_num_seqs or 1)]
    steps += [step((dials.max_num_seqs or 1) + 1, running=dials.max_num_seqs, waiting=1.0)]
    decision = next_decision([trial(0, dials, steps, 6.0)], capacity, TUNE)  # type: ignore[arg-type]
    assert decision.dials == expected


def test_a_cap_the_cache_cannot_exceed_stops() -> None:
    # at 16 bits the cache holds 4 of the load's sequences: a cap of 6 already allows more
    steps = [step(1), step(2), step(6), step(7, running=6, waiting=1.0)]
    decision = next_decision([trial(0, AUTO6, steps, 6.0)], CAPACITY, TUNE)
    assert decision.move is Move.STOP
    assert "holds 4 sequences" in decision.words and "max_num_seqs 6 already" in decision.words


# 1..6 hold; at 7 TTFT p99 is 600 ms and the six seats (= max_num_seqs) were full for 19 of 20
# samples, one request waiting in 18 of them: 0.9 on average, under the queue mark of 1, since
# each request's turnaround in the client leaves the seventh unsent for a moment
def _knee(*, held: float | None, waiting: float, waiting_max: float) -> list[StepResult]:
    knee = step(
        7, ttft_s=0.6, running=6, held=held, waiting=waiting, waiting_max=waiting_max, kv=0.5
    )
    return [step(c) for c in (1, 2, 4, 6)] + [knee]


def test_full_seats_with_a_request_waiting_bind_at_the_knee_under_the_queue_mark() -> None:
    knee = _knee(held=0.95, waiting=0.9, waiting_max=1.0)
    decision = next_decision([trial(0, Dials("fp8", 6), knee, 6.0)], CAPACITY, TUNE)
    assert decision.binding is Binding.SEQ_CAP
    # fp8 holds floor(8.73) = 8 of the load's sequences; twice the cap would be 12
    assert (decision.move, decision.dials) == (Move.MORE_SEQS, Dials("fp8", 8))
    assert decision.evidence == (
        "at concurrency 7 (slo broken): running held at 6 (max_num_seqs 6) for 95% of the span "
        "while 0.9 waited on average"
    )


@pytest.mark.parametrize(
    ("held", "waiting", "waiting_max"),
    [
        (1.0, 0.0, 0.0),  # the seats full all along, but no request ever waited
        (0.45, 0.9, 1.0),  # a request waited, but the seats were full under half the time
        (None, 0.9, 1.0),  # a sweep file from before the share was measured: the mean alone
    ],
)
def test_seats_that_did_not_hold_a_waiting_request_leave_the_slo_binding(
    held: float | None, waiting: float, waiting_max: float
) -> None:
    knee = _knee(held=held, waiting=waiting, waiting_max=waiting_max)
    decision = next_decision([trial(0, Dials("fp8", 6), knee, 6.0)], CAPACITY, TUNE)
    assert (decision.binding, decision.move) == (Binding.TTFT, Move.STOP)
    assert decision.words.startswith(
        "the SLO itself binds (at concurrency 7 (slo broken): TTFT p99"
    )


def test_kv_capacity_still_binds_first_with_the_seats_full() -> None:
    # at 5 four run with one waiting and the cache full; the seats (max_num_seqs 4) full as well
    steps = [*KV_FULL[:-1], step(5, running=4, held=1.0, waiting=1.0, kv=0.92)]
    decision = next_decision([trial(0, Dials("auto", 4), steps, 4.0)], CAPACITY, TUNE)
    assert (decision.binding, decision.move) == (Binding.KV_CAPACITY, Move.SMALLER_KV_DTYPE)


def test_itl_breaking_while_ttft_holds_halves_the_token_budget() -> None:
    decision = next_decision([trial(0, Dials("auto", 6, 2048), ITL_BROKE, 6.0)], CAPACITY, TUNE)
    assert decision.binding is Binding.ITL
    assert (decision.move, decision.dials) == (Move.FEWER_BATCHED_TOKENS, Dials("auto", 6, 1024))
    assert "max_num_batched_tokens 2048 → 1024" in decision.words


@pytest.mark.parametrize(
    ("dials", "words"),
    [
        (AUTO6, "max_num_batched_tokens is the replica's default, unknown to slotop"),
        (Dials("auto", 6, 256), "max_num_batched_tokens 256 is at its floor"),
    ],
)
def test_a_token_budget_that_cannot_go_lower_stops(dials: Dials, words: str) -> None:
    decision = next_decision([trial(0, dials, ITL_BROKE, 6.0)], CAPACITY, TUNE)
    assert decision.move is Move.STOP and words in decision.words


def test_the_slo_itself_binding_stops_and_names_the_headroom() -> None:
    decision = next_decision([trial(0, AUTO6, TTFT_BROKE, 6.0)], CAPACITY, TUNE)
    assert decision.binding is Binding.TTFT and decision.move is Move.STOP
    assert "the SLO itself binds" in decision.words
    assert "TTFT p99 900.0 ms vs 500 ms" in decision.words
    assert "KV cache 70% free, 2 sequence slots free" in decision.words


def test_no_break_up_to_the_cap_stops_at_the_load_cap() -> None:
    decision = next_decision([trial(0, AUTO6, NO_BREAK, 6.0)], CAPACITY, TUNE)
    assert decision.move is Move.STOP and "the load cap binds" in decision.words


def test_a_narrowest_dtype_a_dial_left_alone_and_dials_tried_stop() -> None:
    fp8 = next_decision([trial(0, Dials("fp8", 6), KV_FULL, 4.0)], CAPACITY, TUNE)
    assert fp8.move is Move.STOP and "already the narrowest" in fp8.words
    left = dataclasses.replace(TUNE, dials=frozenset({"max_num_seqs"}))
    alone = next_decision([trial(0, AUTO6, KV_FULL, 4.0)], CAPACITY, left)
    assert alone.move is Move.STOP and "--dials leaves kv_cache_dtype alone" in alone.words
    # fp8 was tried and did worse; the baseline again names fp8: no dials are tried twice
    trials = [trial(0, AUTO6, KV_FULL, 8.0), trial(1, Dials("fp8", 6), KV_FULL, 2.0)]
    again = next_decision(trials, CAPACITY, TUNE)
    assert again.after == 0 and again.move is Move.STOP
    assert "already tried as #1" in again.words


@pytest.mark.parametrize(
    ("base_rps", "latest_rps", "latest_se", "base"),
    [
        (4.0, 8.0, 0.5, 1),  # the latest is the best
        (10.0, 9.5, 0.5, 1),  # 0.5 worse, within ±1.60 (2.262 × √(0.5² + 0.5²)): still the latest
        (10.0, 7.0, 0.5, 0),  # 3 worse, beyond ±1.60: back to the best
        (10.0, 7.0, 2.0, 1),  # 3 worse, within ±4.66 (2.262 × √(0.5² + 2²))
    ],
)
def test_the_diagnosed_configuration_is_the_latest_unless_worse_beyond_noise(
    base_rps: float, latest_rps: float, latest_se: float, base: int
) -> None:
    trials = [
        trial(0, AUTO6, KV_FULL, base_rps, 0.5),
        trial(1, Dials("fp8", 6), SEQ_CAP, latest_rps, latest_se),
    ]
    chosen = base_trial(trials)
    assert chosen is not None and chosen.number == base


def test_a_configuration_that_met_the_slo_nowhere_is_not_diagnosed_over_one_that_did() -> None:
    # 1,024 tokens held the SLO up to 24; 2,048 at no concurrency: 1,024 is diagnosed again
    # (on the real-time sim tune tried fp8 at 2,048 next, a candidate wasted)
    held, broke = [step(1), step(2), step(4)], [step(1, ttft_s=0.9), step(2, ttft_s=0.9)]
    trials = [
        trial(0, Dials("auto", 64, 1024), held, 4.7),
        trial(1, Dials("auto", 64, 2048), broke, None, None),
    ]
    chosen = base_trial(trials)
    assert chosen is not None and chosen.number == 0


def test_the_choice_is_the_highest_goodput_with_its_margin_against_the_noise() -> None:
    # 6.0 ± 0.5 against 4.0 ± 0.5, ten batches each: +2.00 beyond ±1.60 (2.262 × √(0.5² + 0.5²))
    better = choose([trial(0, AUTO6, KV_FULL, 4.0), trial(1, Dials("fp8", 6), SEQ_CAP, 6.0)])
    assert (better.trial, better.dials, better.concurrency) == (1, Dials("fp8", 6), 6)
    assert better.gain_rps == pytest.approx(2.0)
    assert better.noise_rps == pytest.approx(2.262 * (0.5**2 + 0.5**2) ** 0.5)
    assert better.beyond_noise is True
    assert better.binding is Binding.SEQ_CAP
    assert better.words == (
        "#1 beats the baseline by +2.00 ± 1.60 req/s of goodput (+50%), beyond the run-to-run "
        "noise; the replica's start-to-start spread is unmeasured (`slotop restart --starts 4 "
        "--concurrency N` measures it), so part of the gain may be the restart's"
    )
    # 5.0 ± 0.5 against 4.0 ± 0.5: +1.00 within ±1.60: still the highest, and said to be chance
    within = choose([trial(0, AUTO6, KV_FULL, 4.0), trial(1, Dials("fp8", 6), SEQ_CAP, 5.0)])
    assert (within.trial, within.beyond_noise) == (1, False)
    assert "+1.00 ± 1.60 req/s of goodput (+25%), within the run-to-run noise" in within.words
    # Neither goodput banded (too few batches for an error): the best is still named, and said
    # not shown to be more than chance
    unbanded = choose(
        [trial(0, AUTO6, KV_FULL, 4.0, None), trial(1, Dials("fp8", 6), SEQ_CAP, 6.0, None)]
    )
    assert (unbanded.trial, unbanded.noise_rps, unbanded.beyond_noise) == (1, None, None)
    assert unbanded.words.startswith("#1 beats the baseline by +2.00 (noise unknown) req/s")
    assert "not shown to be more than chance" in unbanded.words
    kept = choose([trial(0, AUTO6, KV_FULL, 4.0), trial(1, Dials("fp8", 6), SEQ_CAP, 3.0)])
    assert (kept.trial, kept.gain_rps) == (0, None)
    assert "keep them" in kept.words


def test_a_rejected_or_unmeasured_configuration_is_never_chosen() -> None:
    rejected = trial(1, Dials("fp8", 6), SEQ_CAP, 9.0, rejected="the quality check kept 50%")
    assert choose([trial(0, AUTO6, KV_FULL, 4.0), rejected]).trial == 0
    no_point = [step(1, ttft_s=0.9)]
    none = choose([trial(0, AUTO6, no_point, None)])
    assert none.trial is None and "no configuration met both SLOs" in none.words
    only = choose([trial(0, AUTO6, no_point, None), trial(1, Dials("fp8", 6), SEQ_CAP, 3.0)])
    assert only.trial == 1 and only.baseline_rps is None
    assert "the replica's own dials met them at no concurrency" in only.words


def test_a_resource_at_a_higher_break_names_the_dial_when_the_first_shows_only_the_slo() -> None:
    # refined: 4 holds; 5 broke its TTFT with half a request waiting (no resource shows yet);
    # 8, the ramp's break, queued 4 with the cache full: KV capacity is what ran out
    steps = [
        step(1),
        step(2),
        step(4, kv=0.92),
        step(8, ttft_s=0.9, running=4, waiting=4.0, kv=0.92),
        step(5, ttft_s=0.6, running=4, waiting=0.5, kv=0.92),
    ]
    base = trial(0, AUTO6, steps, 4.0)
    assert base.sweep is not None and base.sweep.recommendation.binding is Binding.TTFT
    decision = next_decision([base], CAPACITY, TUNE)
    assert (decision.binding, decision.move) == (Binding.KV_CAPACITY, Move.SMALLER_KV_DTYPE)
    assert decision.evidence.startswith("at concurrency 8 (slo broken, queue): KV usage peaked")


FP8_BIG_BUDGET = Dials("fp8", 64, 16384)


def _kv_full_at(batch_bucket: tuple[float, float | None] | None) -> list[StepResult]:
    # 8..32 hold; at 48 forty run, three wait, the cache is full and twelve were preempted
    full = step(
        48, running=40, waiting=3.0, kv=1.0, preemptions=12.0,
        batch_tokens=1500.0 if batch_bucket else None, batch_bucket=batch_bucket,
    )  # fmt: skip
    return [step(8), step(16), step(32, kv=0.8), full]


def test_a_full_cache_at_fp8_lowers_the_token_budget_to_what_the_steps_batched() -> None:
    # the busiest steps batched at most 2,048 tokens (bucket 1,024–2,048) of 16,384: vLLM's
    # profile run reserved activations for 16,384, and 2,048 gives the rest to the cache
    decision = next_decision(
        [trial(0, FP8_BIG_BUDGET, _kv_full_at((1024.0, 2048.0)), 10.0)], CAPACITY, TUNE
    )
    assert decision.binding is Binding.KV_CAPACITY
    assert (decision.move, decision.dials) == (Move.FEWER_BATCHED_TOKENS, Dials("fp8", 64, 2048))
    assert "reserves activation memory for a step of max_num_batched_tokens" in decision.words
    assert "the busiest steps batched at most 2,048 tokens: 16384 → 2048" in decision.words
    notes = {note.dial: note for note in decision.considered}
    assert notes["max_num_batched_tokens"].tried
    assert not notes["kv_cache_dtype"].tried and not notes["max_num_seqs"].tried
    assert notes["kv_cache_dtype"].words == (
        "already fp8, the narrowest tune tries (KV usage peaked at 100%)"
    )
    assert notes["max_num_seqs"].words == (
        "the cap does not bind: running peaked at 40 of max_num_seqs 64"
    )


def test_a_full_cache_at_fp8_halves_the_token_budget_when_the_batch_is_unknown() -> None:
    decision = next_decision([trial(0, FP8_BIG_BUDGET, _kv_full_at(None), 10.0)], CAPACITY, TUNE)
    assert decision.dials == Dials("fp8", 64, 8192)
    assert "the steps' batch size is unknown: 16384 → 8192" in decision.words


def test_the_token_budget_holding_ttft_back_doubles_it() -> None:
    # 4,096-token prompts chunked 256 a step: at 8 TTFT breaks and the steps batch the budget
    # (vLLM counts a prompt's tokens in the step that finishes it: bucket 4,096–8,192)
    steps = [step(1), step(2), step(4)]
    steps += [step(8, ttft_s=0.9, batch_tokens=5000.0, batch_bucket=(4096.0, 8192.0))]
    decision = next_decision([trial(0, Dials("auto", 64, 256), steps, 2.0)], CAPACITY, TUNE)
    assert decision.binding is Binding.TOKEN_BUDGET
    assert (decision.move, decision.dials) == (Move.MORE_BATCHED_TOKENS, Dials("auto", 64, 512))
    assert "prompts are chunked 256 tokens a step and TTFT broke: 256 → 512" in decision.words


# 1, 2, 4 hold; at 8 throughput stays at 4's (400 tokens/s, a knee) while TTFT and ITL hold and
# the busiest steps batch 2,048-4,096 tokens of a 2,048 budget: the steps themselves bind
FULL_STEPS = [step(1), step(2), step(4)]
FULL_STEPS += [step(8, tokens_per_s=400.0, batch_tokens=2100.0, batch_bucket=(2048.0, 4096.0))]


def test_full_steps_with_ttft_holding_name_fp8_for_faster_decode_steps() -> None:
    decision = next_decision([trial(0, Dials("auto", 64, 2048), FULL_STEPS, 4.0)], CAPACITY, TUNE)
    assert decision.binding is Binding.TOKEN_BUDGET
    assert (decision.move, decision.dials) == (Move.SMALLER_KV_DTYPE, Dials("fp8", 64, 2048))
    assert "TTFT held where the steps bound (8 sequences running, 30% of the cache in use)" in (
        decision.words
    )
    assert "so the same steps read half of it" in decision.words


def test_full_steps_at_fp8_or_with_the_dtype_left_alone_stop() -> None:
    fp8 = next_decision([trial(0, Dials("fp8", 64, 2048), FULL_STEPS, 4.0)], CAPACITY, TUNE)
    assert fp8.move is Move.STOP and "names no dial tune turns" in fp8.words
    left = dataclasses.replace(TUNE, dials=frozenset({"max_num_seqs", "max_num_batched_tokens"}))
    alone = next_decision([trial(0, Dials("auto", 64, 2048), FULL_STEPS, 4.0)], CAPACITY, left)
    assert alone.move is Move.STOP


# at 2 throughput rose 5% for twice the load (a knee: the real CPU replica's two busy cores at
# max_num_seqs 4) while both targets held far off: no resource binds and no target is reached
def _knee_held(ttft_s: float) -> list[StepResult]:
    return [step(1, ttft_s=ttft_s), step(2, ttft_s=ttft_s, tokens_per_s=105.0)]


def test_a_knee_with_itl_the_nearer_target_names_fp8_or_says_the_dtype_is_left_alone() -> None:
    # ITL at half its target (20 of 40 ms) is nearer than TTFT's 100 of 500: the steps bind
    decision = next_decision([trial(0, Dials("auto", 4), _knee_held(0.1), 1.0)], CAPACITY, TUNE)
    assert (decision.binding, decision.move) == (Binding.ITL, Move.SMALLER_KV_DTYPE)
    assert decision.dials == Dials("fp8", 4)
    seqs = dataclasses.replace(TUNE, dials=frozenset({"max_num_seqs"}))
    alone = next_decision([trial(0, Dials("auto", 4), _knee_held(0.1), 1.0)], CAPACITY, seqs)
    assert alone.move is Move.STOP
    assert alone.words == (
        "a narrower KV dtype would be next (at concurrency 2 (knee): ITL p99 20.0 ms vs 40 ms), "
        "but --dials leaves kv_cache_dtype alone"
    )


def test_a_knee_with_ttft_the_nearer_target_says_no_target_binds() -> None:
    # TTFT at 400 of 500 ms is nearer than ITL's 20 of 40, and held: the SLO did not bind
    decision = next_decision([trial(0, Dials("auto", 4), _knee_held(0.4), 1.0)], CAPACITY, TUNE)
    assert (decision.binding, decision.move) == (Binding.TTFT, Move.STOP)
    assert decision.words.startswith(
        "no target binds: the SLO held where the sweep broke (at concurrency 2 (knee): TTFT p99 "
        "400.0 ms vs 500 ms), and no resource binds there"
    )
    assert "the SLO itself binds" not in decision.words


def test_a_named_dial_tried_already_leaves_fp8_at_the_diagnosed_dials() -> None:
    # 256 → 512 was tried and measured 3 req/s worse (beyond ±1.60): the baseline is diagnosed
    # again and names 512 again; the KV dtype is the dial left, at the baseline's dials
    steps = [step(1), step(2), step(4)]
    steps += [step(8, ttft_s=0.9, batch_tokens=5000.0, batch_bucket=(4096.0, 8192.0))]
    budget = Dials("auto", 64, 256)
    trials = [trial(0, budget, steps, 10.0), trial(1, Dials("auto", 64, 512), steps, 7.0)]
    decision = next_decision(trials, CAPACITY, TUNE)
    assert decision.after == 0
    assert (decision.move, decision.dials) == (Move.SMALLER_KV_DTYPE, Dials("fp8", 64, 256))
    assert "already tried as #1; the KV dtype is left (8 sequences running" in decision.words
    # and once fp8 was tried there too, the tune stops
    trials.append(trial(2, Dials("fp8", 64, 256), steps, 6.0))
    assert next_decision(trials, CAPACITY, TUNE).move is Move.STOP


@pytest.mark.parametrize(
    ("band", "binding", "move"),
    [
        # 0.9 ± 0.3 waiting against a mark of 1, the seats (6) full: the cap binds, likely
        (0.3, Binding.SEQ_CAP, Move.MORE_SEQS),
        # 0.9 ± 0.05: the queue stayed under its mark beyond its noise: the SLO binds
        (0.05, Binding.TTFT, Move.STOP),
    ],
)
def test_a_queue_just_under_its_mark_is_read_with_its_noise(
    band: float, binding: Binding, move: Move
) -> None:
    knee = _knee(held=0.45, waiting=0.9, waiting_max=1.0)
    knee[-1] = dataclasses.replace(
        knee[-1], server=dataclasses.replace(knee[-1].server, waiting_band=band)
    )
    decision = next_decision([trial(0, Dials("fp8", 6), knee, 6.0)], CAPACITY, TUNE)
    assert (decision.binding, decision.move) == (binding, move)
    if move is Move.MORE_SEQS:
        assert decision.dials == Dials("fp8", 8)
        assert decision.words.startswith(
            "seq cap binds (likely, a reading within its noise of the mark) at concurrency 7"
        )
        assert "0.90 ± 0.30 waiting on average against a mark of 1" in decision.words
    else:
        assert decision.words.startswith("the SLO itself binds")


def test_a_decision_reads_back_with_how_sure_and_each_dials_note() -> None:
    decision = next_decision([trial(0, AUTO6, KV_FULL, 4.0)], CAPACITY, TUNE)
    again = Decision.from_json(decision.to_json(), "test")
    assert again == decision
    # the call rests on the queue, and these steps carry no band for it (as an older file)
    assert again.certainty is Certainty.NOISE_UNKNOWN
    assert [(n.dial, n.tried) for n in again.considered] == [
        ("kv_cache_dtype", True), ("max_num_seqs", False), ("max_num_batched_tokens", False)
    ]  # fmt: skip


def test_a_measured_start_to_start_spread_widens_the_choices_margin() -> None:
    # +2.00 against ±1.60 of sampling alone is beyond the noise; the replica's own restarts move
    # goodput 10% (four starts: t 3.182 × 0.10 × √(4² + 6²) = ±2.29), so with it, within.
    spread = StartSpread({"goodput_rps": 0.10}, starts=4)
    trials = [trial(0, AUTO6, KV_FULL, 4.0), trial(1, Dials("fp8", 6), SEQ_CAP, 6.0)]
    sampling = 2.262 * (0.5**2 + 0.5**2) ** 0.5
    between = 3.182 * 0.10 * (4.0**2 + 6.0**2) ** 0.5
    alone, widened = choose(trials), choose(trials, spread)
    assert (alone.beyond_noise, widened.beyond_noise) == (True, False)
    assert widened.noise_rps == pytest.approx((sampling**2 + between**2) ** 0.5, rel=1e-3)
    assert "+2.00 ± 2.80 req/s of goodput (+50%), within the run-to-run noise and the " in (
        widened.words
    )
    # A spread with no goodput row leaves the band as it was.
    assert choose(trials, StartSpread({"ttft_p50": 0.5}, starts=4)).noise_rps == alone.noise_rps
    # A latest trial of 4.0 is worse beyond the sampling noise than the best's 6.0 (the best is
    # diagnosed next); with the spread it is not (the latest is).
    latest = trial(2, Dials("fp8", 8), SEQ_CAP, 4.0)
    assert base_trial([*trials, latest]) is trials[1]
    assert base_trial([*trials, latest], spread) is latest
