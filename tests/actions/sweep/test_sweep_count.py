"""How a sweep step counts: requests that last about as long as the dwell, on a fake clock.

The fake probe runs a closed loop whose requests all take 10 s: a 1 s TTFT, then one token a
second, 10 tokens in all. Both slots send at the step's start (1000 s) and every 10 s after.
The warm-up is 2 s and the dwell 12 s, so the window is (1002, 1014]:
  the two requests sent at 1000 deliver at 1003..1010 inside it: 8 tokens each;
  the two sent at 1010 deliver at 1011..1014 inside it: 4 tokens each;
  24 tokens in 12 s: 2.0 tok/s, the loop's true rate (2 slots × 1 token a second).
Counting only requests both sent after the warm-up's start and ended in the dwell (the old way)
finds the two sent at 1000: 20 tokens, 1.67 tok/s (−17%, the issue's figure at concurrency 2).
Latencies come from the two sent at 1010, inside the window; they end at 1020, 6 s past it.
"""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest

from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.codec import sweep_from_json, sweep_to_json
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult, SweepRunner
from slotop.actions.sweep.table import format_sweep_text
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.window import WindowView
from slotop.slo import Slo

REQUEST_S = 10.0
TOKENS = 10
SHAPE = LoadShape(
    prompt_lengths=LengthDistribution("fixed", 16),
    output_lengths=LengthDistribution("fixed", TOKENS),
    max_concurrency=8,
)
SLO = Slo(ttft_s=2.0, itl_s=2.0)


class Clock:
    def __init__(self) -> None:
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds


class LongRequestLoop:
    """A closed loop of `concurrency` slots, each sending a 10 s request as the last one ends."""

    def __init__(self, clock: Clock, concurrency: int) -> None:
        self.clock = clock
        self.began_s = clock()
        self.concurrency = concurrency
        self.stopped = False
        self.drained: set[int] = set()

    @property
    def running(self) -> bool:
        return not self.stopped

    def set_concurrency(self, concurrency: int) -> None:
        raise AssertionError("one step only")

    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None:
        raise AssertionError("a sweep is closed loop")

    def stop(self, timeout_s: float = 5.0) -> None:
        self.stopped = True

    def events(self) -> list[ProbeEvent]:
        return []

    def _sends(self) -> list[tuple[int, float]]:
        """(request id, send time) of every request sent by now, slot after slot."""
        rounds = int((self.clock() - self.began_s) // REQUEST_S) + 1
        return [
            (n * self.concurrency + slot, self.began_s + n * REQUEST_S)
            for n in range(rounds)
            for slot in range(self.concurrency)
        ]

    def status(self) -> ProbeStatus | None:
        now = self.clock()
        streaming = tuple(sent for _, sent in self._sends() if now < sent + REQUEST_S)
        return ProbeStatus(
            now, 0, "closed", self.concurrency, None, len(streaming), 0, 0, 0, streaming
        )

    def drain_records(self) -> list[ProbeRecord]:
        now, ended = self.clock(), []
        for request_id, sent in self._sends():
            if sent + REQUEST_S <= now and request_id not in self.drained:
                self.drained.add(request_id)
                ended.append(record(request_id, sent))
        return ended


def record(request_id: int, sent_s: float) -> ProbeRecord:
    return ProbeRecord(
        request_id=request_id,
        step=0,
        sent_at_s=sent_s,
        done_at_s=sent_s + REQUEST_S,
        in_flight_at_send=1,
        planned_prompt_tokens=16,
        planned_output_tokens=TOKENS,
        ttft_s=1.0,
        itl_s=(1.0,) * (TOKENS - 1),
        e2e_s=REQUEST_S,
        chunk_count=TOKENS,
        prompt_tokens=16,
        output_tokens=TOKENS,
        finish_reason="length",
        error=None,
    )


class CounterWatch:
    """The replica's side: idle gauges, and a generation-token counter that rose by `tokens`."""

    def __init__(self, tokens: float) -> None:
        self.tokens = tokens

    def poll(self) -> Any:
        return SimpleNamespace(
            kv=SimpleNamespace(usage_ratio=0.1),
            requests=SimpleNamespace(running=2.0, waiting=0.0),
            simulated_gpu=None,  # a real replica serves no simulated GPU
            replica=SimpleNamespace(engine="vllm"),
        )

    def view(self, span_s: float) -> WindowView:
        increases = MappingProxyType({"generation_tokens": self.tokens, "preemptions": 0.0})
        return WindowView(span_s, span_s, increases, {})


def one_step(max_follow_s: float | None = None, server_tokens: float = 24.0) -> SweepResult:
    clock = Clock()

    def start(target: Any, shape: Any, concurrency: int | None, rate: Any) -> LongRequestLoop:
        assert concurrency is not None
        return LongRequestLoop(clock, concurrency)

    control = ProbeControl(
        ProbeTarget("http://127.0.0.1:8000"), SHAPE, False, start_probe=start, clock=clock
    )
    spec = SweepSpec(
        plan=(2,),
        slo=SLO,
        warmup_s=2.0,
        dwell_s=12.0,
        min_requests=1,
        max_dwell_s=12.0,
        max_follow_s=max_follow_s,
    )
    runner = SweepRunner(control, CounterWatch(server_tokens), spec, clock=clock, sleep=clock.sleep)
    return runner.run()


def test_a_step_of_long_requests_counts_every_token_of_its_dwell() -> None:
    (step,) = one_step().steps
    assert (step.started_at_s, step.measured_s) == (1002.0, 12.0)
    assert step.client.output_tokens_per_s == pytest.approx(24 / 12)
    assert step.server.output_tokens_per_s == pytest.approx(24 / 12)
    assert step.client.requests_ok == 2  # the two sent at 1010, followed to 1020
    assert step.client.ttft_p99_s == pytest.approx(1.0)
    assert step.client.tpot_p50_s == pytest.approx(1.0)
    assert (step.followed_s, step.requests_cut) == (6.0, 0)


def test_a_wait_too_short_for_the_dwells_requests_cuts_them_and_says_so() -> None:
    result = one_step(max_follow_s=3.0)
    (step,) = result.steps
    assert (step.followed_s, step.requests_cut) == (3.0, 2)
    assert step.client.requests_ok == 0
    assert step.client.output_tokens_per_s == pytest.approx(
        16 / 12
    )  # only the requests sent at 1000
    text = format_sweep_text(result)
    assert "concurrency 2: 2 requests still streamed after a wait of 3 s past the dwell" in text
    assert "the probe's 1.3 tok/s and the replica's 2.0 tok/s differ by -33%" in text


def test_the_step_file_keeps_the_wait_and_the_gap_to_the_replicas_counter() -> None:
    result = one_step(server_tokens=30.0)  # the replica made 2.5 tok/s: the probe saw 20% fewer
    data = sweep_to_json(result)
    (row,) = data["steps"]
    assert (row["followed_s"], row["requests_cut"]) == (6.0, 0)
    assert row["throughput_gap_ratio"] == pytest.approx(2.0 / 2.5 - 1)
    assert data["settings"]["max_follow_s"] is None
    back = sweep_from_json(data)
    assert back.steps == result.steps
    assert "differ by -20% (more than 10%)" in format_sweep_text(result)


def test_a_step_file_from_before_the_wait_still_reads() -> None:
    data = sweep_to_json(one_step())
    for row in data["steps"]:
        for key in ("followed_s", "requests_cut", "throughput_gap_ratio"):
            del row[key]
    del data["settings"]["max_follow_s"]
    (step,) = sweep_from_json(data).steps
    assert (step.followed_s, step.requests_cut) == (None, None)
    assert step.client.output_tokens_per_s == pytest.approx(2.0)
