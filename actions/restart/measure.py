"""Measure one side of a restart's before/after: the probe's load for a dwell, and a snapshot.

The same probe, at the same load, runs before and after the restart for the same dwell; each side
is its client-side statistics over the dwell, their spread from its own requests (for the noise
of each difference), plus the replica's snapshot over the same span. Both sides measure the same
thing: each dwell begins only once the load has settled since it began (the probe's start before,
its resume after: `collectors.probe.settle`), so neither counts the streams' opening requests nor
a replica's first requests after it came up. The statistics count as a sweep step does
(`measured_window_stats`): the latencies of requests sent in the dwell, each followed to its end
through a bounded wait, and the tokens that arrived inside the dwell.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slotop.actions.replica.spec import DIAL_NAMES, Dials, dial_words
from slotop.actions.restart.compare import RunSide, SideSpan
from slotop.actions.restart.noise import SIDE_CYCLES, loop_cycle_s, side_spread
from slotop.collectors.errors import CollectorError
from slotop.collectors.oneshot import snapshot_of_replica
from slotop.collectors.probe.follow import RecordFeed, follow_window
from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.settle import settled_at
from slotop.collectors.probe.stats import measured_window_stats
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import Snapshot
from slotop.config import Settings

FOLLOW_TICK_S = 0.2
"""How often the wait past a dwell looks for the requests still streaming."""


def dial_flags(dials: Dials) -> tuple[tuple[str, str], ...]:
    """Dials as the (name, value) pairs a before/after side shows."""
    return tuple((name, dial_words(getattr(dials, name))) for name in DIAL_NAMES)


def slo_percentiles(settings: Settings) -> tuple[float, float]:
    """The SLO's TTFT and ITL percentiles, the ones a before/after table shows beside p50."""
    return settings.slo.ttft_percentile, settings.slo.itl_percentile


def side_percentiles(settings: Settings) -> tuple[float, ...]:
    """Every percentile a side's statistics compute: p50 and the SLO's."""
    return tuple(sorted({50.0, *slo_percentiles(settings)}))


def measured_side(
    label: str,
    dials: Dials,
    records: Sequence[ProbeRecord],
    start_s: float,
    end_s: float,
    settings: Settings,
    *,
    snapshot: Snapshot | None = None,
    requests_cut: int | None = None,
    load_began_s: float | None = None,
    settled_s: float | None = None,
) -> RunSide:
    """A side from the records that touched [start_s, end_s]: its statistics, counted as a sweep
    step's, and their spread from the same requests. Opening requests take no part (a side starts
    once they ended); `load_began_s` and `settled_s` say when the load began and settled, for the
    side's span in words."""
    percentiles = side_percentiles(settings)
    targets = settings.slo.goodput_targets
    counted = [r for r in records if not r.opening]
    stats = measured_window_stats(
        counted,
        start_s,
        end_s,
        percentiles=percentiles,
        targets=targets,
        requests_cut=requests_cut,
    )
    spread = side_spread(counted, start_s, end_s, percentiles, targets)
    span = SideSpan(
        start_s,
        end_s,
        stats.requests_ok,
        since_load_s=start_s - load_began_s if load_began_s is not None else None,
        settled_s=(
            settled_s - load_began_s if settled_s is not None and load_began_s is not None else None
        ),
    )
    return RunSide(label, dial_flags(dials), stats, snapshot, spread, span)


def wait_settled(
    probe: RecordFeed,
    load_began_s: float,
    max_wait_s: float,
    *,
    wall_clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Settling:
    """Wait until the load that began at `load_began_s` has settled (`collectors.probe.settle`),
    at most `max_wait_s`; when it settled, and how long its requests live."""
    records: list[ProbeRecord] = []
    while True:
        status = probe.status()
        records.extend(probe.drain_records())
        settled = settled_at(records, load_began_s, status)
        if settled is not None or wall_clock() - load_began_s >= max_wait_s:
            return Settling(settled, loop_cycle_s([r for r in records if not r.opening]))
        sleep(FOLLOW_TICK_S)


@dataclass(frozen=True, slots=True)
class Settling:
    """How a load settled: when (None: not within the wait), and its requests' median lifetime
    from the full requests that ended meanwhile (None: none did)."""

    settled_s: float | None
    cycle_s: float | None


def side_dwell_s(dwell_s: float, cycle_s: float | None, max_dwell_s: float) -> float:
    """How long a side dwells: `dwell_s`, or as long as `SIDE_CYCLES` of its requests' lifetimes
    where that is longer (so that it cuts into enough batches), but never past `max_dwell_s`."""
    wanted = SIDE_CYCLES * cycle_s if cycle_s is not None else 0.0
    return min(max(dwell_s, wanted), max(dwell_s, max_dwell_s))


def measure_side(
    label: str,
    dials: Dials,
    probe: RecordFeed,
    settings: Settings,
    *,
    dwell_s: float,
    load_began_s: float,
    max_follow_s: float | None = None,
    wall_clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> RunSide:
    """Wait for the load that began at `load_began_s` to settle (at most the request timeout),
    let the probe run for `dwell_s` (longer where twelve of its requests' lifetimes are:
    `side_dwell_s`) while the replica is scraped at both ends, then follow the dwell's requests to
    their end for at most `max_follow_s` (None: as long as the dwell); one side."""
    settling = wait_settled(
        probe,
        load_began_s,
        settings.load.request_timeout_s,
        wall_clock=wall_clock,
        sleep=sleep,
    )
    dwell_s = side_dwell_s(dwell_s, settling.cycle_s, settings.restart.max_dwell_s)
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
        sleep(max(0.0, dwell_s - (wall_clock() - start)))
    end = wall_clock()
    records = probe.drain_records()
    followed = follow_window(
        probe,
        end,
        dwell_s if max_follow_s is None else max_follow_s,
        clock=wall_clock,
        wait=lambda: sleep(FOLLOW_TICK_S),
    )
    return measured_side(
        label,
        dials,
        [*records, *followed.records],
        start,
        end,
        settings,
        snapshot=snapshot,
        requests_cut=followed.requests_cut,
        load_began_s=load_began_s,
        settled_s=settling.settled_s,
    )
