"""The probe's own HTTP client against real local servers: framing, errors, reuse, lag, cancel."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence

import pytest
from aiohttp import web

from slotop.collectors.probe.records import ErrorClass
from slotop.collectors.probe.stream import StreamMeter, StreamOutcome
from slotop.collectors.probe.wire import WireClient, _timestamp_option


def event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def token(finish: str | None = None) -> bytes:
    return event({"choices": [{"index": 0, "text": "x", "finish_reason": finish}]})


def stream_body(tokens: int) -> bytes:
    usage = event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": tokens}})
    return (
        b"".join(token() for _ in range(tokens - 1)) + token("length") + usage + b"data: [DONE]\n\n"
    )


def chunked(*pieces: bytes) -> bytes:
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def full_stream(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for _ in range(body["max_tokens"] - 1):
        await response.write(token())
    await response.write(token("length"))
    usage = {"prompt_tokens": 3, "completion_tokens": body["max_tokens"]}
    await response.write(event({"choices": [], "usage": usage}))
    await response.write(b"data: [DONE]\n\n")
    return response


async def refuse(_: web.Request) -> web.StreamResponse:
    return web.json_response({"error": {"message": "model not found"}}, status=404)


async def cut(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(token())
    assert request.transport is not None
    request.transport.close()  # the replica dies mid-stream
    return response


async def stall(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(token())
    await asyncio.sleep(30)
    return response


async def error_event(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(token())
    await response.write(event({"error": {"message": "generation failed"}}))
    await response.write(b"data: [DONE]\n\n")
    return response


async def post(
    client: WireClient, url: str, body: dict[str, object] | None = None
) -> tuple[StreamMeter, StreamOutcome]:
    meter, outcome = StreamMeter(0.0), StreamOutcome()
    content = json.dumps(body or {"max_tokens": 5}).encode()
    await client.stream(url, content, {"Content-Type": "application/json"}, meter, outcome)
    return meter, outcome


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
        client = WireClient(timeout_s)
        try:
            return await post(client, f"http://127.0.0.1:{port}/v1/completions", body)
        finally:
            await client.aclose()
            await runner.cleanup()

    return asyncio.run(main())


@contextlib.contextmanager
def receive_stamps_on() -> Iterator[None]:
    """Hold a loopback connection that asks for receive stamps until the kernel gives them.

    Linux turns receive stamps on for the whole host a moment after the first socket asks
    (deferred work), and a TCP segment that arrived before carries none, so a test's first
    stream could come unstamped. A running probe holds its asking sockets open; this holds one
    and returns only once a segment sent over it comes back stamped.
    """
    option = _timestamp_option()
    if option is None:  # no stamps on this platform: nothing to wait for
        yield
        return
    with socket.create_server(("127.0.0.1", 0)) as server:
        asking = socket.socket()
        asking.setsockopt(socket.SOL_SOCKET, option, 1)
        asking.connect(server.getsockname())
        sending, _ = server.accept()
        try:
            deadline = time.monotonic() + 5.0
            while True:
                sending.sendall(b"x")
                _, ancillary, _, _ = asking.recvmsg(16, socket.CMSG_SPACE(16))
                if ancillary:
                    break
                if time.monotonic() > deadline:
                    pytest.fail("the kernel gave no receive stamp within 5 s of asking")
                time.sleep(0.01)
            yield
        finally:
            sending.close()
            asking.close()


def test_a_stream_arrives_whole_with_its_usage_and_each_chunk_s_lag() -> None:
    with receive_stamps_on():
        meter, outcome = run_against(full_stream, {"max_tokens": 50})
    assert outcome.error is None and outcome.http_status == 200
    assert (meter.chunk_count, meter.output_tokens, meter.prompt_tokens) == (50, 50, 3)
    assert meter.done and len(meter.gaps_s) == 49
    if sys.platform == "linux":  # the kernel's receive time comes with every read
        assert meter.lags_s is not None and len(meter.lags_s) == 50
        assert all(0.0 <= lag < 30.0 for lag in meter.lags_s)


@pytest.mark.parametrize(
    ("handler", "error", "words"),
    [
        (refuse, ErrorClass.HTTP_STATUS, "HTTP 404: model not found"),
        (cut, ErrorClass.STREAM_CUT, "mid-body"),
        (error_event, ErrorClass.STREAM_ERROR, "generation failed"),
    ],
)
def test_failures_become_error_classes(handler: Handler, error: ErrorClass, words: str) -> None:
    _, outcome = run_against(handler, {"max_tokens": 5})
    assert outcome.error is error
    assert words in outcome.detail


def test_a_silent_replica_is_a_timeout() -> None:
    meter, outcome = run_against(stall, {"max_tokens": 5}, timeout_s=0.5)
    assert outcome.error is ErrorClass.TIMEOUT
    assert meter.chunk_count == 1


def test_nothing_listening_is_a_connect_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: refused

    async def main() -> StreamOutcome:
        client = WireClient(5.0)
        return (await post(client, f"http://127.0.0.1:{port}/v1/completions"))[1]

    outcome = asyncio.run(main())
    assert outcome.error is ErrorClass.CONNECT
    assert outcome.http_status is None


class RawReplica:
    """A replica that answers each request with fixed bytes, written in the given pieces."""

    def __init__(self, pieces: Sequence[bytes], *, close_after: bool = False) -> None:
        self.pieces = pieces
        self.close_after = close_after
        self.connections = 0
        self.requests = 0
        self.closed = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                await reader.readexactly(length)
                self.requests += 1
                for piece in self.pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.002)
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed.set()
        writer.close()


async def serve_raw(replica: RawReplica) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(replica.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1/completions"


def split_bytes(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


HEAD_CHUNKED = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


@pytest.mark.parametrize(
    "pieces",
    [
        # one chunk a token, written one by one: the usual read
        [HEAD_CHUNKED, *split_bytes(chunked(*[token()] * 4, stream_body(1)), 10_000)],
        # every 7 bytes its own write: heads, sizes and events cut anywhere
        split_bytes(HEAD_CHUNKED + chunked(stream_body(5)), 7),
        # chunk extensions, and events split across chunks
        [
            HEAD_CHUNKED,
            b"3;note=x\r\ndat\r\n",
            chunked(stream_body(5)[3:]),
        ],
        # a body with a length instead of chunks
        [
            b"HTTP/1.1 200 OK\r\nContent-Length: "
            + str(len(stream_body(5))).encode()
            + b"\r\n\r\n"
            + stream_body(5)
        ],
    ],
    ids=["chunk-a-write", "cut-every-7-bytes", "extensions", "content-length"],
)
def test_every_framing_gives_the_whole_stream_and_keeps_the_connection(
    pieces: list[bytes],
) -> None:
    async def main() -> tuple[list[StreamOutcome], list[StreamMeter], RawReplica]:
        replica = RawReplica(pieces)
        server, url = await serve_raw(replica)
        client = WireClient(5.0)
        results = [await post(client, url) for _ in range(2)]
        await client.aclose()
        server.close()
        return [o for _, o in results], [m for m, _ in results], replica

    outcomes, meters, replica = asyncio.run(main())
    assert [o.error for o in outcomes] == [None, None]
    assert all(m.done and m.output_tokens is not None for m in meters)
    assert (replica.requests, replica.connections) == (2, 1)  # kept alive, reused


def test_a_body_that_ends_with_the_connection_is_whole() -> None:
    pieces = [b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", stream_body(3)]

    async def main() -> tuple[StreamMeter, StreamOutcome, RawReplica]:
        replica = RawReplica(pieces, close_after=True)
        server, url = await serve_raw(replica)
        client = WireClient(5.0)
        meter, outcome = await post(client, url)
        second = await post(client, url)  # the first connection is gone: a new one
        server.close()
        assert second[1].error is None
        return meter, outcome, replica

    meter, outcome, replica = asyncio.run(main())
    assert outcome.error is None and meter.chunk_count == 3
    assert replica.connections == 2


def test_a_connection_the_replica_dropped_while_idle_is_replaced_not_failed() -> None:
    response = [HEAD_CHUNKED, chunked(stream_body(2))]

    async def main() -> tuple[list[StreamOutcome], RawReplica]:
        replica = RawReplica(response, close_after=True)  # says keep-alive, then hangs up
        server, url = await serve_raw(replica)
        client = WireClient(5.0)
        first = await post(client, url)
        await asyncio.sleep(0.1)  # the replica has closed the idle connection by now
        second = await post(client, url)
        server.close()
        return [first[1], second[1]], replica

    outcomes, replica = asyncio.run(main())
    assert [o.error for o in outcomes] == [None, None]
    assert (replica.requests, replica.connections) == (2, 2)


def test_cancelling_a_request_drops_its_connection_so_the_replica_sees_it_go() -> None:
    async def main() -> RawReplica:
        end = len(b"0\r\n\r\n")
        first, ping = chunked(token())[:-end], chunked(b": ping\n\n")[:-end]
        replica = RawReplica([HEAD_CHUNKED, first, *[ping] * 2000])  # the body goes on, slowly
        server, url = await serve_raw(replica)
        client = WireClient(5.0)
        task = asyncio.create_task(post(client, url))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(replica.closed.wait(), 5.0)
        server.close()
        return replica

    replica = asyncio.run(main())
    assert replica.closed.is_set()
