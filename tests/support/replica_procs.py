"""Process-table checks for tests that start replicas: what is left of a group or below a PID."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.vllm_replica import live_descendants, proc_stats

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
    stats = proc_stats()
    mine = [
        other
        for other, (state, parent, _) in stats.items()
        if parent == me and state != "Z" and not _is_shared_helper(other)
    ]
    found: set[int] = set()
    for child in mine:
        found |= set(live_descendants(child))
    return sorted(found)
