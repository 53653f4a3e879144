"""Process-table checks for tests that start replicas: what is left of a group or below a PID."""

from __future__ import annotations

import os
from pathlib import Path


def _stats() -> dict[int, tuple[str, int, int]]:
    """State, parent PID and process group of every process, from /proc."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        stats[int(entry.name)] = (fields[0], int(fields[1]), int(fields[2]))
    return stats


def live_in_group_or_below(pid: int) -> list[int]:
    """Live (non-zombie) processes in pid's process group or descended from pid."""
    stats = _stats()
    found = {other for other, (_, _, group) in stats.items() if group == pid}
    if pid in stats:
        found.add(pid)
    grew = True
    while grew:
        below = {other for other, (_, parent, _) in stats.items() if parent in found}
        grew = not below <= found
        found |= below
    return sorted(other for other in found if stats[other][0] != "Z")


_SHARED_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")
"""Python's own per-interpreter helpers, started once and kept until exit: never strays."""


def _is_shared_helper(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return any(helper in cmdline for helper in _SHARED_HELPERS)


def live_children() -> list[int]:
    """Live processes this test process started and that still run, with their descendants.

    Python's multiprocessing resource tracker (started by the first spawned process, kept until
    the interpreter exits) is not counted.
    """
    me = os.getpid()
    stats = _stats()
    mine = [
        other
        for other, (state, parent, _) in stats.items()
        if parent == me and state != "Z" and not _is_shared_helper(other)
    ]
    found: set[int] = set()
    for child in mine:
        found |= set(live_in_group_or_below(child))
    return sorted(found)
