"""The probe process end to end against the simulated replica on a free loopback port."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from slotop.collectors.errors import ProbeError
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ErrorClass, EventKind, ProbeRecord
from slotop.collectors.probe.stream import ProbeTarget
from tests.support.sim_replica import run_sim
from tests.support.vllm_replica import free_port

pytestmark = pytest.mark.slow

SHAPE = LoadShape(
    prompt_lengths=LengthDistribution("fixed", 64),
    output_lengths=LengthDistribution("fixed", 400),
    max_concurrency=16,
    max_rate_rps=100.0,
)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    yield from run_sim()


def wait_until(probe: Probe, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met; status {probe.status()}"
        probe.wait_for_batch(0.2)


def test_stepping_concurrency_live_changes_in_flight_counts_within_one_step(sim_url: str) -> None:
    records: list[ProbeRecord] = []
    with Probe.start(ProbeTarget(sim_url), SHAPE, concurrency=2) as probe:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.in_flight == 2)
        probe.set_concurrency(6)
        wait_until(probe, lambda: (s := probe.status()) is not None and s.step == 1)
        status = probe.status()
        assert status is not None and status.in_flight == 6  # the first count after the step
        probe.set_concurrency(1)
        wait_until(probe, lambda: (s := probe.status()) is not None and s.step == 2)

        def a_step_two_record_arrived() -> bool:
            records.extend(probe.drain_records())
            return any(r.step == 2 for r in records)

        wait_until(probe, a_step_two_record_arrived)
    records.extend(probe.drain_records())
    by_step: dict[int, set[int]] = {}
    for record in records:
        by_step.setdefault(record.step, set()).add(record.in_flight_at_send)
    assert by_step[0] == {2}
    assert by_step[1] == {6}
    assert by_step[2] == {1}  # nothing new went out until the six had drained to none
    kept_up = (EventKind.CLIENT_BOUND, EventKind.CLIENT_CAUGHT_UP)  # a busy machine's
    events = [e for e in probe.events() if e.kind not in kept_up]
    assert [e.kind for e in events] == [
        EventKind.STARTED,
        EventKind.CONCURRENCY_SET,
        EventKind.CONCURRENCY_SET,
        EventKind.STOPPED,
    ]
    assert [e.concurrency for e in events[:3]] == [2, 6, 1]


def test_records_measure_every_request_the_replica_served(sim_url: str) -> None:
    with Probe.start(ProbeTarget(sim_url), SHAPE, concurrency=3) as probe:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.done_total >= 6)
    records = [r for r in probe.drain_records() if r.ok]
    assert len(records) >= 6
    for record in records:
        planned = record.planned_output_tokens
        # every length is dithered by up to ±1/8, and an opening then cut to a uniform share of it
        assert planned <= 450 if record.opening else abs(planned - 400) <= round(400 / 8)
        assert record.output_tokens == planned
        assert record.prompt_tokens == 64
        assert record.chunk_count == planned
        assert len(record.itl_s) == planned - 1
        assert record.ttft_s is not None and record.e2e_s is not None
        assert record.e2e_s == pytest.approx(record.ttft_s + sum(record.itl_s))
        assert record.done_at_s == pytest.approx(record.sent_at_s + record.e2e_s)
        assert record.finish_reason == "length"


def test_stop_is_immediate_and_reports_in_flight_requests_as_cancelled(sim_url: str) -> None:
    long_shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 16),
        output_lengths=LengthDistribution("fixed", 30_000),
        max_concurrency=4,
    )
    probe = Probe.start(ProbeTarget(sim_url), long_shape, concurrency=4)
    wait_until(probe, lambda: (s := probe.status()) is not None and s.in_flight == 4)
    probe.stop()
    assert not probe.running
    records = probe.drain_records()
    assert [r.error for r in records] == [ErrorClass.CANCELLED] * 4
    assert probe.events()[-1].kind is EventKind.STOPPED
    with pytest.raises(ProbeError, match="not running"):
        probe.set_concurrency(2)


def test_errors_are_counted_and_never_stop_the_probe() -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with Probe.start(ProbeTarget(dead), SHAPE, concurrency=2) as probe:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.failed_total >= 4)
        assert probe.running
        probe.set_concurrency(1)
        wait_until(probe, lambda: (s := probe.status()) is not None and s.step == 1)
    errors = {r.error for r in probe.drain_records()}
    assert ErrorClass.CONNECT in errors


def test_open_loop_rate_steps_are_events(sim_url: str) -> None:
    with Probe.start(ProbeTarget(sim_url), SHAPE, rate_rps=20.0) as probe:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.sent_total >= 3)
        probe.set_rate(5.0, burstiness=4.0)
        wait_until(probe, lambda: (s := probe.status()) is not None and s.step == 1)
    started, changed = probe.events()[:2]
    assert (started.kind, started.mode, started.rate_rps, started.burstiness) == (
        EventKind.STARTED,
        "open",
        20.0,
        1.0,
    )
    assert (changed.kind, changed.rate_rps, changed.burstiness) == (EventKind.RATE_SET, 5.0, 4.0)


def test_the_caps_refuse_a_level_before_anything_is_sent() -> None:
    with pytest.raises(ProbeError, match=r"concurrency 17 is outside 0\.\.16"):
        Probe.start(ProbeTarget("http://127.0.0.1:9"), SHAPE, concurrency=17)
    with pytest.raises(ProbeError, match=r"request rate 101.0 req/s is outside 0\.\.100"):
        Probe.start(ProbeTarget("http://127.0.0.1:9"), SHAPE, rate_rps=101.0)
    with pytest.raises(ProbeError, match="not both"):
        Probe.start(ProbeTarget("http://127.0.0.1:9"), SHAPE, concurrency=1, rate_rps=1.0)


def test_a_probe_whose_parent_goes_away_stops_its_load(sim_url: str) -> None:
    probe = Probe.start(ProbeTarget(sim_url), SHAPE, concurrency=2)
    wait_until(probe, lambda: (s := probe.status()) is not None and s.in_flight == 2)
    for commands in probe._commands:
        commands.close()  # what the operating system does when the parent dies
    wait_until(probe, lambda: not probe.running)
    assert probe.events()[-1].kind is EventKind.STOPPED
    probe.stop()


def test_the_chat_endpoint_streams_text_messages(sim_url: str) -> None:
    shape = LoadShape(
        endpoint="chat",
        prompt_lengths=LengthDistribution("fixed", 20),
        output_lengths=LengthDistribution("fixed", 12),
    )
    with Probe.start(ProbeTarget(sim_url), shape, concurrency=1) as probe:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.done_total >= 2)
    records = [r for r in probe.drain_records() if r.ok]
    assert records and all(r.output_tokens == r.planned_output_tokens for r in records)
    assert all(abs(r.planned_output_tokens - 12) <= round(12 / 8) for r in records if not r.opening)
    assert all(r.prompt_tokens is not None and r.prompt_tokens >= 20 for r in records)
