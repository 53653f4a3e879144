"""One app shared by every browser: started by the first, fed by the one holding the control.

The app's screen goes to every viewer; a viewer who joins later is put in the app's terminal
modes and the app draws its whole screen again. Keys, clicks and focus reach the app only from
the viewer holding the control (`Room`), so two viewers never both turn the probe on or restart
the replica. When the last viewer leaves, the app stays for `linger_s` (a reload keeps the
session), then quits as closing the terminal quits `slotop attach`: the probe stops with it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from slotop.web.app_process import AppProcess
from slotop.web.errors import WebError
from slotop.web.modes import TerminalModes
from slotop.web.outbox import Outbox, Socket
from slotop.web.room import Room, Viewer

LINGER_S = 60.0
"""How long the app outlives its last viewer."""
PAGE_MESSAGE = "slotop"
"""The first word of the page's own messages on the websocket (the rest are the terminal's)."""
_MAX_SIZE = 1000
CLEAR_SCREEN = b"\x1b[H\x1b[2J"


class SharedApp:
    """The served app, its viewers and the hand on its dials."""

    def __init__(
        self,
        argv: Sequence[str],
        log: Callable[[str], None],
        *,
        linger_s: float = LINGER_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._argv = list(argv)
        self._log = log
        self._linger_s = linger_s
        self._clock = clock
        self.room = Room()
        self._outboxes: dict[int, Outbox] = {}
        self._modes = TerminalModes()
        self._app: AppProcess | None = None
        self._size: tuple[int, int] | None = None
        self._starting = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._linger: asyncio.TimerHandle | None = None

    async def join(
        self, socket: Socket, address: str, name: str | None, columns: int, rows: int
    ) -> Viewer | None:
        """A browser opened the page: start the app if none runs, else show it the screen.
        None when the app could not start (the page was told why)."""
        viewer = self.room.join(address, name, _fit(columns), _fit(rows), self._clock())
        outbox = self._outboxes[viewer.number] = Outbox(socket)
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        self._tell_everyone()  # while the app starts, the page already says who holds the control
        async with self._starting:
            if self._app is None:
                try:
                    await self._start()
                except WebError as exc:
                    self._log(str(exc))
                    outbox.text(json.dumps([PAGE_MESSAGE, {"error": str(exc)}]))
                    await self._drop(viewer.number, hang_up=True)
                    return None
            elif viewer.number in self._outboxes:
                outbox.screen(self._modes.replay())
                if not self._fit():
                    self._app.redraw()
        self._tell_everyone()
        return viewer

    async def leave(self, number: int) -> None:
        """A browser closed the page (or lost it)."""
        await self._drop(number)
        if len(self.room):
            self._fit()
            self._tell_everyone()
        elif self._app is not None and self._linger is None:
            self._linger = asyncio.get_running_loop().call_later(self._linger_s, self._lingered)

    def _lingered(self) -> None:
        self._run(self._stop_app(f"nobody watched for {self._linger_s:g} s"))

    def received(self, number: int, text: str) -> None:
        """A message from a viewer's page: keys, its size, a ping, focus, or the control."""
        try:
            envelope = json.loads(text)
        except ValueError:
            return
        if not isinstance(envelope, list) or not envelope:
            return
        kind, body = envelope[0], envelope[1] if len(envelope) > 1 else None
        holds = self.room.holds(number)
        app = self._app
        if kind == "stdin" and isinstance(body, str) and holds and app is not None:
            app.keys(body)
        elif kind == "resize" and isinstance(body, dict):
            columns, rows = body.get("width"), body.get("height")
            if isinstance(columns, int) and isinstance(rows, int):
                self.room.resize(number, _fit(columns), _fit(rows))
                self._fit()
                self._tell_everyone()
        elif kind == "ping" and number in self._outboxes:
            self._outboxes[number].text(json.dumps(["pong", body]))
        elif kind in ("focus", "blur") and holds and app is not None:
            app.focus(kind == "focus")
        elif kind == PAGE_MESSAGE and body == "take":
            self.room.take(number, self._clock())
            self._tell_everyone()
        elif kind == PAGE_MESSAGE and body == "release":
            self.room.release(number)
            self._tell_everyone()

    async def close(self) -> None:
        """Quit the app and let every viewer go."""
        if self._linger is not None:
            self._linger.cancel()
        await self._stop_app("the server stops")
        await self._let_everyone_go(json.dumps([PAGE_MESSAGE, {"stopped": True}]))

    async def _start(self) -> None:
        columns, rows = self._size = self.room.size()
        self._modes = TerminalModes()
        app = AppProcess(self._argv, self._screen, lambda line: self._log(f"dashboard: {line}"))
        await app.start(columns, rows)
        self._app = app
        self._run(self._watch(app))

    def _screen(self, data: bytes) -> None:
        """The app drew: every viewer gets it; one that lagged gets its modes and a whole screen."""
        self._modes.feed(data)
        lagged = [box for box in self._outboxes.values() if not box.screen(data)]
        for box in lagged:
            box.screen(self._modes.replay())
        if lagged and self._app is not None:
            self._app.redraw()

    def _fit(self) -> bool:
        """Size the app for the smallest viewer, and have it draw its whole screen at the new
        size; whether the size changed. A viewer larger than a shrunk app would keep the old
        screen's edges beside the new one: every viewer's screen is cleared first."""
        size = self.room.size()
        if self._app is None or size == self._size:
            return False
        before, self._size = self._size, size
        if before is not None and (size[0] < before[0] or size[1] < before[1]):
            for box in self._outboxes.values():
                box.screen(CLEAR_SCREEN)
        self._app.resize(*size)
        self._app.redraw()  # a resize repaints only what moved
        return True

    def _tell_everyone(self) -> None:
        for number, box in self._outboxes.items():
            box.text(json.dumps([PAGE_MESSAGE, self.room.told_to(number)]))

    async def _watch(self, app: AppProcess) -> None:
        code = await app.ended()
        if self._app is not app:
            return  # stopped on purpose: whoever stopped it lets the viewers go
        self._app = None
        self._log(f"the dashboard ended (exit code {code})")
        await self._let_everyone_go(json.dumps([PAGE_MESSAGE, {"ended": code}]))

    async def _let_everyone_go(self, last_word: str | None = None) -> None:
        """Empty the room at once, then say `last_word` to each viewer and hang up."""
        boxes = list(self._outboxes.values())
        self._outboxes.clear()
        for number in self.room.numbers():
            self.room.leave(number)
        for box in boxes:
            if last_word is not None:
                box.text(last_word)
        await asyncio.gather(*(box.close(hang_up=True) for box in boxes))

    async def _stop_app(self, why: str) -> None:
        self._linger = None
        app, self._app = self._app, None
        if app is not None:
            self._log(f"stopping the dashboard: {why}")
            await app.stop()

    async def _drop(self, number: int, *, hang_up: bool = False) -> None:
        self.room.leave(number)
        box = self._outboxes.pop(number, None)
        if box is not None:
            await box.close(hang_up=hang_up)

    def _run(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _fit(cells: int) -> int:
    return max(1, min(cells, _MAX_SIZE))
