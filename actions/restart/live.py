"""The dashboard's before/after of a restart, gathered from the probe's records as they arrive (pure).

A restart pauses the probe (a load step at 0), lets its requests drain, restarts the replica and
resumes the probe at the same load (a new step). The two sides are load steps at that same load,
each counted only once its load had settled (`collectors.probe.settle`: the streams the step
opened have ended their opening requests), so both measure the steady load and neither the burst
of a start:

- before: the old dials' requests, the latest `min_requests` of the step that ran when the restart
  began, sent after it settled, over the span from the first of them to the pause; a request the
  replica's stop cut off is the restart's doing, not the dials', and is left out (counted as cut);
- after: the new dials' first `min_requests` requests of the step the probe resumed with, sent
  after it settled, over the span from the settling to the send of the last of them, once each
  has ended. Until it settled the state says so (`settling`).

Each side is counted as `slotop restart` counts its dwell (`measure.measured_side`). Both lie on
either side of the replica's `up` phase, where the experiment opens the new configuration, so no
side mixes two configurations. Until the after side has its requests the state says how many of
how many have ended; then the comparison is built once, by work (`build`) that may run off the
UI thread, since each side's bootstrap costs tens of milliseconds per 50 requests, and kept until
the next restart or until it is dismissed. KV capacity and preemptions come from the replica's snapshots over the short
window: the one before the restart began, and one taken after the after side's last send.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import RestartPlan, RestartResult
from slotop.actions.restart.compare import Comparison, RunSide, compare_runs
from slotop.actions.restart.measure import dial_flags, measured_side, slo_percentiles
from slotop.actions.restart.noise import SIDE_CYCLES, loop_cycle_s
from slotop.actions.restart.starts import StartSpread
from slotop.actions.restart.table import ComparisonTable, comparison_table
from slotop.collectors.probe.follow import streaming_sent_by
from slotop.collectors.probe.records import (
    EventKind,
    LoadMode,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
)
from slotop.collectors.probe.settle import settled_at, settled_by, steady
from slotop.collectors.snapshot import Snapshot
from slotop.config import Settings

KEEP_RECORDS = 4000
"""Recent records kept for the before side (and the tokens still streaming into its span)."""
RECORDS_PER_STREAM = round(2 * SIDE_CYCLES)
"""Records kept per stream of the heaviest closed loop seen, whatever `keep_records` says: a
side spans `SIDE_CYCLES` lifetimes once the load has settled, each stream ending about one
request a lifetime, so at N streams the before side needs some SIDE_CYCLES × N records and
twice that leaves room for the settling and the tokens still streaming into its span."""
BEFORE_LABEL = "as it ran"
AFTER_LABEL = "restarted"
MIN_REQUESTS = 2
"""A side cut short by a change of load still shows with at least this many requests."""
_STEP_STARTS = (EventKind.STARTED, EventKind.CONCURRENCY_SET, EventKind.RATE_SET)


@dataclass(frozen=True, slots=True)
class BeforeAfter:
    """What the before/after panel shows: the change, the load, how many of the requests the after
    side needs have ended, and once it has them the comparison and its table in words.

    `stopped` says why the measure ended short of them (the load changed), or is empty. A
    recording keeps the rest too: the dials of each side, the load as numbers (`mode`,
    `concurrency`, `rate_rps`; None without load) and, once all is in, each side's span.
    A before/after read back from a recording holds the table without the comparison.
    """

    changes: str
    load: str
    requests: int
    wanted: int
    comparison: Comparison | None = None
    table: ComparisonTable | None = None
    stopped: str = ""
    dials: tuple[Dials, Dials] | None = None
    mode: LoadMode | None = None
    concurrency: int | None = None
    rate_rps: float | None = None
    before_span_s: tuple[float, float] | None = None
    after_span_s: tuple[float, float] | None = None
    settling: bool = False
    """The load resumed, and its streams' opening requests have yet to end: nothing counts yet."""
    span_s: float = 0.0
    """How long the after side has spanned so far (from its settling to its latest send)."""
    wanted_span_s: float | None = None
    """How long it needs to span: `noise.SIDE_CYCLES` of its requests' median lifetime."""

    @property
    def measuring(self) -> bool:
        """Whether the after side is still gathering its requests."""
        return self.comparison is None and self.table is None and not self.stopped


@dataclass(frozen=True, slots=True)
class _Step:
    """One load step: when it began, its number, and its load."""

    at_s: float
    step: int
    mode: LoadMode | None
    concurrency: int | None
    rate_rps: float | None

    def same_load(self, other: _Step) -> bool:
        return (self.mode, self.concurrency, self.rate_rps) == (
            other.mode,
            other.concurrency,
            other.rate_rps,
        )

    @property
    def loaded(self) -> bool:
        return bool(self.concurrency if self.mode != "open" else self.rate_rps)

    def words(self) -> str:
        if self.mode == "open":
            return f"{self.rate_rps or 0:g} requests/s"
        return f"{self.concurrency or 0} in flight"


def _ended(record: ProbeRecord) -> bool:
    return record.ok or record.counts_as_failure


def _short_window(snapshot: Snapshot | None) -> Snapshot | None:
    """The snapshot with its short window in place of the long one (a side is short)."""
    if snapshot is None or snapshot.short_window is None:
        return snapshot
    return dataclasses.replace(snapshot, window=snapshot.short_window)


Built = tuple[int, BeforeAfter]
"""What `build`'s work hands back: the restart it belongs to, and the finished before/after."""


def _finish(
    generation: int,
    state: BeforeAfter,
    sides: Callable[[], tuple[RunSide, RunSide]],
    percentiles: tuple[float, float],
    min_requests: int,
    start_spread: StartSpread | None = None,
) -> Built:
    """Measure both sides (their bootstraps are the cost) and build the table."""
    before, after = sides()
    comparison = compare_runs(
        before,
        after,
        slo_percentiles=percentiles,
        min_requests=min_requests,
        start_spread=start_spread,
    )
    table = comparison_table(comparison)
    return generation, dataclasses.replace(state, comparison=comparison, table=table)


class LiveBeforeAfter:
    """Follows the probe's steps and records, and a restart's begin and end, into a `BeforeAfter`."""

    def __init__(self, settings: Settings, keep_records: int = KEEP_RECORDS) -> None:
        self._settings = settings
        self._wanted = settings.restart.min_requests
        self._records: deque[ProbeRecord] = deque(maxlen=keep_records)
        self._steps: list[_Step] = []
        self._status: ProbeStatus | None = None
        self._plan: RestartPlan | None = None
        self._start_spread: StartSpread | None = None
        self._began_s = 0.0
        self._old: _Step | None = None
        self._before_snapshot: Snapshot | None = None
        self._result: RestartResult | None = None
        self._state: BeforeAfter | None = None
        self._generation = 0
        self._job: Callable[[], Built] | None = None
        self._building = False

    # what the dashboard hears

    def add(
        self,
        records: Iterable[ProbeRecord],
        events: Iterable[ProbeEvent] = (),
        status: ProbeStatus | None = None,
    ) -> None:
        """Records that ended, load steps that began, and the probe's latest status."""
        for event in events:
            if event.kind in _STEP_STARTS:
                self._steps.append(
                    _Step(event.at_s, event.step, event.mode, event.concurrency, event.rate_rps)
                )
                wanted = RECORDS_PER_STREAM * (event.concurrency or 0)
                if wanted > (self._records.maxlen or 0):
                    self._records = deque(self._records, maxlen=wanted)
        self._records.extend(records)
        if status is not None:
            self._status = status

    def began(
        self,
        plan: RestartPlan,
        at_s: float,
        snapshot: Snapshot | None,
        start_spread: StartSpread | None = None,
    ) -> None:
        """A restart was confirmed at `at_s`: forget the last before/after, note the load now
        (and the replica's start-to-start spread, where one was measured)."""
        self._forget()
        self._plan, self._began_s = plan, at_s
        self._start_spread = start_spread
        self._before_snapshot = snapshot
        running = [s for s in self._steps if s.at_s <= at_s]
        self._old = running[-1] if running and plan.probe_load is not None else None
        if self._old is not None and not self._old.loaded:
            self._old = None

    def ended(self, result: RestartResult) -> None:
        """The restart ended; only one that applied its dials is measured."""
        if self._plan is None or result.plan is not self._plan:
            return
        self._result = result if result.applied else None
        if not result.applied:
            self._plan = None

    def dismiss(self) -> None:
        """Hide the before/after until the next restart."""
        self._forget()

    def _forget(self) -> None:
        self._plan, self._result, self._state = None, None, None
        self._generation += 1
        self._job, self._building = None, False

    def build(self) -> Callable[[], Built] | None:
        """The work that turns gathered sides into the table, once they are all in (then None):
        it reads nothing of this object's, so it may run on another thread; hand its result to
        `built`."""
        job, self._job = self._job, None
        return job

    def built(self, done: Built) -> None:
        """The table the work from `build` made, kept unless another restart began meanwhile."""
        generation, state = done
        if generation == self._generation:
            self._state, self._building = state, False

    def state(self, snapshot: Snapshot | None) -> BeforeAfter | None:
        """The before/after now, given the replica's newest fresh snapshot (None: none shown).

        When it has all it needs it stays measuring, with every request counted, until the work
        from `build` is handed back.
        """
        if self._building or (self._state is not None and not self._state.measuring):
            return self._state
        plan, result = self._plan, self._result
        if plan is None or result is None or result.dials is None:
            return None
        changes = ", ".join(f"{n} {old} → {new}" for n, old, new in plan.changes)
        if self._old is None:
            self._state = self._without_load(changes, plan.before, result.dials, snapshot)
        else:
            self._state = self._with_load(changes, plan.before, result.dials, snapshot)
        return self._state

    # the sides

    def _without_load(
        self, changes: str, before: Dials, after: Dials, snapshot: Snapshot | None
    ) -> BeforeAfter:
        """No load ran: only the replica's own numbers, once it has been read since it came up."""
        up_s = self._result_phase("up")
        state = BeforeAfter(changes, "no load", 0, 0, dials=(before, after))
        if snapshot is None or up_s is None or snapshot.taken_at_s < up_s:
            return state
        sides = (
            RunSide(BEFORE_LABEL, dial_flags(before), snapshot=self._before()),
            RunSide(AFTER_LABEL, dial_flags(after), snapshot=_short_window(snapshot)),
        )
        return self._pending(state, lambda: sides)

    def _with_load(
        self, changes: str, before: Dials, after: Dials, snapshot: Snapshot | None
    ) -> BeforeAfter:
        old = self._old
        assert old is not None
        new = self._resumed(old)
        load = BeforeAfter(
            changes,
            old.words(),
            0,
            self._wanted,
            dials=(before, after),
            mode=old.mode,
            concurrency=old.concurrency,
            rate_rps=old.rate_rps,
        )
        if new is None:
            return load
        mine = self._in_step(new)
        changed = self._next_step(new)
        every = tuple(self._records)
        settled = (
            settled_at(every, new.at_s, self._status)
            if changed is None
            else settled_by(every, new.at_s, changed.at_s)
        )
        if settled is None:
            return dataclasses.replace(load, settling=True)
        ended = sorted((r for r in steady(mine, settled) if _ended(r)), key=lambda r: r.sent_at_s)
        count = min(len(ended), self._wanted)
        cycle = loop_cycle_s(ended)
        wanted_s = SIDE_CYCLES * cycle if cycle is not None else None
        spanned_s = ended[-1].sent_at_s - settled if ended else 0.0
        state = dataclasses.replace(load, requests=count, span_s=spanned_s, wanted_span_s=wanted_s)
        if len(ended) >= self._wanted and wanted_s is not None and spanned_s >= wanted_s:
            end_s = max(ended[self._wanted - 1].sent_at_s, settled + wanted_s)
            if changed is None and streaming_sent_by(self._status, end_s) not in (0, None):
                return state  # a request sent before the last one counted still streams
        elif changed is not None:
            if streaming_sent_by(self._status, changed.at_s) not in (0, None):
                return state
            state = dataclasses.replace(
                state,
                stopped=f"the load changed to {changed.words()} after {count} of "
                f"{self._wanted} requests",
            )
            if len(ended) < MIN_REQUESTS:
                return state
            end_s = ended[-1].sent_at_s
        else:
            return state
        if snapshot is None or snapshot.taken_at_s < end_s:
            return state
        after_side = partial(
            measured_side,
            AFTER_LABEL,
            after,
            tuple(self._records),
            settled,
            end_s,
            self._settings,
            snapshot=_short_window(snapshot),
            load_began_s=new.at_s,
            settled_s=settled,
        )
        before_span, before_side = self._before_side(old, before)
        state = dataclasses.replace(state, before_span_s=before_span, after_span_s=(settled, end_s))
        return self._pending(state, lambda: (before_side(), after_side()))

    def _before_side(
        self, old: _Step, dials: Dials
    ) -> tuple[tuple[float, float], Callable[[], RunSide]]:
        """The old step's latest requests sent after it settled, up to the pause, those the stop
        cut left out: the side's span, and the work that measures it."""
        pause_s = self._step_end(old)
        until_s = pause_s if pause_s is not None else self._began_s
        stop_s = self._result_phase("stop")
        mine = self._in_step(old)
        settled = settled_by(tuple(self._records), old.at_s, until_s)
        cut = {
            id(r)
            for r in mine
            if r.counts_as_failure and stop_s is not None and r.done_at_s >= stop_s
        }
        sent = sorted(
            (r for r in steady(mine, settled) if id(r) not in cut), key=lambda r: r.sent_at_s
        )
        latest = sent[-self._wanted :]
        cycle = loop_cycle_s(latest)
        if cycle is not None:  # as long a span as the after side's, where the step ran that long
            reach_s = min(until_s - SIDE_CYCLES * cycle, latest[0].sent_at_s)
            latest = [r for r in sent if r.sent_at_s >= reach_s]
        span = (latest[0].sent_at_s if latest else settled, until_s)
        return span, partial(
            measured_side,
            BEFORE_LABEL,
            dials,
            tuple(r for r in self._records if id(r) not in cut),
            *span,
            self._settings,
            snapshot=self._before(),
            requests_cut=len(cut),
            load_began_s=old.at_s,
            settled_s=settled,
        )

    def _pending(
        self, state: BeforeAfter, sides: Callable[[], tuple[RunSide, RunSide]]
    ) -> BeforeAfter:
        """All is in: leave the sides' spreads and the table to `build`'s work."""
        self._job = partial(
            _finish,
            self._generation,
            state,
            sides,
            slo_percentiles(self._settings),
            self._wanted,
            self._start_spread,
        )
        self._building = True
        return state

    def _before(self) -> Snapshot | None:
        return _short_window(self._before_snapshot)

    # steps

    def _result_phase(self, phase: str) -> float | None:
        result = self._result
        if result is None:
            return None
        return next((e.at_s for e in result.events if e.phase == phase), None)

    def _next_step(self, step: _Step) -> _Step | None:
        return next((s for s in self._steps if s.at_s > step.at_s), None)

    def _step_end(self, step: _Step) -> float | None:
        """When a step ended: the next one's start (for the old step, else the pause)."""
        following = self._next_step(step)
        if following is not None:
            return following.at_s
        return self._result_phase("pause_probe") if step is self._old else None

    def _resumed(self, old: _Step) -> _Step | None:
        """The first step after the restart began at the old step's load."""
        return next((s for s in self._steps if s.at_s > self._began_s and s.same_load(old)), None)

    def _in_step(self, step: _Step) -> Sequence[ProbeRecord]:
        """The records sent in one step (a new probe numbers its steps from 0 again)."""
        until = self._step_end(step)
        return [
            r
            for r in self._records
            if r.step == step.step
            and step.at_s <= r.sent_at_s
            and (until is None or r.sent_at_s < until)
        ]
