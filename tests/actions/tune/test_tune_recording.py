"""A tune recorded to a real session file: read back for --resume, reported, and shown as text and
JSON; the fake replica of tests/support/tune_fakes.py on a fake clock, no server."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.report.build import build_report
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import SessionRecorder, start_recording
from slotop.actions.sweep.runner import SweepProgress
from slotop.actions.tune.model import TuneError
from slotop.actions.tune.output import format_tune_text, tune_to_json
from slotop.actions.tune.resume import read_tune
from slotop.actions.tune.runner import TuneResult, TuneRunner
from slotop.config import Settings
from tests.support.sweep_loop import Clock
from tests.support.tune_fakes import ORIGINAL, SPEC, FakeTuneReplica
from tests.support.tune_trials import CAPACITY

URL = "http://127.0.0.1:8000"


def recorded_run(path: Path, replica: FakeTuneReplica, clock: Clock, **kwargs: Any) -> TuneResult:
    """A tune recorded as `slotop tune` records one: its start, its actions, its result."""
    recorder = start_recording(command="tune", settings=Settings(), path=path)

    def record(kind: str, data: Mapping[str, Any]) -> None:
        recorder.action(kind, data)

    try:
        recorder.action(
            "tune_started",
            {"url": URL, "original_dials": ORIGINAL.to_json(), "capacity": CAPACITY.to_json()},
        )
        runner = TuneRunner(
            replica, SPEC, CAPACITY, ORIGINAL, URL, clock=clock, on_record=record, **kwargs
        )
        result = runner.run()
        recorder.action("tune_result", {"tune": tune_to_json(result)})
    finally:
        _close(recorder)
    return result


def _close(recorder: SessionRecorder) -> None:
    recorder.close()
    assert recorder.failure is None


def _interrupt_at(replica: FakeTuneReplica, runner: TuneRunner, dials: Dials) -> None:
    def progress(update: SweepProgress) -> None:
        if replica.dials == dials and update.concurrency == 4:
            runner.cancel.set()

    replica.on_sweep_progress = progress


def test_the_report_shows_the_tune_and_its_evidence_agrees_with_the_choice(tmp_path: Path) -> None:
    clock = Clock()
    path = tmp_path / "tune.jsonl"
    result = recorded_run(path, FakeTuneReplica(ORIGINAL, clock), clock)
    report = build_report(read_recording(path), str(path)).markdown
    section = report[report.index("## Tune decisions") : report.index("## Configurations")]
    rows = [line for line in section.splitlines() if line[:4] in [f"| #{n}" for n in range(9)]]
    assert [row.split("|")[2].strip() for row in rows] == [
        "`--kv-cache-dtype auto --max-num-seqs 6`",
        "`--kv-cache-dtype fp8 --max-num-seqs 6`",
        "`--kv-cache-dtype fp8 --max-num-seqs 8`",
    ]
    goodputs = [float(row.split("|")[6]) for row in rows]
    chosen = [row for row in rows if "◀" in row]
    assert len(chosen) == 1 and float(chosen[0].split("|")[6]) == max(goodputs)
    assert chosen[0].startswith("| #2 ◀")
    assert "after #0 (narrower KV dtype → `--kv-cache-dtype fp8 --max-num-seqs 6`)" in section
    assert "KV usage peaked at 100%" in section
    assert "after #1 (more sequences → `--kv-cache-dtype fp8 --max-num-seqs 8`)" in section
    assert "#1 `--kv-cache-dtype fp8 --max-num-seqs 6`: " in section  # its quality check
    assert f"**Chosen:** #2 at concurrency 8, goodput {result.choice.goodput_rps:.2f}" in section
    assert "Flags to paste into `vllm serve`: `--kv-cache-dtype fp8 --max-num-seqs 8`" in section
    assert "left on `--kv-cache-dtype auto --max-num-seqs 6`, verified" in section


def test_text_and_json_say_the_same_choice(tmp_path: Path) -> None:
    clock = Clock()
    result = recorded_run(tmp_path / "tune.jsonl", FakeTuneReplica(ORIGINAL, clock), clock)
    text = format_tune_text(result, ("vllm", "serve", "m", "--kv-cache-dtype=fp8"))
    assert "Paste into `vllm serve`: --kv-cache-dtype fp8 --max-num-seqs 8" in text
    assert "as [launch] runs it: vllm serve m --kv-cache-dtype=fp8" in text
    assert (
        "The replica runs its original dials (--kv-cache-dtype auto --max-num-seqs 6), verified."
        in text
    )
    data = json.loads(json.dumps(tune_to_json(result), allow_nan=False))
    assert data["schema"] == "slotop.tune/1"
    assert data["choice"]["trial"] == 2 and data["paste"] == "--kv-cache-dtype fp8 --max-num-seqs 8"
    assert [t["flags"] for t in data["trials"]][2] == ["--kv-cache-dtype=fp8", "--max-num-seqs=8"]
    assert data["trials"][0]["sweep"]["format"] == "slotop-sweep"
    assert data["ended_dials"] == ORIGINAL.to_json() and data["verified"] is True


def test_an_interrupted_recording_resumes_and_a_finished_one_is_refused(tmp_path: Path) -> None:
    clock = Clock()
    replica = FakeTuneReplica(ORIGINAL, clock)
    path = tmp_path / "cut.jsonl"
    recorder = start_recording(command="tune", settings=Settings(), path=path)
    recorder.action(
        "tune_started", {"url": URL, "original_dials": ORIGINAL.to_json(), "capacity": None}
    )
    runner = TuneRunner(
        replica, SPEC, CAPACITY, ORIGINAL, URL, clock=clock,
        on_record=lambda kind, data: recorder.action(kind, data),
    )  # fmt: skip
    _interrupt_at(replica, runner, Dials("fp8", 6))
    cut = runner.run()
    recorder.action("tune_result", {"tune": tune_to_json(cut)})
    _close(recorder)
    recorded = read_tune(path)
    assert recorded.url == URL and recorded.original == ORIGINAL and recorded.capacity is None
    assert [t.complete for t in recorded.state.trials] == [True, False]
    assert recorded.state.trials[0] == cut.trials[0]
    assert len(recorded.state.decisions) == 1
    report = build_report(read_recording(path), str(path)).markdown
    assert "| #1 | `--kv-cache-dtype fp8 --max-num-seqs 6`" in report
    assert "cut short" in report and "Stopped: interrupted: resume with --resume." in report

    finished = tmp_path / "whole.jsonl"
    recorded_run(finished, FakeTuneReplica(ORIGINAL, Clock()), Clock())
    with pytest.raises(TuneError, match="that tune ended whole"):
        read_tune(finished)
    with pytest.raises(TuneError, match="holds no tune"):
        other = tmp_path / "sweep.jsonl"
        _close(start_recording(command="sweep", settings=Settings(), path=other))
        read_tune(other)
