"""A dashboard sweep as recorded (through the sweep flow itself) and as a replay reads it back:
the same progress, the same steps and the same recommendation, update for update."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import SessionRecorder, start_recording
from slotop.actions.sweep.decide import StopReason, recommend
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.config import Settings
from slotop.slo import Slo
from slotop.tui.flows.sweep import SweepFlow
from slotop.tui.replay.sweeps import SweepReplay
from slotop.tui.sweeping import SweepUpdated
from tests.support.sweep_steps import flat_step

URL = "http://127.0.0.1:8000/v1/completions"
SPEC = SweepSpec(plan=(1, 2, 4), slo=Slo(ttft_s=0.5, itl_s=0.04), min_requests=10)


class Host:
    """The app as the sweep flow sees it, with nothing on screen."""

    settings = Settings()

    def __init__(self, recorder: SessionRecorder) -> None:
        self.recorder = recorder
        self.notes: list[str] = []

    def clock(self) -> float:
        return 1_800_000_000.0

    def note(self, kind: str, text: str) -> None:
        self.notes.append(text)

    def hold_records(self, held: bool) -> None:
        pass

    def update_inputs(self, **changes: object) -> None:
        pass

    def post_message(self, message: object) -> bool:
        return True

    def run_in_thread(self, work: Callable[[], object], **_: Any) -> None:
        pass  # the sweep itself does not run: its updates are handed in below


def _step(concurrency: int, ttft_s: float, tokens_per_s: float) -> StepResult:
    return flat_step(
        concurrency=concurrency,
        started_at_s=1_800_000_000.0 + concurrency,
        measured_s=20.0,
        requests_ok=40 * concurrency,
        requests_failed=0,
        min_requests_met=True,
        ttft_slo_s=ttft_s,
        itl_slo_s=0.012,
        output_tokens_per_s=tokens_per_s,
        goodput_ratio=1.0,
    )


def _result(steps: tuple[StepResult, ...], stop: StopReason | None = None) -> SweepResult:
    recommendation = recommend(steps, SPEC.slo, SPEC.rules, SPEC.limits)
    return SweepResult(URL, 1_800_000_000.0, SPEC, steps, stop, recommendation)


def test_a_recorded_dashboard_sweep_reads_back_update_for_update(tmp_path: Path) -> None:
    path = tmp_path / "sweep.jsonl"
    recorder = start_recording(command="attach", settings=Settings(), path=path)
    flow = SweepFlow(Host(recorder))  # type: ignore[arg-type]
    flow._start(SimpleNamespace(url=URL), SPEC, stop_first=False)  # type: ignore[arg-type]
    one = _result((_step(1, 0.08, 900.0),))
    two = _result((*one.steps, _step(2, 0.11, 1700.0)), StopReason.CAP)
    warming = SweepProgress(1, 3, 1, "warmup", 2.0, 0, 10, 20.0)
    dwelling = SweepProgress(2, 3, 2, "dwell", 12.0, 33, 10, 20.0)
    updates = [
        SweepUpdated(warming, None, True),
        SweepUpdated(None, one, True),
        SweepUpdated(dwelling, one, True),
        SweepUpdated(None, two, False),
    ]
    for update in updates:
        flow.updated(update)
    recorder.close()

    recording = read_recording(path)
    actions = [line.data["action"] for line in recording.of_kind("action")]
    assert actions == [
        "sweep_started",
        "sweep_progress",
        "sweep_step",
        "sweep_progress",
        "sweep_progress",
        "sweep_step",
        "sweep_result",
    ]
    replay = SweepReplay(recording)
    read = [
        shown
        for line in recording.of_kind("action")
        if (shown := replay.read(line.data["action"], line.data)) is not None
    ]
    assert len(read) == len(updates)
    for (progress, result, running), update in zip(read, updates, strict=True):
        assert progress == update.progress
        assert running == update.running
        if update.result is None:
            assert result is None
            continue
        assert result is not None
        assert result.steps == update.result.steps
        assert result.recommendation == update.result.recommendation
        assert result.stop == update.result.stop
    assert read[-1][1] is not None and read[-1][1].recommendation.concurrency == 2


def test_a_headless_sweep_reads_its_steps_with_the_plan_of_its_result(tmp_path: Path) -> None:
    from slotop.actions.sweep.codec import sweep_to_json

    path = tmp_path / "headless.jsonl"
    recorder = start_recording(command="sweep", settings=Settings(), path=path)
    one = _result((_step(1, 0.08, 900.0),))
    two = _result((*one.steps, _step(2, 0.11, 1700.0)), StopReason.CAP)
    for result in (one, two):  # as `slotop sweep` records them
        recorder.action("sweep_step", {"step": sweep_to_json(result)["steps"][-1]})
    recorder.action("sweep_result", {"sweep": sweep_to_json(two)})
    recorder.close()
    recording = read_recording(path)
    replay = SweepReplay(recording)
    read = [replay.read(line.data["action"], line.data) for line in recording.of_kind("action")]
    assert [(r[0], r[2]) for r in read if r is not None] == [(None, True)] * 2 + [(None, False)]
    assert [len(r[1].steps) for r in read if r is not None and r[1] is not None] == [1, 2, 2]
