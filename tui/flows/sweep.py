"""The s key: plan a concurrency sweep, confirm it, run it in a worker; s again stops it.

The sweep drives the probe through the same controller as the load keys, so the caps and the
loopback guard hold; while it runs, the feed leaves the probe's records to it. The sweep is
recorded as `slotop sweep` records it (a `sweep_step` action per step, `sweep_result` at its end),
with the plan it started with (`sweep_started`) and each update the dashboard showed
(`sweep_progress`, `sweep_failed`), so a replay shows what the dashboard showed.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from functools import partial

from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.codec import sweep_to_json
from slotop.actions.sweep.plan import SweepSpec, plan_words, spec_from_settings
from slotop.actions.sweep.runner import ReplicaWatch, SweepResult
from slotop.errors import SlotopError
from slotop.tui.flows.host import NO_PROBE, FlowHost
from slotop.tui.screens.confirm import ConfirmScreen
from slotop.tui.sweeping import SweepUpdated, run_sweep

WatchFactory = Callable[[], ReplicaWatch | None]


class SweepFlow:
    """What the sweep key does, on behalf of the app, and how a sweep's end is shown."""

    def __init__(self, host: FlowHost, watch: WatchFactory | None = None) -> None:
        self._host = host
        self._watch = watch
        self._cancel: threading.Event | None = None
        self._recorded_steps = 0

    def toggle(self) -> None:
        """Stop the running sweep, or plan one and ask before it starts."""
        host = self._host
        control = host.probe_control
        if self._cancel is not None:
            self._cancel.set()
            host.notify("stopping the sweep: the load stops with it")
            return
        if control is None:
            host.notify(NO_PROBE, severity="warning")
            return
        load_on = control.probe is not None
        try:
            spec = spec_from_settings(host.settings)
            if load_on:
                control.plan_stop()
            else:
                control.plan_start(concurrency=spec.plan[0])  # the loopback guard, before asking
        except SlotopError as exc:
            host.notify(str(exc), title="refused", severity="warning")
            return
        words = plan_words(spec, control.url, spec.plan)
        summary = f"{words}\n\nCap: at most {max(spec.plan)} in flight. s again stops it."
        if load_on:
            summary += "\nYour load is stopped first; the sweep drives the probe itself."

        def answered(yes: bool | None) -> None:
            if yes:
                self._start(control, spec, stop_first=load_on)
            host.render_views()

        host.ask(ConfirmScreen("Run a concurrency sweep?", summary), answered)

    def _start(self, control: ProbeControl, spec: SweepSpec, *, stop_first: bool) -> None:
        host = self._host
        cancel = threading.Event()
        self._cancel = cancel
        host.hold_records(True)
        watch = self._watch() if self._watch is not None else None
        host.note("sweep", f"sweep started: concurrency {', '.join(map(str, spec.plan))}")
        if host.recorder is not None:
            self._recorded_steps = 0
            started = SweepResult(control.url, host.clock(), spec)
            host.recorder.action("sweep_started", {"sweep": sweep_to_json(started)})
        host.run_in_thread(
            partial(run_sweep, control, watch, spec, cancel, host.post_message, stop_first),
            name="sweep",
            group="sweep",
        )

    def updated(self, message: SweepUpdated) -> None:
        """Show the sweep's progress; at its end, hand the records back and note the outcome."""
        host = self._host
        self._record(message)
        if not message.running:
            self._cancel = None
            host.hold_records(False)
            if message.result is not None:
                recommendation = message.result.recommendation
                host.note("sweep", f"sweep ended: {recommendation.binding_detail}")
        host.update_inputs(
            sweep_progress=message.progress if message.running else None,
            sweep_result=message.result,
            sweeping=message.running,
        )

    def _record(self, message: SweepUpdated) -> None:
        """Record the steps the update brings, then the update as the dashboard shows it."""
        recorder = self._host.recorder
        if recorder is None:
            return
        result = message.result
        if result is not None:
            rows = sweep_to_json(result)["steps"]
            for row in rows[self._recorded_steps :]:
                recorder.action("sweep_step", {"step": row})
            self._recorded_steps = max(self._recorded_steps, len(rows))
        if message.running:
            progress = message.progress
            shown = dataclasses.asdict(progress) if progress is not None else None
            recorder.action("sweep_progress", {"progress": shown})
        elif result is not None:
            recorder.action("sweep_result", {"sweep": sweep_to_json(result)})

    def failed(self) -> None:
        """The sweep's worker failed: forget it and hand the records back (the app reports why)."""
        if self._host.recorder is not None:
            self._host.recorder.action("sweep_failed", {})
        self._cancel = None
        self._host.hold_records(False)
        self._host.update_inputs(sweeping=False, sweep_progress=None)

    def stop(self) -> None:
        """Ask a running sweep to stop (the app is leaving)."""
        if self._cancel is not None:
            self._cancel.set()
