"""The curve pane: the plot of the current configuration over the previous one, the numbers one
key away, repaints only when a point moves; and the feed opening configurations as dials apply."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from rich.text import Text
from textual.pilot import Pilot

from slotop.actions.experiment.model import Configuration, ConfigurationCurve, CurvePoint
from slotop.actions.probe_control import ProbeControl, load_shape_from_settings
from slotop.actions.replica.spec import Dials
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.records import EventKind, ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.replica import ReplicaClient
from slotop.config import Settings
from slotop.tui.app import SlotopApp
from slotop.tui.feed import Feed
from slotop.tui.messages import CurveUpdated, DialsApplied, TimelineEvent, TimelineNoted
from slotop.tui.panes.curve import CurvePane, draw_plot
from slotop.tui.views.load import CurveView
from tests.support.fake_probe import FakeProbe, probe_record
from tests.support.http_answers import Answer, HttpAnswers, Request, http_answers
from tests.support.paths import CAPTURES

pytestmark = pytest.mark.anyio


def _point(concurrency: int, ttft_s: float, itl_s: float, tokens: float) -> CurvePoint:
    return CurvePoint(
        concurrency=concurrency,
        ttft_s=ttft_s,
        itl_s=itl_s,
        requests=40,
        output_tokens_per_s=tokens,
        goodput_rps=None,
    )


FP8 = Configuration(2, (("--kv-cache-dtype", "fp8"),), 10.0, "#2 kv fp8")
AUTO = Configuration(1, (("--kv-cache-dtype", "auto"),), 0.0, "#1 kv auto")
CURRENT = ConfigurationCurve(
    FP8,
    (
        _point(1, 0.05, 0.010, 90.0),
        _point(2, 0.07, 0.012, 170.0),
        _point(4, 0.12, 0.018, 310.0),
        _point(8, 0.35, 0.030, 520.0),
        _point(16, 0.90, 0.060, 640.0),
    ),
)
PREVIOUS = ConfigurationCurve(
    AUTO,
    (_point(1, 0.06, 0.011, 85.0), _point(2, 0.08, 0.014, 160.0), _point(4, 0.74, 0.02, 280.0)),
)
BRAILLE = range(0x2800, 0x2900)
IDLE = (CAPTURES / "vllm-0.32-cpu-idle.txt").read_text(encoding="utf-8")


def _idle_replica(request: Request) -> Answer:
    """A replica without load, /metrics from a real capture; nothing else is needed here."""
    if request.path == "/metrics":
        return Answer(200, IDLE.encode())
    return Answer(404)


def _app() -> SlotopApp:
    return SlotopApp(Settings(), clock=lambda: 1000.0)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_the_plot_shows_both_configurations_and_c_shows_the_numbers(
    size: tuple[int, int],
) -> None:
    app = _app()
    async with app.run_test(size=size) as pilot:
        app.post_message(CurveUpdated(CURRENT, PREVIOUS))
        pane = app.query_one(CurvePane)
        await _wait_for(pilot, lambda: "#2 kv fp8" in str(pane.border_title))
        assert str(pane.border_title) == "Curve #2 kv fp8 vs [dim]#1 kv auto[/dim]"
        plot = pane.render()
        shown = plot.plain
        assert any(ord(ch) in BRAILLE for ch in shown)
        assert "TTFT p99 ms" in shown and "ITL p99 ms" in shown and "out tok/s" in shown
        # TTFT 0.9 s breaks 500 ms at 16, so the operating point is 8, marked under each panel
        assert shown.count("▲8") == 3
        assert "recommended concurrency 8 (one step below the" in shown  # cut at 50 wide
        # the previous configuration is drawn dimmer than the current one
        styles = {str(span.style) for span in plot.spans}
        assert {"bold cyan", "grey50", "red"} <= styles
        await pilot.press("c")
        await pilot.pause()
        table = pane.render().plain.splitlines()
        assert table[0].split() == ["conc", "TTFT", "p99", "ITL", "p99", "tok/s", "good/s", "n"]
        assert table[1].split() == ["<500", "ms", "<50.0", "ms"]
        assert table[5].split() == ["8", "350", "ms", "30.0", "ms", "520", "N/A", "40", "◀"]
        await pilot.press("c")
        await pilot.pause()
        assert "▲8" in pane.render().plain


async def test_the_plot_repaints_when_a_point_moves_and_not_otherwise() -> None:
    app = _app()
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(CurveUpdated(CURRENT, PREVIOUS))
        pane = app.query_one(CurvePane)
        frames = await _drawn(pilot, pane)
        app.post_message(CurveUpdated(CURRENT, PREVIOUS))  # equal curves
        app.post_message(TimelineNoted(TimelineEvent(999.0, "note", "something else")))
        await pilot.pause()
        assert pane.frames == frames
        moved = dataclasses.replace(CURRENT.points[-1], ttft_s=0.45, itl_s=0.04)
        app.post_message(
            CurveUpdated(dataclasses.replace(CURRENT, points=(*CURRENT.points[:-1], moved)))
        )
        await pilot.pause()
        assert pane.frames > frames
        assert "all steps pass up to 16" in pane.render().plain


class StepsProbe(FakeProbe):
    """A probe that hands over records and events its test puts in, as a running probe does."""

    def __init__(self) -> None:
        super().__init__(2, closed_loop=True)
        self.lock = threading.Lock()
        self.queued: list[ProbeRecord] = []
        self.load_events: list[ProbeEvent] = []

    def status(self) -> ProbeStatus | None:
        return ProbeStatus(0.0, 0, "closed", 2, None, 0, 0, 0, 0)

    def drain_records(self) -> list[ProbeRecord]:
        with self.lock:
            taken, self.queued = self.queued, []
        return taken

    def events(self) -> list[ProbeEvent]:
        with self.lock:
            return list(self.load_events)


async def _drawn(pilot: Pilot[int], pane: CurvePane) -> int:
    """Let the pane draw what it was given, however long a busy machine takes to get there
    (drawn, then a few more turns of the loop with no frame added): its frames then."""
    await _wait_for(pilot, lambda: pane.frames > 0)
    quiet, frames = 0, pane.frames
    while quiet < 3:
        await pilot.pause(0.02)
        quiet, frames = (quiet + 1, frames) if pane.frames == frames else (0, pane.frames)
    return frames


async def _wait_for(
    pilot: Pilot[int], condition: Callable[[], bool], timeout_s: float = 20.0
) -> None:
    """Let the app's loop run (messages handled) until `condition` holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the feed never got there"
        await pilot.pause(0.01)


@pytest.fixture
def idle_replica() -> Iterator[HttpAnswers]:
    with http_answers(_idle_replica) as server:
        yield server


async def test_dials_applied_open_a_configuration_and_its_records_leave_the_old_one(
    idle_replica: HttpAnswers,
) -> None:
    settings = Settings()
    probe = StepsProbe()
    control = ProbeControl(
        ProbeTarget(base_url=settings.replica.url),
        load_shape_from_settings(settings.load),
        allow_remote_load=False,
        start_probe=lambda *_: probe,
    )
    control.apply(control.plan_start(concurrency=2))

    def feed(post: Callable[[object], object]) -> Feed:
        client = ReplicaClient(idle_replica.url)
        monitor = ReplicaMonitor(client, interval_s=0.01, long_window_s=60.0)
        return Feed(
            monitor, post, probe=control, scrape_interval_s=0.05, refresh_s=0.01, clock=lambda: 0.0
        )

    app = SlotopApp(settings, feed_factory=feed, probe_control=control, clock=lambda: 0.0)
    async with app.run_test(size=(160, 50)) as pilot:

        def shows(label: str, concurrencies: list[int]) -> bool:
            inputs = app.inputs
            return (
                inputs.configuration is not None
                and inputs.configuration.label == label
                and [p.concurrency for p in inputs.curve] == concurrencies
            )

        app.post_message(DialsApplied(Dials("auto")))  # as found at start: #1 learns its dials
        await _wait_for(pilot, lambda: shows("#1 kv auto", []))  # before any record comes
        with probe.lock:
            probe.load_events.append(ProbeEvent(0.5, EventKind.STARTED, 0, "closed", 2))
            probe.queued += [probe_record(0, second, 0.1, (0.01,)) for second in (1, 2, 3)]
            # sent at 11, 12, 13: after the restart below was up, heard of only later
            probe.queued += [probe_record(0, second, 0.3, (0.01,)) for second in (11, 12, 13)]
        await _wait_for(pilot, lambda: shows("#1 kv auto", [2]))
        # all six in one point while the app does not know of the restart yet: TTFT p99 of
        # 0.1 0.1 0.1 0.3 0.3 0.3 is 0.3
        assert app.inputs.curve[0].ttft_s == pytest.approx(0.3)
        app.post_message(DialsApplied(Dials("fp8"), since_s=10.0))
        await pilot.pause()
        await _wait_for(pilot, lambda: shows("#2 kv fp8", [2]))
        await pilot.pause()
        assert app.inputs.curve[0].ttft_s == pytest.approx(0.3)
        previous = app.inputs.previous_curve
        assert previous is not None and previous.configuration.label == "#1 kv auto"
        assert [p.ttft_s for p in previous.points] == [pytest.approx(0.1)]
        assert (
            str(app.query_one(CurvePane).border_title) == "Curve #2 kv fp8 vs [dim]#1 kv auto[/dim]"
        )


LIGHT = (
    _point(1, 0.030, 0.008, 95.0),
    _point(2, 0.035, 0.009, 180.0),
    _point(4, 0.040, 0.012, 330.0),
)
LIGHT_BEFORE = (_point(1, 0.032, 0.009, 90.0), _point(2, 0.036, 0.010, 170.0))
PANEL = 14
"""A panel's columns in a 48-column plot (the pane at 160×50): (48 − 2 gaps of 2) // 3."""


def _light_plot(itl_target_s: float) -> Text:
    view = CurveView(
        points=LIGHT,
        ttft_target_s=0.5,
        itl_target_s=itl_target_s,
        recommended=4,
        note="",
        header="",
        label="#2 kv fp8",
        previous=LIGHT_BEFORE,
        previous_label="#1 kv auto",
    )
    plot = draw_plot(view, 48, 11)  # titles, the targets' words, 7 plot rows, ticks, note
    assert plot is not None
    return plot


def _panel(plot: Text, index: int, width: int = PANEL) -> list[str]:
    start = index * (width + 2)
    return [row[start : start + width] for row in plot.plain.split("\n")]


def _dotted(rows: list[str]) -> list[int]:
    """The rows holding a braille dot."""
    return [i for i, row in enumerate(rows) if any(0x2800 < ord(c) < 0x2900 for c in row)]


def test_a_light_load_fills_each_panel_and_names_a_target_far_above_it() -> None:
    plot = _light_plot(itl_target_s=0.050)
    ttft, itl, tokens = (_panel(plot, i) for i in range(3))
    # TTFT up to 40 ms, its target 500 ms: over twice the data, so the axis tops at
    # 40 × 1.15 = 46 ms and the words over the panel say where the target is
    assert ttft[1].rstrip() == "target 500 ↑"  # "target 500 ms above" is 19 columns of 14
    assert ttft[2].startswith("  46┤") and ttft[8].startswith("   0┤")
    # 7 rows of 4 dots: 40 ms at dot row round(6/46 × 27) = 4, the second plot row; 30 and
    # 32 ms (the previous configuration) at rounds of 16/46 × 27 and 14/46 × 27: 9 and 8, the third
    assert _dotted(ttft[2:9]) == [1, 2]
    # ITL up to 12 ms, its target 50 ms: named too; the top 12 × 1.15 = 13.8, shown as 14
    assert itl[1].rstrip() == "target 50 ↑" and itl[2].startswith("  14┤")
    assert tokens[1].strip() == ""  # no target
    red = [plot.plain[s.start : s.end] for s in plot.spans if str(s.style) == "red"]
    assert red == ["target 500 ↑  ", "target 50 ↑   "]  # no dashed line: both are off the plot
    grey = [plot.plain[s.start : s.end] for s in plot.spans if str(s.style) == "grey50"]
    assert grey and all(0x2800 < ord(c) < 0x2900 for cells in grey for c in cells)
    assert plot.plain.split("\n")[9].count("▲4") == 3  # the operating point under each panel


def test_a_target_within_twice_the_data_sets_the_top_and_is_drawn_dashed() -> None:
    plot = _light_plot(itl_target_s=0.020)
    itl = _panel(plot, 1)
    # 20 ms over at most 12: within a factor 2, so the top is 20 × 1.15 = 23 and the target's
    # dashes lie on dot row round(3/23 × 27) = 4, the second plot row, labelled 20
    assert itl[1].strip() == ""
    assert itl[2].startswith("  23┤") and itl[3].startswith("  20┤")
    assert "⠉ ⠉ ⠉" in itl[3]


async def test_the_pane_at_160_by_50_plots_a_light_load_above_its_bottom_row() -> None:
    app = _app()
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(
            CurveUpdated(ConfigurationCurve(FP8, LIGHT), ConfigurationCurve(AUTO, LIGHT_BEFORE))
        )
        pane = app.query_one(CurvePane)
        await _drawn(pilot, pane)
        # 50 columns: panels of (50 − 4) // 3 = 15; 9 rows: titles, the targets' words, 5 plot
        # rows, ticks, note
        assert pane.content_size == (50, 9)
        ttft = _panel(pane.render(), 0, 15)
        assert ttft[1].rstrip() == "target 500 ↑"
        # 5 rows of 4 dots under a top of 46 ms: 40 ms at dot row round(6/46 × 19) = 2, the
        # first plot row; 30 ms at round(16/46 × 19) = 7, the second
        assert _dotted(ttft[2:7]) == [0, 1]
