"""The k / n / b keys: pick a dial, confirm the restart plan, apply it in a worker.

Each phase of the restart goes on the timeline as it happens; the outcome (applied, rolled back,
down) is told in words, and a KV-dtype change runs the greedy quality check around it when the
load is off, its result recorded as a `restart_quality` action after the restart's. A restart that applied its dials is then measured at the load it ran under: the flow
gathers the probe's records the app hands it into a before/after (`LiveBeforeAfter`) and puts it
in the inputs whenever it changes, for the before/after panel, and records each change as a
`before_after` action (`live_record`), so a report and a replay show the table the panel showed.
"""

from __future__ import annotations

from functools import partial

from textual.message import Message

from slotop.actions.experiment.recording import RESTART_UP_PHASE
from slotop.actions.probe_control import ProbeHandle
from slotop.actions.replica.spec import dial_words
from slotop.actions.restart.apply import RestartEvent, RestartPlan, RestartResult
from slotop.actions.restart.compare import Change
from slotop.actions.restart.live import BeforeAfter, Built, LiveBeforeAfter
from slotop.actions.restart.live_record import ACTION as BEFORE_AFTER_ACTION
from slotop.actions.restart.live_record import before_after_json
from slotop.actions.restart.quality_check import (
    QualityCheck,
    configured_prompts,
    quality_applies,
    quality_baseline,
    quality_check,
)
from slotop.actions.restart.recorded import QUALITY_ACTION, plan_json, quality_json, result_json
from slotop.actions.restart.starts import StartSpread, kept_start_spread
from slotop.collectors.snapshot import Snapshot
from slotop.errors import SlotopError
from slotop.tui.flows.host import FlowHost
from slotop.tui.messages import DialsApplied, ProbeRecordsArrived, TimelineEvent, TimelineNoted
from slotop.tui.restarting import (
    DIAL_TITLES,
    KV_DTYPES,
    AccessFinder,
    RestartAccess,
    apply_in_thread,
    plan_dial_change,
)
from slotop.tui.screens.confirm import ConfirmScreen
from slotop.tui.screens.dial import DialScreen


def measured_words(state: BeforeAfter) -> str:
    """The before/after in a line for the timeline: what moved beyond its noise."""
    comparison = state.comparison
    moved = [
        f"{row.label} {row.verdict.value}"
        for row in (comparison.rows if comparison is not None else ())
        if row.verdict in (Change.BETTER, Change.WORSE)
    ]
    return f"before/after at {state.load}: " + (
        ", ".join(moved) if moved else "nothing moved beyond its noise"
    )


class RestartEnded(Message):
    """A restart ended (applied, rolled back or down), with every phase and its time."""

    def __init__(self, result: RestartResult) -> None:
        super().__init__()
        self.result = result


class QualityChecked(Message):
    """The quality check around the restart that just ended ran, or says why it did not."""

    def __init__(self, check: QualityCheck) -> None:
        super().__init__()
        self.check = check


class BeforeAfterBuilt(Message):
    """A worker measured the before/after's sides and built its table."""

    def __init__(self, done: Built) -> None:
        super().__init__()
        self.done = done


BEFORE_AFTER_RECORDS = 400
"""The probe's latest records the before/after keeps at least (eight times a side's
[restart] min_requests when that is more, and `live.RECORDS_PER_STREAM` for each stream of the
heaviest closed loop it has seen): its before side spans twelve request lifetimes once the load
has settled, and each record kept costs some 9 KB on a dashboard open all week."""


class RestartFlow:
    """What the dial keys do, on behalf of the app, and the before/after of the last restart."""

    def __init__(self, host: FlowHost, find_access: AccessFinder | None = None) -> None:
        self._host = host
        self._find_access = find_access
        min_requests = host.settings.restart.min_requests
        self._before_after = LiveBeforeAfter(
            host.settings, keep_records=max(BEFORE_AFTER_RECORDS, 8 * min_requests)
        )

    def start(self) -> None:
        """Tell the app the dials a restartable replica runs with, when there is one."""
        access = self._find_access() if self._find_access is not None else None
        if isinstance(access, RestartAccess):
            self._host.post_message(DialsApplied(access.dials))

    def dial(self, name: str) -> None:
        """Ask for a dial's new value, then plan and confirm the restart."""
        host = self._host
        access = self._find_access() if self._find_access is not None else None
        if not isinstance(access, RestartAccess):
            reason = access or "this session has no replica it may restart"
            host.notify(f"unavailable: {reason}", severity="warning")
            return
        current = dial_words(getattr(access.dials, name))
        choices = KV_DTYPES if name == "kv_cache_dtype" else ()

        def chosen(text: str | None) -> None:
            if text is None:
                host.render_views()
                return
            self._plan(access, name, text)

        host.ask(DialScreen(DIAL_TITLES[name], current, choices), chosen)

    def _plan(self, access: RestartAccess, name: str, text: str) -> None:
        host = self._host
        snapshot = host.inputs.poll.value if host.inputs.poll is not None else None
        probe = host.probe_control.probe if host.probe_control is not None else None
        try:
            plan = plan_dial_change(
                access,
                name,
                text,
                snapshot.kv if snapshot is not None else None,
                probe.status() if probe is not None else None,
            )
        except SlotopError as exc:
            host.notify(str(exc), title="refused", severity="warning")
            host.render_views()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._apply(plan, access)
            host.render_views()

        summary = "\n".join(plan.lines())
        if quality_applies(plan.before, plan.after):
            summary += "\n" + (
                "Quality: the same greedy prompts run before and after, and the outputs are "
                "compared (on the timeline)."
                if probe is None
                else "Quality: no check while the probe's load runs (it would batch with the "
                "greedy prompts); turn the load off (l) first to get one."
            )
        host.ask(ConfirmScreen("Restart the replica?", summary), answered)

    def _apply(self, plan: RestartPlan, access: RestartAccess) -> None:
        host = self._host
        probe = host.probe_control.probe if host.probe_control is not None else None
        changes = ", ".join(f"{n} {old} → {new}" for n, old, new in plan.changes)
        host.note("restart", f"restart planned: {changes}")
        began_s = host.clock()
        if host.recorder is not None:
            host.recorder.action("restart_planned", plan_json(plan), at_s=began_s)
        self._before_after.began(plan, began_s, self._fresh_snapshot(), self._start_spread(access))
        self.refresh()
        host.run_in_thread(
            partial(self._in_thread, plan, access, probe),
            name="restart",
            group="restart",
            exclusive=True,
        )

    def _start_spread(self, access: RestartAccess) -> StartSpread | None:
        """The replica's measured start-to-start spread, None (and a warning) where its state
        file holds a damaged one."""
        try:
            return kept_start_spread(access.spec.state_path)
        except SlotopError as exc:
            self._host.notify(str(exc), title="start spread", severity="warning")
            return None

    def _in_thread(
        self, plan: RestartPlan, access: RestartAccess, probe: ProbeHandle | None
    ) -> None:
        host = self._host

        def on_event(event: RestartEvent) -> None:
            host.post_message(
                TimelineNoted(
                    TimelineEvent(event.at_s, "restart", f"{event.phase}: {event.detail}")
                )
            )

        spec = access.spec
        baseline = None
        if probe is None and quality_applies(plan.before, plan.after):
            prompts = configured_prompts(host.settings.launch.quality_prompts_file)
            baseline = quality_baseline(spec.url, spec.api_key, prompts)
        recorder = host.recorder
        recording = recorder.path if recorder is not None else None
        result: RestartResult = apply_in_thread(plan, access, probe, on_event, recording)
        host.post_message(RestartEnded(result))
        kind = "restart" if result.applied else "error"
        host.post_message(TimelineNoted(TimelineEvent(host.clock(), kind, result.lines()[0])))
        host.forget_identity()
        if baseline is not None:
            check = quality_check(spec.url, spec.api_key, baseline, result.outcome)
            host.post_message(QualityChecked(check))
            for text in check.text().splitlines()[:4]:
                host.post_message(
                    TimelineNoted(TimelineEvent(host.clock(), "quality", text.strip()))
                )
        if result.dials is not None:
            since = [e.at_s for e in result.events if e.phase == RESTART_UP_PHASE]
            host.post_message(DialsApplied(result.dials, since[-1] if since else None))

    # the before/after

    def records_arrived(self, message: ProbeRecordsArrived) -> None:
        """Records, load steps and status the feed took from the probe."""
        self._before_after.add(message.records, message.events, message.status)
        self.refresh()

    def ended(self, message: RestartEnded) -> None:
        """A restart ended: measure its after side when it applied."""
        if self._host.recorder is not None:
            self._host.recorder.action("restart", result_json(message.result))
        self._before_after.ended(message.result)
        self.refresh()

    def quality_checked(self, message: QualityChecked) -> None:
        """Record the whole check as data, after the restart it belongs to (the timeline shows
        its first lines)."""
        if self._host.recorder is not None:
            self._host.recorder.action(QUALITY_ACTION, quality_json(message.check))

    def dismiss(self) -> None:
        """Hide the before/after until the next restart."""
        self._before_after.dismiss()
        self.refresh()

    def built(self, message: BeforeAfterBuilt) -> None:
        """The worker's table is in: show it."""
        self._before_after.built(message.done)
        self.refresh()

    def refresh(self) -> None:
        """Put the before/after in the inputs when it changed (a new snapshot may finish it);
        once all is in, its sides' bootstraps and the table are left to a worker."""
        state = self._before_after.state(self._fresh_snapshot())
        job = self._before_after.build()
        if job is not None:
            post = self._host.post_message
            self._host.run_in_thread(
                lambda: post(BeforeAfterBuilt(job())), name="before/after", group="before-after"
            )
        shown = self._host.inputs.before_after
        if state == shown:
            return
        recorder = self._host.recorder
        if recorder is not None:
            data = before_after_json(state, shown)
            recorder.action(BEFORE_AFTER_ACTION, data, at_s=self._host.clock())
        self._host.update_inputs(before_after=state)
        if (
            state is not None
            and state.comparison is not None
            and (shown is None or shown.measuring)
        ):
            self._host.note("restart", measured_words(state))

    def _fresh_snapshot(self) -> Snapshot | None:
        poll = self._host.inputs.poll
        return poll.value if poll is not None and not poll.stale else None
