"""Frozen inputs for the TUI tests, built from a real vLLM capture, and a fake probe."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.poller import PollResult
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.snapshot import Snapshot

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
FROZEN_NOW_S = 1_800_000_000.0


def capture_snapshot(name: str = "vllm-0.32-cpu-load.txt") -> Snapshot:
    """A Snapshot of a real replica's /metrics under load, with its identity filled in."""
    text = (CAPTURES / name).read_text(encoding="utf-8")
    snapshot = snapshot_of_dump(
        text, where=name, ttft_percentile=99.0, itl_percentile=99.0, taken_at_s=FROZEN_NOW_S
    )
    info = dataclasses.replace(
        snapshot.replica, url="http://127.0.0.1:8000", vllm_version="0.32.0", healthy=True
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


class FakeProbe:
    """A probe handle that records what it was told."""

    def __init__(self, concurrency: int | None) -> None:
        self.concurrencies: list[int] = [] if concurrency is None else [concurrency]
        self.stopped = False

    @property
    def running(self) -> bool:
        return not self.stopped

    def set_concurrency(self, concurrency: int) -> None:
        self.concurrencies.append(concurrency)

    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None:
        raise AssertionError("the TUI steps concurrency, not rate")

    def stop(self, timeout_s: float = 5.0) -> None:
        self.stopped = True

    def status(self) -> ProbeStatus | None:
        return None

    def drain_records(self) -> list[ProbeRecord]:
        return []

    def events(self) -> list[ProbeEvent]:
        return []
