"""The scheduler engine in simulated time: batching, budgets, preemption and the latencies they make."""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.errors import DuplicateRequestError, RequestRejectedError
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.types import FinishedRequest, OutputLengths, StepOutcome

NEVER_EOS = OutputLengths(kind="never", median_tokens=1.0, sigma=0.0)


def make_engine(
    *,
    max_num_seqs: int = 256,
    max_num_batched_tokens: int = 8192,
    max_model_len: int = 16384,
    blocks: int | None = None,
    seed: int = 0,
    output_lengths: OutputLengths = NEVER_EOS,
    async_scheduling: bool = False,
) -> Engine:
    """An engine whose scheduling pass runs at its own step's start unless `async_scheduling`."""
    config = resolve_engine_config(
        MODELS["llama-3.1-8b"],
        GPUS["h100-sxm"],
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        max_model_len=max_model_len,
        num_gpu_blocks_override=blocks,
        seed=seed,
        output_lengths=output_lengths,
        async_scheduling=async_scheduling,
    )
    return Engine(config)


@dataclass
class Trace:
    """Everything a run produced, for assertions."""

    steps: list[StepOutcome] = field(default_factory=list)
    finished: dict[str, FinishedRequest] = field(default_factory=dict)
    token_times: dict[str, list[float]] = field(default_factory=dict)

    def ttft_s(self, request_id: str) -> float:
        timing = self.finished[request_id].timing
        assert timing.first_token_s is not None
        return timing.first_token_s - timing.arrival_s

    def gaps_s(self) -> list[float]:
        """Every inter-token gap of every request (vLLM's inter-token latency samples)."""
        gaps: list[float] = []
        for times in self.token_times.values():
            gaps.extend(b - a for a, b in itertools.pairwise(times))
        return gaps


def record(trace: Trace, outcome: StepOutcome) -> None:
    trace.steps.append(outcome)
    for request_id in outcome.emitted_ids:
        trace.token_times.setdefault(request_id, []).append(outcome.end_s)
    for done in outcome.finished:
        trace.finished[done.request_id] = done


def run_all(
    engine: Engine, requests: Iterable[tuple[str, int, int, float]], ignore_eos: bool = True
) -> Trace:
    """Submit (id, prompt, max_tokens, arrival) at their arrival times and step until idle."""
    pending = sorted(requests, key=lambda r: r[3])
    trace = Trace()
    now = 0.0
    while pending or engine.has_work():
        while pending and pending[0][3] <= now:
            request_id, prompt, max_tokens, arrival = pending.pop(0)
            engine.submit(request_id, prompt, max_tokens, ignore_eos, arrival)
        if not engine.has_work():
            now = pending[0][3]
            continue
        outcome = engine.step(now)
        record(trace, outcome)
        now = outcome.end_s
    return trace


def run_closed_loop(engine: Engine, concurrency: int, prompt: int, total: int) -> Trace:
    """Keep `concurrency` requests in flight (a new one whenever one ends) until `total` are done.

    Output lengths vary (128–384 tokens, seeded) so requests end, and new prompts arrive, spread
    over time the way they do under real load.
    """
    rng = random.Random(1)
    trace = Trace()
    submitted = 0

    def submit(now: float) -> None:
        nonlocal submitted
        engine.submit(f"r{submitted}", prompt, rng.randint(128, 384), True, now)
        submitted += 1

    for _ in range(concurrency):
        submit(0.0)
    now = 0.0
    while engine.has_work():
        outcome = engine.step(now)
        record(trace, outcome)
        now = outcome.end_s
        for _ in outcome.finished:
            if submitted < total:
                submit(now)
    return trace


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


# --- continuous batching -------------------------------------------------------------------


def test_requests_join_and_leave_every_step() -> None:
    engine = make_engine(max_num_seqs=4)
    lengths = [3, 5, 7, 9, 2, 4, 6]
    trace = run_all(engine, [(f"r{i}", 16, n, 0.0) for i, n in enumerate(lengths)])
    firsts = [set(step.first_token_ids) for step in trace.steps]
    finished = [len(step.finished) for step in trace.steps]
    assert firsts[0] == {"r0", "r1", "r2", "r3"}
    # r0 ends at step 3 (tokens at steps 1, 2, 3); r4 takes its seat in step 4, the very next.
    assert finished[2] == 1 and firsts[3] == {"r4"}
    # r1 and r4 both end at step 5; r5 and r6 both join at step 6.
    assert finished[4] == 2 and firsts[5] == {"r5", "r6"}
    for done in trace.finished.values():
        assert done.output_tokens == lengths[int(done.request_id[1:])]
        assert done.finish_reason == "length"


def test_a_finished_request_s_last_token_is_emitted_in_the_step_it_ends() -> None:
    engine = make_engine()
    trace = run_all(engine, [("only", 32, 3, 0.0)])
    assert [step.emitted_ids for step in trace.steps] == [("only",)] * 3
    assert [len(step.finished) for step in trace.steps] == [0, 0, 1]
    assert len(trace.token_times["only"]) == 3


def test_budget_seats_and_blocks_are_never_exceeded_under_random_load() -> None:
    rng = random.Random(7)
    engine = make_engine(
        max_num_seqs=24, max_num_batched_tokens=2048, blocks=1200, max_model_len=8192
    )
    requests = [
        (f"r{i}", rng.randint(1, 6000), rng.randint(1, 800), rng.uniform(0, 20)) for i in range(300)
    ]
    requests = [(rid, p, min(m, 8192 - p), t) for rid, p, m, t in requests]
    trace = run_all(engine, requests)
    for step in trace.steps:
        assert step.prefill_tokens + step.decode_tokens <= 2048
        assert step.stats.num_running <= 24
        assert step.stats.kv_blocks_used <= step.stats.kv_blocks_total == 1199
        assert step.end_s > step.start_s
    assert sum(step.stats.preemptions_total > 0 for step in trace.steps) > 0
    assert set(trace.finished) == {r[0] for r in requests}
    for rid, _prompt, max_tokens, _arrival in requests:
        assert trace.finished[rid].output_tokens == max_tokens
    assert trace.steps[-1].stats.kv_blocks_used == 0


def test_long_prompts_are_chunked_by_the_token_budget() -> None:
    engine = make_engine(max_num_batched_tokens=2048)
    trace = run_all(engine, [("long", 5000, 2, 0.0)])
    assert [s.prefill_tokens for s in trace.steps[:3]] == [2048, 2048, 904]
    assert [s.emitted_ids for s in trace.steps[:3]] == [(), (), ("long",)]


def test_running_decodes_take_their_token_before_a_prefill_chunk() -> None:
    engine = make_engine(max_num_batched_tokens=2048)
    for i in range(10):
        engine.submit(f"d{i}", 100, 50, True, 0.0)
    first = engine.step(0.0)
    engine.submit("long", 6000, 2, True, first.end_s)
    mixed = engine.step(first.end_s)
    assert mixed.decode_tokens == 10
    assert mixed.prefill_tokens == 2048 - 10
    assert set(mixed.emitted_ids) == {f"d{i}" for i in range(10)}


# --- preemption ----------------------------------------------------------------------------


def test_preemption_happens_exactly_when_blocks_run_out_and_takes_the_newest() -> None:
    # 11 blocks of 16 tokens: one is vLLM's null block, 10 are usable.
    engine = make_engine(blocks=11, max_model_len=160)
    engine.submit("old", 64, 90, True, 0.0)
    engine.submit("new", 64, 90, True, 0.0)
    trace = Trace()
    now = 0.0
    while not any(step.preempted_ids for step in trace.steps):
        outcome = engine.step(now)
        record(trace, outcome)
        now = outcome.end_s
        if len(trace.steps) == 2:
            engine.submit("late", 8, 4, True, now)
    *before, victim_step = trace.steps
    assert victim_step.preempted_ids == ("new",)
    # Each holds 64 + 16 tokens (5 blocks) before; the 81st token needs a 6th block.
    assert before[-1].stats.kv_blocks_used == 10
    assert all(not step.preempted_ids for step in before)
    assert len(before) == 1 + 16
    assert victim_step.emitted_ids == ("old",)
    assert "late" not in victim_step.emitted_ids  # no admissions in a step that preempted
    assert victim_step.stats.preemptions_total == 1
    assert victim_step.stats.kv_blocks_used == 6
    assert victim_step.stats.num_waiting == 2


def test_a_preempted_request_recomputes_and_still_finishes_with_all_its_tokens() -> None:
    engine = make_engine(blocks=11, max_model_len=160)
    trace = run_all(engine, [("old", 64, 90, 0.0), ("new", 64, 90, 0.0), ("late", 8, 4, 0.1)])
    assert trace.finished["new"].num_preemptions >= 1
    assert trace.finished["new"].output_tokens == 90
    assert len(trace.token_times["new"]) == 90  # no token emitted twice after recompute
    assert trace.finished["old"].num_preemptions == 0
    # FCFS: "late" waits behind the preempted "new" at the head of the queue.
    new_resumed = trace.token_times["new"][16]
    assert trace.token_times["late"][0] >= new_resumed


def test_a_waiting_prompt_is_admitted_only_when_its_whole_prompt_fits() -> None:
    # 10 usable blocks; "first" takes 4. "big" needs 7 for its whole prompt, although the
    # 16 tokens of budget left in step one would only have needed one block for a first chunk.
    engine = make_engine(blocks=11, max_model_len=160, max_num_batched_tokens=80, max_num_seqs=8)
    trace = run_all(engine, [("first", 64, 8, 0.0), ("big", 112, 8, 0.0)])
    assert trace.steps[0].first_token_ids == ("first",)
    assert trace.steps[0].prefill_tokens == 64
    assert trace.steps[0].stats.num_waiting == 1
    big = trace.finished["big"].timing
    assert big.first_scheduled_s is not None
    assert big.first_scheduled_s >= trace.finished["first"].timing.finished_s
    assert all(step.stats.preemptions_total == 0 for step in trace.steps)


# --- the waiting gauge ---------------------------------------------------------------------
# vLLM publishes its scheduler stats once per step, after scheduling: a request that arrives
# during a step is not in them, and counts as waiting only if the next step leaves it queued.

WAITING_AFTER_THE_STEP_THAT_FIRST_SEES_THE_ARRIVALS = [
    # Seat 2 of 8, 63 tokens of budget to spare, 10 blocks free of 1,199: "b" goes in.
    pytest.param({"max_num_seqs": 8}, [("b", 64)], 0, id="seat-budget-and-blocks-free"),
    # The one seat is "a"'s: "b" stays queued.
    pytest.param({"max_num_seqs": 1}, [("b", 64)], 1, id="seats-full"),
    # 129 tokens: a's decode 1 + b 64 + c 64 spends them all, so "d" stays queued.
    pytest.param(
        {"max_num_seqs": 8, "max_num_batched_tokens": 129},
        [("b", 64), ("c", 64), ("d", 64)],
        1,
        id="token-budget-spent",
    ),
    # 10 usable blocks; "a" holds 5 once its 65th token is scheduled, "big" needs 112/16 = 7.
    pytest.param(
        {"max_num_seqs": 8, "blocks": 11, "max_model_len": 160},
        [("big", 112)],
        1,
        id="blocks-short",
    ),
]


@pytest.mark.parametrize(
    ("limits", "arrivals", "left_waiting"), WAITING_AFTER_THE_STEP_THAT_FIRST_SEES_THE_ARRIVALS
)
def test_an_arrival_counts_as_waiting_only_once_a_step_left_it_queued(
    limits: dict[str, int], arrivals: list[tuple[str, int]], left_waiting: int
) -> None:
    engine = make_engine(**limits)
    engine.submit("a", 64, 20, True, 0.0)
    first = engine.step(0.0)
    assert (first.stats.num_running, first.stats.num_waiting) == (1, 0)
    during_s = (first.start_s + first.end_s) / 2
    for request_id, prompt in arrivals:
        engine.submit(request_id, prompt, 8, True, during_s)
    # What a scrape reads until the next step: the first step's queue, which held none of them.
    assert engine.stats().num_waiting == 0
    second = engine.step(first.end_s)
    assert second.stats.num_waiting == left_waiting
    assert second.stats.num_running == 1 + len(arrivals) - left_waiting
    assert engine.stats().num_waiting == left_waiting


def test_an_abort_takes_a_request_off_the_waiting_count_only_if_it_was_counted() -> None:
    engine = make_engine(max_num_seqs=1)
    engine.submit("a", 64, 20, True, 0.0)
    first = engine.step(0.0)
    engine.submit("b", 64, 8, True, first.end_s)
    second = engine.step(first.end_s)
    assert second.stats.num_waiting == 1  # "b": the seat is "a"'s
    engine.submit("c", 64, 8, True, second.end_s)
    assert engine.stats().num_waiting == 1  # "c" came after the step: not counted yet
    assert engine.abort("c") is not None
    assert engine.stats().num_waiting == 1
    assert engine.abort("b") is not None
    assert engine.stats().num_waiting == 0
    engine.submit("d", 64, 8, True, second.end_s)
    third = engine.step(second.end_s)
    assert (third.stats.num_running, third.stats.num_waiting) == (1, 1)  # "d" waits for the seat


# --- latency shapes ------------------------------------------------------------------------


def test_ttft_grows_with_prompt_length() -> None:
    ttfts = []
    for prompt in (128, 1024, 4096, 8192, 16000):
        trace = run_all(make_engine(), [("r", prompt, 1, 0.0)])
        ttfts.append(trace.ttft_s("r"))
    assert ttfts == sorted(ttfts)
    assert ttfts[-1] > 10 * ttfts[0]


def test_ttft_grows_with_the_queue_ahead() -> None:
    last_ttft = []
    for queued in (1, 8, 32):
        engine = make_engine()
        trace = run_all(engine, [(f"r{i}", 2048, 4, 0.0) for i in range(queued)])
        last_ttft.append(trace.ttft_s(f"r{queued - 1}"))
    assert last_ttft == sorted(last_ttft)
    assert last_ttft[2] > 4 * last_ttft[0]


def test_queue_time_is_recorded_for_requests_that_waited_for_a_seat() -> None:
    engine = make_engine(max_num_seqs=1)
    trace = run_all(engine, [("a", 64, 10, 0.0), ("b", 64, 10, 0.0)])
    a, b = trace.finished["a"].timing, trace.finished["b"].timing
    assert a.first_scheduled_s == 0.0
    assert b.first_scheduled_s is not None and b.first_scheduled_s >= a.finished_s
    assert b.arrival_s <= b.first_scheduled_s <= (b.first_token_s or 0) <= b.finished_s


def test_itl_grows_with_the_batch_s_kv() -> None:
    def median_itl(concurrency: int, prompt: int) -> float:
        engine = make_engine(max_model_len=16384)
        trace = run_all(engine, [(f"r{i}", prompt, 64, 0.0) for i in range(concurrency)])
        return statistics.median(trace.gaps_s())

    assert median_itl(1, 512) < median_itl(32, 512) < median_itl(128, 512)
    assert median_itl(32, 512) < median_itl(32, 8192)


def test_p99_bends_when_concurrency_passes_the_kv_capacity() -> None:
    # 1,601 blocks: 1,600 usable = 25,600 tokens; a request peaks at 1,024 + 384 = 1,408 tokens,
    # so about 20 fit, and past that requests wait for blocks or preempt each other.
    runs = {}
    for concurrency in (4, 8, 16, 20, 24, 32, 64):
        engine = make_engine(blocks=1601, max_model_len=2048)
        trace = run_closed_loop(engine, concurrency, 1024, total=6 * concurrency)
        ttfts = [trace.ttft_s(r) for r in trace.finished]
        runs[concurrency] = (
            statistics.median(ttfts),
            p99(ttfts),
            p99(trace.gaps_s()),
            trace.steps[-1].stats.preemptions_total,
        )
    below, above = (4, 8, 16, 20), (24, 32, 64)
    assert all(runs[c][3] == 0 for c in below)
    assert all(runs[c][3] > 0 for c in above)
    medians_below = [runs[c][0] for c in below]
    assert max(medians_below) < 1.2 * min(medians_below)  # flat: one prefill, no queue
    assert runs[24][0] > 5 * runs[20][0]  # the bend: requests now queue for KV blocks
    assert [runs[c][1] for c in above] == sorted(runs[c][1] for c in above)
    assert runs[32][2] > 1.5 * runs[16][2]  # recompute prefills stall the decodes too


# --- determinism, output lengths, edges ----------------------------------------------------


def test_the_same_seed_replays_the_same_run() -> None:
    chat = OutputLengths(kind="lognormal", median_tokens=40, sigma=1.0)
    requests = [(f"r{i}", 100 + 7 * i, 400, i * 0.01) for i in range(50)]
    one = run_all(make_engine(seed=3, output_lengths=chat), requests, ignore_eos=False)
    two = run_all(make_engine(seed=3, output_lengths=chat), requests, ignore_eos=False)
    other = run_all(make_engine(seed=4, output_lengths=chat), requests, ignore_eos=False)
    assert one.steps == two.steps
    lengths = {r: f.output_tokens for r, f in one.finished.items()}
    assert lengths != {r: f.output_tokens for r, f in other.finished.items()}


def test_ignore_eos_generates_exactly_max_tokens() -> None:
    chat = OutputLengths(kind="lognormal", median_tokens=5, sigma=0.5)
    trace = run_all(make_engine(output_lengths=chat), [("r", 10, 300, 0.0)], ignore_eos=True)
    assert trace.finished["r"].output_tokens == 300
    assert trace.finished["r"].finish_reason == "length"


def test_chat_lengths_stop_early_around_the_configured_median() -> None:
    chat = OutputLengths(kind="lognormal", median_tokens=150, sigma=0.9)
    engine = make_engine(output_lengths=chat, max_num_seqs=1024, max_num_batched_tokens=16384)
    trace = run_all(engine, [(f"r{i}", 20, 2000, 0.0) for i in range(1000)], ignore_eos=False)
    lengths = [f.output_tokens for f in trace.finished.values()]
    assert statistics.median(lengths) == pytest.approx(150, rel=0.12)
    reasons = {f.finish_reason for f in trace.finished.values()}
    assert reasons == {"stop", "length"}  # a few draws pass 2,000 tokens
    for done in trace.finished.values():
        assert (done.finish_reason == "length") == (done.output_tokens == 2000)


def test_never_eos_runs_every_request_to_max_tokens() -> None:
    trace = run_all(make_engine(), [(f"r{i}", 20, 30, 0.0) for i in range(20)], ignore_eos=False)
    assert {f.output_tokens for f in trace.finished.values()} == {30}


def test_abort_frees_the_blocks_of_running_and_waiting_requests() -> None:
    engine = make_engine(max_num_seqs=1)
    engine.submit("running", 300, 100, True, 0.0)
    engine.submit("waiting", 300, 100, True, 0.0)
    step = engine.step(0.0)
    assert step.stats.kv_blocks_used == 19  # ceil(300 / 16)
    gone = engine.abort("running", at_s=step.end_s)
    assert gone is not None and gone.finish_reason == "abort" and gone.output_tokens == 1
    assert engine.stats().kv_blocks_used == 0
    waiting = engine.abort("waiting")
    assert waiting is not None and waiting.timing.first_token_s is None
    assert engine.abort("waiting") is None
    assert not engine.has_work()


def test_an_abort_that_leaves_the_engine_idle_frees_the_blocks_of_the_request_just_finished() -> (
    None
):
    # With async scheduling a request that finished keeps its blocks until the next pass; when
    # the only other request is aborted there is no next pass, and an idle engine holds nothing.
    engine = make_engine(async_scheduling=True)
    engine.submit("short", 300, 2, True, 0.0)
    engine.submit("long", 300, 100, True, 0.0)
    at_s = 0.0
    while not (step := engine.step(at_s)).finished:
        at_s = step.end_s
    assert [f.request_id for f in step.finished] == ["short"]
    assert engine.stats().kv_blocks_used == 2 * 19  # "short" is retiring: its blocks are held
    assert engine.abort("long", at_s=step.end_s) is not None
    assert not engine.has_work()
    assert engine.stats().kv_blocks_used == 0


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "message"),
    [(0, 10, "at least one token"), (10, 0, "max_tokens"), (4000, 200, "maximum context length")],
)
def test_requests_that_can_never_run_are_refused(
    prompt: int, max_tokens: int, message: str
) -> None:
    engine = make_engine(max_model_len=4096)
    with pytest.raises(RequestRejectedError, match=message):
        engine.submit("r", prompt, max_tokens, True, 0.0)
    assert not engine.has_work()


def test_request_ids_are_unique_while_held() -> None:
    engine = make_engine()
    engine.submit("r", 10, 1, True, 0.0)
    with pytest.raises(DuplicateRequestError):
        engine.submit("r", 10, 1, True, 0.0)
    engine.step(0.0)
    engine.submit("r", 10, 1, True, 1.0)  # finished ids may be reused


def test_an_idle_step_takes_no_time_and_steps_never_go_back_in_time() -> None:
    engine = make_engine()
    idle = engine.step(5.0)
    assert (idle.start_s, idle.end_s, idle.emitted_ids) == (5.0, 5.0, ())
    engine.submit("r", 100, 2, True, 5.0)
    first = engine.step(5.0)
    second = engine.step(0.0)
    assert second.start_s == first.end_s


def test_totals_count_prompt_and_generated_tokens() -> None:
    engine = make_engine()
    trace = run_all(engine, [("a", 100, 5, 0.0), ("b", 50, 7, 0.0)])
    stats = trace.steps[-1].stats
    assert stats.prompt_tokens_total == 150
    assert stats.generation_tokens_total == 12
    assert stats.prefix_cache_queries_total == 150
    assert stats.prefix_cache_hits_total == 0


# --- how vLLM's engine core takes requests in and counts them -----------------------------------
# vLLM V1 (EngineCore.run_busy_loop): requests wait in the engine core's input queue until the
# loop comes round, then enter the scheduler's waiting queue (their QUEUED event) just before a
# scheduling pass, which admits what it can (SCHEDULED). The waiting gauge is len(waiting) after a
# pass; the queue time runs from QUEUED to SCHEDULED. With async scheduling (step_with_batch_queue)
# the pass for the next step runs as soon as this one is launched, and the requests this step
# finishes hold their seats and blocks until its output is processed, after that pass.


def test_a_request_arriving_mid_step_is_taken_in_at_the_next_pass_and_never_waits() -> None:
    engine = make_engine(max_num_seqs=4)
    engine.submit("a", 64, 20, True, 0.0)
    first = engine.step(0.0)
    mid_step_s = (first.start_s + first.end_s) / 2
    engine.submit("b", 64, 5, True, mid_step_s)
    assert first.stats.num_waiting == 0 and engine.stats().num_waiting == 0
    second = engine.step(first.end_s)
    assert "b" in second.first_token_ids  # admitted by the pass at the second step's start
    assert second.stats.num_waiting == 0
    trace = Trace()
    now = second.end_s
    while engine.has_work():
        outcome = engine.step(now)
        record(trace, outcome)
        now = outcome.end_s
    timing = trace.finished["b"].timing
    assert timing.arrival_s == mid_step_s
    assert timing.queued_s == timing.first_scheduled_s == first.end_s  # queue time 0


def test_a_request_without_a_seat_waits_from_the_pass_that_took_it_in() -> None:
    engine = make_engine(max_num_seqs=1)
    engine.submit("a", 64, 3, True, 0.0)
    first = engine.step(0.0)
    engine.submit("b", 64, 3, True, first.start_s + 1e-4)
    steps = [first]
    while engine.has_work():
        steps.append(engine.step(steps[-1].end_s))
    waiting = [s.stats.num_waiting for s in steps]
    # b is taken in at the second pass and waits through a's last two steps: 0, 1, 1, then 0.
    assert waiting[:4] == [0, 1, 1, 0]
    finished = {f.request_id: f for s in steps for f in s.finished}
    timing = finished["b"].timing
    assert timing.queued_s == steps[1].start_s
    assert timing.first_scheduled_s == steps[3].start_s


def test_with_async_scheduling_a_mid_step_arrival_joins_the_step_after_next() -> None:
    engine = make_engine(max_num_seqs=4, async_scheduling=True)
    engine.submit("a", 64, 20, True, 0.0)
    first = engine.step(0.0)
    engine.submit("b", 64, 5, True, (first.start_s + first.end_s) / 2)
    # The pass for the second step ran at the first step's start, before b came.
    second = engine.step(first.end_s)
    assert "b" not in second.first_token_ids
    third = engine.step(second.end_s)
    assert "b" in third.first_token_ids
    assert third.scheduled_stats.num_waiting == 0  # taken in and admitted by the same pass


def test_with_async_scheduling_a_freed_seat_is_taken_one_pass_later() -> None:
    sync_engine = make_engine(max_num_seqs=1)
    async_engine = make_engine(max_num_seqs=1, async_scheduling=True)
    firsts: dict[bool, int] = {}
    for is_async, engine in ((False, sync_engine), (True, async_engine)):
        engine.submit("a", 64, 3, True, 0.0)
        engine.submit("b", 64, 3, True, 0.0)
        steps = [engine.step(0.0)]
        while engine.has_work():
            steps.append(engine.step(steps[-1].end_s))
        firsts[is_async] = next(i for i, s in enumerate(steps) if "b" in s.first_token_ids)
        # While b waits, the gauges say so; once a is gone they count b alone.
        assert max(s.stats.num_waiting for s in steps) == 1
    # a's third token ends step 2; without async the pass of step 3 gives b the seat, with
    # async that pass ran during step 2, so b's first step is step 4 (an empty step between).
    assert firsts == {False: 3, True: 4}
