"""The concurrency sweep inside the dashboard: run it in a worker thread, show it as it goes.

The sweep drives the probe itself (through the same ProbeControl, so the caps and the loopback
guard hold) and drains its records, so the feed holds off reading records while it runs. Its
steps become curve points, and its recommendation replaces the one the manual steps give.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from textual.message import Message

from slotop.actions.experiment.model import CurvePoint
from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import ReplicaWatch, SweepProgress, SweepResult, SweepRunner


class SweepUpdated(Message):
    """The sweep moved: its progress, the result so far, and whether it still runs."""

    def __init__(
        self, progress: SweepProgress | None, result: SweepResult | None, running: bool
    ) -> None:
        super().__init__()
        self.progress = progress
        self.result = result
        self.running = running

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SweepUpdated) and message.running == self.running


def sweep_points(result: SweepResult | None) -> tuple[CurvePoint, ...]:
    """The sweep's measured steps as curve points, at the SLO's percentiles.

    A step that ended fewer requests than the sweep's floor is left out, as the manual curve
    leaves out a step with too few requests: its percentiles are too thin to stand on the curve.
    """
    if result is None:
        return ()
    return tuple(
        CurvePoint(
            concurrency=step.concurrency,
            ttft_s=step.client.ttft_slo_s,
            itl_s=step.client.itl_slo_s,
            requests=step.client.requests_ok,
            output_tokens_per_s=step.client.output_tokens_per_s,
            goodput_rps=step.goodput_rps,
            requests_failed=step.client.requests_failed,
        )
        for step in result.steps
        if step.min_requests_met
    )


def merged_curve(
    manual: tuple[CurvePoint, ...], swept: tuple[CurvePoint, ...]
) -> tuple[CurvePoint, ...]:
    """Manual steps and sweep steps on one curve; the sweep's measurement wins at a concurrency."""
    by_concurrency = {p.concurrency: p for p in manual}
    by_concurrency.update({p.concurrency: p for p in swept})
    return tuple(by_concurrency[c] for c in sorted(by_concurrency))


def progress_words(progress: SweepProgress | None, result: SweepResult | None) -> str:
    """One line on where the sweep is, or how it ended."""
    if progress is None and result is None:
        return ""
    if progress is not None and (result is None or result.stop is None):
        if progress.phase == "warmup":
            return (
                f"sweep step {progress.step_number}/{progress.step_count}: concurrency "
                f"{progress.concurrency}, warming up"
            )
        if progress.phase == "follow":
            return (
                f"sweep step {progress.step_number}/{progress.step_count}: concurrency "
                f"{progress.concurrency}, measured; waiting for the dwell's last requests to end "
                f"({progress.requests_ok} ended)"
            )
        return (
            f"sweep step {progress.step_number}/{progress.step_count}: concurrency "
            f"{progress.concurrency}, {progress.elapsed_s:.0f}/{progress.dwell_s:.0f} s, "
            f"{progress.requests_ok}/{progress.min_requests} requests"
        )
    assert result is not None
    stop = result.stop.value if result.stop is not None else "running"
    return f"sweep ended ({stop}): {result.recommendation.binding_detail}"


def run_sweep(
    control: ProbeControl,
    watch: ReplicaWatch | None,
    spec: SweepSpec,
    cancel: threading.Event,
    post: Callable[[Message], object],
    stop_first: bool = False,
) -> SweepResult:
    """Run a sweep to its end (or until `cancel`), posting every tick and step; load off after.

    With `stop_first`, the operator's load is stopped (through the controller, an event) first.
    """
    if stop_first and control.probe is not None:
        control.apply(control.plan_stop())
    last: list[SweepResult | None] = [None]

    def on_progress(progress: SweepProgress) -> None:
        post(SweepUpdated(progress, last[0], True))

    def on_step(result: SweepResult) -> None:
        last[0] = result
        post(SweepUpdated(None, result, True))

    runner = SweepRunner(
        control, watch, spec, cancel=cancel, on_progress=on_progress, on_step=on_step
    )
    result = runner.run()
    post(SweepUpdated(None, result, False))
    return result
