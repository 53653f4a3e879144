"""Prefix caching in the simulated engine: block hits, what they cost, LRU eviction and the flag.

Expected values are worked by hand from vLLM V1's rules: only full blocks (16 tokens here) are
cached, chained by hash so a block matches only with everything before it; a hit may cover at
most the prompt's length − 1 tokens; queries count a prompt's tokens and hits its cached tokens,
once, when it is admitted; the usable pool is `num_gpu_blocks − 1` (the null block).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.prefix_cache import BlockPool, block_hashes
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.types import EngineStats, OutputLengths

NEVER_EOS = OutputLengths(kind="never", median_tokens=1.0, sigma=0.0)


def make_engine(
    *, blocks: int | None = None, caching: bool = True, max_num_batched_tokens: int = 8192
) -> Engine:
    config = resolve_engine_config(
        MODELS["llama-3.1-8b"],
        GPUS["h100-sxm"],
        block_size=16,
        max_num_seqs=64,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=4096 if blocks is None else min(4096, (blocks - 2) * 16),
        num_gpu_blocks_override=blocks,
        output_lengths=NEVER_EOS,
        enable_prefix_caching=caching,
        # Each pass at its own step's start, so a request submitted at a step's end is in it.
        async_scheduling=False,
    )
    return Engine(config)


def ids(start: int, count: int) -> list[int]:
    """`count` distinct token ids from `start` on."""
    return list(range(start, start + count))


PREFIX = ids(1000, 64)


def serve_alone(engine: Engine, request_id: str, prompt: Sequence[int], max_tokens: int) -> None:
    """Submit one request and step until it has finished."""
    engine.submit(request_id, prompt, max_tokens, True, engine.end_s)
    while engine.has_work():
        engine.step(engine.end_s)


def counters(stats: EngineStats) -> tuple[int, int]:
    return stats.prefix_cache_queries_total, stats.prefix_cache_hits_total


@pytest.mark.parametrize(
    ("first", "second", "queries", "hits"),
    [
        # 64 shared + 36 own each: the second finds the 4 full shared blocks.
        (PREFIX + ids(1, 36), PREFIX + ids(100, 36), 200, 64),
        # 70 shared tokens: 4 full blocks (64), the 6 left share a block with own tokens.
        (ids(1000, 70) + ids(1, 30), ids(1000, 70) + ids(100, 30), 200, 64),
        # Nothing shared: no hit.
        (ids(1, 100), ids(200, 100), 200, 0),
        # The same token in the first place differs: the chain breaks at block 0.
        ([7, *PREFIX[1:], *ids(1, 36)], PREFIX + ids(1, 36), 200, 0),
        # The same 64-token prompt twice: at most 63 tokens may hit, so 3 blocks (48).
        (PREFIX, PREFIX, 128, 48),
        # 65 tokens twice: 64 may hit, 4 blocks; the last token is computed again.
        (ids(1000, 65), ids(1000, 65), 130, 64),
    ],
)
def test_a_second_request_hits_the_full_blocks_it_shares(
    first: list[int], second: list[int], queries: int, hits: int
) -> None:
    engine = make_engine()
    serve_alone(engine, "a", first, 4)
    serve_alone(engine, "b", second, 4)
    assert counters(engine.stats()) == (queries, hits)


def test_a_hit_is_shared_while_both_run_and_costs_no_blocks_or_prefill() -> None:
    engine = make_engine()
    engine.submit("a", PREFIX + ids(1, 36), 50, True, 0.0)
    first = engine.step(0.0)
    # a: 100 prompt tokens, then 1 token out: ceil(100 / 16) = 7 blocks.
    assert (first.prefill_tokens, first.stats.kv_blocks_used) == (100, 7)
    engine.submit("b", PREFIX + ids(100, 36), 50, True, first.end_s)
    second = engine.step(first.end_s)
    # a decodes one token; b computes 100 − 64 = 36 tokens and draws ceil(100/16) − 4 = 3 blocks.
    assert (second.decode_tokens, second.prefill_tokens) == (1, 36)
    assert second.stats.kv_blocks_used == 7 + 3
    finished = {}
    while engine.has_work():
        for request in engine.step(engine.end_s).finished:
            finished[request.request_id] = request
    assert (finished["a"].cached_prompt_tokens, finished["b"].cached_prompt_tokens) == (0, 64)
    assert engine.stats().prompt_tokens_cached_total == 64


def test_a_hit_shortens_the_prefill_step() -> None:
    long_prefix = ids(1000, 2048)
    cold, warm = make_engine(), make_engine()
    serve_alone(warm, "a", long_prefix + ids(1, 16), 1)
    cold.submit("b", long_prefix + ids(100, 16), 1, True, 0.0)
    warm.submit("b", long_prefix + ids(100, 16), 1, True, warm.end_s)
    cold_step, warm_step = cold.step(cold.end_s), warm.step(warm.end_s)
    assert (cold_step.prefill_tokens, warm_step.prefill_tokens) == (2064, 16)
    assert warm_step.end_s - warm_step.start_s < (cold_step.end_s - cold_step.start_s) / 4


def test_freed_cached_blocks_count_as_free() -> None:
    engine = make_engine(blocks=101)  # 100 usable
    serve_alone(engine, "a", PREFIX + ids(1, 36), 4)
    # 103 computed tokens held 7 blocks; all are free again, the prompt's 6 full ones cached.
    assert engine.stats().kv_blocks_used == 0
    assert (engine._pool.free_blocks, engine._pool.cached_free_blocks) == (100, 6)


def test_the_least_recently_freed_cached_block_is_evicted_first() -> None:
    # 11 usable blocks. "a" (48 tokens) leaves 3 cached blocks A0 A1 A2; "b" (48) leaves B0 B1 B2,
    # freed after A's, so the LRU order is A2 A1 A0 B2 B1 B0 (a request's last block first).
    engine = make_engine(blocks=12)
    a, b = ids(1000, 48), ids(2000, 48)
    serve_alone(engine, "a", [*a, 1], 1)
    serve_alone(engine, "b", [*b, 1], 1)
    pool = engine._pool
    assert (pool.free_blocks, pool.cached_free_blocks) == (11, 6)
    # "c" needs 8 blocks for 120 tokens: the 5 uncached free ones, then evicts A2 A1 A0; its
    # own 7 full blocks are cached when it leaves: B's 3 + C's 7.
    serve_alone(engine, "c", ids(5000, 120), 2)
    assert pool.cached_free_blocks == 10
    # "b" hits all 3 of its blocks again; "a" hits none (its first block is gone).
    serve_alone(engine, "b2", [*b, 2], 1)
    serve_alone(engine, "a2", [*a, 2], 1)
    queries, hits = counters(engine.stats())
    assert (queries, hits) == (49 + 49 + 120 + 49 + 49, 48)


def test_a_tail_block_is_evicted_before_the_head_of_its_prompt() -> None:
    pool = BlockPool(4, enabled=True)
    hashes = block_hashes(ids(1, 48), 16)
    pool.allocate(3)
    assert pool.cache(hashes) == list(hashes)
    pool.release(0, hashes)
    pool.allocate(2)  # 1 uncached free block, then the last block of the prompt goes
    assert pool.longest_hit(hashes, 3) == (2, 2)
    pool.allocate(2)  # then the second
    assert pool.longest_hit(hashes, 3) == (0, 0)


def test_no_enable_prefix_caching_never_hits_and_counts_no_queries() -> None:
    # vLLM records prefix-cache stats only for requests that looked the cache up.
    engine = make_engine(caching=False)
    serve_alone(engine, "a", PREFIX + ids(1, 36), 4)
    serve_alone(engine, "b", PREFIX + ids(100, 36), 4)
    assert counters(engine.stats()) == (0, 0)
    assert engine._pool.cached_blocks == 0


def test_a_prompt_known_only_by_its_length_is_queried_but_never_hits() -> None:
    engine = make_engine()
    serve_alone(engine, "a", 100, 4)
    serve_alone(engine, "b", 100, 4)
    assert counters(engine.stats()) == (200, 0)


def test_a_preempted_request_finds_what_is_left_of_its_prompt_blocks() -> None:
    # 15 usable blocks; two 96-token prompts take 6 each (3 free). Step s ≥ 2 computes token
    # 95 + s of each: at s = 2 each takes a 7th block (1 free), at s = 18 an 8th: a takes the
    # last one and b (the newest) is preempted with 113 tokens, leaving 7 free: its 6 prompt
    # blocks (cached) and 1 uncached. b needs 8 to come back, so it waits for a (60 tokens out,
    # done at s = 60), whose 10th block (s = 50) evicts b's last prompt block. b re-enters with
    # 5 blocks (80 tokens) cached and recomputes 113 − 80 = 33; vLLM counts a preempted
    # request's hits apart from the query and hit counters.
    engine = make_engine(blocks=16)
    engine.submit("a", ids(1000, 96), 60, True, 0.0)
    engine.submit("b", ids(2000, 96), 60, True, 0.0)
    preempted: list[str] = []
    prefilled_after: list[int] = []
    while engine.has_work():
        outcome = engine.step(engine.end_s)
        if preempted and not prefilled_after and outcome.prefill_tokens:
            prefilled_after.append(outcome.prefill_tokens)
        preempted += outcome.preempted_ids
    assert preempted == ["b"]
    assert prefilled_after == [33]
    assert counters(engine.stats()) == (192, 0)
