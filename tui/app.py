"""The slotop app: composes the panes, routes data down to them, and turns keys into actions.

Data arrives as messages from the feed's threads; the app keeps the newest of each in one frozen
`Inputs`, builds every pane's view from it, and assigns the views inside one batch update. The
load, sweep and restart keys go to flows (`tui/flows/`) that see the app only as a `FlowHost`:
they plan on the UI thread, confirm in a modal, and apply in a thread worker whose errors all
reach `on_worker_state_changed`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import Theme
from textual.worker import Worker, WorkerState

from slotop.actions.experiment.model import dial_pairs
from slotop.actions.probe_control import ProbeControl
from slotop.actions.session.recorder import SessionRecorder
from slotop.config import Settings, secret_values
from slotop.errors import SlotopError
from slotop.redact import Scrubber
from slotop.tui.driver import slotop_driver
from slotop.tui.feed import Source
from slotop.tui.flows.load import LoadFlow
from slotop.tui.flows.restart import (
    BeforeAfterBuilt,
    QualityChecked,
    RestartEnded,
    RestartFlow,
)
from slotop.tui.flows.sweep import SweepFlow, WatchFactory
from slotop.tui.flows.tune import TuneFlow, TuneUpdated
from slotop.tui.kept import Body, KeptScreen, Row, Stack
from slotop.tui.keys import KEY_ACTIONS, KeyAction, key_words
from slotop.tui.messages import (
    CurveUpdated,
    DialsApplied,
    GpuCollected,
    ProbeRecordsArrived,
    ProbeUpdated,
    SnapshotCollected,
    TimelineEvent,
    TimelineNoted,
)
from slotop.tui.panes.base import Pane
from slotop.tui.panes.change import ChangePane
from slotop.tui.panes.checklist import DiagnosisPane, LitmusPane
from slotop.tui.panes.curve import CurvePane
from slotop.tui.panes.events import EventsPane
from slotop.tui.panes.gpu import GpuPane
from slotop.tui.panes.header import HeaderPane
from slotop.tui.panes.kv import KvPane, ThroughputPane
from slotop.tui.panes.latency import LatencyPane
from slotop.tui.panes.probe import ProbePane
from slotop.tui.panes.slo import SloPane
from slotop.tui.restarting import AccessFinder
from slotop.tui.screens.help import HelpScreen
from slotop.tui.sweeping import SweepUpdated
from slotop.tui.textual_internals import PrunedFooter
from slotop.tui.views.change import change_view
from slotop.tui.views.dashboard import Views, build_views
from slotop.tui.views.header import header_view
from slotop.tui.views.inputs import EVENTS_KEPT, Inputs

FeedFactory = Callable[[Callable[[Message], object]], Source]


def key_bindings(keys: Iterable[KeyAction]) -> list[BindingType]:
    """Bindings for a key table; an unavailable key's label says n/a."""
    return [
        Binding(
            k.key,
            k.action,
            k.label if not k.unavailable else f"{k.label} n/a",
            show=k.show,
            tooltip=k.description,
            priority=k.priority,
        )
        for k in keys
    ]


AnswerT = TypeVar("AnswerT")


class _ThemeFound(NamedTuple):
    """The theme last looked up, by its name."""

    name: str
    theme: Theme


class SlotopApp(App[int]):
    """The dashboard of one replica."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "slotop"
    # Side by side only where each of three panes in a row keeps the 48 columns the SLO table needs.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (156, "-wide")]  # noqa: RUF012
    KEYS: ClassVar[tuple[KeyAction, ...]] = KEY_ACTIONS
    """The key table the bindings, the help and the command palette are made from."""
    BINDINGS: ClassVar[list[BindingType]] = key_bindings(KEY_ACTIONS)
    _theme_found: _ThemeFound | None = None

    def __init__(
        self,
        settings: Settings,
        *,
        feed_factory: FeedFactory | None = None,
        probe_control: ProbeControl | None = None,
        clock: Callable[[], float] = time.time,
        simulated: bool = False,
        start_probe_at: int | None = None,
        sweep_watch: WatchFactory | None = None,
        restart_access: AccessFinder | None = None,
        recorder: SessionRecorder | None = None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        self.recorder = recorder
        self.settings = settings
        self._warnings = warnings
        self._scrub = Scrubber(secret_values(settings))
        self._feed_factory = feed_factory
        self._feed: Source | None = None
        self.probe_control = probe_control
        self.clock = clock
        now = clock()
        self.inputs = Inputs(settings=settings, now_s=now, started_s=now, simulated=simulated)
        self.views: Views | None = None
        self._stopped = False
        self._load = LoadFlow(self, start_probe_at)
        self._sweep = SweepFlow(self, sweep_watch)
        self._restarts = RestartFlow(self, restart_access)
        self._tune = TuneFlow(self, restart_access)
        self._panes: dict[type[Pane], Pane] = {}

    @property
    def current_theme(self) -> Theme:
        """The theme in use, found once per theme name: the compositor asks for it on every line
        it draws, and Textual's own look-up copies the table of every theme to answer."""
        name = self.theme
        known = self._theme_found
        if known is None or known.name != name:
            known = self._theme_found = _ThemeFound(name, super().current_theme)
        return known.theme

    def get_driver_class(self) -> type[Driver]:
        return slotop_driver(super().get_driver_class())

    def get_default_screen(self) -> Screen[Any]:
        return KeptScreen(id="_default")

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast in plain words (slotop's messages name settings as `[section] key`, which
        markup would take for a tag and drop), never showing a secret of the settings."""
        super().notify(
            self._scrub(message), title=title, severity=severity, timeout=timeout, markup=markup
        )

    def compose(self) -> ComposeResult:
        yield HeaderPane(id="header")
        yield DiagnosisPane(id="diagnosis")
        with Body(id="body"):
            yield ChangePane(id="change")  # first: after a restart, its headline is the news
            with Row(id="row-now", classes="row"):
                yield SloPane(id="slo")
                with Stack(classes="stack"):
                    yield ProbePane(id="probe")
                    yield ThroughputPane(id="throughput")
                yield KvPane(id="kv")
            with Row(id="row-trend", classes="row"):
                yield LatencyPane(id="latency")
                yield CurvePane(id="curve")
            with Row(id="row-checks", classes="row"):
                yield LitmusPane(id="litmus")
                yield GpuPane(id="gpu")
            yield EventsPane(id="events")
        yield PrunedFooter()

    def on_mount(self) -> None:
        self._panes = {type(pane): pane for pane in self.query(Pane)}
        if self._feed_factory is not None:
            self._feed = self._feed_factory(self.post_message)
            self._feed.start()
        self.set_interval(self.settings.tui.refresh_s, self._tick)
        self._restarts.start()
        self.render_views()
        self._load.start()
        if self.recorder is not None:
            self.recorder.on_failure = self._recording_failed
            self.recorder.on_note = partial(self.note, "session")
            self.note("session", self.recorder.where())
        for warning in self._warnings:
            self.note("warn", warning)

    # data, downward

    def update_inputs(self, **changes: object) -> None:
        """Replace some of the inputs and redraw."""
        self.inputs = dataclasses.replace(self.inputs, **changes)  # type: ignore[arg-type]
        self.render_views()

    def _tick(self) -> None:
        """Once a second: only the header shows time (uptime, how long without an answer)."""
        self.inputs = dataclasses.replace(self.inputs, now_s=self.clock())
        if not self._showing() or len(self.screen_stack) != 1:
            return
        header = self._panes[HeaderPane]
        assert isinstance(header, HeaderPane)
        header.view = header_view(self.inputs)

    def _showing(self) -> bool:
        """Whether the panes are there to draw into: not before mount, nor once the app closes.

        Closing, Textual marks the app not running, takes the screens down, and then handles the
        messages still queued (a snapshot the feed posted a moment before) with them gone.
        """
        return self.is_running and not self._stopped and bool(self._panes)

    def render_views(self) -> None:
        """Build every view and hand each to its pane; equal views repaint nothing."""
        panes = self._panes
        if not self._showing():
            return
        if self.inputs.paused:
            panes[HeaderPane].view = header_view(self.inputs)
            return
        if len(self.screen_stack) > 1:
            return  # behind a modal: catch up when it closes
        views = build_views(self.inputs)
        self.views = views
        with self.batch_update():
            panes[HeaderPane].view = views.header
            panes[DiagnosisPane].view = views.diagnosis
            panes[SloPane].view = views.slo
            panes[LatencyPane].view = views.latency
            panes[KvPane].view = views.kv
            panes[ThroughputPane].view = views.throughput
            panes[GpuPane].view = views.gpu
            panes[ProbePane].view = views.probe
            panes[CurvePane].view = views.curve
            panes[LitmusPane].view = views.litmus
            panes[EventsPane].view = views.events
            panes[ChangePane].view = change_view(self.inputs.before_after)

    def on_snapshot_collected(self, message: SnapshotCollected) -> None:
        self.update_inputs(
            poll=message.result,
            trend=message.trend,
            last_poll_at_s=self.clock(),
            now_s=self.clock(),
        )
        self._restarts.refresh()  # a before/after may wait for the replica's numbers

    def on_probe_records_arrived(self, message: ProbeRecordsArrived) -> None:
        self._restarts.records_arrived(message)

    def on_restart_ended(self, message: RestartEnded) -> None:
        self._restarts.ended(message)

    def on_quality_checked(self, message: QualityChecked) -> None:
        self._restarts.quality_checked(message)

    def on_before_after_built(self, message: BeforeAfterBuilt) -> None:
        self._restarts.built(message)

    def on_gpu_collected(self, message: GpuCollected) -> None:
        self.update_inputs(gpu=message.gpu)

    def on_probe_updated(self, message: ProbeUpdated) -> None:
        self.update_inputs(probe=message.view)

    def on_curve_updated(self, message: CurveUpdated) -> None:
        current = message.current
        self.update_inputs(
            curve=current.points if current is not None else (),
            configuration=current.configuration if current is not None else None,
            previous_curve=message.previous,
        )

    def on_dials_applied(self, message: DialsApplied) -> None:
        dials = message.dials
        now = self.clock()
        since = message.since_s if message.since_s is not None else now
        if self.recorder is not None:
            self.recorder.action("dials", {"dials": dials.to_json(), "since_s": since}, at_s=now)
        if self._feed is not None:
            self._feed.open_configuration(dial_pairs(dials), since)
        self.update_inputs(limits=(dials.max_num_seqs, dials.max_num_batched_tokens))

    def on_timeline_noted(self, message: TimelineNoted) -> None:
        event = message.event
        if self._scrub:  # words from outside (a replica's log, an error) may echo a secret
            event = dataclasses.replace(event, text=self._scrub(event.text))
        if self.recorder is not None:
            self.recorder.event(event.kind, event.text, at_s=event.at_s)
        self.update_inputs(events=(*self.inputs.events, event)[-EVENTS_KEPT:])

    def note(self, kind: str, text: str) -> None:
        """Put an entry on the timeline."""
        self.post_message(TimelineNoted(TimelineEvent(self.clock(), kind, text)))

    def _recording_failed(self, why: str) -> None:
        """The recorder stopped (a full disk, say): say so on the timeline; the session goes on."""
        self.note("session", why)

    # actions, upward: the means flows use (FlowHost), then the keys

    def ask(self, screen: Screen[AnswerT], answered: Callable[[AnswerT | None], None]) -> None:
        """Show a modal and call `answered` with what it returns."""
        self.push_screen(screen, answered)

    def run_in_thread(
        self, work: Callable[[], object], *, name: str, group: str, exclusive: bool = False
    ) -> None:
        """Run `work` in a thread worker; a failure reaches `on_worker_state_changed`."""
        self.run_worker(
            work, name=name, group=group, thread=True, exclusive=exclusive, exit_on_error=False
        )

    def hold_records(self, held: bool) -> None:
        """Make the feed leave the probe's records alone (a sweep drains them itself), or not."""
        if self._feed is not None:
            self._feed.hold_records(held)

    def forget_identity(self) -> None:
        """Ask the replica who it is again on the next poll (after a restart)."""
        if self._feed is not None:
            self._feed.forget_identity()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place every worker's failure is reported."""
        if event.state is WorkerState.ERROR and event.worker.group == "sweep":
            self._sweep.failed()
        if event.state is WorkerState.ERROR and event.worker.group == "tune":
            self._tune.failed()
        if event.state is WorkerState.ERROR:
            error = event.worker.error
            text = str(error) if isinstance(error, SlotopError) else repr(error)
            self.notify(text, title=f"{event.worker.name} failed", severity="error")
            self.note("error", f"{event.worker.name} failed: {text}")

    def on_sweep_updated(self, message: SweepUpdated) -> None:
        self._sweep.updated(message)

    def on_tune_updated(self, message: TuneUpdated) -> None:
        self._tune.updated(message)

    def action_toggle_probe(self) -> None:
        if not self._tuning():
            self._load.toggle()

    def action_step(self, delta: int) -> None:
        if not self._tuning():
            self._load.step(delta)

    def _tuning(self) -> bool:
        """Whether a tune runs (it drives the probe and restarts the replica), said if so."""
        if self._tune.running:
            self.notify("a tune is running: t stops it", severity="warning")
        return self._tune.running

    def action_sweep(self) -> None:
        if not self._tuning():
            self._sweep.toggle()

    def action_tune(self) -> None:
        self._tune.toggle()

    def action_dial(self, name: str) -> None:
        if not self._tuning():
            self._restarts.dial(name)

    def action_cycle_window(self) -> None:
        self.update_inputs(short_window=not self.inputs.short_window)

    def action_toggle_curve(self) -> None:
        self.update_inputs(curve_table=not self.inputs.curve_table)

    def action_dismiss_change(self) -> None:
        self._restarts.dismiss()

    def action_toggle_pause(self) -> None:
        self.update_inputs(paused=not self.inputs.paused)

    def action_help(self) -> None:
        keys = tuple(
            (
                key_words(k.key),
                k.description,
                f"unavailable: {k.unavailable}" if k.unavailable else "",
            )
            for k in self.KEYS
        )
        self.push_screen(HelpScreen(keys), lambda _: self.render_views())

    def action_quit_slotop(self) -> None:
        if self._tune.running:  # leaving now could cut a restart in half
            self._tune.stop()
            self.notify(
                "the tune is stopping and putting the replica back; q again once it has ended",
                severity="warning",
            )
            return
        self.shutdown()
        self.exit(0)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for k in self.KEYS:
            words = k.description + (f" (unavailable: {k.unavailable})" if k.unavailable else "")
            yield SystemCommand(
                f"{k.label} [{key_words(k.key)}]", words, partial(self.run_action, k.action)
            )

    def shutdown(self) -> None:
        """Stop the feed and the probe; safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        self._sweep.stop()
        self._tune.stop()
        if self._feed is not None:
            self._feed.stop()
        elif self.probe_control is not None and self.probe_control.probe is not None:
            self.probe_control.probe.stop()

    def on_unmount(self) -> None:
        self._panes = {}
        self.shutdown()
