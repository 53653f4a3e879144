"""A stand-in replica whose timing is known: a clock to measure streaming clients against.

It answers /v1/models and streams /v1/completions (or chat) in vLLM's event shapes: the first
token chunk `--ttft-ms` after the request arrived, then one chunk every `--itl-ms` on an absolute
schedule, `max_tokens` chunks, a usage chunk and `[DONE]`. Each token chunk is its own write (one
TCP segment), so a client that keeps up reads them one by one. One timer serves every stream, so
hundreds of streams cost the replica little. With `--itl-ms 0` it is a firehose that writes as
fast as the client reads, so the client's own chunk rate is what limits the run.

The truth: the replica notes when each request arrived (the kernel's receive time where the OS
gives one) and when it wrote each token chunk; `GET /truth` returns and forgets what it noted, as
`{"requests": [{"arrived_s": ..., "writes_s": [...]}, ...]}` in Unix seconds, so a client's
TTFT and ITL can be scored against what was actually sent, late writes included.

    python bench/paced_replica.py --port 8123 --ttft-ms 30 --itl-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import itertools
import json
import socket
import struct
import sys
import time
from collections.abc import Sequence

_HEAD = '{{"id":"cmpl-{rid}","object":"text_completion","created":1,"model":"{model}","choices":'
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
"""The kernel's receive time of each read (Python does not name it; 35 on common Linux)."""
_ANCILLARY = socket.CMSG_SPACE(16) if _SO_TIMESTAMPNS is not None else 0


def _chunk(payload: bytes) -> bytes:
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def _event(data: str) -> bytes:
    return _chunk(f"data: {data}\n\n".encode())


def _response(status: str, content_type: str, payload: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n"
        f"content-length: {len(payload)}\r\n\r\n"
    ).encode() + payload


class Stream:
    """One streamed answer: its schedule, what it still has to write, and when it wrote."""

    __slots__ = ("arrived_s", "chat", "connection", "due", "head", "index", "tokens", "writes_s")

    def __init__(
        self, connection: Connection, body: dict[str, object], arrived_s: float, due: float
    ) -> None:
        tokens = body.get("max_tokens") or body.get("max_completion_tokens") or 16
        self.connection = connection
        self.tokens = int(tokens) if isinstance(tokens, int | float | str) else 16
        self.chat = "messages" in body
        self.head = _HEAD.format(rid=connection.replica.next_rid(), model=connection.args.model)
        self.arrived_s = arrived_s
        self.due = due
        self.index = 0
        self.writes_s: list[float] = []

    def next_bytes(self) -> bytes:
        """The next token chunk; the last one carries the finish reason, usage and [DONE]."""
        index = self.index
        self.index += 1
        last = index == self.tokens - 1
        finish = '"length"' if last else "null"
        piece = (
            f'{{"index":0,"delta":{{"content":" w{index}"}},"finish_reason":{finish}}}'
            if self.chat
            else f'{{"index":0,"text":" w{index}","logprobs":null,"finish_reason":{finish}}}'
        )
        data = _event(f"{self.head}[{piece}]}}")
        if last:
            prompt = self.connection.args.prompt_tokens
            usage = f'{{"prompt_tokens":{prompt},"completion_tokens":{self.tokens}}}'
            data += _event(f'{self.head}[],"usage":{usage}}}') + _event("[DONE]") + _chunk(b"")
        return data

    @property
    def finished(self) -> bool:
        return self.index >= self.tokens


class Connection:
    """One client connection: reads requests with their arrival times, writes without waiting."""

    def __init__(self, replica: Replica, sock: socket.socket) -> None:
        self.replica = replica
        self.args = replica.args
        self.sock = sock
        self.inbox = b""
        self.outbox = b""
        self.stream: Stream | None = None
        self.closed = False
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if _SO_TIMESTAMPNS is not None:
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        replica.loop.add_reader(sock.fileno(), self.readable)

    def readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(65536, _ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        arrived_s = time.time()
        for level, kind, value in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(value) >= 16:
                seconds, nanoseconds = struct.unpack_from("qq", value)
                arrived_s = seconds + nanoseconds * 1e-9
        if not data:
            self.close()
            return
        self.inbox += data
        self.handle_requests(arrived_s)

    def handle_requests(self, arrived_s: float) -> None:
        while self.stream is None and not self.closed:
            end = self.inbox.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.inbox[:end].decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for header in lines[1:]:
                name, _, value = header.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.inbox) < end + 4 + length:
                return
            body = self.inbox[end + 4 : end + 4 + length]
            self.inbox = self.inbox[end + 4 + length :]
            if method == "GET" and path.startswith("/v1/models"):
                models = {"object": "list", "data": [{"id": self.args.model}]}
                self.write(_response("200 OK", "application/json", json.dumps(models).encode()))
            elif method == "GET" and path.startswith("/truth"):
                truth = json.dumps({"requests": self.replica.take_truth()}).encode()
                self.write(_response("200 OK", "application/json", truth))
            elif method == "POST" and path.endswith("completions"):
                self.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                self.stream = self.replica.start_stream(self, json.loads(body or b"{}"), arrived_s)
            else:
                self.write(_response("404 Not Found", "text/plain", b""))

    def write(self, data: bytes) -> None:
        """Send now where the socket takes it; keep the rest until it is writable again."""
        if self.closed:
            return
        if self.outbox:
            self.outbox += data
            return
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close()
            return
        if sent < len(data):
            self.outbox = data[sent:]
            self.replica.loop.add_writer(self.sock.fileno(), self.writable)

    def writable(self) -> None:
        try:
            sent = self.sock.send(self.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        self.outbox = self.outbox[sent:]
        if not self.outbox:
            self.replica.loop.remove_writer(self.sock.fileno())
            if self.stream is not None and self.args.itl_ms <= 0:
                self.replica.pump(self.stream)

    def stream_ended(self) -> None:
        self.stream = None
        if self.inbox:
            self.handle_requests(time.time())

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.stream = None
        loop = self.replica.loop
        loop.remove_reader(self.sock.fileno())
        loop.remove_writer(self.sock.fileno())
        self.sock.close()


class Replica:
    """Accepts connections and writes every stream's chunks from one timer, on schedule."""

    def __init__(self, args: argparse.Namespace, loop: asyncio.AbstractEventLoop) -> None:
        self.args = args
        self.loop = loop
        self._rids = itertools.count(1)
        self._order = itertools.count()
        self._due: list[tuple[float, int, Stream]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        self._truth: list[dict[str, object]] = []

    def next_rid(self) -> int:
        return next(self._rids)

    def take_truth(self) -> list[dict[str, object]]:
        truth, self._truth = self._truth, []
        return truth

    def accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            Connection(self, sock)

    def start_stream(
        self, connection: Connection, body: dict[str, object], arrived_s: float
    ) -> Stream:
        """A new stream whose first chunk is due `--ttft-ms` after its request arrived."""
        due = self.loop.time() + (arrived_s + self.args.ttft_ms / 1000 - time.time())
        stream = Stream(connection, body, arrived_s, due)
        self._schedule(stream)
        return stream

    def _schedule(self, stream: Stream) -> None:
        heapq.heappush(self._due, (stream.due, next(self._order), stream))
        if stream.due < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = stream.due
            self._timer = self.loop.call_at(stream.due, self._tick)

    def _tick(self) -> None:
        self._timer, self._timer_at = None, float("inf")
        now = self.loop.time()
        itl_s = self.args.itl_ms / 1000
        while self._due and self._due[0][0] <= now:
            _, _, stream = heapq.heappop(self._due)
            if stream.connection.closed:
                continue
            if itl_s <= 0:
                self.pump(stream)
                continue
            self._write_one(stream)
            if not stream.finished and not stream.connection.closed:
                stream.due += itl_s
                heapq.heappush(self._due, (stream.due, next(self._order), stream))
        if self._due:
            self._timer_at = self._due[0][0]
            self._timer = self.loop.call_at(self._timer_at, self._tick)

    def _write_one(self, stream: Stream) -> None:
        data = stream.next_bytes()
        stream.writes_s.append(time.time())
        stream.connection.write(data)
        if stream.finished:
            self._truth.append({"arrived_s": stream.arrived_s, "writes_s": stream.writes_s})
            stream.connection.stream_ended()

    def pump(self, stream: Stream) -> None:
        """Firehose: write until the socket is full or the stream is done."""
        connection = stream.connection
        while not stream.finished and not connection.closed and not connection.outbox:
            self._write_one(stream)


def _listen(host: str, port: int) -> socket.socket:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(4096)
    listener.setblocking(False)
    return listener


async def _main(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    replica = Replica(args, loop)
    listener = _listen(args.host, args.port)
    loop.add_reader(listener.fileno(), replica.accept, listener)
    await asyncio.Event().wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ttft-ms", type=float, default=30.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--model", default="tiny-llama")
    parser.add_argument("--prompt-tokens", type=int, default=64, help="reported in usage")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
