"""A refined sweep on the fake closed loop: bisect after the ramp breaks, resume mid-way, report."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence

from slotop.actions.sweep.codec import sweep_from_json, sweep_to_json
from slotop.actions.sweep.decide import StopReason
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.actions.sweep.table import format_sweep_text
from slotop.collectors.probe.records import ProbeRecord
from tests.support.sweep_loop import SETTINGS, Clock, make_runner

REFINED = dataclasses.replace(SETTINGS, refine=True)


def holds_to_12(concurrency: int) -> float:
    """A replica whose TTFT is 30 ms per request in flight up to 12 (360 ms), and 900 ms past it."""
    return 0.03 * concurrency if concurrency <= 12 else 0.9


def test_a_sweep_breaking_at_16_with_12_holding_recommends_12_after_refining() -> None:
    clock, probes, log = Clock(), [], []
    updates: list[SweepProgress] = []
    result = make_runner(
        clock, probes, log, settings=REFINED, ttft=holds_to_12, on_progress=updates.append
    ).run()
    # the ramp: 1, 2, 4, 8 hold, 16 breaks; then 12 holds, 14 breaks, 13 breaks (12, 13 adjacent)
    assert [s.concurrency for s in result.steps] == [1, 2, 4, 8, 16, 12, 14, 13]
    assert log == [
        "start 1",
        "set 2",
        "set 4",
        "set 8",
        "set 16",
        "set 12",
        "set 14",
        "set 13",
        "stop",
    ]
    assert result.stop is StopReason.SLO_BROKEN  # why the ramp ended
    assert (result.recommendation.concurrency, result.recommendation.next_concurrency) == (12, 13)
    refining = {u.concurrency for u in updates if u.refining}
    assert refining == {12, 14, 13}
    assert all(not u.refining for u in updates if u.concurrency in (1, 2, 4, 8, 16))


def test_without_refine_the_same_sweep_recommends_8() -> None:
    clock, probes, log = Clock(), [], []
    result = make_runner(clock, probes, log, ttft=holds_to_12).run()
    assert [s.concurrency for s in result.steps] == [1, 2, 4, 8, 16]
    assert result.recommendation.concurrency == 8


def test_a_refine_interrupted_mid_way_resumes_with_the_steps_left() -> None:
    clock, probes, log = Clock(), [], []
    cancel = threading.Event()

    def progress(update: SweepProgress) -> None:
        if update.concurrency == 14:
            cancel.set()

    partial = make_runner(
        clock, probes, log, settings=REFINED, ttft=holds_to_12, cancel=cancel, on_progress=progress
    ).run()
    assert [s.concurrency for s in partial.steps] == [1, 2, 4, 8, 16, 12]
    assert partial.stop is StopReason.INTERRUPTED and not partial.finished
    log.clear()
    resumed = make_runner(clock, probes, log, settings=REFINED, ttft=holds_to_12).run(
        resume=partial
    )
    assert [s.concurrency for s in resumed.steps] == [1, 2, 4, 8, 16, 12, 14, 13]
    assert log == ["start 14", "set 13", "stop"]
    assert resumed.recommendation.concurrency == 12


def test_refining_a_finished_sweep_measures_only_the_steps_between() -> None:
    clock, probes, log = Clock(), [], []
    done = make_runner(clock, probes, log, ttft=holds_to_12).run()
    log.clear()
    seen: list[SweepResult] = []
    refined = make_runner(
        clock, probes, log, settings=REFINED, ttft=holds_to_12, on_step=seen.append
    ).run(resume=done)
    assert log == ["start 12", "set 14", "set 13", "stop"]
    assert [len(r.steps) for r in seen] == [6, 7, 8]  # each new step once, none of the saved
    assert refined.recommendation.concurrency == 12


def test_every_refine_step_reaches_the_step_callback_with_its_records() -> None:
    clock, probes, log = Clock(), [], []
    seen: list[SweepResult] = []
    measured: list[tuple[int, int]] = []

    def on_measured(step: StepResult, records: Sequence[ProbeRecord]) -> None:
        measured.append((step.concurrency, len(records)))

    result = make_runner(
        clock,
        probes,
        log,
        settings=REFINED,
        ttft=holds_to_12,
        on_step=seen.append,
        on_measured=on_measured,
    ).run()
    assert [len(r.steps) for r in seen] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert all(r.stop is None for r in seen[:-1]) and seen[-1] == result
    # each step's dwell of 5 s at one request per slot a second, and one more tick of follow-up
    assert [c for c, _ in measured] == [1, 2, 4, 8, 16, 12, 14, 13]
    assert all(count >= 5 * c for c, count in measured)


def test_the_refined_sweep_reads_back_and_shows_its_steps_in_concurrency_order() -> None:
    clock, probes, log = Clock(), [], []
    result = make_runner(clock, probes, log, settings=REFINED, ttft=holds_to_12).run()
    data = json.loads(json.dumps(sweep_to_json(result)))
    assert [row["concurrency"] for row in data["steps"]] == [1, 2, 4, 8, 16, 12, 14, 13]
    assert data["settings"]["refine"] is True
    back = sweep_from_json(data)
    assert back.settings.refine and back.recommendation.concurrency == 12
    text = format_sweep_text(result)
    rows = [line.split()[0] for line in text.splitlines()[2:10]]
    assert rows == ["1", "2", "4", "8", "12", "13", "14", "16"]
    assert "Operating point: concurrency 12." in text
    assert "Refined: measured concurrency 12, 14, 13 (in that order)" in text
