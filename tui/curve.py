"""The percentile-versus-concurrency curve from the probe's load steps, and the point it recommends.

Each closed-loop step of the probe is one point: the client's pXX TTFT and ITL over the requests
sent in that step. Steps at the same concurrency are merged (the latest wins). The operating
point comes from `slotop.actions.slo.operating_point`, each point judged on both targets.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from slotop.actions.slo import OperatingPoint, Verdict, judge, operating_point, overall
from slotop.collectors.probe.records import EventKind, ProbeEvent, ProbeRecord
from slotop.collectors.probe.stats import probe_stats

MIN_REQUESTS_PER_POINT = 3
MAX_RECORDS_PER_STEP = 4000


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One measured load level: client latencies at the SLO's percentiles, and how many requests."""

    concurrency: int
    ttft_s: float | None
    itl_s: float | None
    requests: int


def point_verdict(point: CurvePoint, ttft_target_s: float, itl_target_s: float) -> Verdict:
    """Both of a point's latencies against their targets, combined."""
    return overall((judge(point.ttft_s, ttft_target_s), judge(point.itl_s, itl_target_s)))


def curve_operating_point(
    points: Sequence[CurvePoint], ttft_target_s: float, itl_target_s: float
) -> OperatingPoint:
    """The curve's operating point: the last point meeting both targets below the first breach."""
    return operating_point(
        (point.concurrency, point_verdict(point, ttft_target_s, itl_target_s)) for point in points
    )


class CurveBuilder:
    """Groups probe records by load step and turns each closed-loop step into a CurvePoint."""

    def __init__(self, ttft_percentile: float, itl_percentile: float) -> None:
        self._ttft_percentile = ttft_percentile
        self._itl_percentile = itl_percentile
        self._concurrency_of_step: dict[int, int | None] = {}
        self._records: dict[int, list[ProbeRecord]] = {}
        self._points_by_step: dict[int, CurvePoint] = {}

    def add_events(self, events: Iterable[ProbeEvent]) -> None:
        """Learn which concurrency each step ran at (open-loop steps have none)."""
        for event in events:
            if event.kind in (EventKind.STARTED, EventKind.CONCURRENCY_SET, EventKind.RATE_SET):
                self._concurrency_of_step[event.step] = (
                    event.concurrency if event.mode != "open" else None
                )

    def add_records(self, records: Iterable[ProbeRecord]) -> None:
        """Add ended requests and recompute the points of the steps they belong to."""
        touched: set[int] = set()
        for record in records:
            kept = self._records.setdefault(record.step, [])
            if len(kept) < MAX_RECORDS_PER_STEP:
                kept.append(record)
                touched.add(record.step)
        for step in touched:
            self._recompute(step)

    def _recompute(self, step: int) -> None:
        concurrency = self._concurrency_of_step.get(step)
        records = self._records[step]
        if concurrency is None or concurrency < 1:
            return
        percentiles = sorted({self._ttft_percentile, self._itl_percentile})
        stats = probe_stats(
            records,
            min(r.sent_at_s for r in records),
            max(r.done_at_s for r in records),
            percentiles,
        )
        if stats.requests_ok < MIN_REQUESTS_PER_POINT:
            return
        self._points_by_step[step] = CurvePoint(
            concurrency=concurrency,
            ttft_s=stats.ttft.at(self._ttft_percentile),
            itl_s=stats.itl.at(self._itl_percentile),
            requests=stats.requests_ok,
        )

    def points(self) -> tuple[CurvePoint, ...]:
        """One point per concurrency (the latest step wins), in ascending concurrency."""
        by_concurrency: dict[int, CurvePoint] = {}
        for _, point in sorted(self._points_by_step.items()):
            by_concurrency[point.concurrency] = point
        return tuple(by_concurrency[c] for c in sorted(by_concurrency))
