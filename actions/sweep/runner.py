"""Running a concurrency sweep: turn the probe's dial step by step, measure, decide, always stop.

The runner drives a `ProbeControl` (so the load safety rules hold) and a replica monitor for the
server's view; each step is measured as step.py says (the load keeps running through the bounded
wait for the dwell's last requests). Clock and sleep are injected so tests run without waiting; a
progress callback sees every tick and a step callback every finished step (what the TUI and the
CLI show).
Whatever happens (a broken step, an error, Ctrl-C, a cancel), the load is stopped before `run`
returns or raises. A refined sweep (`SweepSpec.refine`) goes on after the ramp breaks, bisecting
between the operating point and the break, each step measured as a ramp step is.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from slotop.actions.errors import SweepError
from slotop.actions.probe_control import ProbeControl, ProbeHandle
from slotop.actions.sweep.decide import (
    Recommendation,
    StopReason,
    next_stop,
    recommend,
    refine_next,
    remaining_steps,
)
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.step import Gauges, dwell_decided, measure_step, sent_in_dwell
from slotop.collectors.errors import CollectorError
from slotop.collectors.probe.follow import follow_window
from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.settle import settled_at
from slotop.collectors.snapshot import Snapshot
from slotop.collectors.window import WindowView

Phase = Literal["warmup", "dwell", "follow"]
"""Warm-up, the measured dwell, then the wait for the dwell's requests to end."""


@dataclass(frozen=True, slots=True)
class SweepResult:
    """A sweep so far or at its end: every measured step, why it stopped, the operating point."""

    url: str
    started_at_s: float
    settings: SweepSpec
    steps: tuple[StepResult, ...] = ()
    stop: StopReason | None = None
    recommendation: Recommendation = field(
        default_factory=lambda: Recommendation(None, None, None, "no step was measured", None)
    )

    @property
    def met_slo(self) -> bool:
        """Whether any step met both SLOs without a flag (what the exit code says)."""
        return self.recommendation.concurrency is not None

    @property
    def finished(self) -> bool:
        """Whether the sweep reached a decision (an interrupted one can be resumed)."""
        return self.stop is not None and self.stop is not StopReason.INTERRUPTED


@dataclass(frozen=True, slots=True)
class SweepProgress:
    """Where a running sweep is: the step, its phase, and how far the dwell has come."""

    step_number: int
    step_count: int
    concurrency: int
    phase: Phase
    elapsed_s: float
    requests_ok: int
    min_requests: int
    dwell_s: float
    refining: bool = False
    """A refine step, measured after the ramp broke (its number counts on past the plan)."""


StepMeasured = Callable[[StepResult, Sequence[ProbeRecord]], None]
"""Told each measured step with the probe records it was measured from (its dwell and follow)."""


class ReplicaWatch(Protocol):
    """What the runner needs of the server side (`ReplicaMonitor`, or a fake in tests)."""

    def poll(self) -> Snapshot: ...
    def view(self, span_s: float) -> WindowView | None: ...


class MonitorWatch:
    """Adapts a `ReplicaMonitor` to `ReplicaWatch`: poll it, and view its window."""

    def __init__(self, monitor: _MonitorLike) -> None:
        self._monitor = monitor

    def poll(self) -> Snapshot:
        """Scrape once and build a Snapshot."""
        return self._monitor.poll()

    def view(self, span_s: float) -> WindowView | None:
        """Increases over the newest `span_s` seconds of scrapes."""
        return self._monitor.window.view(span_s)


class _WindowLike(Protocol):
    def view(self, span_s: float) -> WindowView | None: ...


class _MonitorLike(Protocol):
    @property
    def window(self) -> _WindowLike: ...
    def poll(self) -> Snapshot: ...


class SweepCancelled(Exception):
    """Raised inside the runner when its cancel event is set; never escapes `run`."""


class SweepRunner:
    """Runs one sweep against one replica; build it, then call `run` once (or to resume)."""

    def __init__(
        self,
        control: ProbeControl,
        watch: ReplicaWatch | None,
        settings: SweepSpec,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        cancel: threading.Event | None = None,
        on_progress: Callable[[SweepProgress], None] | None = None,
        on_step: Callable[[SweepResult], None] | None = None,
        on_measured: StepMeasured | None = None,
    ) -> None:
        self._control = control
        self._watch = watch
        self._settings = settings
        self._clock = clock
        self._sleep = sleep
        self._cancel = cancel or threading.Event()
        self._on_progress = on_progress
        self._on_step = on_step
        self._on_measured = on_measured
        self._handle: ProbeHandle | None = None
        self._refining = False
        self._reported = 0

    def run(self, resume: SweepResult | None = None) -> SweepResult:
        """Measure every remaining step until a stop rule fires; the load is off when it returns."""
        settings = self._settings = self._engine_read(self._settings)
        result = SweepResult(self._control.url, self._clock(), settings)
        if resume is not None:
            result = replace(resume, settings=settings, stop=None)
        self._reported = len(result.steps)
        stop: StopReason | None = None
        try:
            if result.steps:
                stop = next_stop(result.steps, settings.plan, settings.slo, settings.rules)
            if stop is None:
                for concurrency in remaining_steps(settings.plan, result.steps):
                    number = settings.plan.index(concurrency) + 1
                    step = self._run_step(concurrency, number, len(settings.plan))
                    result = replace(result, steps=(*result.steps, step))
                    stop = next_stop(result.steps, settings.plan, settings.slo, settings.rules)
                    if stop is not None:
                        break
                    self._report(self._decided(result, None))
                else:
                    stop = StopReason.CAP
            while settings.refine and (between := self._refine_next(result)) is not None:
                if len(result.steps) > self._reported:  # the step that broke, or the last refined
                    self._report(self._decided(result, None))  # not decided while it bisects
                number = len(result.steps) + 1
                step = self._run_step(between, number, number, refining=True)
                result = replace(result, steps=(*result.steps, step))
        except (KeyboardInterrupt, SweepCancelled):
            stop = StopReason.INTERRUPTED
        finally:
            self._stop_load()
        final = self._decided(result, stop)
        self._report(final)
        return final

    def _engine_read(self, settings: SweepSpec) -> SweepSpec:
        """The spec with the engine the replica's first scrape names (its words, and what it can
        report: SGLang has no tokens per step); as given when the scrape fails."""
        if self._watch is None:
            return settings
        try:
            engine = self._watch.poll().replica.engine
        except CollectorError:
            return settings
        if engine == settings.limits.engine:
            return settings
        return replace(settings, limits=replace(settings.limits, engine=engine))

    def _refine_next(self, result: SweepResult) -> int | None:
        """The next refine step, or None once the operating point and the break are close."""
        settings = self._settings
        return refine_next(
            result.steps, settings.slo, settings.rules, settings.refine_resolution_ratio
        )

    def _decided(self, result: SweepResult, stop: StopReason | None) -> SweepResult:
        settings = self._settings
        return replace(
            result,
            stop=stop,
            recommendation=recommend(result.steps, settings.slo, settings.rules, settings.limits),
        )

    def _report(self, result: SweepResult) -> None:
        self._reported = len(result.steps)
        if self._on_step is not None:
            self._on_step(result)

    def _set_load(self, concurrency: int) -> None:
        control = self._control
        if control.probe is None:
            control.apply(control.plan_start(concurrency=concurrency))
            self._handle = control.probe
        else:
            control.apply(control.plan_concurrency(concurrency))

    def _stop_load(self) -> None:
        """Stop through the controller (an event); else stop the handle, even a dead one's pipes."""
        control = self._control
        stopped = False
        with contextlib.suppress(Exception):
            if control.probe is not None:
                control.apply(control.plan_stop())
                stopped = True
        handle, self._handle = self._handle, None
        if handle is not None and not stopped:
            handle.stop()

    def _poll(self, gauges: Gauges | None) -> None:
        if self._watch is None:
            return
        try:
            snapshot = self._watch.poll()
        except CollectorError:
            return  # a failed scrape is a gap in the gauges, not the end of the sweep
        if gauges is not None:
            gauges.add(snapshot)

    def _tick(self) -> None:
        if self._cancel.is_set():
            raise SweepCancelled
        self._sleep(self._settings.tick_s)
        if self._cancel.is_set():
            raise SweepCancelled

    def _progress(
        self, number: int, total: int, concurrency: int, phase: Phase, elapsed: float, ok: int
    ) -> None:
        if self._on_progress is not None:
            settings = self._settings
            self._on_progress(
                SweepProgress(
                    number,
                    total,
                    concurrency,
                    phase,
                    elapsed,
                    ok,
                    settings.min_requests,
                    settings.dwell_s,
                    self._refining,
                )
            )

    def _run_step(
        self, concurrency: int, number: int, total: int, *, refining: bool = False
    ) -> StepResult:
        self._refining = refining
        step, records = self._measure(concurrency, number, total)
        if self._on_measured is not None:
            self._on_measured(step, records)
        return step

    def _measure(
        self, concurrency: int, number: int, total: int
    ) -> tuple[StepResult, list[ProbeRecord]]:
        settings = self._settings
        began = self._clock()
        self._set_load(concurrency)
        handle = self._control.probe
        self._progress(number, total, concurrency, "warmup", 0.0, 0)
        warming: list[ProbeRecord] = []
        while True:
            now = self._clock()
            warm = now - began >= settings.warmup_s
            if warm and (handle is None or now - began >= settings.warmup_s + settings.max_dwell_s):
                break  # a load that never settles is measured as it is, after the longest dwell
            if warm and handle is not None:
                status = handle.status()
                warming.extend(handle.drain_records())
                if settled_at(warming, began, status) is not None:
                    break
            self._tick()
            self._poll(None)
            if handle is not None:
                warming.extend(handle.drain_records())
            self._progress(number, total, concurrency, "warmup", self._clock() - began, 0)
        start = now
        kept: list[ProbeRecord] = []
        gauges = Gauges()
        self._poll(gauges)
        while True:
            self._tick()
            self._poll(gauges)
            now = self._clock()
            ok = 0
            if handle is not None:
                status = handle.status()
                kept.extend(handle.drain_records())
                self._check_alive(handle)
                ok = sent_in_dwell(kept, status, start, now)
            elapsed = now - start
            self._progress(number, total, concurrency, "dwell", elapsed, ok)
            if elapsed >= settings.max_dwell_s or (
                elapsed >= settings.dwell_s and dwell_decided(kept, start, now, settings)
            ):
                break
        end = now
        view = self._watch.view(end - start) if self._watch is not None else None
        followed_s: float | None = None
        cut: int | None = None
        if handle is not None:

            def follow_tick() -> None:
                self._tick()
                self._check_alive(handle)
                self._progress(number, total, concurrency, "follow", self._clock() - start, ok)

            followed = follow_window(
                handle, end, settings.follow_limit_s, clock=self._clock, wait=follow_tick
            )
            kept.extend(followed.records)
            followed_s, cut = followed.followed_s, followed.requests_cut
        step = measure_step(
            concurrency,
            kept,
            start,
            end,
            settings,
            gauges.kv_usage,
            gauges.waiting,
            gauges.running,
            view,
            followed_s=followed_s,
            requests_cut=cut,
            gauges_sim_gpu_util=gauges.sim_gpu_util,
        )
        return step, kept

    @staticmethod
    def _check_alive(handle: ProbeHandle) -> None:
        if not handle.running:
            raise SweepError("the probe process ended during the sweep; see the probe's events")
