"""A dashboard session watched while it runs, and its replay compared with it, view for view.

`Watcher` samples the live app's views at quiet instants: the recorder handed no line while the
app caught up with every message, so the screen then is the one a replay shows after exactly
the lines handed so far. `replayed_views` seeks a `ReplayApp` there. `differences` compares two
views field by field, numbers to the recording's precision: with every inter-token gap kept
(`[session] itl_gaps`), probe times and gaps are kept to the microsecond, so a float may move by
that (a hundredth of a percent of a millisecond latency), and a number shown with decimals by one
unit of its last digit; words, whole numbers, flags and everything else must be equal. (Pooled,
the default, gaps are kept within 0.5%: a flag judged on an ITL at a bucket's edge may flip.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from slotop.actions.session.recorder import SessionRecorder
from slotop.tui.app import SlotopApp
from slotop.tui.change_view import ChangeView, change_view
from slotop.tui.replay_app import ReplayApp
from slotop.tui.views import Views

RELATIVE = 1e-4
"""How far a float may move: a percentile of times kept to the microsecond."""
ABSOLUTE = 2e-6
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class Seen:
    """The live dashboard's views after the first `lines` lines of its recording."""

    lines: int
    views: Views
    change: ChangeView | None


class Watcher:
    """Samples a live app's views where the recording stands still around them."""

    def __init__(self, app: SlotopApp, recorder: SessionRecorder, pilot: Any) -> None:
        self.app = app
        self.recorder = recorder
        self.pilot = pilot
        self.seen: list[Seen] = []
        self.tries = 0

    async def sample(self) -> None:
        """Sample once; kept only if no line was handed meanwhile (a message may be in flight)."""
        self.tries += 1
        before = self.recorder.lines_handed
        await asyncio.sleep(0.2)  # a line handed just before is followed by its message
        await self.pilot.pause()
        views = self.app.views
        change = change_view(self.app.inputs.before_after)
        if views is not None and self.recorder.lines_handed == before:
            self.seen.append(Seen(before, views, change))

    async def until(self, condition: Any, what: str, timeout_s: float = 120.0) -> None:
        """Sample until `condition()` holds; on timeout, say what the dashboard showed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            if loop.time() > deadline:
                inputs = self.app.inputs
                events = "\n".join(f"  {e.kind}: {e.text}" for e in inputs.events[-12:])
                raise AssertionError(
                    f"the dashboard never showed {what}; it shows configuration "
                    f"{inputs.configuration}, curve {[p.concurrency for p in inputs.curve]}, "
                    f"before/after {inputs.before_after}, and the timeline ends\n{events}"
                )
            await self.sample()


def frames_through(app: ReplayApp, lines: int) -> int:
    """How many of the replay's frames come from the recording's first `lines` lines."""
    return sum(1 for frame in app.frames.frames if frame.line <= lines)


async def replayed_views(app: ReplayApp, pilot: Any, lines: int) -> tuple[Views, ChangeView | None]:
    """Seek the replay to just after the first `lines` lines; its views then."""
    count = frames_through(app, lines)
    assert count > 0, f"no frame comes from the first {lines} lines"
    feed = app.replay_feed
    assert feed is not None
    feed.seek(app.frames.times_s[count - 1])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20.0
    while app.inputs.now_s != app.frames.times_s[count - 1]:
        assert loop.time() < deadline, "the replay never got there"
        await pilot.pause(0.02)
    await pilot.pause()
    assert app.views is not None
    return app.views, change_view(app.inputs.before_after)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _text_differences(live: str, replayed: str, where: str) -> Iterator[str]:
    words_live, words_replayed = _NUMBER.split(live), _NUMBER.split(replayed)
    numbers_live, numbers_replayed = _NUMBER.findall(live), _NUMBER.findall(replayed)
    if words_live != words_replayed or len(numbers_live) != len(numbers_replayed):
        yield f"{where}: {live!r} != {replayed!r}"
        return
    for a, b in zip(numbers_live, numbers_replayed, strict=True):
        if a == b:
            continue
        if "." not in a or "." not in b:
            yield f"{where}: {live!r} != {replayed!r} (a whole number differs)"
            return
        unit = 10.0 ** -max(len(a.rsplit(".", 1)[1]), len(b.rsplit(".", 1)[1]))
        x, y = _number(a), _number(b)
        if abs(x - y) > unit * 1.0001:
            yield f"{where}: {live!r} != {replayed!r} ({a} against {b})"
            return


def differences(live: Any, replayed: Any, where: str = "view") -> Iterator[str]:
    """Where two views differ beyond the recording's precision (none: equal)."""
    if dataclasses.is_dataclass(live) and not isinstance(live, type):
        if type(live) is not type(replayed):
            yield f"{where}: {type(live).__name__} != {type(replayed).__name__}"
            return
        for field in dataclasses.fields(live):
            yield from differences(
                getattr(live, field.name), getattr(replayed, field.name), f"{where}.{field.name}"
            )
    elif isinstance(live, tuple | list) and isinstance(replayed, tuple | list):
        if len(live) != len(replayed):
            yield f"{where}: {len(live)} items != {len(replayed)}"
            return
        for index, (a, b) in enumerate(zip(live, replayed, strict=True)):
            yield from differences(a, b, f"{where}[{index}]")
    elif isinstance(live, str) and isinstance(replayed, str):
        yield from _text_differences(live, replayed, where)
    elif (
        isinstance(live, float)
        and isinstance(replayed, float)
        and not isinstance(live, bool | enum.Enum)
    ):
        if math.isnan(live) and math.isnan(replayed):
            return
        if abs(live - replayed) > ABSOLUTE + RELATIVE * max(abs(live), abs(replayed)):
            yield f"{where}: {live!r} != {replayed!r}"
    elif live != replayed:
        yield f"{where}: {live!r} != {replayed!r}"


def view_differences(live: Seen, views: Views, change: ChangeView | None) -> list[str]:
    """Every pane's view but the header's words (live says fresh, a replay says REPLAY)."""
    found: list[str] = []
    for field in dataclasses.fields(Views):
        if field.name == "header":
            continue
        found += differences(
            getattr(live.views, field.name), getattr(views, field.name), field.name
        )
    found += differences(live.views.header.title, views.header.title, "header.title")
    found += differences(live.change, change, "change")
    return found
