"""The tune's decisions on the simulated engine in virtual time: the real sweeps, the real
diagnosis, the KV cache as vLLM sizes it; minutes of load in seconds.

Expected values come from the scenarios' own setup (their dials and the KV sizing `slotop sim
--dry-run` prints for them), never from the decisions under test.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.slo import Binding
from slotop.actions.sweep.decide import ReplicaLimits
from slotop.actions.tune.diagnose import next_decision
from slotop.actions.tune.model import Move, Trial
from tests.support.tune_scenarios import (
    ACTIVATION,
    KV_THEN_CAP,
    SGLANG_SEQ_CAP,
    SGLANG_TOKEN_BUDGET,
    TOKEN_BUDGET,
)
from tests.support.virtual_tune import Scenario, VirtualReplica, run_tune


def _baseline(scenario: Scenario) -> tuple[VirtualReplica, Trial]:
    replica = VirtualReplica(scenario)
    spec = scenario.spec.sweep
    limits = ReplicaLimits(scenario.start.max_num_seqs, scenario.start.max_num_batched_tokens)
    sweep = replica.sweep(
        dataclasses.replace(spec, limits=limits),
        None,
        threading.Event(),
        lambda _update: None,
        lambda _step, _records: None,
    )
    trial = Trial(0, scenario.start, Move.BASELINE, "", sweep, capacity=replica.capacity())
    return replica, trial


@pytest.mark.slow
def test_a_full_fp8_cache_gets_the_activation_memory_a_smaller_step_frees() -> None:
    # fp8 at max_num_batched_tokens 16,384: 35,152 KV tokens (`slotop sim --dry-run`), 27 of the
    # load's 1,280-token requests; 1,024-token prompts never fill a step of 16,384
    replica, baseline = _baseline(ACTIVATION)
    assert baseline.kv_tokens == 35_152
    decision = next_decision([baseline], baseline.capacity, ACTIVATION.spec)
    assert decision.binding is Binding.KV_CAPACITY
    assert decision.move is Move.FEWER_BATCHED_TOKENS
    assert decision.dials is not None and decision.dials.max_num_batched_tokens is not None
    assert decision.dials.max_num_batched_tokens <= 4096
    # the restart sizes the cache anew: at 2,048 the profile run leaves it 64,720 tokens
    applied = replica.apply(ACTIVATION.start, Dials("fp8", 64, 2048))
    assert applied.capacity is not None and applied.capacity.at("fp8") is not None
    assert applied.capacity.at("fp8").kv_tokens == 64_720  # type: ignore[union-attr]


@pytest.mark.slow
def test_a_cache_that_fills_first_gets_fp8_then_the_cap_it_holds() -> None:
    # 288 KV blocks at 16 bits and 577 at fp8 (`slotop sim --dry-run`), 66 a request: the cache
    # binds first (4 requests), then at fp8 the cap of 6, raised to the 8 the fp8 cache holds
    result, cost = run_tune(KV_THEN_CAP)
    bindings = [decision.binding for decision in result.decisions[:2]]
    assert bindings == [Binding.KV_CAPACITY, Binding.SEQ_CAP]
    assert [trial.dials for trial in result.trials] == [
        Dials("auto", 6),
        Dials("fp8", 6),
        Dials("fp8", 8),
    ]
    concurrency = [trial.concurrency for trial in result.trials]
    assert None not in concurrency and concurrency[0] < min(concurrency[1:]), concurrency  # type: ignore[type-var]
    chosen = result.choice
    assert chosen.trial in (1, 2) and chosen.goodput_rps is not None
    assert chosen.baseline_rps is not None and chosen.goodput_rps > chosen.baseline_rps
    assert (result.ended, cost.restarts) == (Dials("auto", 6), 3)


@pytest.mark.slow
def test_long_prompts_against_a_small_budget_raise_it_until_itl_breaks() -> None:
    # 4,096-token prompts chunked 256 a step: TTFT breaks while the steps fill the budget;
    # doubling it shortens the wait until the chunks stall the decodes past the ITL target;
    # then fp8 at the best budget
    result, cost = run_tune(TOKEN_BUDGET)
    moves = [t.move for t in result.trials[1:]]
    assert moves[:3] == [Move.MORE_BATCHED_TOKENS] * 3
    budgets = [t.dials.max_num_batched_tokens for t in result.trials]
    assert budgets[:4] == [256, 512, 1024, 2048]
    # 2,048 measured worse, so 1,024 names 2,048 again: the KV dtype is the dial left there
    assert result.trials[4].dials == Dials("fp8", 64, 1024)
    assert result.trials[4].move is Move.SMALLER_KV_DTYPE
    assert result.decisions[0].binding is Binding.TOKEN_BUDGET
    chosen = result.choice
    assert chosen.dials is not None and chosen.dials.max_num_batched_tokens in (512, 1024, 2048)
    assert chosen.goodput_rps is not None and chosen.baseline_rps is not None
    assert chosen.goodput_rps > chosen.baseline_rps
    # a restart per candidate and one to put the replica back; the grid has 24 cells
    assert cost.restarts == len(result.trials) <= len(TOKEN_BUDGET.grid) // 3


def _sglang_baseline(scenario: Scenario) -> Trial:
    replica = VirtualReplica(scenario)
    start = scenario.start
    limits = ReplicaLimits(start.max_num_seqs, start.max_num_batched_tokens, start.engine)
    sweep = replica.sweep(
        dataclasses.replace(scenario.spec.sweep, limits=limits),
        None,
        threading.Event(),
        lambda _update: None,
        lambda _step, _records: None,
    )
    return Trial(0, start, Move.BASELINE, "", sweep, capacity=replica.capacity())


@pytest.mark.slow
def test_long_prompts_on_sglang_leave_the_chunk_alone_and_say_why() -> None:
    # the token-budget scenario's load, prompts chunked 256 at a time, on SGLang: TTFT breaks
    # as on vLLM, but with no tokens-per-step histogram the chunk cannot be shown to bind
    baseline = _sglang_baseline(SGLANG_TOKEN_BUDGET)
    assert baseline.sweep is not None
    assert all(step.server.batch_tokens_p99 is None for step in baseline.sweep.steps)
    decision = next_decision([baseline], baseline.capacity, SGLANG_TOKEN_BUDGET.spec)
    assert decision.binding is not Binding.TOKEN_BUDGET
    assert decision.move is not Move.MORE_BATCHED_TOKENS
    notes = {note.dial: note for note in decision.considered}
    assert "SGLang has no such metric" in notes["max_num_batched_tokens"].words
    assert "chunked_prefill_size" in notes["max_num_batched_tokens"].words


@pytest.mark.slow
def test_sglangs_cap_is_raised_within_its_pool() -> None:
    # --max-running-requests 8 in a pool of some 400k tokens (`slotop sim --engine sglang
    # --dry-run`): the cap binds and doubles, as on vLLM, in SGLang's words
    baseline = _sglang_baseline(SGLANG_SEQ_CAP)
    assert baseline.capacity is not None and baseline.capacity.current_dtype == "auto"
    decision = next_decision([baseline], baseline.capacity, SGLANG_SEQ_CAP.spec)
    assert decision.binding is Binding.SEQ_CAP
    assert (decision.move, decision.dials) == (
        Move.MORE_SEQS,
        Dials("auto", 16, 2048, engine="sglang"),
    )
    assert "max_running_requests 8 → 16" in decision.words
