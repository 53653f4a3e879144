"""A browser that lags skips whole frames and is told; messages to its page are never dropped."""

from __future__ import annotations

import asyncio

import pytest

from slotop.web.outbox import Outbox

pytestmark = pytest.mark.anyio


class HeldSocket:
    """A websocket that sends nothing until the test lets it, then records what went out."""

    def __init__(self) -> None:
        self.sent: list[bytes | str] = []
        self.going = asyncio.Event()
        self.closed = False

    async def send_bytes(self, data: bytes) -> None:
        await self.going.wait()
        self.sent.append(data)

    async def send_str(self, data: str) -> None:
        await self.going.wait()
        self.sent.append(data)

    async def close(self) -> bool:
        self.closed = True
        return True


async def test_what_is_queued_goes_out_in_order() -> None:
    socket = HeldSocket()
    box = Outbox(socket, lag_bytes=100)
    assert box.screen(b"frame 1")
    box.text('["slotop", {}]')
    assert box.screen(b"frame 2")
    socket.going.set()
    await box.flush()
    assert socket.sent == [b"frame 1", '["slotop", {}]', b"frame 2"]
    await box.close()


async def test_a_lagging_browser_loses_its_queued_frames_but_not_its_messages() -> None:
    socket = HeldSocket()
    box = Outbox(socket, lag_bytes=100)
    await asyncio.sleep(0)  # the sender takes the first frame and waits on the socket with it
    assert box.screen(b"a" * 40)
    await asyncio.sleep(0)
    assert box.screen(b"b" * 40)
    box.text("news")
    assert box.screen(b"c" * 40)
    assert not box.screen(b"d" * 40)  # 160 bytes queued past 100: b, c and d dropped
    assert box.screen(b"whole screen")
    socket.going.set()
    await box.flush()
    assert socket.sent == [b"a" * 40, "news", b"whole screen"]
    await box.close(hang_up=True)
    assert socket.closed
