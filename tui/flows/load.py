"""The l, +/- keys: turn the load probe on (asking the first time) or off, and step its concurrency.

Plans are made on the UI thread through the probe's controller, so its caps and loopback guard
refuse before anything is sent; applying runs in a worker and ends as a timeline event.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from slotop.actions.probe_control import LoadPlan, ProbeControl
from slotop.errors import SlotopError
from slotop.tui.flows.host import NO_PROBE, FlowHost
from slotop.tui.messages import TimelineEvent, TimelineNoted
from slotop.tui.screens.confirm import ConfirmScreen


class LoadFlow:
    """What the load keys do, on behalf of the app."""

    def __init__(self, host: FlowHost, start_at: int | None = None) -> None:
        self._host = host
        self._start_at = start_at
        self._confirmed = start_at is not None
        self.concurrency = (
            start_at if start_at is not None else host.settings.load.initial_concurrency
        )

    def start(self) -> None:
        """Turn the load on at the concurrency the session started with, if it named one."""
        start_at = self._start_at
        if start_at is not None and self._host.probe_control is not None:
            self._plan_and_apply(lambda c: c.plan_start(concurrency=start_at))

    def toggle(self) -> None:
        """Stop the load, or start it (asking first, once a session)."""
        host = self._host
        control = host.probe_control
        if control is not None and control.probe is not None:
            self._plan_and_apply(lambda c: c.plan_stop())
            return
        if self._confirmed:
            self._plan_and_apply(lambda c: c.plan_start(concurrency=self.concurrency))
            return
        if control is None:
            host.notify(NO_PROBE, severity="warning")
            return
        try:
            plan = control.plan_start(concurrency=self.concurrency)
        except SlotopError as exc:
            host.notify(str(exc), title="refused", severity="warning")
            return
        cap = host.settings.load.max_concurrency
        summary = f"{plan.summary}\n\nTarget: {plan.url}\nCap: at most {cap} in flight."

        def answered(yes: bool | None) -> None:
            if yes:
                self._confirmed = True
                self._plan_and_apply(lambda c: c.plan_start(concurrency=self.concurrency))
            host.render_views()

        host.ask(ConfirmScreen("Turn the load probe on?", summary), answered)

    def step(self, delta: int) -> None:
        """Move the running load's concurrency by `delta`, within 0 and the cap."""
        host = self._host
        control = host.probe_control
        if control is None or control.probe is None:
            host.notify("the load is off; press l to turn it on", severity="warning")
            return
        cap = host.settings.load.max_concurrency
        target = max(0, min(self.concurrency + delta, cap))
        if target == self.concurrency:
            host.notify(f"concurrency stays at {target} (0..{cap})")
            return
        self.concurrency = target
        self._plan_and_apply(lambda c: c.plan_concurrency(target))

    def _plan_and_apply(self, make_plan: Callable[[ProbeControl], LoadPlan]) -> None:
        host = self._host
        control = host.probe_control
        if control is None:
            host.notify(NO_PROBE, severity="warning")
            return
        try:
            plan = make_plan(control)
        except SlotopError as exc:
            host.notify(str(exc), title="refused", severity="warning")
            return
        host.run_in_thread(
            partial(self._apply_in_thread, control, plan), name=f"load {plan.kind}", group="load"
        )

    def _apply_in_thread(self, control: ProbeControl, plan: LoadPlan) -> None:
        event = control.apply(plan)
        self._host.post_message(TimelineNoted(TimelineEvent(event.at_s, "load", plan.summary)))
