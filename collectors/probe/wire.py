"""The probe's own HTTP/1.1 client for plain-HTTP replicas: each read stamped the moment it lands.

A read costs one callback from the loop's selector: one `recvmsg`, the stamp, the chunked framing
undone, the bytes handed to the meter. No task wakes per chunk and nothing is parsed that the
statistics do not need, so one worker keeps up with many more streams than a client built on
streams and tasks. On Linux each read carries the kernel's receive time (SO_TIMESTAMPNS), so the
probe also knows how long the bytes waited in its socket: its own lag (`lag.py`).

Failures become the same error classes as `stream.stream_request` gives (which https replicas
still go through): no answer is CONNECT, a broken body STREAM_CUT, a silent replica TIMEOUT.
Cancelling a request closes its connection, so the replica sees it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import socket
import struct
import sys
import time
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from slotop.collectors.probe.records import ErrorClass
from slotop.collectors.probe.stream import (
    StreamDataError,
    StreamMeter,
    StreamOutcome,
    finish_outcome,
    status_detail,
)


def _timestamp_option() -> int | None:
    """SO_TIMESTAMPNS where its number and its 16-byte timespec are known (64-bit Linux with the
    generic socket numbers); Python's socket module does not name it."""
    named = getattr(socket, "SO_TIMESTAMPNS", None)
    if isinstance(named, int):
        return named
    generic = {"x86_64", "amd64", "aarch64", "arm64", "riscv64", "s390x", "ppc64le"}
    if sys.platform == "linux" and platform.machine().lower() in generic and sys.maxsize > 2**32:
        return 35
    return None


_SO_TIMESTAMPNS = _timestamp_option()
_ANCILLARY = socket.CMSG_SPACE(16) if _SO_TIMESTAMPNS is not None else 0
_TIMESPEC = struct.Struct("qq")
_READ_BYTES = 65536
_MAX_HEAD_BYTES = 65536
_DETAIL_CHARS = 200

_HEAD, _SIZE, _DATA, _DATA_END, _TRAILER, _LENGTH, _UNTIL_CLOSE, _DONE = range(8)


class _Failed(Exception):
    """A request failed in a way the outcome names (class and detail)."""

    def __init__(self, error: ErrorClass, detail: str) -> None:
        super().__init__(detail)
        self.error = error
        self.detail = detail[:_DETAIL_CHARS]


class _Connection:
    """One keep-alive connection and the response it is reading."""

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
        lags: list[float] | None,
    ) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.loop = loop
        self.clock = clock
        self.lags = lags
        self.reused = False
        self.reusable = False
        self._reset()

    def _reset(self) -> None:
        self.state = _HEAD
        self.buffer = b""
        self.received = False
        self.status = 0
        self.keep_alive = True
        self.remaining = 0
        self.body = bytearray()
        self.meter: StreamMeter | None = None
        self.done: asyncio.Future[None] | None = None
        self.last_read_s = 0.0
        self.watchdog: asyncio.TimerHandle | None = None

    def start(self, meter: StreamMeter, timeout_s: float) -> asyncio.Future[None]:
        """Read the next response into `meter`; the future ends with it (or raises _Failed)."""
        self._reset()
        self.meter = meter
        self.done = self.loop.create_future()
        self.last_read_s = self.clock()
        self.timeout_s = timeout_s
        self.watchdog = self.loop.call_later(timeout_s, self._watch)
        self.loop.add_reader(self.fd, self._readable)
        return self.done

    def close(self) -> None:
        self.reusable = False
        self._stop_reading()
        self.sock.close()

    def alive(self) -> bool:
        """Whether an idle connection is still open (the replica may have closed it)."""
        try:
            return not self.sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            return False

    def _stop_reading(self) -> None:
        if self.watchdog is not None:
            self.watchdog.cancel()
            self.watchdog = None
        if self.sock.fileno() >= 0:
            self.loop.remove_reader(self.fd)

    def _end(self, failure: _Failed | None = None) -> None:
        self._stop_reading()
        self.reusable = failure is None and self.keep_alive and not self.buffer
        if self.done is not None and not self.done.done():
            if failure is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(failure)

    def _watch(self) -> None:
        idle = self.clock() - self.last_read_s
        if idle >= self.timeout_s:
            self.watchdog = None
            what = "ReadTimeout" if self.received else "no answer"
            self._end(_Failed(ErrorClass.TIMEOUT, f"{what} after {self.timeout_s:g} s"))
        else:
            self.watchdog = self.loop.call_later(self.timeout_s - idle, self._watch)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(_READ_BYTES, _ANCILLARY)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._broken(exc)
            return
        at_s = self.clock()
        lag_s: float | None = None
        if ancillary:
            raw = ancillary[0][2]
            if len(raw) >= 16:
                seconds, nanoseconds = _TIMESPEC.unpack_from(raw)
                lag_s = max(0.0, time.time() - seconds - nanoseconds * 1e-9)
                if self.lags is not None:
                    self.lags.append(lag_s)
        self.last_read_s = at_s
        if not data:
            self._eof()
            return
        self.received = True
        try:
            self._take(data, at_s, lag_s)
        except _Failed as failure:
            self.keep_alive = False
            self._end(failure)
        except StreamDataError as exc:
            self.keep_alive = False
            self._end(_Failed(ErrorClass.STREAM_ERROR, str(exc)))

    def _broken(self, exc: OSError) -> None:
        error = ErrorClass.STREAM_CUT if self.received else ErrorClass.CONNECT
        self.keep_alive = False
        self._end(_Failed(error, f"{type(exc).__name__}: {exc}"))

    def _eof(self) -> None:
        self.keep_alive = False
        if self.state == _UNTIL_CLOSE:
            self.state = _DONE
            self._end()
        elif not self.received:
            self._end(_Failed(ErrorClass.CONNECT, "the replica closed the connection unanswered"))
        else:
            self._end(_Failed(ErrorClass.STREAM_CUT, "the replica closed the stream mid-body"))

    def _take(self, data: bytes, at_s: float, lag_s: float | None) -> None:
        if self.state == _SIZE and not self.buffer and self.meter is not None:
            # the usual read: exactly one chunk of the body, written as one
            line_end = data.find(b"\r\n")
            end = len(data) - 2
            if 0 < line_end < 10 and data[end:] == b"\r\n":
                try:
                    size = int(data[:line_end], 16)
                except ValueError:
                    size = -1
                if size > 0 and line_end + 2 + size == end and self.status == 200:
                    self.meter.feed(data[line_end + 2 : end], at_s, lag_s)
                    return
        buffer = self.buffer + data if self.buffer else data
        position = 0
        pieces: list[bytes] = []
        while True:
            state = self.state
            if state == _SIZE:
                line_end = buffer.find(b"\r\n", position)
                if line_end < 0:
                    break
                size = _chunk_size(buffer[position:line_end])
                position = line_end + 2
                self.remaining = size
                self.state = _DATA if size else _TRAILER
            elif state == _DATA:
                take = min(self.remaining, len(buffer) - position)
                if take <= 0:
                    break
                pieces.append(buffer[position : position + take])
                position += take
                self.remaining -= take
                if self.remaining:
                    break
                self.state = _DATA_END
            elif state == _DATA_END:
                if len(buffer) - position < 2:
                    break
                if buffer[position : position + 2] != b"\r\n":
                    raise _Failed(ErrorClass.STREAM_CUT, "a chunk of the body is malformed")
                position += 2
                self.state = _SIZE
            elif state == _HEAD:
                head_end = buffer.find(b"\r\n\r\n", position)
                if head_end < 0:
                    if len(buffer) - position > _MAX_HEAD_BYTES:
                        raise _Failed(ErrorClass.CONNECT, "the response head is too long")
                    break
                self._head(buffer[position:head_end])
                position = head_end + 4
            elif state == _TRAILER:
                line_end = buffer.find(b"\r\n", position)
                if line_end < 0:
                    break
                empty = line_end == position
                position = line_end + 2
                if empty:
                    self.state = _DONE
            elif state == _LENGTH:
                take = min(self.remaining, len(buffer) - position)
                pieces.append(buffer[position : position + take])
                position += take
                self.remaining -= take
                if not self.remaining:
                    self.state = _DONE
                break
            elif state == _UNTIL_CLOSE:
                pieces.append(buffer[position:])
                position = len(buffer)
                break
            else:  # _DONE
                break
        self.buffer = buffer[position:]
        if pieces:
            payload = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            if self.status == 200 and self.meter is not None:
                self.meter.feed(payload, at_s, lag_s)
            else:
                self.body += payload[: 4096 - len(self.body)]
        if self.state == _DONE:
            self._end()

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        try:
            self.status = int(parts[1])
        except (IndexError, ValueError):
            raise _Failed(ErrorClass.CONNECT, f"not an HTTP answer: {lines[0][:80]!r}") from None
        if 100 <= self.status < 200:
            return  # an interim answer; the real one follows
        self.keep_alive = parts[0] == b"HTTP/1.1"
        chunked = False
        length: int | None = None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise _Failed(
                        ErrorClass.CONNECT, "the answer's length is not a number"
                    ) from None
            elif name == b"connection":
                self.keep_alive = b"close" not in value.lower()
        if chunked:
            self.state = _SIZE
        elif length is not None:
            self.remaining = length
            self.state = _LENGTH if length else _DONE
        else:
            self.keep_alive = False
            self.state = _UNTIL_CLOSE


def _chunk_size(line: bytes) -> int:
    try:
        return int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise _Failed(ErrorClass.STREAM_CUT, f"a chunk size is not hex: {line[:40]!r}") from None


class WireClient:
    """Streams requests to one plain-HTTP replica over a pool of keep-alive connections.

    `lags` (where given) receives every read's lag in seconds, for the worker's `LagMeter`.
    """

    def __init__(
        self,
        timeout_s: float,
        *,
        lags: list[float] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._timeout_s = timeout_s
        self._lags = lags
        self._clock = clock
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._addresses: dict[tuple[str, int], tuple[int, tuple[object, ...]]] = {}
        self._heads: dict[
            tuple[str, tuple[tuple[str, str], ...]], tuple[bytes, tuple[str, int]]
        ] = {}

    def _head(self, url: str, headers: Mapping[str, str]) -> tuple[bytes, tuple[str, int]]:
        key = (url, tuple(headers.items()))
        known = self._heads.get(key)
        if known is None:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                raise ValueError(f"{url}: the probe's own client speaks plain http:// only")
            port = parts.port or 80
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", "Accept: */*"]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            known = ("\r\n".join(lines) + "\r\n").encode("latin-1"), (parts.hostname, port)
            self._heads[key] = known
        return known

    async def stream(
        self,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        meter: StreamMeter,
        outcome: StreamOutcome,
    ) -> None:
        """Post one streaming request, feeding every read to `meter` and filling `outcome`.

        Cancellation propagates (and drops the connection); every other failure is an outcome.
        """
        head, where = self._head(url, headers)
        request = head + f"Content-Length: {len(content)}\r\n\r\n".encode() + content
        connection: _Connection | None = None
        try:
            for attempt in range(2):
                connection = await self._connection(where, fresh=attempt > 0)
                try:
                    await self._exchange(connection, request, meter)
                    break
                except _Failed:
                    if connection.reused and not connection.received and attempt == 0:
                        connection.close()  # the replica dropped an idle connection: once more
                        continue
                    raise
        except _Failed as failure:
            outcome.error, outcome.detail = failure.error, failure.detail
            if connection is not None:
                outcome.http_status = connection.status or None
                connection.close()
            return
        except BaseException:
            if connection is not None:
                connection.close()
            raise
        assert connection is not None
        outcome.http_status = connection.status
        if connection.reusable:
            self._idle.setdefault(where, []).append(connection)
        else:
            connection.close()
        if connection.status != 200:
            outcome.error = ErrorClass.HTTP_STATUS
            outcome.detail = status_detail(connection.status, bytes(connection.body))
            return
        finish_outcome(meter, outcome)

    async def _exchange(self, connection: _Connection, request: bytes, meter: StreamMeter) -> None:
        done = connection.start(meter, self._timeout_s)
        try:
            sent = connection.sock.send(request)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            connection._stop_reading()
            raise _Failed(ErrorClass.CONNECT, f"{type(exc).__name__}: {exc}") from None
        if sent < len(request):
            try:
                await connection.loop.sock_sendall(connection.sock, request[sent:])
            except OSError as exc:
                connection._stop_reading()
                raise _Failed(ErrorClass.CONNECT, f"{type(exc).__name__}: {exc}") from None
        await done

    async def _connection(self, where: tuple[str, int], fresh: bool) -> _Connection:
        idle = self._idle.get(where)
        while idle and not fresh:
            connection = idle.pop()
            if connection.alive():
                connection.reused = True
                return connection
            connection.close()
        loop = asyncio.get_running_loop()
        family, address = await self._address(where, loop)
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if _SO_TIMESTAMPNS is not None:
                with contextlib.suppress(OSError):  # no arrival times: the lag is not observable
                    sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            await asyncio.wait_for(loop.sock_connect(sock, address), self._timeout_s)
        except asyncio.TimeoutError:
            sock.close()
            raise _Failed(ErrorClass.TIMEOUT, "ConnectTimeout") from None
        except OSError as exc:
            sock.close()
            raise _Failed(ErrorClass.CONNECT, f"{type(exc).__name__}: {exc}") from None
        except BaseException:
            sock.close()
            raise
        return _Connection(sock, loop, self._clock, self._lags)

    async def _address(
        self, where: tuple[str, int], loop: asyncio.AbstractEventLoop
    ) -> tuple[int, tuple[object, ...]]:
        known = self._addresses.get(where)
        if known is None:
            try:
                infos = await loop.getaddrinfo(*where, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise _Failed(ErrorClass.CONNECT, f"{type(exc).__name__}: {exc}") from None
            family, _, _, _, address = infos[0]
            known = (int(family), tuple(address))
            self._addresses[where] = known
        return known

    async def aclose(self) -> None:
        """Close every idle connection."""
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
