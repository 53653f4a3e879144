"""A replica whose behaviour follows its dials, on a fake clock: the tune's loop without a server.

The cache holds `kv_seqs` sequences of the load (4 at 16 bits, 8 at fp8); at most
min(kv_seqs, max_num_seqs) run, the rest wait. Each running slot ends a request every
`service_s` (TTFT plus ten 20 ms gaps), its slots out of phase, so a step's goodput is
concurrency / service_s. TTFT is 100 ms while nothing waits and grows by 600 ms × waiting /
running past that. The sweep is the real `SweepRunner` (refined as the tune asks), driving a
closed-loop fake probe through the real `ProbeControl`.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable
from types import MappingProxyType, SimpleNamespace
from typing import Any

from slotop.actions.budget.kv import dtype_bytes
from slotop.actions.probe_control import ProbeControl
from slotop.actions.replica.spec import Dials
from slotop.actions.sweep.decide import StopRules
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import StepMeasured, SweepProgress, SweepResult, SweepRunner
from slotop.actions.tune.runner import Applied, QualityResult
from slotop.collectors.probe.records import ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.window import WindowView
from tests.support.fake_probe import FakeProbe
from tests.support.sweep_loop import SHAPE, Clock
from tests.support.sweep_steps import SLO
from tests.support.tune_trials import TUNE

GAPS_S = (0.02,) * 10
ORIGINAL = Dials("auto", 6)
"""The fake replica's own dials: 16-bit KV cache (4 of the load's sequences), max_num_seqs 6."""
SPEC = dataclasses.replace(
    TUNE,
    sweep=SweepSpec(
        plan=(1, 2, 4, 8, 16),
        slo=SLO,
        warmup_s=1.0,
        dwell_s=5.0,
        min_requests=5,
        max_dwell_s=10.0,
        max_follow_s=1.0,
        rules=StopRules(queue_waiting_requests=1.0),
    ),
)
"""A tune of the fake replica: sweeps of 1 s warm-up and 5 s dwell on the fake clock."""


class DialsModel:
    """What the fake replica does at a concurrency, given the dials it runs."""

    def __init__(self, dials: Dials) -> None:
        self.dials = dials

    @property
    def kv_seqs(self) -> int:
        return 8 if dtype_bytes(self.dials.kv_cache_dtype) == 1 else 4

    def running(self, concurrency: int) -> int:
        return min(concurrency, self.kv_seqs, self.dials.max_num_seqs or 1024)

    def ttft_s(self, concurrency: int) -> float:
        running = self.running(concurrency)
        return 0.1 + 0.6 * (concurrency - running) / max(running, 1)

    def service_s(self, concurrency: int) -> float:
        return self.ttft_s(concurrency) + sum(GAPS_S)


class ServingProbe(FakeProbe):
    """Closed loop: each slot ends a request every `service_s`, the slots spread over it."""

    def __init__(self, clock: Clock, concurrency: int, model: DialsModel) -> None:
        super().__init__(concurrency, closed_loop=True)
        self.clock = clock
        self.concurrency = concurrency
        self.model = model
        self.last_s = clock()
        self.next_id = 0

    def set_concurrency(self, concurrency: int) -> None:
        super().set_concurrency(concurrency)
        self.concurrency = concurrency

    def status(self) -> ProbeStatus:
        """Settled at once (its streams open with no short request) and nothing left streaming."""
        now = self.clock()
        return ProbeStatus(now, 0, "closed", self.concurrency, None, 0, 0, 0, 0)

    def drain_records(self) -> list[ProbeRecord]:
        now, records = self.clock(), []
        if self.stopped or now <= self.last_s:
            return records
        service = self.model.service_s(self.concurrency)
        ttft = self.model.ttft_s(self.concurrency)
        for slot in range(self.concurrency):
            phase = service * slot / self.concurrency
            k = math.floor((self.last_s - phase) / service) + 1
            while (done := phase + k * service) <= now:
                self.next_id += 1
                records.append(self._record(done - service, done, ttft))
                k += 1
        self.last_s = now
        return records

    def _record(self, sent_s: float, done_s: float, ttft_s: float) -> ProbeRecord:
        return ProbeRecord(
            request_id=self.next_id,
            step=0,
            sent_at_s=sent_s,
            done_at_s=done_s,
            in_flight_at_send=self.concurrency,
            planned_prompt_tokens=100,
            planned_output_tokens=11,
            ttft_s=ttft_s,
            itl_s=GAPS_S,
            e2e_s=done_s - sent_s,
            chunk_count=11,
            prompt_tokens=100,
            output_tokens=11,
            finish_reason="length",
            error=None,
        )


class DialsWatch:
    """The replica's gauges: running, waiting and KV usage as the model says at the load."""

    def __init__(self, probes: list[ServingProbe], model: DialsModel) -> None:
        self.probes = probes
        self.model = model

    def poll(self) -> Any:
        concurrency = self.probes[-1].concurrency if self.probes else 0
        running = self.model.running(concurrency)
        return SimpleNamespace(
            kv=SimpleNamespace(usage_ratio=running / self.model.kv_seqs),
            requests=SimpleNamespace(running=float(running), waiting=float(concurrency - running)),
            simulated_gpu=None,
            replica=SimpleNamespace(engine="vllm"),
        )

    def view(self, span_s: float) -> WindowView:
        return WindowView(span_s, span_s, MappingProxyType({"preemptions": 0.0}), {})


class FakeTuneReplica:
    """A `TuneReplica` on the fake clock: restarts apply at once (unless told to fail), the
    quality check answers `match_ratio`, and every call is logged."""

    def __init__(self, dials: Dials, clock: Clock, *, match_ratio: float | None = 1.0) -> None:
        self.model = DialsModel(dials)
        self.clock = clock
        self.match_ratio = match_ratio
        self.log: list[str] = []
        self.probes: list[ServingProbe] = []
        self.refuse: set[Dials] = set()
        self.on_sweep_progress: Callable[[SweepProgress], None] = lambda _update: None

    @property
    def dials(self) -> Dials:
        return self.model.dials

    def apply(self, before: Dials, after: Dials) -> Applied:
        assert before == self.model.dials, (
            f"restart from {before}, but the replica runs {self.dials}"
        )
        self.clock.sleep(2.0)
        if after in self.refuse:
            self.log.append(f"rolled back {' '.join(after.flag_args())}")
            return Applied("rolled_back", before, ("ROLLED BACK",), 2.0)
        self.model.dials = after
        self.log.append(f"applied {' '.join(after.flag_args())}")
        return Applied("applied", after, ("Restarted with the new dials, verified",), 2.0)

    def verify(self, dials: Dials) -> tuple[bool, tuple[str, ...]]:
        self.log.append(f"verified {' '.join(dials.flag_args())}")
        return dials == self.model.dials, ("dials match",)

    def sweep(
        self,
        spec: SweepSpec,
        resume: SweepResult | None,
        cancel: threading.Event,
        on_progress: Callable[[SweepProgress], None],
        on_measured: StepMeasured,
    ) -> SweepResult:
        self.log.append(f"sweep {' '.join(self.dials.flag_args())}")

        def start(target: Any, shape: Any, concurrency: int | None, rate: float | None) -> Any:
            assert concurrency is not None
            self.probes.append(ServingProbe(self.clock, concurrency, self.model))
            return self.probes[-1]

        def progress(update: SweepProgress) -> None:
            on_progress(update)
            self.on_sweep_progress(update)

        control = ProbeControl(
            ProbeTarget("http://127.0.0.1:8000"), SHAPE, False, start_probe=start, clock=self.clock
        )
        runner = SweepRunner(
            control,
            DialsWatch(self.probes, self.model),
            spec,
            clock=self.clock,
            sleep=self.clock.sleep,
            cancel=cancel,
            on_progress=progress,
            on_measured=on_measured,
        )
        return runner.run(resume=resume)

    def quality_baseline(self) -> object:
        self.log.append(f"quality before {self.dials.kv_cache_dtype}")
        return "baseline"

    def quality_check(self, baseline: object, outcome: str) -> QualityResult:
        assert baseline == "baseline"
        self.log.append(f"quality after {self.dials.kv_cache_dtype}")
        ratio = self.match_ratio
        data = {"not_run": None, "position_match_ratio": ratio} if ratio is not None else {
            "not_run": "the run after the restart failed"
        }  # fmt: skip
        return QualityResult(data, ratio)
