"""The tune's rules on an SGLang replica's hand-worked sweeps: SGLang's dtypes and names, and the
token budget's move skipped, with why, where it rests on what SGLang does not measure."""

from __future__ import annotations

from slotop.actions.replica.spec import Dials
from slotop.actions.slo import Binding
from slotop.actions.tune.capacity import Capacity, capacity_from_sglang
from slotop.actions.tune.diagnose import next_decision
from slotop.actions.tune.model import Move
from slotop.actions.tune.output import flags_line
from tests.support.sglang_pool import sglang_pool
from tests.support.sweep_steps import step
from tests.support.tune_trials import TUNE, trial


def sglang(kv_cache_dtype: str = "auto", seqs: int | None = 6, chunk: int | None = None) -> Dials:
    return Dials(kv_cache_dtype, seqs, chunk, engine="sglang")


# 1, 2, 4 hold; at 5 four run with one waiting, the pool full, two retracted
KV_FULL = [
    step(1),
    step(2),
    step(4, kv=0.92),
    step(5, running=4, waiting=1.0, kv=0.95, preemptions=2.0),
]
# 1..6 hold; at 7 six run (= --max-running-requests) with one waiting, the pool 75% used
SEQ_CAP = [step(c) for c in (1, 2, 4, 6)] + [step(7, running=6, waiting=1.0, kv=0.75)]
# at 8 ITL p99 is 60 ms against 40 while TTFT holds at 100 ms
ITL_BROKE = [step(1), step(2), step(4), step(8, itl_s=0.06)]
# at 8 TTFT breaks with nothing full: on vLLM the steps' batch size would say whether the
# token budget holds the prompts back; SGLang's /metrics has no such histogram
TTFT_BROKE = [step(1), step(2), step(4), step(8, ttft_s=0.9, kv=0.4)]


def test_kv_capacity_names_sglangs_fp8_not_vllms() -> None:
    decision = next_decision([trial(0, sglang(), KV_FULL, 4.0)], None, TUNE)
    assert decision.binding is Binding.KV_CAPACITY
    assert (decision.move, decision.dials) == (Move.SMALLER_KV_DTYPE, sglang("fp8_e5m2"))
    assert decision.dials is not None and decision.dials.problem() is None  # SGLang takes it
    assert "2 retractions" in decision.words and "preemptions" not in decision.words
    assert flags_line(decision.dials) == "--kv-cache-dtype fp8_e5m2 --max-running-requests 6"


def test_the_cap_binds_in_sglangs_words_and_is_not_held_under_the_chunk_size() -> None:
    # vLLM wants max_num_batched_tokens ≥ max_num_seqs and would cap 12 at 8; SGLang decodes
    # apart from its prefill chunks, so a chunk of 8 tokens bounds nothing here: twice the cap
    decision = next_decision([trial(0, sglang("fp8_e5m2", 6, 8), SEQ_CAP, 6.0)], None, TUNE)
    assert decision.binding is Binding.SEQ_CAP
    assert (decision.move, decision.dials) == (Move.MORE_SEQS, sglang("fp8_e5m2", 12, 8))
    assert "max_running_requests 6 → 12" in decision.words
    assert "max_num_seqs" not in decision.words


def test_itl_breaking_alone_halves_the_chunk_in_sglangs_words() -> None:
    decision = next_decision([trial(0, sglang("auto", 64, 2048), ITL_BROKE, 6.0)], None, TUNE)
    # the floor is 256 tokens, not the cap of 64 (vLLM's) nor anything above 1,024
    assert (decision.move, decision.dials) == (
        Move.FEWER_BATCHED_TOKENS,
        sglang("auto", 64, 1024),
    )
    assert "chunked_prefill_size 2048 → 1024" in decision.words
    assert "between its decode batches" in decision.words


def test_the_chunk_left_to_sglang_says_which_setting_to_give() -> None:
    decision = next_decision([trial(0, sglang("auto", 64), ITL_BROKE, 6.0)], None, TUNE)
    assert decision.move is Move.STOP
    assert "chunked_prefill_size is the replica's default" in decision.words
    assert "(passed as chunked_prefill_size)" in decision.words


def test_ttft_breaking_never_names_the_chunk_and_says_why() -> None:
    decision = next_decision([trial(0, sglang("auto", 64, 256), TTFT_BROKE, 2.0)], None, TUNE)
    assert decision.binding is Binding.TTFT and decision.move is Move.STOP
    assert "whether chunked_prefill_size 256 binds cannot be read" in decision.evidence
    assert decision.words.endswith(
        "; chunked_prefill_size may hold the first tokens back, but SGLang cannot show it: a "
        "before/after (`slotop restart --max-num-batched-tokens N`, passed as "
        "--chunked-prefill-size) measures it"
    )
    notes = {note.dial: note for note in decision.considered}
    assert not notes["max_num_batched_tokens"].tried
    assert notes["max_num_batched_tokens"].words == (
        "ITL did not break alone (TTFT breach, ITL pass), and whether chunked_prefill_size "
        "holds TTFT back cannot be read: tokens per step: SGLang has no such metric"
    )


def test_a_full_pool_at_fp8_halves_the_chunk_for_sglangs_activation_reserve() -> None:
    full = step(48, running=40, waiting=3.0, kv=1.0, preemptions=12.0)
    steps = [step(8), step(16), step(32, kv=0.8), full]
    decision = next_decision([trial(0, sglang("fp8_e5m2", 64, 16384), steps, 10.0)], None, TUNE)
    assert decision.binding is Binding.KV_CAPACITY
    assert decision.dials == sglang("fp8_e5m2", 64, 8192)
    assert "SGLang's default mem_fraction_static" in decision.words
    assert "vLLM" not in decision.words


def test_the_budget_comes_from_sglangs_pool_in_tokens() -> None:
    # 8,448 tokens: 8 of the load's 1,056-token requests, 4.125 at a 2,048-token context
    capacity = capacity_from_sglang(sglang_pool(8448, 2048), "auto", 1056)
    assert capacity.max_model_len_tokens == 2048
    assert [row.kv_cache_dtype for row in capacity.rows] == ["auto"]  # no dtype predicted
    assert capacity.seqs_at_load("auto") == 8 and capacity.at("fp8_e5m2") is None
    assert capacity.words()[0] == (
        "auto (now): ? B/token, 8,448 tokens; sequences: 4.1 at max context (2,048), "
        "8.0 at the load's 1,056 tokens"
    )
    assert Capacity.from_json(capacity.to_json()) == capacity


def test_the_cap_is_raised_at_most_to_what_sglangs_pool_holds() -> None:
    capacity = capacity_from_sglang(sglang_pool(8448, 2048), "auto", 1056)
    decision = next_decision([trial(0, sglang("auto", 6), SEQ_CAP, 6.0)], capacity, TUNE)
    assert decision.dials == sglang("auto", 8)  # twice the cap would be 12
    assert (
        "the KV cache holds 8 sequences of the load's 1,056 tokens at auto: "
        "max_running_requests 6 → 8"
    ) in decision.words
