"""Measure one side of a restart's before/after: the probe's load for a dwell, and a snapshot.

The same probe, at the same load, runs before and after the restart for the same dwell; each side
is its client-side statistics over the dwell plus the replica's snapshot over the same span.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from slotop.actions.replica.spec import DIAL_NAMES, Dials, dial_words
from slotop.actions.restart.compare import RunSide
from slotop.collectors.errors import CollectorError
from slotop.collectors.oneshot import snapshot_of_replica
from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.stats import GoodputTargets, probe_stats
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import Snapshot
from slotop.config import Settings

COMPARE_PERCENTILES: tuple[float, ...] = (50.0, 99.0)


class RecordSource(Protocol):
    """What measuring needs of the probe: its records so far (`Probe` has it)."""

    def drain_records(self) -> list[ProbeRecord]: ...


def dial_flags(dials: Dials) -> tuple[tuple[str, str], ...]:
    """Dials as the (name, value) pairs a before/after side shows."""
    return tuple((name, dial_words(getattr(dials, name))) for name in DIAL_NAMES)


def goodput_targets(settings: Settings) -> GoodputTargets:
    """The SLO as per-request targets: TTFT, and the ITL target checked through TPOT."""
    return GoodputTargets(ttft_s=settings.slo.ttft_ms / 1e3, tpot_s=settings.slo.itl_ms / 1e3)


def measure_side(
    label: str,
    dials: Dials,
    probe: RecordSource,
    settings: Settings,
    *,
    dwell_s: float,
    wall_clock: Callable[[], float] = time.time,
) -> RunSide:
    """Let the probe run for `dwell_s` while the replica is scraped at both ends; one side."""
    probe.drain_records()  # what came before this dwell belongs to no side
    start = wall_clock()
    snapshot: Snapshot | None
    slo = settings.slo
    try:
        with ReplicaClient(
            settings.replica.url,
            api_key=settings.replica.api_key,
            timeout_s=settings.replica.timeout_s,
        ) as client:
            snapshot = snapshot_of_replica(
                client,
                interval_s=dwell_s,
                long_window_s=dwell_s,
                short_window_s=min(settings.window.short_s, dwell_s),
                ttft_percentile=slo.ttft_percentile,
                itl_percentile=slo.itl_percentile,
            )
    except CollectorError:
        snapshot = None
        time.sleep(max(0.0, dwell_s - (wall_clock() - start)))
    end = wall_clock()
    records = [r for r in probe.drain_records() if r.sent_at_s >= start and r.done_at_s <= end]
    stats = probe_stats(
        records, start, end, percentiles=COMPARE_PERCENTILES, targets=goodput_targets(settings)
    )
    return RunSide(label, dial_flags(dials), stats, snapshot)
