"""`slotop restart --starts N`: the same dials started N more times under one load, each start's
steady level measured as a before/after side is, and the spread between them kept for the
replica's later before/afters (`starts`).

Text goes out through an injected `write`, the question through an injected `confirm`, as in
`command`; the replica is the one a restart acts on (`wiring.restart.restart_target`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from slotop import fmt
from slotop.actions.probe_control import (
    load_shape_from_settings,
    plan_start,
    probe_target_from_settings,
)
from slotop.actions.replica.journal import found_cut_restart
from slotop.actions.replica.spec import LaunchSpec
from slotop.actions.restart.command import journaled_apply, restarting_session, spec_plan
from slotop.actions.restart.compare import RunSide, measured_levels, row_labels
from slotop.actions.restart.measure import measure_side, slo_percentiles
from slotop.actions.restart.starts import (
    MIN_STARTS,
    Levels,
    StartSpread,
    estimate_start_spread,
    keep_start_spread,
)
from slotop.actions.session.recorder import RecordChoice, SessionRecorder
from slotop.actions.session.taps import RecordingProbe
from slotop.actions.wiring.restart import restart_target
from slotop.collectors.probe.handle import Probe
from slotop.config import Settings

Write = Callable[[str], None]
SHOWN = (
    ("TTFT p50", "ttft_p50_s", "ms"),
    ("ITL p50", "itl_p50_s", "ms"),
    ("output tok/s", "output_tokens_per_s", ""),
    ("req/s", "request_rate_rps", ""),
)
"""The rows a start's line shows (all measured rows are kept)."""


def run_starts(
    settings: Settings,
    spec: LaunchSpec,
    *,
    restarts: int,
    concurrency: int,
    dwell_s: float,
    confirm: Callable[[str], bool],
    write: Write,
    record: RecordChoice | None = None,
) -> StartSpread | None:
    """Measure the running start and `restarts` more of the same dials at `concurrency` in
    flight; keep and return the spread, None when not confirmed or a restart failed."""
    if restarts + 1 < MIN_STARTS:
        raise ValueError(f"--starts needs {MIN_STARTS - 1} restarts or more, got {restarts}")
    with restarting_session(settings, spec, record, write) as recorder:
        return _starts(settings, spec, restarts, concurrency, dwell_s, confirm, write, recorder)


def _starts(
    settings: Settings,
    spec: LaunchSpec,
    restarts: int,
    concurrency: int,
    dwell_s: float,
    confirm: Callable[[str], bool],
    write: Write,
    recorder: SessionRecorder | None,
) -> StartSpread | None:
    found_cut_restart(spec, write)
    target, dials, how = restart_target(spec)
    shape = load_shape_from_settings(settings.load)
    plan_start(
        probe_target_from_settings(settings),
        shape,
        settings.load.allow_remote_load,
        concurrency=concurrency,
    )
    plan = spec_plan(spec, target, how, dials, dials, kv=None, same_dials=True)
    for line in plan.lines():
        write(line)
    write(
        f"Start-to-start: the probe keeps {concurrency} in flight; the running start and each of "
        f"{restarts} restarts on the same dials is measured for {dwell_s:g} s (or twelve request "
        "lifetimes) once its load has settled, and how far their levels differ beyond their "
        "sampling noise is kept in the replica's state file, for its later before/afters."
    )
    if not confirm(f"Restart the replica {restarts} times?"):
        write("not restarted")
        return None
    probe: Probe | RecordingProbe = Probe.start(
        probe_target_from_settings(settings), shape, concurrency=concurrency
    )
    if recorder is not None:
        probe = RecordingProbe(probe, recorder)
    percentiles = slo_percentiles(settings)
    levels: list[Levels] = []
    try:
        load_began = time.time()
        for start in range(restarts + 1):
            if start:
                result = journaled_apply(
                    spec, plan, target, probe, write, recorder, command="restart --starts"
                )
                if not result.applied:
                    for line in result.lines():
                        write(line)
                    write(f"stopped after {start} of {restarts} restarts; nothing was kept")
                    return None
                resumed = result.resumed_at_s()
                load_began = resumed if resumed is not None else time.time()
            side = measure_side(
                f"start {start + 1}",
                dials,
                probe,
                settings,
                dwell_s=dwell_s,
                load_began_s=load_began,
            )
            levels.append(measured_levels(side, percentiles))
            write(start_line(side, levels[-1]))
    finally:
        probe.stop()
    spread = estimate_start_spread(
        levels,
        concurrency=concurrency,
        flags=dials.flag_args(),
    )
    keep_start_spread(spec.state_path, spread)
    for line in spread_lines(spread, row_labels(percentiles)):
        write(line)
    if recorder is not None:
        recorder.action("start_spread", spread.to_json())
    return spread


def start_line(side: RunSide, levels: Levels) -> str:
    """One start's steady level (its measured rows) in a line."""
    cells = []
    for label, key, unit in SHOWN:
        value = levels[key][0] if key in levels else None
        shown = fmt.millis(value, ".1f", " ms") if unit == "ms" else fmt.number(value, 1)
        cells.append(f"{label} {shown}")
    span = f" ({side.span.words()})" if side.span is not None else ""
    return f"  {side.label}: {', '.join(cells)}{span}"


def spread_lines(spread: StartSpread, labels: Mapping[str, str]) -> list[str]:
    """The spread in words: each row's standard deviation between starts, and where it is kept."""
    lines = [f"Start-to-start spread over {spread.words()}: the standard deviation between"]
    lines.append("starts beyond each start's own sampling noise, over the mean level:")
    for key, relative in spread.relative.items():
        lines.append(f"  {labels.get(key, key):20s} {relative:6.1%}")
    lines.append(
        "Kept in the replica's state file: later before/afters of this replica widen their band "
        "by it (and say so in their notes)."
    )
    return lines
