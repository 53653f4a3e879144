"""Frozen inputs for TUI tests and benches: snapshots and polls built from a real vLLM capture."""

from __future__ import annotations

import dataclasses

from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.poller import PollResult
from slotop.collectors.snapshot import Snapshot
from tests.support.paths import CAPTURES

FROZEN_NOW_S = 1_800_000_000.0


def capture_snapshot(name: str = "vllm-0.32-cpu-load.txt") -> Snapshot:
    """A Snapshot of a real replica's /metrics under load, with its identity filled in."""
    text = (CAPTURES / name).read_text(encoding="utf-8")
    snapshot = snapshot_of_dump(
        text, where=name, ttft_percentile=99.0, itl_percentile=99.0, taken_at_s=FROZEN_NOW_S
    )
    info = dataclasses.replace(
        snapshot.replica, url="http://127.0.0.1:8000", version="0.32.0", healthy=True
    )
    return dataclasses.replace(snapshot, replica=info, notes=())


def with_load(
    snapshot: Snapshot,
    *,
    running: float | None = 4,
    waiting: float | None = 0,
    usage: float | None = 0.3,
    preemptions_per_s: float | None = 0.0,
) -> Snapshot:
    """The same snapshot with other queues, KV usage and preemption rate."""
    requests = dataclasses.replace(snapshot.requests, running=running, waiting=waiting)
    kv = dataclasses.replace(snapshot.kv, usage_ratio=usage)
    window = dataclasses.replace(snapshot.window, preemptions_per_s=preemptions_per_s)
    return dataclasses.replace(snapshot, requests=requests, kv=kv, window=window)


def fresh(snapshot: Snapshot, at_s: float = FROZEN_NOW_S) -> PollResult[Snapshot]:
    """A successful poll."""
    return PollResult(snapshot, False, None, at_s, at_s, 0)


def stale(
    snapshot: Snapshot | None, error: str, at_s: float = FROZEN_NOW_S
) -> PollResult[Snapshot]:
    """A failed poll that keeps the last good value."""
    return PollResult(snapshot, True, error, at_s, at_s - 5, 3)


def estimate(value: float, lower: float, upper: float, clamped: bool = False) -> QuantileEstimate:
    """A server quantile interpolated in (lower, upper]."""
    return QuantileEstimate(0.99, value, lower, upper, 100.0, clamped=clamped)
