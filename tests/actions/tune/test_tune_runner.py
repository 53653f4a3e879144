"""The tune's loop on a replica whose behaviour follows its dials (fake clock, real sweeps).

The fake replica (tests/support/tune_fakes.py) holds 4 of the load's sequences at 16 bits and 8
at fp8, runs at most max_num_seqs of them, and ends a request per slot every 0.3 s while nothing
waits, so goodput at an operating point c is c / 0.3 req/s. Started at auto with max_num_seqs 6,
worked by hand:

- #0 auto, 6: 4 run (the cache), so 5 queues with the cache full: KV capacity binds → fp8.
- #1 fp8, 6: 6 run (the cap), so 7 queues with the cache 75% used: the cap binds → the cache
  holds 8 of the load's sequences at fp8 (the budget: 8.73), at most twice 6 → max_num_seqs 8.
- #2 fp8, 8: 8 run, so 9 queues with the cache full: KV capacity binds, fp8 is the narrowest → stop.

Goodput 4 / 0.3 = 13.3 → 6 / 0.3 = 20 → 8 / 0.3 = 26.7 req/s: #2 is chosen.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.slo import Binding
from slotop.actions.sweep.runner import SweepProgress
from slotop.actions.tune.model import Move
from slotop.actions.tune.runner import TuneResult, TuneRunner, TuneState
from tests.support.sweep_loop import Clock
from tests.support.tune_fakes import ORIGINAL, SPEC, FakeTuneReplica
from tests.support.tune_trials import CAPACITY


def tune(
    replica: FakeTuneReplica,
    clock: Clock,
    *,
    spec: Any = SPEC,
    resume: TuneState | None = None,
    records: list[tuple[str, Any]] | None = None,
    **kwargs: Any,
) -> TuneResult:
    runner = TuneRunner(
        replica,
        spec,
        CAPACITY,
        ORIGINAL,
        "http://127.0.0.1:8000",
        current=replica.dials,
        clock=clock,
        on_record=(lambda kind, data: records.append((kind, data)))
        if records is not None
        else None,
        **kwargs,
    )
    return runner.run(resume)


def test_the_tune_follows_what_binds_and_puts_the_replica_back() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)
    records: list[tuple[str, Any]] = []
    result = tune(replica, clock, records=records)
    assert [t.dials for t in result.trials] == [ORIGINAL, Dials("fp8", 6), Dials("fp8", 8)]
    assert [t.move for t in result.trials] == [
        Move.BASELINE,
        Move.SMALLER_KV_DTYPE,
        Move.MORE_SEQS,
    ]
    assert [t.concurrency for t in result.trials] == [4, 6, 8]
    assert [d.binding for d in result.decisions] == [
        Binding.KV_CAPACITY,
        Binding.SEQ_CAP,
        Binding.KV_CAPACITY,
    ]
    assert result.decisions[-1].move is Move.STOP
    assert "already the narrowest" in result.stop_words
    for trial, c in zip(result.trials, (4, 6, 8), strict=True):
        assert trial.goodput_rps == pytest.approx(c / 0.3, rel=0.08)
        assert trial.goodput_se_rps is not None
    # the refine found 6 and 8 where the doubling ramp alone would have stopped at 4
    assert [s.concurrency for s in result.trials[1].sweep.steps] == [1, 2, 4, 8, 6, 7]  # type: ignore[union-attr]
    choice = result.choice
    assert (choice.trial, choice.dials, choice.concurrency) == (2, Dials("fp8", 8), 8)
    assert choice.beyond_noise is True and choice.binding is Binding.KV_CAPACITY
    assert replica.log == [
        "sweep --kv-cache-dtype=auto --max-num-seqs=6",
        "quality before auto",
        "applied --kv-cache-dtype=fp8 --max-num-seqs=6",
        "quality after fp8",
        "sweep --kv-cache-dtype=fp8 --max-num-seqs=6",
        "applied --kv-cache-dtype=fp8 --max-num-seqs=8",
        "sweep --kv-cache-dtype=fp8 --max-num-seqs=8",
        "applied --kv-cache-dtype=auto --max-num-seqs=6",
    ]
    assert (result.ended, result.verified, result.interrupted) == (ORIGINAL, True, False)
    assert [kind for kind, _ in records] == [
        "tune_trial",
        "tune_decision",
        "tune_candidate",
        "tune_trial",
        "tune_decision",
        "tune_candidate",
        "tune_trial",
        "tune_decision",
        "tune_restored",
    ]


def test_keep_ends_on_the_chosen_dials_verified() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)
    result = tune(replica, clock, spec=dataclasses.replace(SPEC, keep=True))
    assert result.ended == Dials("fp8", 8) and result.verified
    assert replica.log[-1] == "verified --kv-cache-dtype=fp8 --max-num-seqs=8"


def test_a_quality_check_that_fails_rejects_fp8_and_the_tune_stops() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock, match_ratio=0.5)
    result = tune(replica, clock)
    assert [t.number for t in result.trials] == [0, 1]
    assert result.trials[1].rejected == (
        "the quality check kept 50% of output tokens identical, under the 90% required"
    )
    assert result.trials[1].sweep is None  # not swept: it cannot be chosen
    assert "already tried as #1" in result.stop_words
    assert result.choice.trial == 0 and result.ended == ORIGINAL


def test_a_restart_that_rolls_back_is_no_choice() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)
    replica.refuse.add(Dials("fp8", 6))
    result = tune(replica, clock)
    assert result.trials[1].restart == "rolled_back"
    assert result.trials[1].rejected == "the restart failed: it rolled back"
    assert result.choice.trial == 0
    assert replica.log[-1] == "verified --kv-cache-dtype=auto --max-num-seqs=6"


def test_dials_left_alone_are_never_turned() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)
    spec = dataclasses.replace(SPEC, dials=frozenset({"max_num_seqs"}))
    result = tune(replica, clock, spec=spec)
    assert [t.number for t in result.trials] == [0]
    assert "--dials leaves kv_cache_dtype alone" in result.stop_words
    assert not any(line.startswith("applied") for line in replica.log)


def test_no_candidate_starts_that_the_time_budget_cannot_hold() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)
    # the baseline takes some 40 s on the fake clock; 60 s leaves too little for another
    result = tune(replica, clock, spec=dataclasses.replace(SPEC, budget_s=60.0))
    assert [t.number for t in result.trials] == [0]
    assert "the time budget has" in result.stop_words and "next was:" in result.stop_words
    assert result.choice.trial == 0 and not result.resumable


def test_the_time_budget_cuts_a_sweep_and_the_tune_can_resume() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)
    result = tune(replica, clock, spec=dataclasses.replace(SPEC, budget_s=20.0))
    assert result.stop_words == "the time budget ran out"
    assert result.resumable and not result.interrupted
    (baseline,) = result.trials
    assert not baseline.complete and baseline.rejected == "its sweep was cut short"
    assert result.choice.trial is None and result.ended == ORIGINAL


def test_an_interrupt_restores_the_original_dials_and_a_resume_goes_on() -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)

    def interrupt(update: SweepProgress) -> None:
        if replica.dials == Dials("fp8", 6) and update.concurrency == 4:
            runner.cancel.set()

    replica.on_sweep_progress = interrupt
    runner = TuneRunner(replica, SPEC, CAPACITY, ORIGINAL, "http://127.0.0.1:8000", clock=clock)
    cut = runner.run()
    assert cut.interrupted and cut.resumable
    assert cut.stop_words == "interrupted: resume with --resume"
    assert [t.complete for t in cut.trials] == [True, False]
    assert [s.concurrency for s in cut.trials[1].sweep.steps] == [1, 2]  # type: ignore[union-attr]
    assert (cut.ended, cut.verified) == (ORIGINAL, True)
    assert replica.log[-1] == "applied --kv-cache-dtype=auto --max-num-seqs=6"
    assert cut.choice.trial == 0  # the baseline stands; the cut candidate is no choice

    replica.on_sweep_progress = lambda _update: None
    replica.log.clear()
    resumed = tune(replica, clock, resume=TuneState(cut.trials, cut.decisions))
    assert [t.dials for t in resumed.trials] == [ORIGINAL, Dials("fp8", 6), Dials("fp8", 8)]
    # fp8 again, its sweep going on from 4 where the interrupt left it; a new run holds no
    # quality baseline, so the prompts run again on the original dtype before the restart
    assert replica.log[:3] == [
        "quality before auto",
        "applied --kv-cache-dtype=fp8 --max-num-seqs=6",
        "quality after fp8",
    ]
    assert [s.concurrency for s in resumed.trials[1].sweep.steps] == [1, 2, 4, 8, 6, 7]  # type: ignore[union-attr]
    assert resumed.choice.trial == 2 and resumed.ended == ORIGINAL
