"""Running a concurrency sweep: turn the probe's dial step by step, measure, decide, always stop.

The runner drives a `ProbeControl` (so the load safety rules hold) and a replica monitor for the
server's view. A step's latencies are those of the requests sent after its warm-up, each followed
to its end (the load keeps running through that bounded wait); its throughput is the tokens that
arrived inside its dwell, beside the replica's own counter rate over the same span. Clock and sleep are injected so tests run without waiting; a progress callback
sees every tick and a step callback every finished step (what the TUI and the CLI show).
Whatever happens (a broken step, an error, Ctrl-C, a cancel), the load is stopped before `run`
returns or raises.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from slotop import fmt
from slotop.actions.errors import SweepError
from slotop.actions.probe_control import ProbeControl, ProbeHandle
from slotop.actions.slo import judge_estimate
from slotop.actions.sweep.decide import (
    Recommendation,
    ReplicaLimits,
    StepResult,
    StopReason,
    StopRules,
    SweepSlo,
    next_stop,
    recommend,
    remaining_steps,
)
from slotop.collectors.errors import CollectorError
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.probe.follow import follow_window
from slotop.collectors.probe.records import ProbeRecord, ProbeStatus
from slotop.collectors.probe.stats import GoodputTargets, LatencySummary, window_stats
from slotop.collectors.snapshot import Snapshot, latency_quantiles
from slotop.collectors.window import WindowView

STANDARD_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)

Phase = Literal["warmup", "dwell", "follow"]
"""Warm-up, the measured dwell, then the wait for the dwell's requests to end."""


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """How one sweep runs: its steps, their timing, the SLO, the stop rules and known limits."""

    plan: tuple[int, ...]
    slo: SweepSlo
    warmup_s: float = 5.0
    dwell_s: float = 20.0
    min_requests: int = 50
    max_dwell_s: float = 120.0
    tick_s: float = 1.0
    rules: StopRules = field(default_factory=StopRules)
    limits: ReplicaLimits = field(default_factory=ReplicaLimits)
    max_follow_s: float | None = None
    """The longest wait past the dwell for its requests to end; None waits as long as the dwell."""

    @property
    def follow_limit_s(self) -> float:
        """The longest wait past the dwell, with None read as the dwell's length."""
        return self.dwell_s if self.max_follow_s is None else self.max_follow_s

    def __post_init__(self) -> None:
        if not self.plan:
            raise SweepError("the sweep has no steps; give at least one concurrency")
        if self.warmup_s < 0 or not self.dwell_s > 0 or not self.tick_s > 0:
            raise SweepError(
                f"warm-up {self.warmup_s:g} s, dwell {self.dwell_s:g} s, tick {self.tick_s:g} s; "
                "the warm-up must be ≥ 0 and the others above 0"
            )
        if self.max_dwell_s < self.dwell_s:
            raise SweepError(
                f"max dwell {self.max_dwell_s:g} s is shorter than the dwell {self.dwell_s:g} s"
            )
        if self.min_requests < 1:
            raise SweepError(f"min requests {self.min_requests}; it must be at least 1")
        if self.max_follow_s is not None and not self.max_follow_s >= 0:
            raise SweepError(f"max follow {self.max_follow_s:g} s; it must be ≥ 0")


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


@dataclass(slots=True)
class _Gauges:
    kv_usage: list[float] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)
    running: list[float] = field(default_factory=list)

    def add(self, snapshot: Snapshot) -> None:
        if snapshot.kv.usage_ratio is not None:
            self.kv_usage.append(snapshot.kv.usage_ratio)
        if snapshot.requests.waiting is not None:
            self.waiting.append(snapshot.requests.waiting)
        if snapshot.requests.running is not None:
            self.running.append(snapshot.requests.running)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _value(summary: LatencySummary, percentile: float) -> float | None:
    return summary.at(percentile)


def _server_value(view: WindowView | None, key: str, percentile: float) -> float | None:
    if view is None:
        return None
    estimate = latency_quantiles(view, key, percentile).at(percentile)
    return estimate.value if estimate is not None else None


def _server_verdict(
    view: WindowView | None, key: str, percentile: float, target_s: float
) -> str | None:
    """What the server's bucket alone says of a target: "pass", "breach" or "undecided"."""
    if view is None:
        return None
    estimate = latency_quantiles(view, key, percentile).at(percentile)
    return judge_estimate(estimate, target_s).value if estimate is not None else None


def _batch_tokens_p99(view: WindowView | None) -> QuantileEstimate | None:
    delta = view.histogram("iteration_tokens") if view is not None else None
    return delta.quantile(0.99) if delta is not None else None


def measure_step(
    concurrency: int,
    records: Sequence[ProbeRecord],
    start_s: float,
    end_s: float,
    settings: SweepSpec,
    gauges_kv: Sequence[float] = (),
    gauges_waiting: Sequence[float] = (),
    gauges_running: Sequence[float] = (),
    view: WindowView | None = None,
    *,
    followed_s: float | None = None,
    requests_cut: int | None = None,
) -> StepResult:
    """Summarise one step's dwell (`window_stats`'s counting) and the server's view of it."""
    slo = settings.slo
    percentiles = tuple(sorted({*STANDARD_PERCENTILES, slo.ttft_percentile, slo.itl_percentile}))
    targets = GoodputTargets(ttft_s=slo.ttft_s, tpot_s=slo.itl_s)
    stats = window_stats(records, start_s, end_s, percentiles, targets, requests_cut)
    preemptions = view.increase("preemptions") if view is not None else None
    batch = _batch_tokens_p99(view)
    return StepResult(
        concurrency=concurrency,
        started_at_s=start_s,
        measured_s=end_s - start_s,
        requests_ok=stats.requests_ok,
        requests_failed=stats.requests_failed,
        min_requests_met=stats.requests_ok >= settings.min_requests,
        ttft_p50_s=_value(stats.ttft, 50.0),
        ttft_p90_s=_value(stats.ttft, 90.0),
        ttft_p99_s=_value(stats.ttft, 99.0),
        ttft_slo_s=_value(stats.ttft, slo.ttft_percentile),
        itl_p50_s=_value(stats.itl, 50.0),
        itl_p90_s=_value(stats.itl, 90.0),
        itl_p99_s=_value(stats.itl, 99.0),
        itl_slo_s=_value(stats.itl, slo.itl_percentile),
        tpot_p50_s=_value(stats.tpot, 50.0),
        tpot_p90_s=_value(stats.tpot, 90.0),
        tpot_p99_s=_value(stats.tpot, 99.0),
        goodput_ratio=stats.goodput.ratio if stats.goodput is not None else None,
        output_tokens_per_s=stats.output_tokens_per_s,
        requests_per_s=stats.request_rate_rps,
        server_ttft_p50_s=_server_value(view, "ttft", 50.0),
        server_ttft_p90_s=_server_value(view, "ttft", 90.0),
        server_ttft_p99_s=_server_value(view, "ttft", 99.0),
        server_ttft_slo_s=_server_value(view, "ttft", slo.ttft_percentile),
        server_itl_p50_s=_server_value(view, "itl", 50.0),
        server_itl_p90_s=_server_value(view, "itl", 90.0),
        server_itl_p99_s=_server_value(view, "itl", 99.0),
        server_itl_slo_s=_server_value(view, "itl", slo.itl_percentile),
        server_ttft_slo_verdict=_server_verdict(view, "ttft", slo.ttft_percentile, slo.ttft_s),
        server_itl_slo_verdict=_server_verdict(view, "itl", slo.itl_percentile, slo.itl_s),
        server_output_tokens_per_s=(
            view.rate_per_s("generation_tokens") if view is not None else None
        ),
        kv_usage_mean_ratio=_mean(gauges_kv),
        kv_usage_max_ratio=max(gauges_kv, default=None),
        preemptions=preemptions,
        waiting_mean=_mean(gauges_waiting),
        waiting_max=max(gauges_waiting, default=None),
        running_mean=_mean(gauges_running),
        running_max=max(gauges_running, default=None),
        batch_tokens_p99=batch.value if batch is not None else None,
        followed_s=followed_s,
        requests_cut=stats.requests_cut,
        batch_tokens_p99_lower=fmt.finite(batch.bucket_lower) if batch is not None else None,
        batch_tokens_p99_upper=fmt.finite(batch.bucket_upper) if batch is not None else None,
    )


def sent_in_dwell(
    records: Sequence[ProbeRecord], status: ProbeStatus | None, start_s: float, now_s: float
) -> int:
    """Requests sent in the dwell so far that ended well or still stream (the latencies to come)."""
    ended = sum(1 for r in records if r.ok and start_s <= r.sent_at_s <= now_s)
    streaming = status.streaming_sent_at_s if status is not None else ()
    return ended + sum(1 for sent_s in streaming if start_s <= sent_s <= now_s)


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
    ) -> None:
        self._control = control
        self._watch = watch
        self._settings = settings
        self._clock = clock
        self._sleep = sleep
        self._cancel = cancel or threading.Event()
        self._on_progress = on_progress
        self._on_step = on_step
        self._handle: ProbeHandle | None = None

    def run(self, resume: SweepResult | None = None) -> SweepResult:
        """Measure every remaining step until a stop rule fires; the load is off when it returns."""
        settings = self._settings
        result = SweepResult(self._control.url, self._clock(), settings)
        if resume is not None:
            result = replace(resume, settings=settings, stop=None)
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
        except (KeyboardInterrupt, SweepCancelled):
            stop = StopReason.INTERRUPTED
        finally:
            self._stop_load()
        final = self._decided(result, stop)
        self._report(final)
        return final

    def _decided(self, result: SweepResult, stop: StopReason | None) -> SweepResult:
        settings = self._settings
        return replace(
            result,
            stop=stop,
            recommendation=recommend(result.steps, settings.slo, settings.rules, settings.limits),
        )

    def _report(self, result: SweepResult) -> None:
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

    def _poll(self, gauges: _Gauges | None) -> None:
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
                )
            )

    def _run_step(self, concurrency: int, number: int, total: int) -> StepResult:
        settings = self._settings
        self._set_load(concurrency)
        began = self._clock()
        handle = self._control.probe
        self._progress(number, total, concurrency, "warmup", 0.0, 0)
        while (now := self._clock()) - began < settings.warmup_s:
            self._tick()
            self._poll(None)
            if handle is not None:
                handle.drain_records()
            self._progress(number, total, concurrency, "warmup", self._clock() - began, 0)
        start = now
        kept: list[ProbeRecord] = []
        gauges = _Gauges()
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
                elapsed >= settings.dwell_s and ok >= settings.min_requests
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
        return measure_step(
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
        )

    @staticmethod
    def _check_alive(handle: ProbeHandle) -> None:
        if not handle.running:
            raise SweepError("the probe process ended during the sweep; see the probe's events")
