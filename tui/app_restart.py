"""The k / n / b keys: pick a dial, confirm the restart plan, apply it in a worker.

A mixin of SlotopApp, kept apart so the app stays a sitting's read. Each phase of the restart
goes on the timeline as it happens; the outcome (applied, rolled back, down) is told in words.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from textual.message import Message

from slotop.actions.probe_control import ProbeHandle
from slotop.actions.replica.spec import Dials, dial_words
from slotop.actions.restart.apply import RestartEvent, RestartPlan, RestartResult
from slotop.actions.restart.quality_check import (
    configured_prompts,
    quality_applies,
    quality_baseline,
    quality_check,
)
from slotop.errors import SlotopError
from slotop.tui.messages import TimelineEvent, TimelineNoted
from slotop.tui.restarting import (
    DIAL_TITLES,
    KV_DTYPES,
    RestartAccess,
    apply_in_thread,
    plan_dial_change,
)
from slotop.tui.screens.confirm import ConfirmScreen
from slotop.tui.screens.dial import DialScreen

if TYPE_CHECKING:
    from slotop.tui.app import SlotopApp


class DialsApplied(Message):
    """The replica runs with these dials now (after a restart, or as found at start)."""

    def __init__(self, dials: Dials) -> None:
        super().__init__()
        self.dials = dials


class RestartFlow:
    """What the dial keys do, on behalf of the app."""

    def __init__(self, app: SlotopApp) -> None:
        self.app = app

    def dial(self, name: str) -> None:
        """Ask for a dial's new value, then plan and confirm the restart."""
        app = self.app
        access = app.restart_access() if app.restart_access is not None else None
        if not isinstance(access, RestartAccess):
            reason = access or "this session has no replica it may restart"
            app.notify(f"unavailable: {reason}", severity="warning")
            return
        current = dial_words(getattr(access.dials, name))
        choices = KV_DTYPES if name == "kv_cache_dtype" else ()

        def chosen(text: str | None) -> None:
            if text is None:
                app.render_views()
                return
            self._plan(access, name, text)

        app.push_screen(DialScreen(DIAL_TITLES[name], current, choices), chosen)

    def _plan(self, access: RestartAccess, name: str, text: str) -> None:
        app = self.app
        snapshot = app.inputs.poll.value if app.inputs.poll is not None else None
        probe = app.probe_control.probe if app.probe_control is not None else None
        try:
            plan = plan_dial_change(
                access,
                name,
                text,
                snapshot.kv if snapshot is not None else None,
                probe.status() if probe is not None else None,
            )
        except SlotopError as exc:
            app.notify(str(exc), title="refused", severity="warning")
            app.render_views()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._apply(plan, access)
            app.render_views()

        summary = "\n".join(plan.lines())
        if quality_applies(plan.before, plan.after):
            summary += "\n" + (
                "Quality: the same greedy prompts run before and after, and the outputs are "
                "compared (on the timeline)."
                if probe is None
                else "Quality: no check while the probe's load runs (it would batch with the "
                "greedy prompts); turn the load off (l) first to get one."
            )
        app.push_screen(ConfirmScreen("Restart the replica?", summary), answered)

    def _apply(self, plan: RestartPlan, access: RestartAccess) -> None:
        app = self.app
        probe = app.probe_control.probe if app.probe_control is not None else None
        changes = ", ".join(f"{n} {old} → {new}" for n, old, new in plan.changes)
        app.note("restart", f"restart planned: {changes}")
        app.run_worker(
            partial(self._in_thread, plan, access, probe),
            name="restart",
            group="restart",
            thread=True,
            exclusive=True,
            exit_on_error=False,
        )

    def _in_thread(
        self, plan: RestartPlan, access: RestartAccess, probe: ProbeHandle | None
    ) -> None:
        app = self.app

        def on_event(event: RestartEvent) -> None:
            app.post_message(
                TimelineNoted(
                    TimelineEvent(event.at_s, "restart", f"{event.phase}: {event.detail}")
                )
            )

        spec = access.spec
        baseline = None
        if probe is None and quality_applies(plan.before, plan.after):
            prompts = configured_prompts(app.settings.launch.quality_prompts_file)
            baseline = quality_baseline(spec.url, spec.api_key, prompts)
        result: RestartResult = apply_in_thread(plan, access, probe, on_event)
        kind = "restart" if result.applied else "error"
        app.post_message(TimelineNoted(TimelineEvent(app.clock(), kind, result.lines()[0])))
        app.forget_identity()
        if baseline is not None:
            check = quality_check(spec.url, spec.api_key, baseline, result.outcome)
            for text in check.text().splitlines()[:4]:
                app.post_message(TimelineNoted(TimelineEvent(app.clock(), "quality", text.strip())))
        if result.dials is not None:
            app.post_message(DialsApplied(result.dials))
