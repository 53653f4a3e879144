"""The dashboard under Textual's web driver, as `slotop web` runs it: asked to, it sends its whole
screen again, modal and all, for a browser that joins a dashboard others already watch."""

from __future__ import annotations

import asyncio
import re
import sys

import pytest

from slotop.web.app_process import AppProcess

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# The dashboard with no replica behind it: every pane drawn, none of them fed.
APP = "from slotop.config import Settings; from slotop.tui.app import SlotopApp; SlotopApp(Settings()).run()"
PANE_TITLES = ("SLO", "Probe (client side)", "Throughput", "KV cache", "Latency", "Litmus", "GPU")
_ESCAPE = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]")


class Screen:
    """What the app wrote, as text without its escape sequences."""

    def __init__(self) -> None:
        self.output = bytearray()

    def take(self, data: bytes) -> None:
        self.output += data

    def text(self) -> str:
        return _ESCAPE.sub("", self.output.decode(errors="replace"))

    async def shows(self, *words: str, timeout_s: float = 60.0) -> None:
        for _ in range(int(timeout_s / 0.05)):
            if all(word in self.text() for word in words):
                return
            await asyncio.sleep(0.05)
        missing = [word for word in words if word not in self.text()]
        raise AssertionError(f"the app never sent {missing}")


async def test_asked_to_redraw_the_dashboard_sends_every_pane_again_modal_included() -> None:
    screen = Screen()
    app = AppProcess([sys.executable, "-c", APP], screen.take, lambda _: None)
    await app.start(160, 50)
    try:
        await screen.shows(*PANE_TITLES, "Quit")  # the first paint
        await asyncio.sleep(2.0)  # past the first layouts; then only the header's clock moves
        screen.output.clear()
        await asyncio.sleep(1.5)
        assert not all(title in screen.text() for title in PANE_TITLES), "repaints it all anyway"
        app.redraw()
        await screen.shows(*PANE_TITLES, "Quit")
        app.keys("?")
        await screen.shows("concurrency")  # the help, over the panes
        await asyncio.sleep(1.0)
        screen.output.clear()
        app.redraw()
        # The help covers the throughput pane; the panes around it show beneath.
        await screen.shows("concurrency", "KV cache", "Litmus", "GPU", "Quit")
    finally:
        assert await app.stop() == 0
