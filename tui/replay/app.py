"""The dashboard driven by a recording: the same app and panes, a replay for its feed.

`ReplayApp` is `SlotopApp` with a `ReplayFeed` where the live feed stands and the transport as
its clock. It hands each message a move brings to the handler the live message reaches (every
pane's view is then built as live), renders once per move, and after a jump starts from an empty
dashboard. Its keys play, pause, step, seek and change the speed; the keys that would change a
replica (the probe, load steps, the sweep, the tune, the dial restarts) say they are off.
"""

from __future__ import annotations

import dataclasses
import time
from typing import ClassVar

from textual.actions import SkipAction
from textual.binding import BindingType

from slotop import fmt
from slotop.actions.session.reader import Recording
from slotop.config import Settings
from slotop.tui.app import SlotopApp, key_bindings
from slotop.tui.keys import REPLAY_OFF, KeyAction, replay_key_actions
from slotop.tui.messages import SnapshotCollected
from slotop.tui.replay.clock import ReplayTransport, parse_position
from slotop.tui.replay.feed import BeforeAfterReplayed, ReplayFeed, ReplayMoved
from slotop.tui.replay.frames import ReplayFrames
from slotop.tui.replay.goto import GoToScreen
from slotop.tui.sweeping import SweepUpdated
from slotop.tui.views.inputs import Inputs, ReplayHeader


class ReplayApp(SlotopApp):
    """The dashboard of a recorded session."""

    KEYS: ClassVar[tuple[KeyAction, ...]] = replay_key_actions()
    BINDINGS: ClassVar[list[BindingType]] = key_bindings(KEYS)

    def __init__(
        self,
        recording: Recording,
        settings: Settings,
        *,
        speed: float = 1.0,
        at_s: float | None = None,
        notes: tuple[str, ...] = (),
    ) -> None:
        self.frames = ReplayFrames(recording, settings)
        for note in (*recording.notes, *notes):
            self.frames.note(note)
        start_s, end_s = recording.header.started_at_s, recording.last_t_s
        self.transport = ReplayTransport(start_s, end_s, at_s=at_s, speed=speed)
        self.replay_feed: ReplayFeed | None = None

        def feed_factory(post: object) -> ReplayFeed:
            self.replay_feed = ReplayFeed(self.frames, self.transport, post)  # type: ignore[arg-type]
            return self.replay_feed

        super().__init__(
            settings,
            feed_factory=feed_factory,
            clock=self.transport.now,
            simulated=recording.header.command == "demo",
        )
        self._header = ReplayHeader(
            source=recording.source,
            recorded_at_s=start_s,
            start_s=start_s,
            end_s=end_s,
            speed=speed,
            playing=True,
            reading=True,
        )
        self.inputs = dataclasses.replace(self.inputs, started_s=start_s, replay=self._header)
        self._render_held = False
        self.frames_shown = 0
        """How many of the frames the dashboard shows now (the last move's)."""
        self._restart_shown = 0
        self._restart_hidden = 0
        self._problem = ""

    # the feed's moves, downward

    def render_views(self) -> None:
        """Build the panes, unless a move is being handed over (then once, at its end)."""
        if not self._render_held:
            super().render_views()

    def on_replay_moved(self, message: ReplayMoved) -> None:
        self._render_held = True
        try:
            if message.reset:
                self._reset()
            for inner in message.messages:
                getattr(self, inner.handler_name)(inner)
        finally:
            self._render_held = False
        transport = self.transport
        header = dataclasses.replace(
            self._header,
            speed=transport.speed,
            playing=transport.playing,
            reading=message.reading,
        )
        self.frames_shown = message.count
        self.update_inputs(now_s=message.at_s, last_poll_at_s=message.poll_at_s, replay=header)
        if message.problem and message.problem != self._problem:
            self._problem = message.problem
            self.notify(message.problem, title="the replay stops here", severity="error")

    def _reset(self) -> None:
        """An empty dashboard, keeping the operator's display choices (window, curve as numbers)."""
        old = self.inputs
        self.inputs = Inputs(
            settings=self.settings,
            now_s=old.now_s,
            started_s=old.started_s,
            simulated=old.simulated,
            short_window=old.short_window,
            curve_table=old.curve_table,
            replay=old.replay,
        )

    def on_snapshot_collected(self, message: SnapshotCollected) -> None:
        message.prevent_default()  # the live handler would measure a restart the replay rebuilt
        self.update_inputs(poll=message.result, trend=message.trend)

    def on_sweep_updated(self, message: SweepUpdated) -> None:
        message.prevent_default()  # the live flow would note and hold records again
        self.update_inputs(
            sweep_progress=message.progress if message.running else None,
            sweep_result=message.result,
            sweeping=message.running,
        )

    def on_before_after_replayed(self, message: BeforeAfterReplayed) -> None:
        shown = message.shown
        self._restart_shown = shown.restart
        hidden = shown.restart == self._restart_hidden
        self.update_inputs(before_after=None if hidden else shown.state)

    # the transport, upward

    def _moved(self, *, jump: bool = False) -> None:
        if self.replay_feed is not None:
            self.replay_feed.moved(jump=jump)

    def action_toggle_play(self) -> None:
        self.transport.toggle()
        self._moved()

    def action_toggle_pause(self) -> None:
        self.action_toggle_play()

    def _not_behind_a_modal(self) -> None:
        """The arrows, home and end bind above every pane: in a prompt they move its cursor."""
        if len(self.screen_stack) > 1:
            raise SkipAction

    def action_step_poll(self, polls: int) -> None:
        self._not_behind_a_modal()
        if self.replay_feed is not None:
            self.replay_feed.step(polls)

    def action_jump_mark(self, direction: int) -> None:
        if self.replay_feed is not None and not self.replay_feed.mark(direction):
            where = "after" if direction > 0 else "before"
            self.notify(f"no timeline entry or action {where} this point")

    def action_speed(self, steps: int) -> None:
        self.transport.faster(steps)
        self._moved()

    def action_seek_edge(self, edge: str) -> None:
        self._not_behind_a_modal()
        if self.replay_feed is not None:
            transport = self.transport
            self.replay_feed.seek(transport.start_s if edge == "start" else transport.end_s)

    def action_go_to(self) -> None:
        transport = self.transport
        span = (
            f"the recording runs {time.strftime('%H:%M:%S', time.localtime(transport.start_s))}"
            f" to {time.strftime('%H:%M:%S', time.localtime(transport.end_s))} "
            f"({fmt.clock_span(transport.end_s - transport.start_s)})"
        )

        def answered(text: str | None) -> None:
            if text is not None and self.replay_feed is not None:
                try:
                    at = parse_position(text, transport.start_s, transport.end_s)
                except ValueError as exc:
                    self.notify(str(exc), title="no such time", severity="warning")
                else:
                    self.replay_feed.seek(at)
            self.render_views()

        self.push_screen(GoToScreen(span), answered)

    def action_dismiss_change(self) -> None:
        self._restart_hidden = self._restart_shown
        self.update_inputs(before_after=None)

    # what a replay does not do

    def _off(self) -> None:
        self.notify(f"unavailable in a {REPLAY_OFF}", severity="warning")

    def action_toggle_probe(self) -> None:
        self._off()

    def action_step(self, delta: int) -> None:
        self._off()

    def action_sweep(self) -> None:
        self._off()

    def action_dial(self, name: str) -> None:
        self._off()

    def action_tune(self) -> None:
        self._off()
