"""Restart the replica with changed dials: plan (pure), then apply with verify and rollback.

Apply pauses the probe and lets in-flight requests end (bounded), stops the replica, starts it
with the new dials, waits for /health (bounded), verifies, and resumes the probe. If the start
fails, times out or verifies wrong, it shows the log tail with the reason, starts the replica
again with the previous dials and verifies that: slotop never leaves the replica down on purpose.
Every phase is an event with its time; the downtime is measured and kept for the next plan.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from slotop.actions.budget.kv import (
    BudgetError,
    CapacityChange,
    describe_capacity_change,
    expected_capacity_change,
)
from slotop.actions.budget.sglang import (
    launch_flag,
    max_total_tokens_of,
    model_dtype_of_server,
    sglang_capacity_change,
)
from slotop.actions.errors import ActionError
from slotop.actions.probe_control import ProbeHandle
from slotop.actions.replica.process import (
    ROOT_CAUSE_TAIL_LINES,
    ProgressCallback,
    RestartTarget,
    root_cause,
)
from slotop.actions.replica.spec import Dials, LaunchError
from slotop.actions.restart.verify import Verification
from slotop.collectors.probe.records import LoadMode, ProbeStatus
from slotop.collectors.snapshot import KvCacheState
from slotop.redact import shown_url

Outcome = Literal["applied", "rolled_back", "down"]
Verifier = Callable[[Dials, str], Verification]
"""Verify dials against the replica, given what it logged since its latest start."""

DRAIN_POLL_S = 0.1


class RestartRefusedError(ActionError):
    """A restart that cannot be planned: nothing changes, or no replica to restart."""


@dataclass(frozen=True, slots=True)
class ProbeLoad:
    """The probe's load when the plan was made: what apply pauses and resumes."""

    mode: LoadMode
    concurrency: int | None
    rate_rps: float | None

    def words(self) -> str:
        """The load in words."""
        if self.mode == "open":
            return f"{self.rate_rps or 0:g} requests/s"
        return f"{self.concurrency or 0} in flight"


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """A checked restart: the dial change, what it should do to the cache, and what it costs."""

    url: str
    how: Literal["managed", "command"]
    before: Dials
    after: Dials
    changes: tuple[tuple[str, str, str], ...]
    capacity: CapacityChange | None
    capacity_words: str
    expected_downtime_s: float | None
    probe_load: ProbeLoad | None
    drain_timeout_s: float
    health_timeout_s: float

    def lines(self) -> tuple[str, ...]:
        """The plan in words, as a confirmation shows it."""
        how = (
            "stop the replica slotop started and start it again"
            if self.how == "managed"
            else "run the configured restart command"
        )
        if self.changes:
            lines = [f"Restart {self.url}: {how}, with"]
            lines += [f"  {name}: {old} → {new}" for name, old, new in self.changes]
        else:
            lines = [f"Restart {self.url}: {how}, on the same dials"]
            lines.append(f"  {' '.join(self.before.flag_args())}")
        if self.capacity_words:
            lines.append(f"Expected: {self.capacity_words}")
        downtime = (
            f"about {self.expected_downtime_s:.1f} s (the last restart's)"
            if self.expected_downtime_s is not None
            else f"unknown until measured (at most {self.health_timeout_s:g} s to /health)"
        )
        lines.append(f"Downtime: {downtime}; requests sent meanwhile fail.")
        if self.probe_load is not None:
            lines.append(
                f"The probe pauses ({self.probe_load.words()} now; in-flight requests get up to "
                f"{self.drain_timeout_s:g} s to end) and resumes at the same load."
            )
        lines.append("On failure: the log tail is shown and the previous dials are restored.")
        return tuple(lines)


def _probe_load(status: ProbeStatus | None) -> ProbeLoad | None:
    if status is None:
        return None
    return ProbeLoad(status.mode, status.target_concurrency, status.rate_rps)


def _sglang_capacity(
    kv: KvCacheState | None,
    before: Dials,
    after: Dials,
    model_dtype: str | None,
    launch_command: Sequence[str] | None,
) -> tuple[CapacityChange | None, str]:
    """SGLang's pool at the new dtype: its tokens scaled by element width, held at a
    `--max-total-tokens` the launch command sets (unknown without the command), with the
    model's dtype from its `--dtype` where `auto` is involved."""
    if kv is None or kv.size_tokens is None:
        return None, (
            "KV capacity change unknown: the replica's max_total_num_tokens was not read; "
            "the verification says what SGLang chose"
        )
    if kv.cache_dtype is None:
        kv = dataclasses.replace(kv, cache_dtype=before.kv_cache_dtype)
    cap = None
    if launch_command is not None:
        cap = max_total_tokens_of(launch_command)
        model_dtype = model_dtype or model_dtype_of_server(launch_flag(launch_command, "--dtype"))
    try:
        change = sglang_capacity_change(
            kv,
            after.kv_cache_dtype,
            model_dtype=model_dtype,
            max_total_tokens=cap,
            cap_known=launch_command is not None,
        )
    except BudgetError as exc:
        return None, f"KV capacity change unknown: {exc}"
    return change, describe_capacity_change(change)


def _capacity(
    kv: KvCacheState | None,
    before: Dials,
    after: Dials,
    model_dtype: str | None,
    launch_command: Sequence[str] | None = None,
) -> tuple[CapacityChange | None, str]:
    if before.kv_cache_dtype == after.kv_cache_dtype:
        return None, ""
    if after.engine == "sglang":
        return _sglang_capacity(kv, before, after, model_dtype, launch_command)
    if kv is None or kv.blocks_total is None:
        return None, "KV capacity change unknown: the replica's cache_config_info was not read"
    try:
        change = expected_capacity_change(kv, after.kv_cache_dtype, model_dtype=model_dtype)
    except BudgetError as exc:
        return None, f"KV capacity change unknown: {exc}"
    return change, describe_capacity_change(change)


def plan_restart(
    before: Dials,
    after: Dials,
    *,
    url: str,
    how: Literal["managed", "command"],
    kv: KvCacheState | None,
    last_downtime_s: float | None,
    probe_status: ProbeStatus | None,
    drain_timeout_s: float,
    health_timeout_s: float,
    model_dtype: str | None = None,
    same_dials: bool = False,
    launch_command: Sequence[str] | None = None,
) -> RestartPlan:
    """Plan a restart from the current dials to `after`; refused when nothing changes, unless
    `same_dials` asks for a start of the same dials (a start-to-start measurement).
    `launch_command` is the command a managed replica starts with, for the cap it sets on
    SGLang's pool (`--max-total-tokens`); None where it is not known."""
    refused = after.problem()
    if refused is not None:
        raise RestartRefusedError(refused)
    changes = before.changes(after)
    if not changes and not same_dials:
        raise RestartRefusedError(
            f"the replica already runs with {', '.join(before.flag_args())}; nothing to restart"
        )
    capacity, capacity_words = _capacity(kv, before, after, model_dtype, launch_command)
    return RestartPlan(
        url=shown_url(url),
        how=how,
        before=before,
        after=after,
        changes=changes,
        capacity=capacity,
        capacity_words=capacity_words,
        expected_downtime_s=last_downtime_s,
        probe_load=_probe_load(probe_status),
        drain_timeout_s=drain_timeout_s,
        health_timeout_s=health_timeout_s,
    )


@dataclass(frozen=True, slots=True)
class RestartEvent:
    """One phase of a restart: when (wall clock), seconds since apply began, and what happened."""

    at_s: float
    elapsed_s: float
    phase: str
    detail: str


@dataclass(frozen=True, slots=True)
class RestartResult:
    """How a restart ended: which dials run now, its verification, downtime and every phase."""

    plan: RestartPlan
    outcome: Outcome
    dials: Dials | None
    verification: Verification | None
    downtime_s: float | None
    failure: str | None
    failure_log_tail: str
    events: tuple[RestartEvent, ...]

    def resumed_at_s(self) -> float | None:
        """When the probe's load was resumed after the restart (its last resume), if it was."""
        return next((e.at_s for e in reversed(self.events) if e.phase == "resume_probe"), None)

    @property
    def applied(self) -> bool:
        """Whether the replica now runs the planned dials, verified."""
        return self.outcome == "applied"

    def lines(self) -> tuple[str, ...]:
        """The outcome in words: the verdict, the verification, the reason and log tail on failure."""
        downtime = f"{self.downtime_s:.1f} s" if self.downtime_s is not None else "unknown"
        head = {
            "applied": f"Restarted with the new dials, verified; downtime {downtime}.",
            "rolled_back": "The new dials failed; ROLLED BACK to the previous dials, verified; "
            f"downtime {downtime}.",
            "down": "The new dials failed AND the rollback failed: the replica is DOWN.",
        }[self.outcome]
        lines = [head]
        if self.failure:
            lines.append(f"Reason: {self.failure}")
        if self.verification is not None:
            lines += [f"  {line}" for line in self.verification.lines()]
        if self.failure_log_tail:
            lines.append("Replica log, last lines of the failed start:")
            lines += [f"  | {line}" for line in self.failure_log_tail.splitlines()]
        return tuple(lines)


EventCallback = Callable[[RestartEvent], None]


class _Restart:
    """One apply in progress: the clocks, the events so far, the probe's paused load."""

    def __init__(
        self,
        plan: RestartPlan,
        target: RestartTarget,
        verify: Verifier,
        probe: ProbeHandle | None,
        on_event: EventCallback | None,
        on_progress: ProgressCallback | None,
        wall_clock: Callable[[], float],
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.plan = plan
        self.target = target
        self.verify = verify
        self.probe = probe
        self.on_event = on_event
        self.on_progress = on_progress
        self.wall_clock = wall_clock
        self.clock = clock
        self.sleep = sleep
        self.started = clock()
        self.events: list[RestartEvent] = []
        self.paused: ProbeLoad | None = None

    def event(self, phase: str, detail: str) -> None:
        event = RestartEvent(self.wall_clock(), self.clock() - self.started, phase, detail)
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def pause_probe(self) -> None:
        probe = self.probe
        if probe is None or not probe.running:
            return
        load = _probe_load(probe.status()) or ProbeLoad("closed", None, None)
        if load.mode == "open":
            probe.set_rate(0.0)
        else:
            probe.set_concurrency(0)
        self.paused = load
        self.event("pause_probe", f"probe paused (was {load.words()})")
        deadline = self.clock() + self.plan.drain_timeout_s
        in_flight = _in_flight(probe)
        while in_flight and self.clock() < deadline:
            self.sleep(DRAIN_POLL_S)
            in_flight = _in_flight(probe)
        if in_flight:
            self.event(
                "drain",
                f"{in_flight} requests still in flight after {self.plan.drain_timeout_s:g} s; "
                "they fail with the stop",
            )
        else:
            self.event("drain", "no request in flight")

    def resume_probe(self) -> None:
        probe, load = self.probe, self.paused
        if probe is None or load is None or not probe.running:
            return
        if load.mode == "open" and load.rate_rps is not None:
            probe.set_rate(load.rate_rps)
        elif load.concurrency is not None:
            probe.set_concurrency(load.concurrency)
        self.event("resume_probe", f"probe resumed at {load.words()}")

    def bring_up(self, dials: Dials, prefix: str) -> Verification:
        """Stop, start with `dials`, wait healthy, verify; raise LaunchError on any failure."""
        self.target.stop()
        self.event(f"{prefix}stop", "replica stopped")
        self.target.spawn(dials)
        self.event(f"{prefix}start", f"started with {' '.join(dials.flag_args())}")
        took = self.target.wait_healthy(self.on_progress)
        self.event(f"{prefix}health", f"/health answered 200 after {took:.1f} s")
        verification = self.verify(dials, self.target.log_since_start())
        words = "; ".join(verification.problems) or "dials match" + (
            f" (unverified: {', '.join(verification.unverified)})"
            if verification.unverified
            else ""
        )
        self.event(f"{prefix}verify", words)
        if not verification.ok:
            raise _VerifyMismatch(verification)
        return verification


class _VerifyMismatch(LaunchError):
    """The replica came up, but reports other dials than it was started with."""

    def __init__(self, verification: Verification) -> None:
        super().__init__("verify failed: " + "; ".join(verification.problems))
        self.verification = verification


def _in_flight(probe: ProbeHandle) -> int:
    status = probe.status()
    return status.in_flight if status is not None and probe.running else 0


def apply_restart(
    plan: RestartPlan,
    target: RestartTarget,
    verify: Verifier,
    *,
    probe: ProbeHandle | None = None,
    on_event: EventCallback | None = None,
    on_progress: ProgressCallback | None = None,
    wall_clock: Callable[[], float] = time.time,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RestartResult:
    """Carry out a plan; on failure roll back to the plan's previous dials and say so."""
    run = _Restart(plan, target, verify, probe, on_event, on_progress, wall_clock, clock, sleep)
    changes = "; ".join(f"{n} {old} → {new}" for n, old, new in plan.changes)
    run.event("plan", changes or "the same dials, started again")
    run.pause_probe()
    down_since = clock()
    failure: str | None = None
    tail = ""
    verification: Verification | None
    try:
        verification = run.bring_up(plan.after, "")
        outcome: Outcome = "applied"
        dials: Dials | None = plan.after
    except (LaunchError, KeyboardInterrupt) as exc:
        tail = target.log_tail()
        failure = str(exc) or "interrupted"
        cause = root_cause(target.log_tail(ROOT_CAUSE_TAIL_LINES))
        if cause is not None:
            failure += f"; the log's error: {cause[:300]}"
        elif tail.strip():
            failure += f"; the log's last line: {tail.strip().splitlines()[-1][:200]}"
        run.event("failed", failure)
        try:
            verification = run.bring_up(plan.before, "rollback_")
            outcome, dials = "rolled_back", plan.before
        except LaunchError as again:
            run.event("rollback_failed", str(again))
            tail = f"{tail}\n--- rollback start ---\n{target.log_tail()}"
            failure = f"{failure}; the rollback failed too: {again}"
            verification = again.verification if isinstance(again, _VerifyMismatch) else None
            outcome, dials = "down", None
    downtime = clock() - down_since if outcome != "down" else None
    if downtime is not None:
        target.record_downtime(downtime)
        run.event("up", f"serving again after {downtime:.1f} s of downtime")
        run.resume_probe()
    else:
        run.event("down", "the replica is down; the probe stays paused")
    return RestartResult(
        plan, outcome, dials, verification, downtime, failure, tail, tuple(run.events)
    )
