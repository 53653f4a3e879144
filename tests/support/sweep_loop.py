"""A closed loop against a fake replica on a fake clock: the sweep runner's tests without a server.

Each tick of the clock, every slot of the probe finishes one request whose TTFT the test chooses
as a function of the concurrency, and the fake replica's gauges follow the load (KV usage of
concurrency / 32, requests over `seq_cap` waiting). Nothing waits: time moves when the runner sleeps.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType, SimpleNamespace
from typing import Any

from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepRunner
from slotop.collectors.errors import ScrapeError
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.window import WindowView
from slotop.slo import Slo
from tests.support.fake_probe import FakeProbe

SHAPE = LoadShape(
    prompt_lengths=LengthDistribution("fixed", 100),
    output_lengths=LengthDistribution("fixed", 11),
    max_concurrency=32,
)
SLO = Slo(ttft_s=0.5, itl_s=0.04)
SETTINGS = SweepSpec(
    plan=(1, 2, 4, 8, 16), slo=SLO, warmup_s=2.0, dwell_s=5.0, min_requests=5, max_dwell_s=20.0
)

Ttft = Callable[[int], float]


class Clock:
    """Time that moves only when the runner sleeps."""

    def __init__(self) -> None:
        self.now_s = 1000.0
        self.on_sleep: Callable[[], None] = lambda: None

    def __call__(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds
        self.on_sleep()


def ttft_at(concurrency: int) -> float:
    """The default fake replica's TTFT: 60 ms per request in flight (breaks 500 ms above 8)."""
    return 0.06 * concurrency


class LoopProbe(FakeProbe):
    """Closed loop against a fake replica: each tick, every slot finishes one request."""

    def __init__(
        self, clock: Clock, concurrency: int, log: list[str], ttft: Ttft = ttft_at
    ) -> None:
        super().__init__(concurrency, closed_loop=True)
        self.clock = clock
        self.concurrency = concurrency
        self.log = log
        self.ttft = ttft
        self.next_id = 0
        self.last_s = clock()
        self.extra: list[ProbeRecord] = []
        log.append(f"start {concurrency}")

    def set_concurrency(self, concurrency: int) -> None:
        super().set_concurrency(concurrency)
        self.log.append(f"set {concurrency}")
        self.concurrency = concurrency

    def stop(self, timeout_s: float = 5.0) -> None:
        super().stop(timeout_s)
        self.log.append("stop")

    def status(self) -> ProbeStatus:
        """Settled at once (its streams open with no short request) and nothing left streaming."""
        now = self.clock()
        return ProbeStatus(now, 0, "closed", self.concurrency, None, 0, 0, 0, 0)

    def drain_records(self) -> list[ProbeRecord]:
        now = self.clock()
        records = list(self.extra)
        self.extra.clear()
        if now > self.last_s and not self.stopped:
            ttft = self.ttft(self.concurrency)
            for _ in range(self.concurrency):
                records.append(self.record(now - 0.8, now, ttft))
        self.last_s = now
        return records

    def record(self, sent_s: float, done_s: float, ttft_s: float) -> ProbeRecord:
        self.next_id += 1
        return ProbeRecord(
            request_id=self.next_id,
            step=0,
            sent_at_s=sent_s,
            done_at_s=done_s,
            in_flight_at_send=self.concurrency,
            planned_prompt_tokens=100,
            planned_output_tokens=11,
            ttft_s=ttft_s,
            itl_s=(0.02,) * 10,
            e2e_s=done_s - sent_s,
            chunk_count=11,
            prompt_tokens=100,
            output_tokens=11,
            finish_reason="length",
            error=None,
        )


class FakeWatch:
    """The replica's side: gauges that follow the probe's concurrency, and a window view."""

    def __init__(self, probes: list[LoopProbe], seq_cap: int = 1000) -> None:
        self.probes = probes
        self.seq_cap = seq_cap
        self.polls = 0
        self.fail = False

    def poll(self) -> Any:
        self.polls += 1
        if self.fail:
            raise ScrapeError("connection refused")
        concurrency = self.probes[-1].concurrency if self.probes else 0
        running = min(concurrency, self.seq_cap)
        return SimpleNamespace(
            kv=SimpleNamespace(usage_ratio=concurrency / 32),
            requests=SimpleNamespace(running=float(running), waiting=float(concurrency - running)),
            simulated_gpu=None,
            replica=SimpleNamespace(engine="vllm"),
        )

    def view(self, span_s: float) -> WindowView:
        return WindowView(span_s, span_s, MappingProxyType({"preemptions": 0.0}), {})


def make_runner(
    clock: Clock,
    probes: list[LoopProbe],
    log: list[str],
    *,
    settings: SweepSpec = SETTINGS,
    url: str = "http://127.0.0.1:8000",
    watch: FakeWatch | None = None,
    ttft: Ttft = ttft_at,
    **kwargs: Any,
) -> SweepRunner:
    """A sweep runner whose probe is a `LoopProbe` (each one started is appended to `probes`)."""

    def start(target: Any, shape: Any, concurrency: int | None, rate: float | None) -> LoopProbe:
        assert concurrency is not None and rate is None
        probes.append(LoopProbe(clock, concurrency, log, ttft))
        return probes[-1]

    control = ProbeControl(ProbeTarget(url), SHAPE, False, start_probe=start, clock=clock)
    return SweepRunner(
        control,
        watch if watch is not None else FakeWatch(probes),
        settings,
        clock=clock,
        sleep=clock.sleep,
        **kwargs,
    )
