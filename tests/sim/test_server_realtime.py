"""The real-time loop: chunked frames per token, one closing per call, aborts on a broken connection,
and the API server's time between a request's arrival and the engine."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest

from slotop.sim.apiserver import ApiServerQueue, ApiServerTiming
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.metrics import SimMetrics, cache_config_labels
from slotop.sim.openai import GenerationRequest
from slotop.sim.realtime import Call, RealtimeLoop
from slotop.sim.tables import gpu_by_name, model_by_name_or_path


class FakeTransport:
    """Records every write; can pretend the peer went away after some writes."""

    def __init__(self, close_after: int | None = None) -> None:
        self.writes: list[bytes] = []
        self.close_after = close_after
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed or (
            self.close_after is not None and len(self.writes) >= self.close_after
        )

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return self.unread

    unread = 0


class StuckTransport(FakeTransport):
    """A client that reads nothing: everything written stays buffered."""

    def write(self, data: bytes) -> None:
        super().write(data)
        self.unread += len(data) * 100_000


def _request(n: int = 1, max_tokens: int = 3, include_usage: bool = True) -> GenerationRequest:
    return GenerationRequest(
        kind="completion",
        model_name="m",
        prompt_tokens=(40,),
        max_tokens=(max_tokens,),
        n=n,
        ignore_eos=True,
        stream=True,
        include_usage=include_usage,
        continuous_usage=False,
        base_id=None,
    )


def _parts(max_num_seqs: int | None = None) -> tuple[Engine, SimMetrics]:
    config = resolve_engine_config(
        model_by_name_or_path("llama-3.1-8b"),
        gpu_by_name("h100-sxm"),
        max_model_len=1024,
        max_num_seqs=max_num_seqs,
    )
    engine = Engine(config)
    labels = cache_config_labels(config, engine.capacity)
    return engine, SimMetrics("m", 1024, labels, late_threshold_s=0.002)


def _unframe(writes: list[bytes]) -> list[bytes]:
    """Undo HTTP chunked framing, checking every frame's length."""
    payloads = []
    for frame in writes:
        size, _, rest = frame.partition(b"\r\n")
        assert rest.endswith(b"\r\n")
        payload = rest[:-2]
        assert int(size, 16) == len(payload)
        payloads.append(payload)
    return payloads


async def _serve(calls: list[tuple[GenerationRequest, FakeTransport]]) -> tuple[list[Call], Engine]:
    engine, metrics = _parts()
    loop_runner = RealtimeLoop(engine, metrics)
    task = asyncio.get_running_loop().create_task(loop_runner.run())
    made = []
    for index, (request, transport) in enumerate(calls):
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        call = Call(request, f"cmpl-{index}", 0, "fp", transport, done)
        loop_runner.submit(call)
        made.append(call)
    await asyncio.wait_for(asyncio.gather(*(call.done for call in made)), timeout=30.0)
    task.cancel()
    assert loop_runner.open_calls == 0
    return made, engine


def test_each_token_is_one_frame_and_the_call_closes_once_after_its_last_choice() -> None:
    transport = FakeTransport()
    (call,), engine = asyncio.run(_serve([(_request(n=2, max_tokens=3), transport)]))
    payloads = _unframe(transport.writes)
    assert len(payloads) == 6
    text = b"".join(payloads).decode()
    events = [line[len("data: ") :] for line in text.split("\n\n") if line]
    assert events[-1] == "[DONE]"
    assert events.count("[DONE]") == 1
    usage = json.loads(events[-2])
    assert usage["usage"] == {"prompt_tokens": 40, "total_tokens": 46, "completion_tokens": 6}
    assert usage["system_fingerprint"] == "fp"
    tokens = [json.loads(e) for e in events[:-2]]
    assert sorted(e["choices"][0]["index"] for e in tokens) == [0, 0, 0, 1, 1, 1]
    assert payloads[-1].endswith(b"data: [DONE]\n\n")
    assert call.output_tokens == [3, 3]
    assert call.finish_reasons == ["length", "length"]
    assert not engine.has_work()


def test_without_usage_the_terminal_chunk_carries_the_fingerprint() -> None:
    transport = FakeTransport()
    asyncio.run(_serve([(_request(max_tokens=2, include_usage=False), transport)]))
    events = b"".join(_unframe(transport.writes)).decode().split("\n\n")
    last_token = json.loads(events[-3][len("data: ") :])
    assert last_token["choices"][0]["finish_reason"] == "length"
    assert last_token["system_fingerprint"] == "fp"
    assert "system_fingerprint" not in json.loads(events[0][len("data: ") :])


def test_a_broken_connection_aborts_its_call_and_frees_the_engine() -> None:
    broken = FakeTransport(close_after=2)
    healthy = FakeTransport()
    (lost, kept), engine = asyncio.run(
        _serve([(_request(max_tokens=50), broken), (_request(max_tokens=5), healthy)])
    )
    assert len(broken.writes) == 2
    assert sum(lost.output_tokens) < 50
    assert len(_unframe(healthy.writes)) == 5
    assert kept.output_tokens == [5]
    assert engine.stats().kv_blocks_used == 0


def test_a_client_that_reads_nothing_is_dropped_before_it_fills_memory() -> None:
    stuck = StuckTransport()
    (call,), engine = asyncio.run(_serve([(_request(max_tokens=200), stuck)]))
    assert stuck.closed
    assert len(stuck.writes) < 10
    assert sum(call.output_tokens) < 10
    assert engine.stats().kv_blocks_used == 0


def test_non_streamed_calls_count_tokens_without_writing() -> None:
    async def run() -> Call:
        engine, metrics = _parts()
        loop_runner = RealtimeLoop(engine, metrics)
        task = asyncio.get_running_loop().create_task(loop_runner.run())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        call = Call(_request(n=3, max_tokens=4), "cmpl-x", 0, None, None, done)
        loop_runner.submit(call)
        await asyncio.wait_for(done, timeout=30.0)
        task.cancel()
        return call

    call = asyncio.run(run())
    assert call.output_tokens == [4, 4, 4]
    assert call.remaining == 0


def test_a_host_stall_pauses_simulated_time_instead_of_showing_as_model_latency() -> None:
    stall_s = [0.0]

    def clock() -> float:
        return time.monotonic() + stall_s[0]

    async def run() -> tuple[SimMetrics, Call, Call]:
        engine, metrics = _parts()
        loop_runner = RealtimeLoop(engine, metrics, resync_after_s=0.25, clock=clock)
        task = asyncio.get_running_loop().create_task(loop_runner.run())
        loop = asyncio.get_running_loop()
        first = Call(_request(max_tokens=40), "cmpl-a", 0, None, None, loop.create_future())
        loop_runner.submit(first)
        while first.output_tokens[0] < 5:
            await asyncio.sleep(0.001)
        stall_s[0] = 1.0
        second = Call(_request(max_tokens=5), "cmpl-b", 0, None, None, loop.create_future())
        loop_runner.submit(second)
        await asyncio.wait_for(asyncio.gather(first.done, second.done), timeout=30.0)
        task.cancel()
        return metrics, first, second

    metrics, first, second = asyncio.run(run())
    assert first.output_tokens == [40]
    assert second.output_tokens == [5]
    assert metrics.lag.resyncs == 1
    sample = metrics.registry.get_sample_value
    labels = {"model_name": "m", "engine": "0"}
    itl_count = sample("vllm:inter_token_latency_seconds_count", labels)
    assert itl_count == 39 + 4
    assert sample("vllm:inter_token_latency_seconds_bucket", {**labels, "le": "0.1"}) == itl_count
    assert sample("vllm:time_to_first_token_seconds_bucket", {**labels, "le": "0.001"}) == 0
    assert sample("vllm:time_to_first_token_seconds_bucket", {**labels, "le": "0.1"}) == 2


def test_gauges_stay_at_zero_when_a_call_is_aborted_while_its_step_is_in_flight() -> None:
    async def run() -> SimMetrics:
        engine, metrics = _parts()
        loop_runner = RealtimeLoop(engine, metrics)
        task = asyncio.get_running_loop().create_task(loop_runner.run())
        call = Call(
            _request(max_tokens=500),
            "cmpl-a",
            0,
            None,
            None,
            asyncio.get_running_loop().create_future(),
        )
        loop_runner.submit(call)
        while call.output_tokens[0] < 2:
            await asyncio.sleep(0)
        loop_runner.abort(call)
        while not loop_runner.idle:
            await asyncio.sleep(0.001)
        task.cancel()
        return metrics

    metrics = asyncio.run(run())
    labels = {"model_name": "m", "engine": "0"}
    assert metrics.registry.get_sample_value("vllm:num_requests_running", labels) == 0
    assert metrics.registry.get_sample_value("vllm:kv_cache_usage_perc", labels) == 0


@pytest.mark.parametrize(
    ("max_num_seqs", "most_waiting"),
    [
        pytest.param(8, 0, id="a-seat-free"),  # the next step admits it: never reported waiting
        pytest.param(1, 1, id="seats-full"),  # every step until the first call ends leaves it
    ],
)
def test_a_call_arriving_mid_step_is_reported_waiting_only_if_a_step_leaves_it_queued(
    max_num_seqs: int, most_waiting: int
) -> None:
    labels = {"model_name": "m", "engine": "0"}

    async def run() -> tuple[list[float], float | None]:
        engine, metrics = _parts(max_num_seqs)
        loop_runner = RealtimeLoop(engine, metrics)
        task = asyncio.get_running_loop().create_task(loop_runner.run())
        loop = asyncio.get_running_loop()
        first = Call(_request(max_tokens=40), "cmpl-a", 0, None, None, loop.create_future())
        second = Call(_request(max_tokens=3), "cmpl-b", 0, None, None, loop.create_future())
        loop_runner.submit(first)
        while first.output_tokens[0] < 2:
            await asyncio.sleep(0)
        loop_runner.submit(second)  # while the first call's decode steps run back to back
        read = metrics.registry.get_sample_value
        seen: list[float] = []
        while not (first.done.done() and second.done.done()):
            value = read("vllm:num_requests_waiting", labels)
            assert value is not None
            seen.append(value)
            await asyncio.sleep(0.002)
        task.cancel()
        return seen, read("vllm:num_requests_waiting", labels)

    seen, last = asyncio.run(run())
    assert max(seen) == most_waiting
    assert last == 0


# --- the API server between a request's arrival and the engine ---------------------------------


class Arrivals:
    """An engine stand-in that notes when each request reached it."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def submit(
        self,
        request_id: str,
        prompt: int | tuple[int, ...],
        max_tokens: int,
        ignore_eos: bool,
        arrival_s: float,
    ) -> None:
        self.at[request_id] = arrival_s


def _one(request_id: str) -> tuple[tuple[str, int, int, bool], ...]:
    return ((request_id, 40, 2, True),)


def test_requests_that_arrive_together_share_the_server_and_reach_the_engine_together() -> None:
    queue = ApiServerQueue(latency_s=0.002)
    queue.hold(0.000, 0.005, _one("a"))
    queue.hold(0.000, 0.005, _one("b"))
    queue.hold(0.001, 0.005, _one("c"))
    engine = Arrivals()
    queue.admit(engine, 1.0, live={"a", "b", "c"})
    # By hand: a and b share the CPU for 1 ms (0.5 ms of work each), then a, b and c share it:
    # a and b's last 4.5 ms take 13.5 ms, to 14.5 ms; c's last 0.5 ms runs alone, to 15 ms.
    # Each then waits the 2 ms latency.
    assert engine.at["a"] == pytest.approx(0.0165)
    assert engine.at["b"] == pytest.approx(0.0165)
    assert engine.at["c"] == pytest.approx(0.0170)


def test_past_its_places_the_server_takes_requests_in_one_after_another() -> None:
    queue = ApiServerQueue(shared=2)
    for request_id in ("a", "b", "c"):
        queue.hold(0.0, 0.005, _one(request_id))
    engine = Arrivals()
    queue.admit(engine, 1.0, live={"a", "b", "c"})
    # Two places: a and b share 10 ms; c waits for a place, then runs alone for 5 ms.
    assert (engine.at["a"], engine.at["b"], engine.at["c"]) == pytest.approx((0.010, 0.010, 0.015))


def test_the_next_ready_time_counts_the_arrivals_already_known() -> None:
    queue = ApiServerQueue()
    queue.hold(0.000, 0.004, _one("a"))
    queue.hold(0.002, 0.004, _one("b"))
    # By hand: a alone for 2 ms (2 ms left), then shared with b: a ends 4 ms later, at 6 ms.
    assert queue.next_ready_s() == pytest.approx(0.006)
    engine = Arrivals()
    queue.admit(engine, 0.005, live={"a", "b"})
    assert engine.at == {}  # nothing is ready by 5 ms
    assert queue.next_ready_s() == pytest.approx(0.006)


def test_held_requests_enter_the_engine_in_ready_order_at_their_ready_time() -> None:
    engine, _metrics = _parts()
    queue = ApiServerQueue(latency_s=0.010)
    queue.hold(0.000, 0.0, _one("a"))
    queue.hold(0.005, 0.0, _one("gone"))
    queue.hold(0.010, 0.0, _one("b"))
    queue.hold(0.020, 0.0, _one("c"))
    queue.admit(engine, 0.025, live={"a", "b", "c"})
    assert queue.next_ready_s() == pytest.approx(0.030)
    assert len(queue) == 1
    first = engine.step(0.025)
    assert first.stats.num_running == 2  # "a" and "b", with seats to spare: what the engine held
    finished = {f.request_id: f for f in first.finished}
    now = first.end_s
    while engine.has_work():
        outcome = engine.step(now)
        now = outcome.end_s
        finished.update({f.request_id: f for f in outcome.finished})
    # Each entered the engine at its ready time; the step that started at 25 ms took them in.
    assert finished["a"].timing.arrival_s == pytest.approx(0.010)
    assert finished["b"].timing.arrival_s == pytest.approx(0.020)
    assert finished["a"].timing.queued_s == pytest.approx(0.025)
    assert finished["a"].timing.first_scheduled_s == pytest.approx(0.025)


def test_a_pause_moves_what_fell_due_in_it_to_the_pause() -> None:
    queue = ApiServerQueue()
    queue.hold(0.0625, 0.0, (("before", 40, 50, True),))
    queue.hold(0.375, 0.0, (("in the pause", 40, 50, True),))
    queue.hold(0.875, 0.0, (("after", 40, 50, True),))
    # Simulated time paused at 125 ms for 500 ms: 375 ms is due at the pause, 875 ms at 375 ms.
    queue.pause(0.125, 0.5)
    due = []
    engine, _metrics = _parts()
    for until_s in (0.0625, 0.125, 0.375):
        queue.admit(engine, until_s, live={"before", "in the pause", "after"})
        # Seats to spare and 50 tokens each: a step runs every request the engine holds.
        due.append(engine.step(until_s).stats.num_running)
    assert due == [1, 2, 3]


def test_vllm_s_ttft_counts_from_the_arrival_and_its_queue_time_from_the_engine() -> None:
    api = ApiServerTiming(
        completion_request_s=0.020,
        chat_request_s=0.030,
        tokenize_s_per_token=1e-4,
        latency_s=0.005,
        response_s=0.010,
    )
    request = dataclasses.replace(_request(max_tokens=3), text_prompts=(True,))

    async def run() -> SimMetrics:
        engine, metrics = _parts()
        loop_runner = RealtimeLoop(engine, metrics, api_server=api)
        task = asyncio.get_running_loop().create_task(loop_runner.run())
        call = Call(request, "cmpl-a", 0, None, None, asyncio.get_running_loop().create_future())
        loop_runner.submit(call)
        assert not engine.has_work()  # still with the API server
        await asyncio.wait_for(call.done, timeout=30.0)
        task.cancel()
        return metrics

    metrics = asyncio.run(run())
    labels = {"model_name": "m", "engine": "0"}
    sample = metrics.registry.get_sample_value

    def total(name: str) -> float:
        value = sample(f"vllm:{name}_sum", labels)
        assert value is not None
        return value

    # The text prompt of 40 tokens takes 20 ms + 40 x 0.1 ms = 24 ms of work and 5 ms of latency
    # to reach the idle engine, inside vLLM's TTFT and outside its queue and prefill times.
    outside_engine = (
        total("time_to_first_token_seconds")
        - total("request_queue_time_seconds")
        - total("request_prefill_time_seconds")
    )
    assert outside_engine == pytest.approx(0.029, abs=1e-9)
