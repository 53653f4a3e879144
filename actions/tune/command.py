"""`slotop tune` headless: find the replica, size its KV cache, run the tune, restore, report.

Text goes out through an injected `write`; Ctrl-C and SIGTERM set the tune's cancel instead of
raising, so whatever phase runs ends cleanly (a restart is never cut in half), the load stops, and
the replica goes back to its original dials before the partial result and report are written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from slotop.actions.errors import ActionError
from slotop.actions.replica.spec import Dials, LaunchSpec, launch_spec_from_settings, restart_lock
from slotop.actions.report.write import write_report
from slotop.actions.restart.command import progress_printer
from slotop.actions.restart.starts import start_spread_or_said
from slotop.actions.session.recorder import RecordChoice, SessionRecorder, open_recording
from slotop.actions.slo import engine_terms
from slotop.actions.sweep.command import ProgressLine
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.actions.tune.capacity import Capacity
from slotop.actions.tune.model import TuneError, TuneSpec
from slotop.actions.tune.output import tune_to_json
from slotop.actions.tune.plan import TuneOptions, plan_words, tune_spec
from slotop.actions.tune.resume import RecordedTune, read_tune
from slotop.actions.tune.runner import TuneResult, TuneRunner
from slotop.actions.tune.wiring import LiveReplica, replica_capacity
from slotop.actions.wiring.replica import probe_control
from slotop.actions.wiring.restart import restart_target
from slotop.config import Settings
from slotop.redact import redact_argv, shown_url

Write = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class TuneRun:
    """A tune's result, its recording and report (None where not written), and the command the
    chosen dials make of [launch]'s (empty: no choice)."""

    result: TuneResult
    recording: Path | None
    report: Path | None
    command: tuple[str, ...]
    report_problem: str | None = None


@contextlib.contextmanager
def interrupts_cancel(cancel: threading.Event, write: Write) -> Iterator[None]:
    """Ctrl-C and SIGTERM set `cancel` (and say what happens next) instead of raising."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        if cancel.is_set():
            write("already stopping: the replica is being put back; wait for it")
            return
        cancel.set()
        write("stopping: the load ends, then the replica goes back to its dials (a restart)")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class SweepLines:
    """Each sweep's progress line and a line per measured step, as `slotop sweep` shows them."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._line = ProgressLine(stream)
        self._started: float | None = None

    def progress(self, update: SweepProgress) -> None:
        """Rewrite the live line (on a terminal)."""
        self._line.progress(update)

    def clear(self) -> None:
        """Blank the live line, so a line written next starts clean."""
        self._line.clear()

    def step(self, result: SweepResult) -> None:
        """Print the newest step; a new sweep starts its own count."""
        if result.started_at_s != self._started:
            self._line.clear()
            self._line, self._started = ProgressLine(self._stream), result.started_at_s
        self._line.step(result)


def _command(spec: LaunchSpec, how: str, dials: Dials | None) -> tuple[str, ...]:
    if dials is None:
        return ()
    argv = spec.restart_argv(dials) if how == "command" else spec.argv(dials)
    return tuple(redact_argv(argv))  # shown and recorded: its secrets hidden


def run_tune(
    settings: Settings,
    options: TuneOptions,
    *,
    write: Write,
    confirm: Callable[[str], bool] = lambda _question: True,
    cancel: threading.Event | None = None,
    record: RecordChoice | None = None,
    on_progress: Callable[[SweepProgress], None] | None = None,
    on_step: Callable[[SweepResult], None] | None = None,
) -> TuneRun | None:
    """Tune the managed (or command-restarted) replica; it ends on its original dials, or the
    chosen ones with `keep`. The plan is shown and `confirm` asked first (None: not confirmed).
    The session is recorded as `record` says, then reported."""
    spec = launch_spec_from_settings(settings)
    resumed = read_tune(options.resume_path) if options.resume_path is not None else None
    if resumed is not None and resumed.url not in (None, shown_url(spec.url)):
        raise TuneError(
            f"{options.resume_path} tuned {resumed.url}, but [replica] url is "
            f"{shown_url(spec.url)}: "
            "give the same replica to resume it"
        )
    plan = tune_spec(settings, options, start_spread_or_said(spec.state_path, write))
    probe_control(settings).plan_start(concurrency=max(plan.sweep.plan))  # caps, remote load
    with restart_lock(spec.state_path):
        target, current, how = restart_target(spec)
        original = resumed.original if resumed is not None else current
        for line in plan_words(plan, shown_url(spec.url), original):
            write(line)
        if not confirm("Tune the replica (it restarts it and sends load)?"):
            write("not tuned")
            return None
        recorder = open_recording(record or RecordChoice(False), command="tune", settings=settings)
        if recorder is not None:
            write(recorder.where())
        session = _Session(settings, spec, plan, recorder, write)
        try:
            replica = LiveReplica(
                settings,
                spec,
                target,
                how,
                probe_control(settings, recorder=recorder),
                recorder,
                write,
                on_step=on_step,
                on_health=progress_printer(lambda line: write(f"  {line}")),
            )
            runner = TuneRunner(
                replica,
                plan,
                session.capacity(resumed, current),
                original,
                shown_url(spec.url),
                current=current,
                cancel=cancel,
                on_note=write,
                on_record=session.record,
                on_progress=on_progress,
            )
            session.started(runner, original, current, resumed, options.resume_path)
            with interrupts_cancel(runner.cancel, write):
                result = runner.run(resumed.state if resumed is not None else None)
            command = _command(spec, how, result.choice.dials)
            where = str(recorder.path) if recorder is not None else None
            session.record(
                "tune_result", {"tune": tune_to_json(result, command=command, recording=where)}
            )
        finally:
            if recorder is not None:
                recorder.close()
    recording = recorder.path if recorder is not None and recorder.failure is None else None
    report, problem = _report(recording, options)
    return TuneRun(result, recording, report, command, problem)


class _Session:
    """What one run records and learns before the loop: the KV budget and the opening lines."""

    def __init__(
        self,
        settings: Settings,
        spec: LaunchSpec,
        plan: TuneSpec,
        recorder: SessionRecorder | None,
        write: Write,
    ) -> None:
        self._settings = settings
        self._spec = spec
        self._plan = plan
        self._recorder = recorder
        self._write = write
        self._capacity: Capacity | None = None

    def record(self, kind: str, data: Mapping[str, Any]) -> None:
        """Record one of the tune's actions."""
        if self._recorder is not None:
            self._recorder.action(kind, data)

    def capacity(self, resumed: RecordedTune | None, current: Dials) -> Capacity | None:
        """The KV budget (method step 3): the recorded one on resume, else the replica's at the
        dials it runs now."""
        capacity = resumed.capacity if resumed is not None else None
        if capacity is None:
            capacity, problem = replica_capacity(self._settings, self._spec.url, current)
            if problem is not None:
                cap = engine_terms(current.engine).seq_cap
                self._write(f"KV budget unknown ({problem}); {cap} is raised at most 2×")
        if capacity is not None:
            self._write("KV budget:")
            for line in capacity.words():
                self._write(f"  {line}")
        self._capacity = capacity
        return capacity

    def started(
        self,
        runner: TuneRunner,
        original: Dials,
        current: Dials,
        resumed: RecordedTune | None,
        source: Path | None,
    ) -> None:
        """Record the start (the original dials, the budget), what a resume took over, and the
        dials the first configuration runs with."""
        capacity = self._capacity
        self.record(
            "tune_started",
            {
                "url": self._spec.url,
                "original_dials": original.to_json(),
                "capacity": capacity.to_json() if capacity is not None else None,
                "slo": dataclasses.asdict(self._plan.sweep.slo),
                "resumed_from": str(source) if source is not None else None,
            },
        )
        if resumed is not None:
            for decision in resumed.state.decisions:
                self.record("tune_decision", {"decision": decision.to_json()})
            for trial in resumed.state.trials:
                self.record("tune_trial", {"trial": trial.to_json()})
        self.record("dials", {"dials": current.to_json()})


def _report(recording: Path | None, options: TuneOptions) -> tuple[Path | None, str | None]:
    """Write the recording's report (`slotop report`'s code); the folder, or why there is none."""
    if not options.write_report:
        return None, None
    if recording is None:
        return None, "no report: the session was not recorded (--no-record)"
    folder = options.report_dir or recording.with_name(recording.stem + "-report")
    try:
        written = write_report(recording, folder)
    except ActionError as exc:  # the tune is done; a report that fails must not hide its result
        return None, f"the report could not be written: {exc}"
    return written.folder / "report.md", None
