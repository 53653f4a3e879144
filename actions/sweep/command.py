"""`slotop sweep` headless: build the sweep from settings, show progress, write its outputs.

The command line parses flags into settings overrides and a `SweepOutputs`; everything else
(the probe, the monitor, the progress line, the files, the exit code) happens here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TextIO

from slotop import fmt
from slotop.actions.errors import SweepError
from slotop.actions.session.recorder import (
    RecordChoice,
    SessionRecorder,
    open_recording,
)
from slotop.actions.sweep.codec import read_json, sweep_to_csv, sweep_to_json, write_json
from slotop.actions.sweep.decide import (
    StopReason,
    remaining_steps,
)
from slotop.actions.sweep.plan import SweepSpec, plan_words, spec_from_settings
from slotop.actions.sweep.plot import write_plot
from slotop.actions.sweep.runner import (
    SweepProgress,
    SweepResult,
)
from slotop.actions.sweep.table import format_sweep_text
from slotop.actions.wiring.replica import probe_control
from slotop.actions.wiring.sweep import sweep_replica
from slotop.config import Settings, with_overrides

EXIT_MET = 0
EXIT_NOT_MET = 3
EXIT_INTERRUPTED = 130

STDOUT = "-"


@dataclass(frozen=True, slots=True)
class SweepOutputs:
    """Where the sweep's results go; '-' is standard output. `resume` is a sweep file to go on from."""

    json_path: str | None = None
    csv_path: str | None = None
    plot_path: str | None = None
    resume_path: str | None = None


def base_url_of(load_url: str) -> str:
    """The replica's base URL from the URL a sweep loaded (its API path cut off)."""
    for suffix in ("/v1/chat/completions", "/v1/completions"):
        if load_url.endswith(suffix):
            return load_url[: -len(suffix)]
    return load_url


class ProgressLine:
    """Shows a running sweep: one line rewritten in place on a terminal, a line per step otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._live = stream.isatty()
        self._shown = 0
        self._printed_steps = 0

    def progress(self, update: SweepProgress) -> None:
        """Rewrite the live line (only on a terminal)."""
        if not self._live:
            return
        if update.phase == "warmup":
            what = f"warming up {update.elapsed_s:.0f} s"
        elif update.phase == "follow":
            what = (
                f"measured {update.elapsed_s:.0f} s; waiting for the dwell's last requests "
                f"({update.requests_ok} ended)"
            )
        else:
            what = (
                f"dwell {update.elapsed_s:.0f}/{update.dwell_s:g} s, "
                f"{update.requests_ok}/{update.min_requests} requests"
            )
        where = "refine" if update.refining else f"{update.step_number}/{update.step_count}"
        text = f"[{where}] concurrency {update.concurrency}: {what}"
        self._stream.write("\r" + text.ljust(self._shown))
        self._shown = len(text)
        self._stream.flush()

    def step(self, result: SweepResult) -> None:
        """Print the newest step once it is measured."""
        if len(result.steps) <= self._printed_steps:
            return
        self._printed_steps = len(result.steps)
        step = result.steps[-1]
        slo = result.settings.slo

        tokens = step.client.output_tokens_per_s
        line = (
            f"concurrency {step.concurrency}: TTFT p{slo.ttft_percentile:g} "
            f"{fmt.millis(step.client.ttft_slo_s, suffix=' ms')}, ITL p{slo.itl_percentile:g} "
            f"{fmt.millis(step.client.itl_slo_s, suffix=' ms')}, "
            f"{fmt.number(tokens)} tokens/s, "
            f"{step.client.requests_ok} requests"
        )
        self.clear()
        self._stream.write(line + "\n")
        self._stream.flush()

    def clear(self) -> None:
        """Blank the live line."""
        if self._live and self._shown:
            self._stream.write("\r" + " " * self._shown + "\r")
            self._shown = 0


@contextlib.contextmanager
def _signals_cancel(cancel: threading.Event) -> Iterator[None]:
    """Ctrl-C and SIGTERM, while the sweep runs, set `cancel` and raise KeyboardInterrupt.

    The raise ends a wait at once, so the sweep stops its load first. The event is for a signal
    that lands while the interpreter runs a finalizer (an HTTP response's or a socket's `close`
    from `__del__`): Python prints the exception raised there as ignored and goes on, and the
    sweep would run to its end; the event stops it at its next tick instead.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        cancel.set()
        raise KeyboardInterrupt

    # A SIGINT ignored since the start stays ignored, as Python leaves it: a shell starts its
    # background jobs so, and a Ctrl-C at its terminal is not theirs.
    signums = [s for s in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(s) != signal.SIG_IGN]
    previous = {sig: signal.signal(sig, interrupt) for sig in signums}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _write_text(path: str, text: str, what: str) -> None:
    if path == STDOUT:
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise SweepError(f"{path}: cannot write the {what} ({exc.strerror or exc})") from None


def _save_json(result: SweepResult, path: str | None) -> None:
    if path is None or path == STDOUT:
        return
    try:
        write_json(result, Path(path))
    except OSError as exc:
        raise SweepError(f"{path}: cannot write the sweep JSON ({exc.strerror or exc})") from None


def run_sweep_command(
    settings: Settings,
    outputs: SweepOutputs,
    *,
    url: str | None = None,
    err: TextIO | None = None,
    cancel: threading.Event | None = None,
    record: RecordChoice | None = None,
) -> int:
    """Run (or resume) a sweep against `url` (default [replica] url, or the resumed sweep's).

    The session is recorded as `record` says (by default, not at all). Returns the exit code:
    0 when a step met the SLO, 3 when none did, 130 when interrupted.
    """
    err = err or sys.stderr
    resumed: SweepResult | None = None
    json_path = outputs.json_path
    if outputs.resume_path is not None:
        resumed = read_json(Path(outputs.resume_path))
        json_path = json_path or outputs.resume_path
        spec = resumed.settings
        if settings.sweep.refine and not spec.refine:  # --refine on a saved sweep bisects it
            spec = dataclasses.replace(spec, refine=True)
        if url is None:
            url = base_url_of(resumed.url)
    if url is not None:
        settings = with_overrides(settings, {"replica.url": url})
    if resumed is None:
        spec = spec_from_settings(settings)
    checked = probe_control(settings)
    if resumed is not None and resumed.url != checked.url:
        raise SweepError(
            f"{outputs.resume_path} is a sweep of {resumed.url}, but this one would load "
            f"{checked.url}; give the same URL (and [load] endpoint) to resume it"
        )
    checked.plan_start(concurrency=max(spec.plan))  # the safety rules, before anything is sent
    recorder = open_recording(record or RecordChoice(False), command="sweep", settings=settings)
    if recorder is not None:
        err.write(recorder.where() + "\n")
    try:
        result = _run(settings, spec, resumed, outputs, json_path, err, cancel, recorder)
    finally:
        if recorder is not None:
            recorder.close()
    return _finish(result, outputs, json_path, err)


def _run(
    settings: Settings,
    spec: SweepSpec,
    resumed: SweepResult | None,
    outputs: SweepOutputs,
    json_path: str | None,
    err: TextIO,
    cancel: threading.Event | None,
    recorder: SessionRecorder | None,
) -> SweepResult:
    control = probe_control(settings, recorder=recorder)
    done = resumed.steps if resumed is not None else ()
    if resumed is not None:
        err.write(f"Resuming {outputs.resume_path}: {len(done)} steps measured.\n")
    line = ProgressLine(err)

    def announce() -> None:
        err.write(plan_words(spec, control.url, remaining_steps(spec.plan, done)) + "\n")

    def on_step(result: SweepResult) -> None:
        line.step(result)
        _save_json(result, json_path)

    cancel = cancel or threading.Event()
    with _signals_cancel(cancel):
        result = sweep_replica(
            settings,
            spec,
            control,
            recorder,
            resume=resumed,
            cancel=cancel,
            on_ready=announce,
            on_progress=line.progress,
            on_step=on_step,
        )
    line.clear()
    return result


def _finish(result: SweepResult, outputs: SweepOutputs, json_path: str | None, err: TextIO) -> int:
    import json

    if json_path == STDOUT:
        sys.stdout.write(json.dumps(sweep_to_json(result), indent=2, allow_nan=False) + "\n")
    if outputs.csv_path is not None:
        _write_text(outputs.csv_path, sweep_to_csv(result), "CSV")
    if STDOUT not in (json_path, outputs.csv_path):
        sys.stdout.write(format_sweep_text(result))
    else:
        err.write(format_sweep_text(result))
    if outputs.plot_path is not None and result.steps:
        write_plot(result, Path(outputs.plot_path))
    if json_path not in (None, STDOUT) and result.stop is StopReason.INTERRUPTED:
        err.write(f"resume with: slotop sweep --resume {json_path}\n")
    if result.stop is StopReason.INTERRUPTED:
        return EXIT_INTERRUPTED
    return EXIT_MET if result.met_slo else EXIT_NOT_MET
