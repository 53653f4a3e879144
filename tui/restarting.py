"""Restarting the replica from the dashboard: find what can be restarted, plan a dial change.

Only a replica slotop started (the demo's, or one from `slotop launch`) or one with a configured
restart command can be restarted; anything else says why not. Planning is pure and runs on the
UI thread; applying (stop, start, verify, roll back on failure) runs in a worker.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from slotop.actions.errors import ActionError
from slotop.actions.probe_control import ProbeHandle
from slotop.actions.replica.journal import RestartJournal
from slotop.actions.replica.process import RestartTarget
from slotop.actions.replica.spec import Dials, LaunchSpec, restart_lock
from slotop.actions.restart.apply import (
    RestartEvent,
    RestartPlan,
    RestartResult,
    apply_restart,
    plan_restart,
)
from slotop.actions.restart.verify import replica_verifier
from slotop.collectors.probe.records import ProbeStatus
from slotop.collectors.snapshot import KvCacheState

KV_DTYPES: tuple[str, ...] = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
DIAL_TITLES = {
    "kv_cache_dtype": "KV-cache dtype (--kv-cache-dtype)",
    "max_num_seqs": "Most sequences in a batch (--max-num-seqs)",
    "max_num_batched_tokens": "Token budget of one step (--max-num-batched-tokens)",
}


@dataclass(frozen=True, slots=True)
class RestartAccess:
    """A replica that can be restarted: how, with which dials now, under which recipe."""

    target: RestartTarget
    spec: LaunchSpec
    how: Literal["managed", "command"]

    @property
    def dials(self) -> Dials:
        """The dials the replica runs with now (as started, or as the recipe says)."""
        return self.target.dials or self.spec.dials


AccessFinder = Callable[[], "RestartAccess | str"]


def with_dial(dials: Dials, name: str, text: str) -> Dials:
    """The dials with one changed from what the operator typed; 0 means the replica's default."""
    if name == "kv_cache_dtype":
        if text not in KV_DTYPES:
            raise ActionError(f"KV dtype {text!r}; choose one of {', '.join(KV_DTYPES)}")
        return dataclasses.replace(dials, kv_cache_dtype=text)
    try:
        value = int(text)
    except ValueError:
        raise ActionError(f"{name} {text!r}: expected a whole number") from None
    if value < 0:
        raise ActionError(f"{name} {value}: it must be 0 (the default) or more")
    if name == "max_num_seqs":
        return dataclasses.replace(dials, max_num_seqs=value or None)
    if name == "max_num_batched_tokens":
        return dataclasses.replace(dials, max_num_batched_tokens=value or None)
    raise ActionError(f"{name} is not a dial slotop turns")


def plan_dial_change(
    access: RestartAccess,
    name: str,
    text: str,
    kv: KvCacheState | None,
    probe_status: ProbeStatus | None,
) -> RestartPlan:
    """Plan a restart that changes one dial (RestartRefusedError when nothing changes)."""
    before = access.dials
    return plan_restart(
        before,
        with_dial(before, name, text),
        url=access.spec.url,
        how=access.how,
        kv=kv,
        last_downtime_s=access.target.last_downtime_s,
        probe_status=probe_status,
        drain_timeout_s=access.spec.drain_timeout_s,
        health_timeout_s=access.spec.health_timeout_s,
        launch_command=access.spec.command if access.how == "managed" else None,
    )


def apply_in_thread(
    plan: RestartPlan,
    access: RestartAccess,
    probe: ProbeHandle | None,
    on_event: Callable[[RestartEvent], None],
    recording: Path | None = None,
) -> RestartResult:
    """Carry out a plan under the recipe's restart lock; events go to `on_event` as they happen,
    and each phase to the state file's journal, for a slotop that finds this one killed."""
    spec = access.spec
    verify = replica_verifier(spec.url, api_key=spec.api_key)
    journal = RestartJournal(
        spec.state_path,
        plan.before,
        plan.after,
        command="attach",
        how=access.how,
        recording=recording,
    )

    def noted(event: RestartEvent) -> None:
        journal.phase(event.phase)
        on_event(event)

    with restart_lock(spec.state_path):
        return apply_restart(plan, access.target, verify, probe=probe, on_event=noted)
