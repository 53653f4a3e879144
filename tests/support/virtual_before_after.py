"""The dashboard's before/after of a restart, on the simulated engine in virtual time.

The load is reached as an operator reaches it (the probe started at 2, `+` to the level), runs,
and the replica restarts onto another configuration (the probe paused, drained, resumed at the
same level); the dashboard's own `LiveBeforeAfter` then reads the probe's records and events as
it reads a real probe's, and builds its table. Minutes of load in a second or two, so a test can
make twenty restarts that change nothing and count how often a row reads beyond noise.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import RestartEvent, RestartResult, plan_restart
from slotop.actions.restart.compare import Comparison
from slotop.actions.restart.live import LiveBeforeAfter
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.probe.loadshape import LoadShape
from slotop.collectors.probe.records import ProbeStatus
from slotop.collectors.snapshot import Snapshot
from slotop.config import Settings
from slotop.sim.types import EngineConfig
from tests.support.paths import CAPTURES
from tests.support.virtual_load import Restart, SetLoad, VirtualRun

BEFORE_DIALS = Dials("auto", 200)
AFTER_DIALS = Dials("auto", 256)


@functools.cache
def _idle_snapshot() -> Snapshot:
    text = (CAPTURES / "vllm-0.32-cpu-idle.txt").read_text(encoding="utf-8")
    return snapshot_of_dump(text, where="capture", taken_at_s=0.0)


def _snapshot(at_s: float) -> Snapshot:
    """The idle capture's snapshot, taken at `at_s`: read once, since only the time differs."""
    return replace(_idle_snapshot(), taken_at_s=at_s)


def _status(run: VirtualRun, at_s: float) -> ProbeStatus:
    """The probe's status at `at_s`: the requests still streaming, and its openings among them."""
    streaming = tuple(sorted(run.in_flight_sent_s()))
    return ProbeStatus(
        at_s,
        0,
        "closed",
        run.concurrency,
        None,
        len(streaming),
        run.sent,
        0,
        0,
        streaming_sent_at_s=streaming,
        openings_streaming=run.openings_in_flight(),
    )


def dashboard_before_after(
    before: EngineConfig,
    after: EngineConfig,
    shape: LoadShape,
    concurrency: int,
    *,
    seed: int,
    settings: Settings | None = None,
    steady_s: float = 60.0,
) -> Comparison | None:
    """The table the dashboard shows for a restart from `before` to `after` at `concurrency`
    streams, reached by `+` from 2 and run `steady_s` before the restart; None if it never came
    within `4 * steady_s` of the restart.

    After the restart the run goes on a second at a time, each second's records and the probe's
    status (what is still streaming) handed over as the dashboard gets them, and stops once the
    table can be built: nothing after that can change it, and simulating the rest would cost two
    thirds of the run."""
    ramp = [SetLoad(0.0, min(2, concurrency))]
    ramp += [SetLoad(2.0 * i, c) for i, c in enumerate(range(3, concurrency + 1), start=1)]
    restart_at = 2.0 * len(ramp) + steady_s
    run = VirtualRun(before, shape, seed=seed).run([*ramp, Restart(restart_at, after)], restart_at)
    pause_s, up_s, resume_s = run.restarts[0]
    live = LiveBeforeAfter(settings or Settings())
    now_s = resume_s
    resumed = _status(run, now_s)
    live.add(run.records, run.events, resumed)
    taken = (len(run.records), len(run.events))
    plan = plan_restart(
        BEFORE_DIALS,
        AFTER_DIALS,
        url="http://127.0.0.1:8000",
        how="managed",
        kv=None,
        last_downtime_s=None,
        probe_status=resumed,  # the plan reads only the load, the same before and after
        drain_timeout_s=60.0,
        health_timeout_s=60.0,
    )
    live.began(plan, pause_s - 0.1, _snapshot(pause_s - 0.1))  # confirmed, then paused
    phases = (
        ("pause_probe", pause_s),
        ("stop", up_s - 1.0),
        ("up", up_s),
        ("resume_probe", resume_s),
    )
    events = tuple(RestartEvent(at, at - pause_s, phase, "") for phase, at in phases)
    live.ended(RestartResult(plan, "applied", plan.after, None, 1.0, None, "", events))
    job = None
    while job is None and now_s < restart_at + 4 * steady_s:
        now_s += 1.0
        run.advance(now_s)
        live.add(run.records[taken[0] :], run.events[taken[1] :], _status(run, now_s))
        taken = (len(run.records), len(run.events))
        live.state(_snapshot(now_s))
        job = live.build()
    if job is None:
        return None
    live.built(job())
    state = live.state(None)
    return state.comparison if state is not None else None


def no_op(config: EngineConfig) -> EngineConfig:
    """The same configuration under another max_num_seqs that changes nothing at a few streams."""
    return replace(config, max_num_seqs=config.max_num_seqs + 56)
