"""One sweep of the [replica] with a monitor of its own, recorded as `slotop sweep` records one.

The headless sweep and `slotop tune` (on the command line and in the dashboard) run a sweep
through this, so each is measured, recorded and reported the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from slotop.actions.errors import SweepError
from slotop.actions.probe_control import ProbeControl
from slotop.actions.session.recorder import SessionRecorder
from slotop.actions.session.taps import record_monitor
from slotop.actions.sweep.codec import sweep_to_json
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import (
    MonitorWatch,
    StepMeasured,
    SweepProgress,
    SweepResult,
    SweepRunner,
)
from slotop.actions.wiring.replica import replica_client, replica_monitor
from slotop.collectors.errors import CollectorError
from slotop.config import Settings


def sweep_replica(
    settings: Settings,
    spec: SweepSpec,
    control: ProbeControl,
    recorder: SessionRecorder | None,
    *,
    resume: SweepResult | None = None,
    cancel: threading.Event | None = None,
    on_ready: Callable[[], None] | None = None,
    on_progress: Callable[[SweepProgress], None] | None = None,
    on_step: Callable[[SweepResult], None] | None = None,
    on_measured: StepMeasured | None = None,
    record_readings: bool = True,
) -> SweepResult:
    """Run one sweep against [replica] url with its own monitor, recorded as `slotop sweep` records
    one (the replica's readings, a `sweep_step` action per step, `sweep_result` at the end).

    `on_ready` is told once the replica answered its first scrape, before any load is sent;
    `record_readings` False leaves the readings to a dashboard that records its own.
    """
    with replica_client(settings) as client:
        monitor = replica_monitor(
            settings,
            client,
            long_window_s=spec.max_dwell_s + spec.warmup_s + 10 * spec.tick_s,
            short_window_s=min(settings.window.short_s, spec.dwell_s),
            interval_s=spec.tick_s,
            percentiles=(spec.slo.ttft_percentile, spec.slo.itl_percentile),
        )
        record_monitor(monitor, recorder if record_readings else None)
        try:
            monitor.poll()
        except CollectorError as exc:
            raise SweepError(f"cannot read the replica before the sweep: {exc}") from None
        if on_ready is not None:
            on_ready()

        def stepped(result: SweepResult) -> None:
            if on_step is not None:
                on_step(result)
            if recorder is not None and result.steps:
                recorder.action("sweep_step", {"step": sweep_to_json(result)["steps"][-1]})

        runner = SweepRunner(
            control,
            MonitorWatch(monitor),
            spec,
            cancel=cancel,
            on_progress=on_progress,
            on_step=stepped,
            on_measured=on_measured,
        )
        result = runner.run(resume=resume)
    if recorder is not None:
        recorder.action("sweep_result", {"sweep": sweep_to_json(result)})
    return result
