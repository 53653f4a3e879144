"""A dashboard session watched while it runs, and its replay compared with it, view for view.

`scripted_session` runs the issue's session on a live app (two load steps, a KV-dtype restart
auto → fp8, two more steps) and `check_session`, `check_replay` and `check_report` check what it
left: two configurations and a before/after table, a replay equal to it, a report.

`Watcher` samples the live app's views at quiet instants: the recorder handed no line while the
app caught up with every message, so the screen then is the one a replay shows after exactly
the lines handed so far. `replayed_views` seeks a `ReplayApp` there. `differences` compares two
views field by field, numbers to the recording's precision: with every inter-token gap kept
(`[session] itl_gaps`), probe times and gaps are kept to the microsecond, so a float may move by
that (a hundredth of a percent of a millisecond latency), and a number shown with decimals, or in
whole milliseconds, by one unit of its last digit; words, other whole numbers, flags and
everything else must be equal. (Pooled, the default, gaps are kept within 0.5%: a flag judged on
an ITL at a bucket's edge may flip.)
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import enum
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials
from slotop.actions.session.reader import Recording
from slotop.actions.session.rebuild import recorded_settings
from slotop.actions.session.recorder import SessionRecorder
from slotop.cli import main
from slotop.tui.app import SlotopApp
from slotop.tui.replay.app import ReplayApp
from slotop.tui.views.change import ChangeView, change_view
from slotop.tui.views.dashboard import Views
from slotop.tui.views.inputs import Inputs

RELATIVE = 1e-4
"""How far a float may move: a percentile of times kept to the microsecond."""
ABSOLUTE = 2e-6
RESTART_S = 300.0
"""The longest a restart may take: a real vLLM replica starts in some 20-60 s on two cores."""
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
    while app.frames_shown != count or app.inputs.now_s != app.frames.times_s[count - 1]:
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
    for a, b, after in zip(numbers_live, numbers_replayed, words_live[1:], strict=True):
        if a == b:
            continue
        if ("." not in a or "." not in b) and not after.startswith(" ms"):
            yield f"{where}: {live!r} != {replayed!r} (a whole number differs)"
            return
        # Milliseconds from 100 up are shown whole (`fmt.ms`): a latency kept to the microsecond
        # rounds either way at a half (592.49979 replayed where live showed 593).
        unit = 10.0 ** -max(len(n.rsplit(".", 1)[1]) if "." in n else 0 for n in (a, b))
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


@dataclass(frozen=True, slots=True)
class Session:
    """What a scripted session left: the live dashboard's last inputs, and what was sampled."""

    inputs: Inputs
    watch: Watcher
    dials: Dials | None


KV_MENU = ("auto", "bfloat16", "float16", "fp8")
"""The k menu's first choices, in order."""


async def scripted_session(
    app: SlotopApp,
    recorder: SessionRecorder,
    replica: ManagedReplica,
    first: int,
    kv_dtype: str = "fp8",
) -> Session:
    """The issue's session on a live app whose probe starts at `first` in flight: two steps,
    a KV-dtype restart auto → `kv_dtype` through k (confirmed), two more steps, sampling
    throughout."""

    def points_at(concurrency: int) -> bool:
        return concurrency in [p.concurrency for p in app.inputs.curve]

    async with app.run_test(size=(160, 60)) as pilot:
        watch = Watcher(app, recorder, pilot)
        await watch.until(
            lambda: (
                points_at(first)
                and app.inputs.configuration is not None
                and bool(app.inputs.configuration.dials)
            ),
            f"a point at {first} and the dials",
        )
        await pilot.press("plus")
        await watch.until(lambda: points_at(first + 1), f"a point at {first + 1}")
        await watch.sample()
        await pilot.press("k")
        await pilot.press(*["down"] * KV_MENU.index(kv_dtype), "enter")
        await pilot.press("y")
        await watch.until(
            lambda: app.inputs.configuration is not None and app.inputs.configuration.index == 2,
            "the second configuration",
            timeout_s=RESTART_S,
        )
        await watch.until(
            lambda: (
                app.inputs.before_after is not None and app.inputs.before_after.table is not None
            ),
            "the before/after table",
        )
        for step in (first + 2, first + 3):
            await pilot.press("plus")
            await watch.until(lambda step=step: points_at(step), f"a point at {step}")  # type: ignore[misc]
        for _ in range(3):
            await watch.sample()
        session = Session(app.inputs, watch, replica.dials)
        await pilot.press("q")
    return session


def check_session(
    session: Session, recording: Recording, first: int, kv_dtype: str = "fp8"
) -> None:
    """Two configurations with curves of their own, and a before/after table, as recorded."""
    inputs = session.inputs
    assert session.dials is not None and session.dials.kv_cache_dtype == kv_dtype
    current, previous = inputs.configuration, inputs.previous_curve
    assert current is not None and current.label.startswith(f"#2 kv {kv_dtype}")
    assert previous is not None and previous.configuration.label.startswith("#1 kv auto")
    assert [p.concurrency for p in previous.points] == [first, first + 1]
    now = {p.concurrency for p in inputs.curve}
    assert {first + 2, first + 3} <= now and first not in now
    table = inputs.before_after
    assert table is not None and table.table is not None
    assert table.load == f"{first + 1} in flight"
    labels = [row.cells[0] for row in table.table.rows]
    assert any(label.startswith("TTFT") for label in labels)
    assert any(label.startswith("KV") for label in labels)
    panels = [
        line.data["state"]
        for line in recording.of_kind("action")
        if line.data["action"] == "before_after"
    ]
    assert panels[0] == "measuring" and "measured" in panels


async def check_replay(recording: Recording, session: Session) -> None:
    """The replay shows, after the same lines, the views the live panes showed."""
    seen = session.watch.seen
    assert len(seen) >= 10, f"only {len(seen)} of {session.watch.tries} samples were quiet"
    settings, notes = recorded_settings(recording)
    assert notes == ()
    replay = ReplayApp(recording, settings)
    replay.transport.pause()
    async with replay.run_test(size=(160, 60)) as pilot:
        feed = replay.replay_feed
        assert feed is not None
        feed.seek(replay.transport.end_s)
        while not replay.frames.done:
            await pilot.pause(0.05)
        found: list[str] = []
        for live in seen:
            views, change = await replayed_views(replay, pilot, live.lines)
            found += [
                f"after line {live.lines}: {d}" for d in view_differences(live, views, change)
            ]
        assert not found, "\n".join(found[:20])
        header = replay.views.header if replay.views is not None else None
        assert header is not None and header.freshness.startswith("REPLAY paused")
        assert header.cache.startswith("recorded ") and recording.source in header.cache
        await pilot.press("q")


def check_report(path: Path, out: Path, concurrencies: set[int], kv_dtype: str = "fp8") -> None:
    """`slotop report` writes its Markdown, its PNGs and a CSV holding both configurations."""
    assert main(["report", str(path), "--out", str(out)]) == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"kv {kv_dtype}" in report and "kv auto" in report
    for png in ("timeline.png", "curve-1.png", "curve-2.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    with (out / "steps.csv").open(encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    columns = set(rows[0])
    configuration = next(c for c in columns if c.startswith("configuration"))
    concurrency = next(c for c in columns if c.startswith("concurrency"))
    steps = {(row[configuration], int(row[concurrency])) for row in rows}
    assert {c for _, c in steps} >= concurrencies
    assert len({name for name, _ in steps}) == 2
