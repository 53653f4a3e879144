"""The sweep runner with a fake probe, a fake replica view and a fake clock: no waiting, no server."""

from __future__ import annotations

import gc
import math
import os
import signal
import sys
import threading
from types import MappingProxyType
from typing import Any

import pytest

from slotop.actions.errors import LoadRefusedError, SweepError
from slotop.actions.slo import Binding
from slotop.actions.sweep.command import _signals_cancel
from slotop.actions.sweep.decide import (
    ReplicaLimits,
    StopReason,
    StopRules,
    binding_constraint,
)
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.actions.sweep.step import measure_step
from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.collectors.window import HistogramDelta, WindowView
from tests.support.sweep_loop import SETTINGS, SLO, Clock, FakeWatch, make_runner


def test_the_sweep_backs_off_one_step_from_where_the_slo_breaks_and_stops_the_load() -> None:
    clock, probes, log = Clock(), [], []
    seen: list[SweepResult] = []
    result = make_runner(clock, probes, log, on_step=seen.append).run()
    assert [s.concurrency for s in result.steps] == [1, 2, 4, 8, 16]
    assert result.steps[-1].client.ttft_slo_s == pytest.approx(0.96)
    assert result.stop is StopReason.SLO_BROKEN
    assert result.recommendation.concurrency == 8
    assert result.met_slo and result.finished
    assert log == ["start 1", "set 2", "set 4", "set 8", "set 16", "stop"]
    assert [len(r.steps) for r in seen] == [1, 2, 3, 4, 5]
    assert seen[-1] == result


def test_a_step_counts_only_records_of_its_dwell() -> None:
    clock, probes, log = Clock(), [], []
    settings = SweepSpec(plan=(2,), slo=SLO, warmup_s=2.0, dwell_s=5.0, min_requests=1)
    runner = make_runner(clock, probes, log, settings=settings)

    def inject() -> None:
        probe = probes[-1]
        if not probe.extra:
            # sent before the step began (1000 s), and still ending inside the dwell: left out
            probe.extra.append(probe.record(999.0, clock() - 0.01, 9.0))

    clock.on_sleep = inject
    result = runner.run()
    (step,) = result.steps
    assert step.measured_s == pytest.approx(5.0)
    assert step.client.requests_ok == 2 * 5  # two slots, one request each per second of the dwell
    assert step.client.ttft_p99_s == pytest.approx(0.12)
    assert step.client.output_tokens_per_s == pytest.approx(2 * 11)
    assert step.server.kv_usage_max_ratio == pytest.approx(2 / 32)
    assert step.server.preemptions == 0.0
    assert step.min_requests_met


def test_the_dwell_lasts_until_enough_requests_ended_or_the_longest_dwell() -> None:
    clock, probes, log = Clock(), [], []
    settings = SweepSpec(
        plan=(1, 2), slo=SLO, warmup_s=1.0, dwell_s=2.0, min_requests=7, max_dwell_s=5.0
    )
    result = make_runner(clock, probes, log, settings=settings).run()
    first, second = result.steps
    assert (first.measured_s, first.client.requests_ok, first.min_requests_met) == (5.0, 5, False)
    assert (second.measured_s, second.client.requests_ok, second.min_requests_met) == (4.0, 8, True)


def test_the_queue_behind_a_seq_cap_stops_the_sweep_and_names_the_cap() -> None:
    clock, probes, log = Clock(), [], []
    watch = FakeWatch(probes, seq_cap=4)
    result = make_runner(clock, probes, log, watch=watch).run()
    assert result.stop is StopReason.QUEUE
    assert [s.concurrency for s in result.steps] == [1, 2, 4, 8]
    assert result.recommendation.concurrency == 4
    assert result.recommendation.binding is not None
    assert result.recommendation.binding.value == "seq_cap"
    assert log[-1] == "stop"


def test_a_cancel_mid_step_stops_the_load_and_keeps_the_measured_steps() -> None:
    clock, probes, log = Clock(), [], []
    cancel = threading.Event()

    def progress(update: SweepProgress) -> None:
        if update.concurrency == 4 and update.phase == "dwell":
            cancel.set()

    result = make_runner(clock, probes, log, cancel=cancel, on_progress=progress).run()
    assert result.stop is StopReason.INTERRUPTED
    assert not result.finished
    assert [s.concurrency for s in result.steps] == [1, 2]
    assert probes[-1].stopped and log[-1] == "stop"


def test_ctrl_c_stops_the_load() -> None:
    clock, probes, log = Clock(), [], []

    def interrupt() -> None:
        if probes and probes[-1].concurrency == 2:
            raise KeyboardInterrupt

    clock.on_sleep = interrupt
    result = make_runner(clock, probes, log).run()
    assert result.stop is StopReason.INTERRUPTED
    assert [s.concurrency for s in result.steps] == [1]
    assert probes[-1].stopped


def test_an_error_inside_a_step_stops_the_load_and_propagates() -> None:
    clock, probes, log = Clock(), [], []

    def die() -> None:
        if probes and probes[-1].concurrency == 2:
            probes[-1].stopped = True  # the probe process ended on its own

    clock.on_sleep = die
    with pytest.raises(SweepError, match="the probe process ended during the sweep"):
        make_runner(clock, probes, log).run()
    assert log[-1] == "stop"  # a dead probe's handle is still stopped, so its pipes close


def test_a_resumed_sweep_measures_only_the_steps_left() -> None:
    clock, probes, log = Clock(), [], []
    cancel = threading.Event()

    def progress(update: SweepProgress) -> None:
        if update.concurrency == 4:
            cancel.set()

    partial = make_runner(clock, probes, log, cancel=cancel, on_progress=progress).run()
    assert [s.concurrency for s in partial.steps] == [1, 2]
    log.clear()
    resumed = make_runner(clock, probes, log).run(resume=partial)
    assert [s.concurrency for s in resumed.steps] == [1, 2, 4, 8, 16]
    assert resumed.steps[:2] == partial.steps
    assert log == ["start 4", "set 8", "set 16", "stop"]
    assert resumed.stop is StopReason.SLO_BROKEN
    assert resumed.started_at_s == partial.started_at_s


def test_resuming_a_finished_sweep_sends_no_load() -> None:
    clock, probes, log = Clock(), [], []
    done = make_runner(clock, probes, log).run()
    log.clear()
    again = make_runner(clock, probes, log).run(resume=done)
    assert log == []
    assert again.steps == done.steps and again.stop is done.stop


def test_failed_scrapes_leave_gaps_not_an_end() -> None:
    clock, probes, log = Clock(), [], []
    watch = FakeWatch(probes)
    watch.fail = True
    settings = SweepSpec(plan=(1, 2), slo=SLO, warmup_s=1.0, dwell_s=2.0, min_requests=1)
    result = make_runner(clock, probes, log, settings=settings, watch=watch).run()
    assert result.stop is StopReason.CAP
    assert watch.polls > 0
    assert all(
        s.server.kv_usage_max_ratio is None and s.server.waiting_mean is None for s in result.steps
    )
    assert result.recommendation.concurrency == 2


def test_remote_load_is_refused_before_anything_is_sent() -> None:
    clock, probes, log = Clock(), [], []
    with pytest.raises(LoadRefusedError, match="--allow-remote-load"):
        make_runner(clock, probes, log, url="http://10.1.2.3:8000").run()
    assert probes == []


def test_failures_are_counted_and_flag_the_step() -> None:
    clock, probes, log = Clock(), [], []
    settings = SweepSpec(plan=(1, 2), slo=SLO, warmup_s=1.0, dwell_s=3.0, min_requests=1)
    runner = make_runner(clock, probes, log, settings=settings)

    def fail_some() -> None:
        probe = probes[-1]
        if probe.concurrency == 2:
            failed = probe.record(clock() - 0.5, clock(), 0.1)
            probe.extra.append(
                ProbeRecord(**{**_fields(failed), "error": ErrorClass.HTTP_STATUS, "ttft_s": None})
            )

    clock.on_sleep = fail_some
    result = runner.run()
    assert result.steps[1].client.requests_failed == 3
    assert result.stop is StopReason.ERRORS
    assert result.recommendation.concurrency == 1


def _fields(record: ProbeRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in record.__slots__}


def test_server_side_values_come_from_the_window_over_the_dwell() -> None:
    histograms = {
        "ttft": HistogramDelta(((0.1, 5.0), (0.5, 10.0), (math.inf, 10.0)), 10.0, 1.5),
        "iteration_tokens": HistogramDelta(
            ((512.0, 0.0), (1024.0, 100.0), (math.inf, 100.0)), 100.0, 8e4
        ),
    }
    view = WindowView(
        10.0, 10.0, MappingProxyType({"generation_tokens": 500.0, "preemptions": 2.0}), histograms
    )
    step = measure_step(4, [], 0.0, 10.0, SETTINGS, [0.2, 0.6], [0.0, 2.0], [4.0, 4.0], view)
    assert step.server.ttft_p50_s == pytest.approx(0.1)
    assert step.server.ttft_p99_s == pytest.approx(0.1 + 0.4 * (9.9 - 5) / 5)
    assert step.server.ttft_slo_s == step.server.ttft_p99_s
    assert step.server.itl_p99_s is None  # the replica sent no ITL histogram
    assert step.server.output_tokens_per_s == pytest.approx(50.0)
    assert step.server.preemptions == 2.0
    assert step.server.batch_tokens_p99 == pytest.approx(512 + 512 * 0.99)
    assert (step.server.batch_tokens_p99_lower, step.server.batch_tokens_p99_upper) == (
        512.0,
        1024.0,
    )
    assert (step.server.kv_usage_mean_ratio, step.server.kv_usage_max_ratio) == (
        pytest.approx(0.4),
        0.6,
    )
    assert (step.server.waiting_mean, step.server.waiting_max, step.server.running_max) == (
        1.0,
        2.0,
        4.0,
    )
    assert (
        step.client.requests_ok == 0
        and step.client.ttft_p99_s is None
        and not step.min_requests_met
    )


def test_seats_held_full_while_a_request_waited_bind_under_the_queue_mark() -> None:
    # max_num_seqs 1 with 2 in flight, ten scrapes: one running in nine (the tenth caught the
    # turnaround between two requests), one waiting in nine: a mean of 0.9, under the mark of 1
    running = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    waiting = [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    step = measure_step(2, [], 0.0, 10.0, SETTINGS, [], waiting, running)
    assert (step.server.running_max, step.server.running_peak_share) == (1.0, pytest.approx(0.9))
    assert (step.server.waiting_mean, step.server.waiting_max) == (pytest.approx(0.9), 1.0)
    found, evidence = binding_constraint(step, SLO, StopRules(), ReplicaLimits(max_num_seqs=1))
    assert found is Binding.SEQ_CAP
    assert evidence == (
        "running held at 1 (max_num_seqs 1) for 90% of the span while 0.9 waited on average"
    )


def test_an_under_sampled_step_is_not_recommended_and_the_sweep_goes_on() -> None:
    # concurrency 1 ends one request a second: 5 in the longest dwell of 5 s, short of 7;
    # concurrency 2 ends two a second: 8 by 4 s. Neither breaks the SLO nor bends throughput.
    clock, probes, log = Clock(), [], []
    settings = SweepSpec(
        plan=(1, 2), slo=SLO, warmup_s=1.0, dwell_s=2.0, min_requests=7, max_dwell_s=5.0
    )
    result = make_runner(clock, probes, log, settings=settings).run()
    assert [s.concurrency for s in result.steps] == [1, 2]
    assert result.stop is StopReason.CAP
    assert result.recommendation.concurrency == 2


def vllm_iteration_tokens(counts_per_bound: dict[float, float]) -> HistogramDelta:
    """An iteration_tokens delta on vLLM's doubling buckets, from how many steps fell at each bound."""
    bounds = (1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0)
    cumulative, buckets = 0.0, []
    for bound in (*bounds, math.inf):
        cumulative += counts_per_bound.get(bound, 0.0)
        buckets.append((bound, cumulative))
    return HistogramDelta(tuple(buckets), cumulative, 0.0)


@pytest.mark.parametrize(
    ("budget", "binding", "words", "absent"),
    [
        # 0.95 × 3,000 = 2,850 lies inside (2048, 4096]: not "4,076 tokens of a 3,000 budget"
        (
            3000,
            Binding.TTFT,
            "steps batched at most 4,096 tokens (bucket 2,048–4,096) against a 3,000 budget: "
            "the buckets cannot tell whether it binds",
            "4,076",
        ),
        # 0.95 × 2,000 = 1,900 ≤ 2,048: every step in the bucket batched the share
        (
            2000,
            Binding.TOKEN_BUDGET,
            "steps batched at least 2,048 tokens (bucket 2,048–4,096) of a 2,000 budget",
            "4,076",
        ),
        # 0.95 × 5,000 = 4,750 > 4,096: none did
        (5000, Binding.TTFT, "no TTFT samples", "budget"),
    ],
)
def test_steps_of_2100_tokens_are_judged_by_their_bucket(
    budget: int, binding: Binding, words: str, absent: str
) -> None:
    # 100 steps of 2,100 tokens: all in (2048, 4096], so the p99 interpolates to
    # 2048 + 2048 × 99/100 = 4,075.52 whatever they really batched.
    histograms = {"iteration_tokens": vllm_iteration_tokens({4096.0: 100.0})}
    view = WindowView(10.0, 10.0, MappingProxyType({}), histograms)
    step = measure_step(4, [], 0.0, 10.0, SETTINGS, [], [], [4.0], view)
    assert step.server.batch_tokens_p99 == pytest.approx(4075.52)
    assert (step.server.batch_tokens_p99_lower, step.server.batch_tokens_p99_upper) == (
        2048.0,
        4096.0,
    )
    limits = ReplicaLimits(max_num_batched_tokens=budget)
    found, evidence = binding_constraint(step, SLO, StopRules(), limits)
    assert found is binding
    assert words in evidence
    assert absent not in evidence


def test_a_p99_above_the_last_bucket_keeps_only_its_lower_bound() -> None:
    # 100 steps of 9,000 tokens are all past 8,192: the estimate is clamped to 8,192, upper open
    histograms = {"iteration_tokens": vllm_iteration_tokens({math.inf: 100.0})}
    view = WindowView(10.0, 10.0, MappingProxyType({}), histograms)
    step = measure_step(4, [], 0.0, 10.0, SETTINGS, [], [], [4.0], view)
    assert (step.server.batch_tokens_p99, step.server.batch_tokens_p99_lower) == (8192.0, 8192.0)
    assert step.server.batch_tokens_p99_upper is None
    found, evidence = binding_constraint(
        step, SLO, StopRules(), ReplicaLimits(max_num_batched_tokens=8192)
    )
    assert found is Binding.TOKEN_BUDGET
    assert "at least 8,192 tokens (bucket 8,192–+Inf) of a 8,192 budget" in evidence


def test_a_ctrl_c_that_lands_in_a_finalizer_still_ends_the_sweep() -> None:
    """Python reports a KeyboardInterrupt raised inside `__del__` as ignored and goes on; the
    command's handler also sets the cancel event, which the runner reads at its next tick."""

    class ClosesSlowly:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # the signal lands while a finalizer runs
            for _ in range(1000):  # Python runs the handler between these bytecodes
                pass

    cancel = threading.Event()
    unraisable: list[object] = []
    previous_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        with _signals_cancel(cancel):
            ClosesSlowly()  # dropped at once: its __del__ runs here
            gc.collect()
    finally:
        sys.unraisablehook = previous_hook
    assert [type(u.exc_value) for u in unraisable] == [KeyboardInterrupt]  # type: ignore[attr-defined]
    assert cancel.is_set()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
