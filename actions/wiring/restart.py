"""Find the replica a restart acts on: the one slotop started, else the restart command's.

The dashboard's dial keys and `slotop restart` both restart what this finds, so they agree on
which replica that is and why there is none.
"""

from __future__ import annotations

from typing import Literal

from slotop.actions.replica.external import CommandReplica
from slotop.actions.replica.process import ManagedReplica, RestartTarget
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.restart.apply import RestartRefusedError
from slotop.redact import shown_url

RestartHow = Literal["managed", "command"]


def restart_target(spec: LaunchSpec) -> tuple[RestartTarget, Dials, RestartHow]:
    """The replica a restart acts on: the one slotop started, else the restart command's."""
    replica = ManagedReplica.adopt(spec)
    if replica.running and replica.dials is not None:
        return replica, replica.dials, "managed"
    if spec.restart_command:
        return CommandReplica(spec, spec.dials), spec.dials, "command"
    raise RestartRefusedError(
        f"no replica that slotop started runs for {shown_url(spec.url)}: start one with "
        "`slotop launch`, "
        "or set [launch] restart_command to restart one started elsewhere"
    )
