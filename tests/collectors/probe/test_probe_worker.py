"""The load loop in-process over MockTransport: steps, caps, open loop, stop and deadlines."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ErrorClass, EventKind, ProbeEvent, ProbeRecord
from slotop.collectors.probe.stream import ProbeTarget, StreamMeter
from slotop.collectors.probe.worker import (
    EpochClock,
    LoadRunner,
    SetConcurrency,
    SetRate,
    resolve_model,
    settled_s,
)


def sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class GatedStream(httpx.AsyncByteStream):
    """Two tokens at once, then waits for its gate, then the usage and the end of the stream.

    Its two tokens come back to back, so a stream rests next to nothing before its next request
    (`worker.rest_s`: a share of the gap between them) and a test sees it sent at once."""

    def __init__(self, gate: asyncio.Future[None]) -> None:
        self._gate = gate

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield sse({"choices": [{"index": 0, "text": "a", "finish_reason": None}]})
        yield sse({"choices": [{"index": 0, "text": "b", "finish_reason": "length"}]})
        await self._gate
        yield sse({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}})
        yield b"data: [DONE]\n\n"


class FakeReplica:
    """Streams every request up to its first token and holds it until the test releases it."""

    def __init__(self) -> None:
        self.gates: list[asyncio.Future[None]] = []
        self.bodies: list[dict[str, Any]] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny"}]})
        self.bodies.append(json.loads(request.content))
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        return httpx.Response(200, stream=GatedStream(gate))

    def release(self, count: int | None = None) -> None:
        waiting = [g for g in self.gates if not g.done()]
        for gate in waiting[:count]:
            gate.set_result(None)


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), timeout_s)


Scenario = Callable[[LoadRunner, FakeReplica, list[ProbeRecord], list[ProbeEvent]], Awaitable[None]]


def drive(scenario: Scenario, shape: LoadShape | None = None, timeout_s: float = 300.0) -> None:
    shape = shape or LoadShape(
        prompt_lengths=LengthDistribution("fixed", 4),
        output_lengths=LengthDistribution("fixed", 2),
        max_concurrency=8,
        max_rate_rps=1000.0,
    )
    target = ProbeTarget("http://replica", request_timeout_s=timeout_s)

    async def main() -> None:
        replica = FakeReplica()
        records: list[ProbeRecord] = []
        events: list[ProbeEvent] = []

        def emit(item: ProbeRecord | ProbeEvent) -> None:
            (records if isinstance(item, ProbeRecord) else events).append(item)  # type: ignore[arg-type]

        transport = httpx.MockTransport(replica.handle)
        async with httpx.AsyncClient(transport=transport) as client:
            model = await resolve_model(client, target)
            runner = LoadRunner(client, target, shape, model, emit, EpochClock())
            try:
                await scenario(runner, replica, records, events)
            finally:
                replica.release()
                await runner.stop()

    asyncio.run(main())


def test_stepping_up_adds_requests_at_once_and_stepping_down_lets_them_finish() -> None:
    async def scenario(
        runner: LoadRunner, replica: FakeReplica, records: list[ProbeRecord], _: list[ProbeEvent]
    ) -> None:
        runner.apply(SetConcurrency(2), EventKind.STARTED)
        assert runner.status().in_flight == 2
        await until(lambda: len(replica.gates) == 2)
        runner.apply(SetConcurrency(5))
        assert runner.status().in_flight == 5  # within the same loop turn as the command
        await until(lambda: len(replica.gates) == 5)
        runner.apply(SetConcurrency(1))
        assert runner.status().in_flight == 5  # nothing is cancelled on the way down
        replica.release(1)
        await until(lambda: len(records) == 1)
        assert runner.status().in_flight == 4  # and nothing new is sent above the target
        assert runner.sent_total == 5
        replica.release(4)
        await until(lambda: len(records) == 5)
        await until(lambda: runner.status().in_flight == 1)  # after its stream's short rest
        await asyncio.sleep(0.05)
        assert runner.status().in_flight == 1  # the new level holds
        assert runner.sent_total == 6
        assert [r.step for r in records] == [0, 0, 1, 1, 1]
        assert sorted(r.in_flight_at_send for r in records) == [2, 2, 5, 5, 5]
        assert [(r.ok, r.output_tokens, r.chunk_count) for r in records] == [(True, 2, 2)] * 5

    drive(scenario)


def test_every_change_is_an_event_with_its_time_step_and_level() -> None:
    async def scenario(
        runner: LoadRunner, _: FakeReplica, __: list[ProbeRecord], events: list[ProbeEvent]
    ) -> None:
        runner.apply(SetConcurrency(1), EventKind.STARTED)
        runner.apply(SetConcurrency(50))  # above max_concurrency: held at the cap
        runner.apply(SetRate(2000.0, burstiness=2.0))  # above max_rate_rps: held at the cap
        runner.apply(SetConcurrency(0))
        kinds = [e.kind for e in events]
        assert kinds == [
            EventKind.STARTED,
            EventKind.CONCURRENCY_SET,
            EventKind.RATE_SET,
            EventKind.CONCURRENCY_SET,
        ]
        assert [e.step for e in events] == [0, 1, 2, 3]
        assert events[1].concurrency == 8
        assert (events[2].mode, events[2].rate_rps, events[2].burstiness) == ("open", 1000.0, 2.0)
        assert events[3].mode == "closed" and events[3].concurrency == 0
        assert all(a.at_s <= b.at_s for a, b in itertools.pairwise(events))

    drive(scenario)


def test_open_loop_sends_at_its_rate_but_never_past_max_concurrency() -> None:
    async def scenario(
        runner: LoadRunner, replica: FakeReplica, records: list[ProbeRecord], _: list[ProbeEvent]
    ) -> None:
        runner.apply(SetRate(1000.0))
        await until(lambda: len(replica.gates) == 8)
        await asyncio.sleep(0.05)  # fifty more arrivals are due by now, and all must wait
        assert runner.status().in_flight == 8
        assert runner.sent_total == 8
        runner.apply(SetRate(0.0))
        replica.release()
        await until(lambda: len(records) == 8)
        await asyncio.sleep(0.05)
        assert runner.sent_total == 8  # rate 0 sends nothing new

    drive(scenario)


def test_stop_cancels_in_flight_requests_and_reports_them() -> None:
    async def scenario(
        runner: LoadRunner,
        replica: FakeReplica,
        records: list[ProbeRecord],
        events: list[ProbeEvent],
    ) -> None:
        runner.apply(SetConcurrency(3), EventKind.STARTED)
        await until(lambda: len(replica.gates) == 3)
        await runner.stop()
        assert [r.error for r in records] == [ErrorClass.CANCELLED] * 3
        assert all(not r.counts_as_failure for r in records)
        assert events[-1].kind is EventKind.STOPPED
        assert runner.status().in_flight == 0
        runner.apply(SetConcurrency(3))  # a stopped runner sends nothing
        assert runner.sent_total == 3

    drive(scenario)


def test_a_request_past_its_deadline_is_a_timeout_and_is_replaced() -> None:
    async def scenario(
        runner: LoadRunner, replica: FakeReplica, records: list[ProbeRecord], _: list[ProbeEvent]
    ) -> None:
        runner.apply(SetConcurrency(1), EventKind.STARTED)
        await until(lambda: len(records) >= 1)
        assert records[0].error is ErrorClass.TIMEOUT
        assert records[0].ttft_s is not None  # the first token had arrived
        assert "request timeout" in records[0].error_detail
        await until(lambda: runner.sent_total >= 2)

    drive(scenario, timeout_s=0.05)


def test_requests_carry_the_model_the_replica_lists_and_pinned_lengths() -> None:
    async def scenario(
        runner: LoadRunner, replica: FakeReplica, _: list[ProbeRecord], __: list[ProbeEvent]
    ) -> None:
        runner.apply(SetConcurrency(1), EventKind.STARTED)
        await until(lambda: len(replica.bodies) == 1)
        replica.release(1)  # the stream's opening request; its next is a full one
        await until(lambda: len(replica.bodies) == 2)
        body = replica.bodies[1]
        assert body["model"] == "tiny"
        assert body["max_tokens"] == 2  # 2 ± 1/8 of it: no whole token to dither by
        assert replica.bodies[0]["max_tokens"] in (1, 2)
        assert body["ignore_eos"] is True
        assert len(body["prompt"]) == 4

    drive(scenario)


@pytest.mark.parametrize("status", [404, 500])
def test_model_is_none_when_the_replica_cannot_list_models(status: int) -> None:
    async def main() -> str | None:
        transport = httpx.MockTransport(lambda _: httpx.Response(status, text="no"))
        async with httpx.AsyncClient(transport=transport) as client:
            return await resolve_model(client, ProbeTarget("http://replica"))

    assert asyncio.run(main()) is None


def test_the_status_lists_when_each_streaming_request_was_sent() -> None:
    async def scenario(
        runner: LoadRunner, replica: FakeReplica, records: list[ProbeRecord], _: list[ProbeEvent]
    ) -> None:
        runner.apply(SetConcurrency(2), EventKind.STARTED)
        await until(lambda: len(replica.gates) == 2)
        first = runner.status().streaming_sent_at_s
        assert len(first) == 2 and list(first) == sorted(first)
        replica.release(1)
        await until(lambda: len(records) == 1 and len(replica.gates) == 3)
        (ended,) = records
        after = runner.status().streaming_sent_at_s
        assert ended.sent_at_s in first and ended.sent_at_s not in after
        assert len(after) == 2 and after[0] in first and after[1] > ended.sent_at_s
        replica.release(2)
        await until(lambda: len(records) == 3 and len(replica.gates) == 5)  # both sent again
        runner.apply(SetConcurrency(0))
        replica.release(2)
        await until(lambda: len(records) == 5)
        assert runner.status().streaming_sent_at_s == ()

    drive(scenario)


def test_streams_the_load_adds_open_with_a_short_request_and_keep_their_ids() -> None:
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 4),
        output_lengths=LengthDistribution("fixed", 64),
        max_concurrency=8,
    )

    async def scenario(
        runner: LoadRunner, replica: FakeReplica, records: list[ProbeRecord], _: list[ProbeEvent]
    ) -> None:
        runner.apply(SetConcurrency(3), EventKind.STARTED)
        # counted from the launch: the status the worker sends right after a command has them
        assert runner.status().openings_streaming == 3
        await until(lambda: len(replica.bodies) == 3)
        assert runner.status().openings_streaming == 3
        replica.release(1)  # the first stream's opening ends: its next request is a full one
        await until(lambda: len(replica.bodies) == 4)
        assert runner.status().openings_streaming == 2
        replica.release(3)  # the other two openings, and that full request
        await until(lambda: len(replica.bodies) == 7)
        assert runner.status().openings_streaming == 0
        runner.apply(SetConcurrency(1))  # down: two streams end with their requests
        replica.release(3)
        await until(lambda: len(records) == 7 and len(replica.bodies) == 8)
        runner.apply(SetConcurrency(2))  # up again: a freed stream opens anew
        await until(lambda: len(replica.bodies) == 9)
        assert runner.status().openings_streaming == 1
        openings = [r for r in records if r.opening]
        assert sorted(r.stream for r in openings) == [0, 1, 2]
        assert all(r.step == 0 for r in openings)
        assert {r.stream for r in records if not r.opening} <= {0, 1, 2}
        # openings ask for 1..72 tokens; every other request for 64 ± 8 (the dither)
        asked = [body["max_tokens"] for body in replica.bodies]
        assert all(1 <= n <= 72 for n in asked[:3] + asked[8:])
        assert all(56 <= n <= 72 for n in asked[3:8])

    drive(scenario, shape)


def test_an_open_loop_opens_no_stream() -> None:
    async def scenario(
        runner: LoadRunner, replica: FakeReplica, records: list[ProbeRecord], _: list[ProbeEvent]
    ) -> None:
        runner.apply(SetRate(200.0, burstiness=float("inf")), EventKind.STARTED)
        await until(lambda: len(replica.bodies) >= 3)
        replica.release()
        await until(lambda: len(records) >= 3)
        assert all(r.stream is None and not r.opening for r in records)
        assert runner.status().openings_streaming == 0

    drive(scenario)


def test_the_status_settles_no_later_than_the_last_token_of_a_stream_still_open() -> None:
    # the gated stream has both tokens and stays open: its record will end at its last token,
    # before the status's time, so the status says records are settled only up to that token
    async def scenario(
        runner: LoadRunner, replica: FakeReplica, records: list[ProbeRecord], _: list[ProbeEvent]
    ) -> None:
        runner.apply(SetConcurrency(1), EventKind.STARTED)
        fresh = runner.status()
        assert fresh.settled_at_s == fresh.at_s  # sent, no token yet: it ends after now
        await until(lambda: len(replica.gates) == 1)
        await asyncio.sleep(0.05)
        open_after_tokens = runner.status()
        assert open_after_tokens.settled_at_s is not None
        assert open_after_tokens.settled_at_s < open_after_tokens.at_s - 0.02
        replica.release(1)
        await until(lambda: len(records) == 1)
        (record,) = records
        assert open_after_tokens.settled_at_s <= record.done_at_s < open_after_tokens.at_s

    drive(scenario)


def test_only_a_stream_that_said_it_is_done_settles_before_now() -> None:
    def meter(*chunks: tuple[dict[str, Any] | str, float]) -> StreamMeter:
        fed = StreamMeter(0.0)
        for chunk, at_s in chunks:
            fed.feed(b"data: [DONE]\n\n" if chunk == "[DONE]" else sse(chunk), at_s)  # type: ignore[arg-type]
        return fed

    def token(reason: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": 0, "text": "a", "finish_reason": reason}]}

    waiting = meter()  # no token yet
    stalled = meter((token(), 1.0), (token(), 2.0))  # more to come, whenever
    finished = meter((token(), 1.0), (token("length"), 3.0))  # open still, ends at 3
    closing = meter((token(), 1.0), (token(), 2.5), ("[DONE]", 2.6))
    assert settled_s([waiting, stalled], 9.0) == 9.0
    assert settled_s([waiting, stalled, finished], 9.0) == 3.0
    assert settled_s([finished, closing], 9.0) == 2.5
    assert settled_s([], 9.0) == 9.0
