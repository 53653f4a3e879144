"""`slotop launch` and `slotop restart` end to end: find the replica, plan, ask, apply, compare.

Text goes out through an injected `write`, the question through an injected `confirm`, so the
command line and tests drive the same code. No terminal library is used here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from slotop.actions.experiment.recording import RESTART_UP_PHASE
from slotop.actions.probe_control import (
    load_shape_from_settings,
    plan_start,
    probe_target_from_settings,
)
from slotop.actions.replica.journal import (
    RestartJournal,
    forget_cut_restart,
    found_cut_restart,
)
from slotop.actions.replica.process import HealthProgress, ManagedReplica, RestartTarget
from slotop.actions.replica.spec import Dials, LaunchError, LaunchSpec, restart_lock
from slotop.actions.restart.apply import (
    RestartEvent,
    RestartPlan,
    RestartResult,
    apply_restart,
    plan_restart,
)
from slotop.actions.restart.compare import Comparison, RunSide, compare_runs
from slotop.actions.restart.measure import measure_side, slo_percentiles
from slotop.actions.restart.quality_check import (
    QualityBaseline,
    QualityCheck,
    configured_prompts,
    quality_applies,
    quality_baseline,
    quality_check,
)
from slotop.actions.restart.starts import StartSpread, start_spread_or_said
from slotop.actions.restart.table import comparison_table, comparison_to_json, table_to_json
from slotop.actions.restart.verify import replica_verifier
from slotop.actions.session.recorder import RecordChoice, SessionRecorder, open_recording
from slotop.actions.session.taps import RecordingProbe
from slotop.actions.wiring.replica import recorded_polls
from slotop.actions.wiring.restart import RestartHow, restart_target
from slotop.collectors.errors import CollectorError
from slotop.collectors.probe.handle import Probe
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import KvCacheState, kv_cache_state
from slotop.config import Settings
from slotop.redact import shown_command, shown_url

Write = Callable[[str], None]
PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True, slots=True)
class DialOverrides:
    """Dials given on the command line; None leaves the current value, 0 means the default."""

    kv_cache_dtype: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None

    def applied_to(self, dials: Dials) -> Dials:
        """`dials` with these values put in."""
        changes: dict[str, object] = {}
        if self.kv_cache_dtype is not None:
            changes["kv_cache_dtype"] = self.kv_cache_dtype
        if self.max_num_seqs is not None:
            changes["max_num_seqs"] = self.max_num_seqs or None
        if self.max_num_batched_tokens is not None:
            changes["max_num_batched_tokens"] = self.max_num_batched_tokens or None
        return dataclasses.replace(dials, **changes)  # type: ignore[arg-type]


class _ProgressPrinter:
    """Writes a health-wait line every few seconds, or sooner when the log moves on."""

    def __init__(self, write: Write, clock: Callable[[], float]) -> None:
        self._write = write
        self._clock = clock
        self._last_at: float | None = None
        self._last_line: str | None = None

    def __call__(self, progress: HealthProgress) -> None:
        now = self._clock()
        moved = progress.log_line is not None and progress.log_line != self._last_line
        if self._last_at is not None and not moved and now - self._last_at < PROGRESS_EVERY_S:
            return
        self._last_at, self._last_line = now, progress.log_line
        log = f" | {progress.log_line[:100]}" if progress.log_line else ""
        self._write(
            f"  waiting for /health: {progress.elapsed_s:.0f}/{progress.timeout_s:g} s{log}"
        )


def progress_printer(
    write: Write, clock: Callable[[], float] = time.monotonic
) -> Callable[[HealthProgress], None]:
    """A health-wait callback that writes a line every few seconds, or when the log moves on."""
    return _ProgressPrinter(write, clock)


def _someone_answers(spec: LaunchSpec) -> bool:
    with ReplicaClient(spec.url, api_key=spec.api_key, timeout_s=2.0) as client:
        return client.health().healthy


def run_launch(spec: LaunchSpec, overrides: DialOverrides, write: Write) -> ManagedReplica:
    """Start the managed replica unless one already runs; return it healthy."""
    with restart_lock(spec.state_path):
        return _launch(spec, overrides, write)


def _launch(spec: LaunchSpec, overrides: DialOverrides, write: Write) -> ManagedReplica:
    cut = found_cut_restart(spec, write)
    replica = ManagedReplica.adopt(spec)
    if replica.running:
        raise LaunchError(
            f"the replica slotop started is already running on {shown_url(spec.url)} "
            f"(PID {replica.pid}, "
            f"{' '.join(replica.dials.flag_args() if replica.dials else ())}); "
            "`slotop restart` changes its dials, `slotop launch --stop` stops it"
        )
    if _someone_answers(spec):
        raise LaunchError(
            f"a replica slotop did not start already answers on {shown_url(spec.url)}; slotop "
            "will not "
            "touch it: stop it, or point [replica] url at a free port"
        )
    dials = overrides.applied_to(spec.dials)
    if cut is not None and overrides == DialOverrides():
        dials = cut.before  # the way back: the dials it ran before the cut restart
        write(
            f"starting it on the dials it ran before the cut restart: {' '.join(dials.flag_args())}"
        )
    refused = dials.problem()
    if refused is not None:
        raise LaunchError(refused)
    write(f"starting: {shown_command(spec.argv(dials))}")
    write(f"  log: {spec.log_path}")
    took = replica.start(dials, progress_printer(write))
    forget_cut_restart(spec.state_path)
    write(
        f"replica up on {shown_url(spec.url)} after {took:.1f} s (PID {replica.pid}, process "
        f"group of its own); `slotop attach {shown_url(spec.url)}` watches it, `slotop launch "
        "--stop` stops it"
    )
    return replica


def run_stop(spec: LaunchSpec, write: Write) -> bool:
    """Stop the replica slotop started for this URL; False when there is none."""
    with restart_lock(spec.state_path):
        return _stop(spec, write)


def _stop(spec: LaunchSpec, write: Write) -> bool:
    replica = ManagedReplica.adopt(spec)
    if not replica.running:
        write(f"no replica that slotop started is running for {shown_url(spec.url)}")
        return False
    pid = replica.pid
    replica.stop()
    write(f"stopped the replica on {shown_url(spec.url)} (PID {pid}, its whole process group)")
    return True


def _kv_now(spec: LaunchSpec) -> KvCacheState | None:
    try:
        with ReplicaClient(spec.url, api_key=spec.api_key, timeout_s=5.0) as client:
            return kv_cache_state(read_metrics_text(client.metrics_text()))
    except CollectorError:
        return None


def spec_plan(
    spec: LaunchSpec,
    target: RestartTarget,
    how: RestartHow,
    before: Dials,
    after: Dials,
    *,
    kv: KvCacheState | None,
    same_dials: bool = False,
) -> RestartPlan:
    """The plan of a restart from the command line: the spec's URL and timeouts, the target's
    last downtime, no probe of the dashboard's to pause (the command runs its own)."""
    return plan_restart(
        before,
        after,
        url=spec.url,
        how=how,
        kv=kv,
        last_downtime_s=target.last_downtime_s,
        probe_status=None,
        drain_timeout_s=spec.drain_timeout_s,
        health_timeout_s=spec.health_timeout_s,
        same_dials=same_dials,
        launch_command=spec.command if how == "managed" else None,
    )


def journaled_apply(
    spec: LaunchSpec,
    plan: RestartPlan,
    target: RestartTarget,
    probe: Probe | RecordingProbe | None,
    write: Write,
    recorder: SessionRecorder | None,
    command: str = "restart",
) -> RestartResult:
    """Apply the plan with each phase written to the state file (for a slotop killed midway),
    shown, and recorded; health waits shown as they go."""
    journal = RestartJournal(
        spec.state_path,
        plan.before,
        plan.after,
        command=command,
        how=plan.how,
        recording=recorder.path if recorder is not None else None,
    )
    show = _event_writer(write, recorder)

    def noted(event: RestartEvent) -> None:
        journal.phase(event.phase)
        show(event)

    return apply_restart(
        plan,
        target,
        replica_verifier(spec.url, api_key=spec.api_key),
        probe=probe,
        on_event=noted,
        on_progress=progress_printer(write),
    )


def _event_writer(
    write: Write, recorder: SessionRecorder | None = None
) -> Callable[[RestartEvent], None]:
    def show(event: RestartEvent) -> None:
        write(f"  [{event.elapsed_s:6.1f} s] {event.phase}: {event.detail}")
        if recorder is not None:
            text = f"{event.phase}: {event.detail}"
            recorder.event("restart", text, at_s=event.at_s, elapsed_s=event.elapsed_s)

    return show


@dataclass(frozen=True, slots=True)
class RestartRun:
    """What `slotop restart` did: the result (None when not confirmed), before/after, quality.

    `quality` is None when the KV dtype did not change or the check was turned off.
    """

    result: RestartResult | None
    comparison: Comparison | None
    quality: QualityCheck | None = None


def run_restart(
    settings: Settings,
    spec: LaunchSpec,
    overrides: DialOverrides,
    *,
    confirm: Callable[[str], bool],
    write: Write,
    concurrency: int | None = None,
    dwell_s: float = 30.0,
    check_quality: bool = True,
    record: RecordChoice | None = None,
) -> RestartRun:
    """Plan, ask, apply; with `concurrency`, measure the same load for `dwell_s` before and after.

    When the KV dtype changes (and `check_quality`), the greedy quality check runs before the
    probe starts and after it stops, so its requests are neither measured as the probe's load
    nor batched with it. The session is recorded as `record` says (by default, not at all),
    the replica polled meanwhile so the recording holds its metrics through the restart.
    """
    with restarting_session(settings, spec, record, write) as recorder:
        return _restart(
            settings,
            spec,
            overrides,
            confirm=confirm,
            write=write,
            concurrency=concurrency,
            dwell_s=dwell_s,
            check_quality=check_quality,
            recorder=recorder,
        )


@contextlib.contextmanager
def restarting_session(
    settings: Settings, spec: LaunchSpec, record: RecordChoice | None, write: Write
) -> Iterator[SessionRecorder | None]:
    """Hold the replica's lock, and record the session as `record` says (by default, not at
    all), the replica polled meanwhile so the recording holds its metrics through restarts."""
    with restart_lock(spec.state_path):
        recorder = open_recording(
            record or RecordChoice(False), command="restart", settings=settings
        )
        if recorder is not None:
            write(recorder.where())
        try:
            with recorded_polls(settings, recorder):
                yield recorder
        finally:
            if recorder is not None:
                recorder.close()


def _restart(
    settings: Settings,
    spec: LaunchSpec,
    overrides: DialOverrides,
    *,
    confirm: Callable[[str], bool],
    write: Write,
    concurrency: int | None,
    dwell_s: float,
    check_quality: bool,
    recorder: SessionRecorder | None = None,
) -> RestartRun:
    cut = found_cut_restart(spec, write)
    target, before, how = restart_target(spec)
    if recorder is not None:
        recorder.action("dials", {"dials": before.to_json()})  # as the dashboard finds them
    after = overrides.applied_to(before)
    if cut is not None and overrides == DialOverrides():
        after = cut.before  # no dial asked for: the way back from the cut restart
    prompts = (
        configured_prompts(settings.launch.quality_prompts_file)
        if check_quality and quality_applies(before, after)
        else ()
    )
    probe: Probe | RecordingProbe | None = None
    shape = load_shape_from_settings(settings.load)
    if concurrency is not None:
        plan_start(
            probe_target_from_settings(settings),
            shape,
            settings.load.allow_remote_load,
            concurrency=concurrency,
        )
    plan = spec_plan(spec, target, how, before, after, kv=_kv_now(spec))
    lines = list(plan.lines())
    if concurrency is not None:
        lines.append(
            f"Before/after: the probe keeps {concurrency} requests in flight for {dwell_s:g} s "
            "(longer where twelve of its requests' lifetimes are, at most "
            f"{settings.restart.max_dwell_s:g} s) before the restart, is paused during it, and "
            "runs the same load and dwell after; each dwell starts once the load has settled "
            "(its streams' opening requests and those in flight with them ended)."
        )
    if prompts:
        lines.append(
            f"Quality check: {len(prompts)} prompts, greedy, before and after the restart "
            "(outside any measured dwell), compared token by token."
        )
    for line in lines:
        write(line)
    dials: dict[str, object] = {
        "dials_before": before.to_json(),
        "dials_after": after.to_json(),
        "how": how,
    }
    if recorder is not None:
        recorder.action("restart_planned", {**dials, "plan": lines})
    if not confirm("Restart the replica?"):
        write("not restarted")
        if recorder is not None:
            recorder.event("restart", "not restarted: the operator said no")
        return RestartRun(None, None)
    baseline: QualityBaseline | None = None
    if prompts:
        write(f"quality check: {len(prompts)} greedy prompts before the restart")
        baseline = quality_baseline(spec.url, spec.api_key, prompts)
    try:
        if concurrency is not None:
            load_began = time.time()
            probe = Probe.start(
                probe_target_from_settings(settings), shape, concurrency=concurrency
            )
            if recorder is not None:
                probe = RecordingProbe(probe, recorder)
            write(
                f"measuring before: {concurrency} in flight for {dwell_s:g} s or twelve request "
                "lifetimes, once the load has settled"
            )
            side_before = measure_side(
                "as it ran", before, probe, settings, dwell_s=dwell_s, load_began_s=load_began
            )
            _write_span(write, side_before)
        result = journaled_apply(spec, plan, target, probe, write, recorder)
        if recorder is not None and result.dials is not None:
            up = [event.at_s for event in result.events if event.phase == RESTART_UP_PHASE]
            since = up[-1] if up else None  # serving with them since (a configuration opens)
            recorder.action("dials", {"dials": result.dials.to_json(), "since_s": since})
        for line in result.lines():
            write(line)
        comparison = None
        if probe is not None and result.outcome != "down":
            write(
                f"measuring after: {concurrency} in flight for {dwell_s:g} s or twelve request "
                "lifetimes, once the resumed load has settled"
            )
            now = result.dials or before
            resumed = result.resumed_at_s()
            side_after = measure_side(
                "restarted",
                now,
                probe,
                settings,
                dwell_s=dwell_s,
                load_began_s=resumed if resumed is not None else time.time(),
            )
            _write_span(write, side_after)
            comparison = compare_runs(
                side_before,
                side_after,
                slo_percentiles=slo_percentiles(settings),
                min_requests=settings.restart.min_requests,
                start_spread=_kept_spread(spec, write),
            )
    finally:
        if probe is not None:
            probe.stop()
    quality = None
    if baseline is not None:
        if result.applied and baseline.run is not None:
            write(f"quality check: the same {len(prompts)} greedy prompts after the restart")
        quality = quality_check(spec.url, spec.api_key, baseline, result.outcome)
    if recorder is not None:
        recorder.action("restart", _restart_json(dials, result, comparison, quality))
    return RestartRun(result, comparison, quality)


def _kept_spread(spec: LaunchSpec, write: Write) -> StartSpread | None:
    """The replica's start-to-start spread; a damaged one is said, and the table goes without."""
    return start_spread_or_said(spec.state_path, lambda words: write(f"  {words}"))


def _write_span(write: Write, side: RunSide) -> None:
    """Say what a measured side spans."""
    if side.span is not None:
        write(f"  {side.label}: {side.span.words()}")


def _restart_json(
    dials: dict[str, object],
    result: RestartResult,
    comparison: Comparison | None,
    quality: QualityCheck | None,
) -> dict[str, object]:
    """A restart's recording: the dials before and after, its outcome, and what it measured."""
    return {
        **dials,
        "dials_now": result.dials.to_json() if result.dials is not None else None,
        "outcome": result.outcome,
        "downtime_s": result.downtime_s,
        "failure": result.failure,
        "lines": list(result.lines()),
        "comparison": comparison_to_json(comparison) if comparison is not None else None,
        "table": table_to_json(comparison_table(comparison)) if comparison is not None else None,
        "quality": quality.to_json() if quality is not None else None,
    }
