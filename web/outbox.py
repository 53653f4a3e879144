"""What is on its way to one browser, sent in order without holding up the others.

Each browser has its own sender: a slow one (a far network, a busy laptop) lets its queue grow
while the others are served at once. Past a limit its queued screen output is dropped whole and
the caller is told, so it can put the browser's modes back and have the app draw the whole screen
again: a browser that lags skips frames, and never holds up the app or the other viewers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import Protocol

LAG_BYTES = 1 << 20
"""Screen output queued for one browser past which it is dropped and the screen redrawn."""


class Socket(Protocol):
    """The part of a websocket an outbox uses (aiohttp's `WebSocketResponse`)."""

    async def send_bytes(self, data: bytes) -> None: ...
    async def send_str(self, data: str) -> None: ...
    async def close(self) -> bool: ...


class Outbox:
    """The queue and the sender of one browser."""

    def __init__(self, socket: Socket, lag_bytes: int = LAG_BYTES) -> None:
        self._socket = socket
        self._lag_bytes = lag_bytes
        self._items: collections.deque[bytes | str] = collections.deque()
        self._screen_bytes = 0
        self._waiting = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self._sender = asyncio.create_task(self._send())

    def screen(self, data: bytes) -> bool:
        """Queue screen output; False when the browser lagged and what it had queued was dropped
        (this piece with it): it then needs its modes and a whole screen."""
        if self._screen_bytes + len(data) > self._lag_bytes:
            self._items = collections.deque(i for i in self._items if isinstance(i, str))
            self._screen_bytes = 0
            return False
        self._items.append(data)
        self._screen_bytes += len(data)
        self._wake()
        return True

    def text(self, message: str) -> None:
        """Queue a message for the page (JSON), never dropped."""
        self._items.append(message)
        self._wake()

    def _wake(self) -> None:
        self._drained.clear()
        self._waiting.set()

    async def _send(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            while True:
                await self._waiting.wait()
                while self._items:
                    item = self._items.popleft()
                    if isinstance(item, bytes):
                        self._screen_bytes -= len(item)
                        await self._socket.send_bytes(item)
                    else:
                        await self._socket.send_str(item)
                self._waiting.clear()
                self._drained.set()

    async def flush(self, timeout_s: float = 2.0) -> None:
        """Wait until what is queued has been handed to the socket (at most `timeout_s`)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._drained.wait(), timeout_s)

    async def close(self, *, hang_up: bool = False) -> None:
        """Stop sending; with `hang_up`, send what is queued first (briefly) and close the socket,
        else drop it (the browser has gone)."""
        if hang_up:
            await self.flush()
        self._sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._sender
        if hang_up:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self._socket.close()
