"""A real HTTP/1.1 server on loopback whose answers a test scripts, misbehaviour included.

Each request's path and headers go to the test's `answer` function, which returns what to send:
an `Answer` (status, headers, body; kept alive unless told), or a `Misbehave` (stall past the
client's timeout, break off mid-body, stream without end, close the connection without a word).
The server reads real requests from a real socket, so the client under test meets what a replica
would send it, not a stand-in for its own library.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import BinaryIO, Literal

_REASONS = {200: "OK", 307: "Temporary Redirect", 401: "Unauthorized", 404: "Not Found"}


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole answer: status, extra headers, body; `close` ends the connection after it."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False


@dataclass(frozen=True, slots=True)
class Misbehave:
    """stall: say nothing for `seconds`; cut: send half the declared body and close; endless:
    stream chunks without end; hang_up: close without answering; headers_then_hang: send the
    headers of a 200 and then nothing for `seconds`; drip: stream a line every `seconds`, without
    end; late: send `body` after `seconds`."""

    how: Literal["stall", "cut", "endless", "hang_up", "headers_then_hang", "drip", "late"]
    seconds: float = 0.0
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Request:
    """What the server read: the path and the headers (names lower-cased), on which connection."""

    path: str
    headers: dict[str, str]
    connection: int


Respond = Callable[[Request], Answer | Misbehave]


@dataclass
class HttpAnswers:
    """The running server: its base URL and every request it read, in order."""

    url: str
    requests: list[Request] = field(default_factory=list)
    connections: int = 0


def _read_request(stream: BinaryIO, connection: int) -> Request | None:
    line = stream.readline()
    if not line:
        return None
    words = line.decode("latin-1").split(" ", 2)
    if len(words) != 3:
        return None  # not an HTTP request line: hang up
    _, path, _ = words
    headers: dict[str, str] = {}
    while (row := stream.readline().decode("latin-1").strip()) != "":
        name, _, value = row.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Request(path, headers, connection)


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _serve_connection(sock: socket.socket, server: HttpAnswers, respond: Respond) -> None:
    server.connections += 1
    number = server.connections
    with sock, sock.makefile("rb") as stream:
        while (request := _read_request(stream, number)) is not None:
            server.requests.append(request)
            what = respond(request)
            if isinstance(what, Answer):
                headers = list(what.headers)
                if not any(name.lower() == "content-length" for name, _ in headers):
                    headers.append(("Content-Length", str(len(what.body))))
                if what.close:
                    headers.append(("Connection", "close"))
                try:
                    sock.sendall(_head(what.status, headers) + what.body)
                except OSError:  # the client hung up first (a body past its cap, say)
                    return
                if what.close:
                    return
                continue
            if what.how == "stall":
                time.sleep(what.seconds)
            elif what.how == "cut":
                body = b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{e="0'
                sock.sendall(_head(200, [("Content-Length", str(2 * len(body)))]) + body)
            elif what.how == "endless":
                sock.sendall(_head(200, [("Transfer-Encoding", "chunked")]))
                chunk = b"x" * (1024 * 1024)
                frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
                with contextlib.suppress(OSError):  # until the client hangs up, as it should
                    while True:
                        sock.sendall(frame)
            elif what.how == "headers_then_hang":
                with contextlib.suppress(OSError):
                    sock.sendall(_head(200, [("Content-Length", "100000")]))
                    time.sleep(what.seconds)
            elif what.how == "drip":
                line = b"vllm:num_requests_running 1.0\n"
                frame = f"{len(line):x}\r\n".encode() + line + b"\r\n"
                with contextlib.suppress(OSError):  # until the client hangs up, as it should
                    sock.sendall(_head(200, [("Transfer-Encoding", "chunked")]))
                    while True:
                        sock.sendall(frame)
                        time.sleep(what.seconds)
            elif what.how == "late":
                time.sleep(what.seconds)
                with contextlib.suppress(OSError):  # the client may have given up
                    sock.sendall(_head(200, [("Content-Length", str(len(what.body)))]) + what.body)
                    continue
            return


@contextmanager
def http_answers(respond: Respond, port: int = 0) -> Iterator[HttpAnswers]:
    """Serve `respond`'s answers on 127.0.0.1 (`port`, or a free one) until the block ends."""
    listener = socket.create_server(("127.0.0.1", port))
    listener.settimeout(0.1)  # so the accepting thread sees the stop
    server = HttpAnswers(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            threading.Thread(
                target=_serve_connection, args=(sock, server, respond), daemon=True
            ).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        listener.close()
        thread.join(5)
