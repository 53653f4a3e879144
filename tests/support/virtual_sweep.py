"""The sweep runner against the simulated engine in virtual time: a sweep of minutes in seconds.

`VirtualProbe` is a probe handle over a `VirtualRun`: the probe's own load rules (streams that
open short, dithered lengths) against the simulated engine, its clock moved only by the runner's
sleeps. `VirtualWatch` reads the engine's gauges as the replica's /metrics would give them. The
runner, the stop rules and the recommendation are the real ones; only time is virtual.
"""

from __future__ import annotations

import math
from types import MappingProxyType, SimpleNamespace
from typing import Any

from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult, SweepRunner
from slotop.collectors.names import Engine
from slotop.collectors.probe.loadshape import LoadShape
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.window import SPAN_SLACK_RATIO, HistogramDelta, WindowView
from slotop.sim.metrics import ITERATION_TOKENS_BUCKETS
from slotop.sim.types import EngineConfig
from tests.support.virtual_load import VirtualRun

URL = "http://127.0.0.1:8000"


class VirtualClock:
    """Seconds that pass only when someone sleeps; each sleep runs the engine that long."""

    def __init__(self, run: VirtualRun) -> None:
        self.now_s = 0.0
        self.run = run

    def __call__(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds
        self.run.advance(self.now_s)


class VirtualProbe:
    """A probe handle over a virtual run: commands take effect at the clock's now."""

    def __init__(self, clock: VirtualClock, concurrency: int) -> None:
        self.clock = clock
        self.run = clock.run
        self.stopped = False
        self._taken = 0
        self._held: list[ProbeRecord] = []
        self.run.set_load(clock(), concurrency)

    @property
    def running(self) -> bool:
        return not self.stopped

    def set_concurrency(self, concurrency: int) -> None:
        self.run.set_load(self.clock(), concurrency)

    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None:
        raise AssertionError("the virtual probe runs a closed loop only")

    def stop(self, timeout_s: float = 5.0) -> None:
        if not self.stopped:
            self.run.set_load(self.clock(), 0)
        self.stopped = True

    def _ended_by_now(self) -> list[ProbeRecord]:
        """Records whose end the clock has passed (a step started before now may end after)."""
        fresh = self.run.records[self._taken :]
        self._taken = len(self.run.records)
        self._held += fresh
        now = self.clock()
        ended = [r for r in self._held if r.done_at_s <= now]
        self._held = [r for r in self._held if r.done_at_s > now]
        return ended

    def drain_records(self) -> list[ProbeRecord]:
        return [] if self.stopped else self._ended_by_now()

    def status(self) -> ProbeStatus:
        now = self.clock()
        streaming = [*self.run.in_flight_sent_s(), *(r.sent_at_s for r in self._pending())]
        openings = self.run.openings_in_flight() + sum(1 for r in self._pending() if r.opening)
        events = self.run.events
        return ProbeStatus(
            at_s=now,
            step=events[-1].step if events else -1,
            mode="closed",
            target_concurrency=self.run.concurrency,
            rate_rps=None,
            in_flight=len(streaming),
            sent_total=0,
            done_total=0,
            failed_total=0,
            streaming_sent_at_s=tuple(sorted(streaming)),
            openings_streaming=openings,
        )

    def _pending(self) -> list[ProbeRecord]:
        """Ended in the engine, not yet by the clock: still streaming as far as a reader knows."""
        now = self.clock()
        return [r for r in (*self._held, *self.run.records[self._taken :]) if r.done_at_s > now]

    def events(self) -> list[ProbeEvent]:
        return list(self.run.events)


class VirtualWatch:
    """The replica's gauges from the engine (KV usage, running, waiting), its preemption and
    generation-token counters over a span, and the tokens each step batched (`iteration_tokens`),
    as the sweep reads them from /metrics: the counters from the polls, a base reading and the
    newest, the way `collectors.window` takes them from scrapes."""

    def __init__(self, run: VirtualRun, clock: VirtualClock, engine: Engine = "vllm") -> None:
        self.run = run
        self.clock = clock
        self.engine = engine
        self.readings: list[tuple[float, int, int]] = []
        """(time, preemptions, generation tokens) at each poll."""

    def poll(self) -> Any:
        stats = self.run.engine.stats()
        self.readings.append((self.clock(), stats.preemptions_total, stats.generation_tokens_total))
        return SimpleNamespace(
            kv=SimpleNamespace(usage_ratio=stats.kv_usage_ratio),
            requests=SimpleNamespace(
                running=float(stats.num_running), waiting=float(stats.num_waiting)
            ),
            simulated_gpu=None,
            replica=SimpleNamespace(engine=self.engine),
        )

    def view(self, span_s: float) -> WindowView:
        now = self.clock()
        counters: dict[str, float] = {"preemptions": 0.0}
        covered_s = span_s
        inside = [r for r in self.readings if r[0] >= now - span_s * (1 + SPAN_SLACK_RATIO)]
        if len(inside) >= 2:
            (base_s, base_preempted, base_tokens), (last_s, preempted, tokens) = (
                inside[0],
                inside[-1],
            )
            counters = {
                "preemptions": float(preempted - base_preempted),
                "generation_tokens": float(tokens - base_tokens),
            }
            covered_s = last_s - base_s
        tokens_per_step = [n for at_s, n in self.run.step_tokens if now - span_s <= at_s <= now]
        served = self.engine == "vllm"  # SGLang has no tokens-per-step histogram
        histograms = (
            {"iteration_tokens": _histogram(tokens_per_step)} if tokens_per_step and served else {}
        )
        return WindowView(span_s, covered_s, MappingProxyType(counters), histograms)


def _histogram(values: list[int]) -> HistogramDelta:
    """Observations as a Prometheus histogram with vLLM's `iteration_tokens_total` buckets."""
    bounds = (*ITERATION_TOKENS_BUCKETS, math.inf)
    buckets = tuple((bound, float(sum(1 for v in values if v <= bound))) for bound in bounds)
    return HistogramDelta(buckets, float(len(values)), float(sum(values)))


def virtual_sweep(
    config: EngineConfig,
    shape: LoadShape,
    spec: SweepSpec,
    *,
    seed: int = 0,
    engine: Engine = "vllm",
) -> SweepResult:
    """Run a whole sweep of `spec` against `config`'s engine in virtual time, its /metrics read
    as `engine` serves them."""
    run = VirtualRun(config, shape, seed=seed)
    clock = VirtualClock(run)

    def start(_: Any, __: Any, concurrency: int | None, rate: float | None) -> VirtualProbe:
        assert concurrency is not None and rate is None
        return VirtualProbe(clock, concurrency)

    control = ProbeControl(ProbeTarget(URL), shape, False, start_probe=start, clock=clock)
    watch = VirtualWatch(run, clock, engine)
    runner = SweepRunner(control, watch, spec, clock=clock, sleep=clock.sleep)
    return runner.run()
