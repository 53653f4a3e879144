"""A restart's journal in the replica's state file: what the next slotop needs if this one dies.

Each phase of a restart (plan, stop, start, health, verify, a rollback's) is written to the state
file as it happens, with the dials before and after and who was restarting; the record goes when
the restart ends, however it ends. A slotop killed in between (`kill -9`, a lost machine) leaves
it, and the next `slotop launch`, `attach` or `restart` reads it back as a `CutRestart`: which
dials the replica runs now, whether it runs, and the command that puts it back.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, LaunchError, LaunchSpec, read_restart, write_restart
from slotop.collectors.errors import CollectorError
from slotop.collectors.replica import ReplicaClient

_ENDS = ("up", "down")
_PHASE_WORDS = {
    "plan": "before it stopped the replica",
    "pause_probe": "before it stopped the replica",
    "drain": "while it stopped the replica",
    "stop": "after it stopped the replica and before it started it again",
    "start": "after it started the replica with the new dials and before /health answered",
    "health": "after /health answered and before the new dials were verified",
    "verify": "after it verified the new dials",
    "failed": "after the new dials failed and before it rolled back",
    "rollback_stop": "while rolling back, after it stopped the replica",
    "rollback_start": "while rolling back, before /health answered",
    "rollback_health": "while rolling back, before the old dials were verified",
    "rollback_verify": "while rolling back, after it verified the old dials",
    "rollback_failed": "after the rollback failed",
}


class RestartJournal:
    """Writes a restart's phases to the state file; pass `on_event(phase)` each phase."""

    def __init__(
        self,
        state_path: Path,
        before: Dials,
        after: Dials,
        *,
        command: str,
        how: str,
        recording: Path | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.state_path = state_path
        self._record = {
            "slotop_pid": os.getpid(),
            "command": command,
            "how": how,
            "started_at_unix_s": wall_clock(),
            "before": before.to_json(),
            "after": after.to_json(),
            "recording": str(recording) if recording is not None else None,
        }
        self._clock = wall_clock

    def phase(self, phase: str) -> None:
        """Note that the restart reached `phase`; its end (`up`, `down`) clears the record."""
        if phase in _ENDS:
            write_restart(self.state_path, None)
            return
        write_restart(
            self.state_path, {**self._record, "phase": phase, "phase_at_unix_s": self._clock()}
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, slots=True)
class CutRestart:
    """A restart whose slotop died before it ended, as its record in the state file says."""

    slotop_pid: int
    command: str
    how: str
    started_at_unix_s: float
    before: Dials
    after: Dials
    phase: str
    recording: str | None

    def words(self, running: tuple[int, Dials] | None, answers: bool | None = None) -> str:
        """What happened and what runs now, in a sentence or two: `running` is the PID and dials
        of the replica slotop started, proven alive (None: none runs); for a replica a restart
        command restarts, `answers` says whether its /health answered."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at_unix_s))
        changes = ", ".join(f"{n} {a} → {b}" for n, a, b in self.before.changes(self.after))
        head = (
            f"a restart by `slotop {self.command}` (PID {self.slotop_pid}, {when}; "
            f"{changes or 'no dial changed'}) was cut off "
            f"{_PHASE_WORDS.get(self.phase, f'at its {self.phase} phase')}"
        )
        if self.recording:
            head += f" (its recording: {self.recording})"
        if self.how == "command":
            state = {True: "it answers /health", False: "it does not answer /health"}
            return f"{head}; the restart command ran it, so slotop cannot tell its dials: " + (
                state.get(answers, "whether it runs is unknown") if answers is not None else ""
            )
        if running is None:
            return f"{head}; the replica is not running"
        pid, dials = running
        if dials == self.after:
            which = "the new dials, never verified"
        elif dials == self.before:
            which = "the dials it ran before"
        else:
            which = "dials of its own"
        return f"{head}; the replica runs (PID {pid}) with {' '.join(dials.flag_args())}, {which}"

    def way_back(self, running: bool) -> str:
        """The command that puts the replica back on the dials it ran before the cut restart."""
        flags = " ".join(self.before.flag_args())
        if running:
            return (
                f"`slotop restart` puts it back on {flags} (it asks first); `slotop restart "
                f"{' '.join(_override_flags(self.after))}` keeps the new dials, verified"
            )
        return (
            f"`slotop launch` starts it again on {flags}, the dials it ran before; `slotop launch "
            f"{' '.join(_override_flags(self.after))}` on the new ones"
        )


def _override_flags(dials: Dials) -> list[str]:
    """The `slotop restart`/`launch` flags that ask for exactly these dials."""
    return [
        f"--kv-cache-dtype {dials.kv_cache_dtype}",
        f"--max-num-seqs {dials.max_num_seqs or 'default'}",
        f"--max-num-batched-tokens {dials.max_num_batched_tokens or 'default'}",
    ]


def cut_restart(state_path: Path) -> CutRestart | None:
    """The restart the state file records as under way when its slotop is gone; None when none
    was cut off (none recorded, or its slotop still runs it)."""
    record = read_restart(state_path)
    if record is None:
        return None
    try:
        pid = int(record["slotop_pid"])
        cut = CutRestart(
            slotop_pid=pid,
            command=str(record.get("command") or "restart"),
            how=str(record.get("how") or "managed"),
            started_at_unix_s=float(record.get("started_at_unix_s") or 0.0),
            before=Dials.from_json(record.get("before") or {}),
            after=Dials.from_json(record.get("after") or {}),
            phase=str(record.get("phase") or "plan"),
            recording=str(record["recording"]) if record.get("recording") else None,
        )
    except (KeyError, TypeError, ValueError):
        return None
    if pid != os.getpid() and _alive(pid) and _is_slotop(pid):
        return None  # still under way: the restart lock keeps others out meanwhile
    return cut


def _is_slotop(pid: int) -> bool:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # cannot tell: take it as the slotop that wrote the record
    return any(b"slotop" in word for word in words)


def forget_cut_restart(state_path: Path) -> None:
    """Clear the record of a cut restart once the replica was put right."""
    with contextlib.suppress(LaunchError):
        write_restart(state_path, None)


def found_cut_restart(spec: LaunchSpec, write: Callable[[str], None]) -> CutRestart | None:
    """Say what a restart cut off by a killed slotop left (from the state file), and the way
    back; the cut restart, None when there is none (or the replica is back where it was)."""
    cut = cut_restart(spec.state_path)
    if cut is None:
        return None
    replica = ManagedReplica.adopt(spec)
    running = (replica.pid, replica.dials) if replica.running and replica.pid else None
    answers = _answers(spec) if cut.how == "command" else None
    write(f"found in {spec.state_path}: {cut.words(_known(running), answers)}")
    if running is not None and running[1] == cut.before:
        write("  it runs the dials it ran before that restart: nothing to put back")
        forget_cut_restart(spec.state_path)
        return None
    write(f"  the way back: {cut.way_back(running is not None or bool(answers))}")
    return cut


def _known(running: tuple[int, Dials | None] | None) -> tuple[int, Dials] | None:
    if running is None or running[1] is None:
        return None
    return running[0], running[1]


def _answers(spec: LaunchSpec) -> bool:
    """Whether the replica at the spec's URL answers /health now."""
    try:
        with ReplicaClient(spec.url, api_key=spec.api_key, timeout_s=2.0) as client:
            return client.health().healthy
    except CollectorError:
        return False
