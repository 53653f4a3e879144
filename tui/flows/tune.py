"""The t key: plan a tune, confirm it, run it in a worker; t again stops it (the replica goes back).

The tune is `slotop tune`'s own loop (`TuneRunner` over `LiveReplica`), driving the dashboard's
probe through its controller (so the caps and the loopback guard hold) while the feed leaves the
probe's records to it, as a sweep does. Its sweeps show as the sweep key's do (progress, curve);
its decisions, restarts and quality checks go on the timeline; each verified restart opens a
configuration (`DialsApplied`). It records what `slotop tune` records, so `slotop report` shows
its decisions.
"""

from __future__ import annotations

import threading
from functools import partial

from textual.message import Message

from slotop.actions.probe_control import ProbeControl
from slotop.actions.replica.spec import Dials, restart_lock
from slotop.actions.restart.apply import RestartEvent
from slotop.actions.restart.starts import start_spread_or_said
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.actions.tune.output import flags_line, tune_to_json
from slotop.actions.tune.plan import TuneOptions, plan_words, tune_spec
from slotop.actions.tune.runner import TuneResult, TuneRunner
from slotop.actions.tune.wiring import LiveReplica, replica_capacity
from slotop.errors import SlotopError
from slotop.tui.flows.host import NO_PROBE, FlowHost
from slotop.tui.messages import DialsApplied, TimelineEvent, TimelineNoted
from slotop.tui.restarting import AccessFinder, RestartAccess
from slotop.tui.screens.confirm import ConfirmScreen


class TuneUpdated(Message):
    """The tune moved: a sweep's progress or step, a line for the timeline, or its end."""

    def __init__(
        self,
        *,
        progress: SweepProgress | None = None,
        sweep: SweepResult | None = None,
        note: str | None = None,
        result: TuneResult | None = None,
    ) -> None:
        super().__init__()
        self.progress = progress
        self.sweep = sweep
        self.note = note
        self.result = result


def run_tune_in_app(
    host: FlowHost,
    access: RestartAccess,
    control: ProbeControl,
    cancel: threading.Event,
) -> TuneResult:
    """The tune, in a worker: every update posted, the replica put back at its end."""
    settings, spec = host.settings, access.spec
    if control.probe is not None:
        control.apply(control.plan_stop())  # the operator's load; the tune drives the probe

    def post(**update: object) -> None:
        host.post_message(TuneUpdated(**update))  # type: ignore[arg-type]

    def restart_event(event: RestartEvent) -> None:
        text = f"{event.phase}: {event.detail}"
        host.post_message(TimelineNoted(TimelineEvent(event.at_s, "restart", text)))

    def dials_applied(dials: Dials, since_s: float | None) -> None:
        host.forget_identity()
        host.post_message(DialsApplied(dials, since_s))

    replica = LiveReplica(
        settings,
        spec,
        access.target,
        access.how,
        control,
        host.recorder,
        lambda _line: None,
        on_step=lambda sweep: post(sweep=sweep),
        on_restart_event=restart_event,
        on_dials=dials_applied,
    )
    spread = start_spread_or_said(spec.state_path, lambda words: post(note=words))
    plan = tune_spec(settings, TuneOptions(), spread)
    capacity, problem = replica_capacity(settings, spec.url)
    if problem is not None:
        post(note=f"KV budget unknown ({problem}); max_num_seqs is raised at most 2×")
    recorder = host.recorder

    def record(kind: str, data: object) -> None:
        if recorder is not None:
            recorder.action(kind, data)  # type: ignore[arg-type]

    original = access.dials
    record(
        "tune_started",
        {
            "url": spec.url,
            "original_dials": original.to_json(),
            "capacity": capacity.to_json() if capacity is not None else None,
        },
    )
    runner = TuneRunner(
        replica,
        plan,
        capacity,
        original,
        spec.url,
        cancel=cancel,
        on_note=lambda text: post(note=text),
        on_record=record,
        on_progress=lambda progress: post(progress=progress),
    )
    with restart_lock(spec.state_path):
        result = runner.run()
    record("tune_result", {"tune": tune_to_json(result)})
    post(result=result)
    return result


class TuneFlow:
    """What the tune key does, on behalf of the app, and how a tune's progress is shown."""

    def __init__(self, host: FlowHost, find_access: AccessFinder | None = None) -> None:
        self._host = host
        self._find_access = find_access
        self._cancel: threading.Event | None = None

    @property
    def running(self) -> bool:
        """Whether a tune runs now."""
        return self._cancel is not None

    def toggle(self) -> None:
        """Stop the running tune, or plan one and ask before it starts."""
        host = self._host
        if self._cancel is not None:
            self._cancel.set()
            host.notify("stopping the tune: the load stops, then the replica goes back")
            return
        control = host.probe_control
        access = self._find_access() if self._find_access is not None else None
        if control is None or not isinstance(access, RestartAccess):
            reason = access or "this session has no replica it may restart"
            if control is None:
                reason = NO_PROBE
            host.notify(f"unavailable: {reason}", severity="warning")
            return
        try:
            plan = tune_spec(host.settings, TuneOptions())
            control.plan_start(concurrency=max(plan.sweep.plan))  # caps, loopback, before asking
        except SlotopError as exc:
            host.notify(str(exc), title="refused", severity="warning")
            return
        summary = "\n".join(plan_words(plan, access.spec.url, access.dials))
        summary += "\n\nt again stops it."
        if control.probe is not None:
            summary += " Your load is stopped first; the tune drives the probe itself."

        def answered(yes: bool | None) -> None:
            if yes:
                self._start(access, control)
            host.render_views()

        host.ask(ConfirmScreen("Tune the replica?", summary, confirm_label="Tune"), answered)

    def _start(self, access: RestartAccess, control: ProbeControl) -> None:
        host = self._host
        cancel = threading.Event()
        self._cancel = cancel
        host.hold_records(True)
        host.note("tune", f"tune started from {flags_line(access.dials)}")
        host.update_inputs(sweeping=True, sweep_result=None, sweep_progress=None)
        host.run_in_thread(
            partial(run_tune_in_app, host, access, control, cancel),
            name="tune",
            group="tune",
            exclusive=True,
        )

    def updated(self, message: TuneUpdated) -> None:
        """Show the tune's progress; at its end, hand the records back and say what it chose."""
        host = self._host
        if message.progress is not None:
            host.update_inputs(sweep_progress=message.progress, sweeping=True)
        if message.sweep is not None:
            host.update_inputs(sweep_result=message.sweep)
        if message.note is not None:
            host.note("tune", message.note)
        result = message.result
        if result is None:
            return
        self._cancel = None
        host.hold_records(False)
        host.update_inputs(sweeping=False, sweep_progress=None)
        choice = result.choice
        if choice.dials is not None:
            words = f"tune chose {flags_line(choice.dials)} at concurrency {choice.concurrency}"
            host.note("tune", f"{words}: {choice.words}")
        else:
            host.note("tune", f"tune chose nothing: {choice.words}")
        host.note("tune", f"tune stopped: {result.stop_words}")
        ended = flags_line(result.ended) if result.ended is not None else "DOWN"
        host.notify(f"tune ended; the replica runs {ended}", title="tune")

    def failed(self) -> None:
        """The tune's worker failed: forget it and hand the records back (the app reports why)."""
        self._cancel = None
        self._host.hold_records(False)
        self._host.update_inputs(sweeping=False, sweep_progress=None)

    def stop(self) -> None:
        """Ask a running tune to stop (the app is leaving)."""
        if self._cancel is not None:
            self._cancel.set()
