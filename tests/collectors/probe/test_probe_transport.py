"""The aiohttp-backed transport against a real local server: streams, statuses, cuts, timeouts, stops."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import httpx
import pytest
from aiohttp import web

from slotop.collectors.probe.records import ErrorClass
from slotop.collectors.probe.stream import StreamMeter, StreamOutcome, stream_request
from slotop.collectors.probe.transport import AiohttpTransport
from tests.support.vllm_replica import free_port

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


TOKEN = event({"choices": [{"index": 0, "text": "x", "finish_reason": None}]})


async def full_stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for _ in range(body["max_tokens"]):
        await response.write(TOKEN)
    await response.write(event({"choices": [], "usage": {"completion_tokens": body["max_tokens"]}}))
    await response.write(b"data: [DONE]\n\n")
    return response


async def refuse(_: web.Request) -> web.StreamResponse:
    return web.json_response({"error": {"message": "model not found"}}, status=404)


async def cut(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(TOKEN)
    assert request.transport is not None
    request.transport.close()  # the replica dies mid-stream
    return response


async def stall(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(TOKEN)
    await asyncio.sleep(30)
    return response


def run_against(
    handler: Handler, body: dict[str, object], timeout_s: float = 30.0
) -> tuple[StreamMeter, StreamOutcome]:
    async def main() -> tuple[StreamMeter, StreamOutcome]:
        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        meter, outcome = StreamMeter(0.0), StreamOutcome()
        try:
            async with httpx.AsyncClient(transport=AiohttpTransport(4, timeout_s)) as client:
                await stream_request(
                    client,
                    f"http://127.0.0.1:{port}/v1/completions",
                    json.dumps(body).encode(),
                    {"Content-Type": "application/json", "Authorization": "Bearer k"},
                    meter,
                    outcome,
                )
        finally:
            await runner.cleanup()
        return meter, outcome

    return asyncio.run(main())


def test_a_stream_arrives_whole_with_its_usage() -> None:
    meter, outcome = run_against(full_stream, {"max_tokens": 50})
    assert outcome.error is None
    assert outcome.http_status == 200
    assert meter.chunk_count == 50
    assert meter.output_tokens == 50
    assert meter.done


def test_a_status_other_than_200_is_an_http_status_error() -> None:
    _, outcome = run_against(refuse, {})
    assert outcome.error is ErrorClass.HTTP_STATUS
    assert outcome.detail == "HTTP 404: model not found"


def test_a_replica_dying_mid_stream_is_a_stream_cut() -> None:
    meter, outcome = run_against(cut, {})
    assert outcome.error is ErrorClass.STREAM_CUT
    assert meter.chunk_count == 1


def test_a_silent_replica_is_a_read_timeout() -> None:
    _, outcome = run_against(stall, {}, timeout_s=0.2)
    assert outcome.error is ErrorClass.TIMEOUT
    assert outcome.detail == "ReadTimeout"


def test_nothing_listening_is_a_connect_error() -> None:
    port = free_port()

    async def main() -> StreamOutcome:
        outcome = StreamOutcome()
        async with httpx.AsyncClient(transport=AiohttpTransport(4, 5.0)) as client:
            await stream_request(
                client,
                f"http://127.0.0.1:{port}/v1/completions",
                b"{}",
                {},
                StreamMeter(0.0),
                outcome,
            )
        return outcome

    outcome = asyncio.run(main())
    assert outcome.error is ErrorClass.CONNECT


def test_cancelling_a_request_drops_its_connection_so_the_replica_sees_it_go() -> None:
    async def main() -> bool:
        gone = asyncio.Event()

        async def endless(request: web.Request) -> web.StreamResponse:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            try:
                while True:
                    await response.write(TOKEN)
                    await asyncio.sleep(0.005)
            except (ConnectionError, asyncio.CancelledError):
                gone.set()
                raise

        app = web.Application()
        app.router.add_post("/v1/completions", endless)
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        meter = StreamMeter(0.0)
        try:
            async with httpx.AsyncClient(transport=AiohttpTransport(4, 5.0)) as client:
                task = asyncio.create_task(
                    stream_request(
                        client,
                        f"http://127.0.0.1:{port}/v1/completions",
                        b"{}",
                        {},
                        meter,
                        StreamOutcome(),
                    )
                )
                while meter.chunk_count < 3:
                    await asyncio.sleep(0.005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                await asyncio.wait_for(gone.wait(), 10)
        finally:
            await runner.cleanup()
        return gone.is_set()

    assert asyncio.run(main())
