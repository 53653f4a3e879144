"""Places probe records in the configuration and the load step they were sent in (pure).

A record belongs to the configuration in effect at its `sent_at_s`: the probe stamps it on the
wall clock (the Unix time at the probe's start advanced by the monotonic counter), the same clock
configurations open on, and a recording gives records back on it. Within a configuration, a
segment is one load step: the probe's step number and the event that began it (a new probe counts
steps from 0 again, so the number alone is not enough). A step that spans a dial change is two
segments, one in each configuration. Each closed-loop segment with enough requests is a point;
at one concurrency the latest segment wins. A segment's point is worked out when a curve is asked
for, and only again once its records changed, so a recording fed poll by poll costs one
statistics pass per segment, not one per poll.

A configuration may open after records sent inside it were placed (the app hears of verified
dials a moment after the probe resumed): they move to it, and any gaps pooled with records on
both sides of the opening are left out rather than mixed.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from slotop.actions.experiment.model import (
    Configuration,
    ConfigurationCurve,
    CurvePoint,
    DialPairs,
    configuration_label,
    curve_operating_point,
)
from slotop.actions.slo import OperatingPoint
from slotop.collectors.probe.lag import RecordArrays, arrays_of
from slotop.collectors.probe.records import EventKind, ProbeEvent, ProbeRecord
from slotop.collectors.probe.stats import stats_of_arrays, summarize_latency
from slotop.slo import GoodputTargets

MIN_REQUESTS_PER_POINT = 3
MAX_RECORDS_PER_SEGMENT = 4000
MAX_UNPLACED_RECORDS = 4000
"""Records whose step's event has not arrived yet, kept until it does (the oldest go first)."""

_STEP_STARTS = (EventKind.STARTED, EventKind.CONCURRENCY_SET, EventKind.RATE_SET)


@dataclass(frozen=True, slots=True)
class _StepStart:
    at_s: float
    step: int
    concurrency: int | None  # None: open loop, which makes no point


@dataclass(frozen=True, slots=True)
class _Pooled:
    """Inter-token gaps pooled for several records (a recording's buckets), with their sends."""

    first_sent_s: float
    last_sent_s: float
    gaps_s: tuple[float, ...]


@dataclass(slots=True)
class _Segment:
    configuration: int
    start: _StepStart
    arrays: list[RecordArrays] = field(default_factory=list)
    """Its records, each made arrays once as it was placed (a point is worked out every poll)."""
    pooled: list[_Pooled] = field(default_factory=list)
    point: CurvePoint | None = None
    changed: bool = True
    """Its records or gaps changed since `point` was worked out."""
    frozen: bool = False
    """Its point is final: its records were let go (a configuration older than those kept)."""

    @property
    def records(self) -> list[ProbeRecord]:
        """The records it holds, in the order placed."""
        return [a.record for a in self.arrays]


def _when(start: _StepStart) -> float:
    return start.at_s


_Key = tuple[int, int, float]  # configuration index, step, the step's start


class ExperimentBuilder:
    """Configurations in the order they opened, and the curve of each, from probe records."""

    def __init__(
        self,
        ttft_percentile: float,
        itl_percentile: float,
        goodput_targets: GoodputTargets | None = None,
        *,
        keep_configurations: int | None = None,
    ) -> None:
        """`keep_configurations`: how many of the newest configurations keep their records; an
        older one keeps its points and lets its records go (a dashboard open for days restarts
        its replica many times), and a record sent in it that ends later counts nowhere. None
        keeps every record (a report rebuilding a whole recording)."""
        self.keep_configurations = keep_configurations
        self.ttft_percentile = ttft_percentile
        self.itl_percentile = itl_percentile
        self.goodput_targets = goodput_targets
        self._percentiles = sorted({ttft_percentile, itl_percentile})
        self._configurations: list[Configuration] = []
        self._starts_s: list[float] = []
        self._step_starts: dict[int, list[_StepStart]] = {}
        self._segments: dict[_Key, _Segment] = {}
        self._unplaced: list[ProbeRecord] = []
        self.records_before_first = 0
        """Records sent before the first configuration opened: they land nowhere."""

    # configurations

    def open_configuration(self, dials: DialPairs, at_s: float) -> Configuration:
        """Open the configuration the replica runs from `at_s` (Unix) on, and return it.

        The same dials as the current configuration open nothing (a rollback, or dials told
        twice). A current configuration whose dials were unknown and which holds no record yet
        learns them instead. An `at_s` before the current one's start is taken as that start.
        """
        dials = tuple(dials)
        current = self.current
        if current is not None:
            if dials == current.dials:
                return current
            at_s = max(at_s, current.started_at_s)
            if not current.dials and not self._holds_records(current.index):
                learnt = dataclasses.replace(
                    current, dials=dials, label=configuration_label(current.index, dials)
                )
                self._configurations[-1] = learnt
                return learnt
        index = len(self._configurations) + 1
        opened = Configuration(index, dials, at_s, configuration_label(index, dials))
        self._configurations.append(opened)
        self._starts_s.append(at_s)
        if current is not None:
            self._move_after(current.index, at_s)
        self._freeze_older()
        return opened

    def _freeze_older(self) -> None:
        """Work out the points of the configurations older than those kept, once, and let
        their records go."""
        if self.keep_configurations is None:
            return
        oldest_kept = len(self._configurations) - self.keep_configurations + 1
        for segment in self._segments.values():
            if segment.configuration < oldest_kept and not segment.frozen:
                self._point(segment)
                segment.arrays, segment.pooled = [], []
                segment.frozen = True

    def configurations(self) -> tuple[Configuration, ...]:
        """Every configuration, in the order opened."""
        return tuple(self._configurations)

    @property
    def current(self) -> Configuration | None:
        """The configuration the replica runs now (None before the first opens)."""
        return self._configurations[-1] if self._configurations else None

    @property
    def previous(self) -> Configuration | None:
        """The configuration before the current one."""
        return self._configurations[-2] if len(self._configurations) > 1 else None

    def _configuration_at(self, at_s: float) -> int | None:
        position = bisect.bisect_right(self._starts_s, at_s)
        return position if position > 0 else None

    def _holds_records(self, index: int) -> bool:
        return any(
            segment.arrays for segment in self._segments.values() if segment.configuration == index
        )

    # probe events and records

    def add_events(self, events: Iterable[ProbeEvent]) -> None:
        """Learn when each load step began and at which concurrency (open loop: none)."""
        for event in events:
            if event.kind not in _STEP_STARTS:
                continue
            concurrency = event.concurrency if event.mode != "open" else None
            starts = self._step_starts.setdefault(event.step, [])
            bisect.insort(starts, _StepStart(event.at_s, event.step, concurrency), key=_when)
        if self._unplaced:
            waiting, self._unplaced = self._unplaced, []
            self._place(waiting, None)

    def add_records(
        self, records: Iterable[ProbeRecord], pooled_itl_s: Sequence[float] | None = None
    ) -> None:
        """Place requests that ended; the points they touch are worked out when next asked for.

        `pooled_itl_s` carries these records' inter-token gaps when they were pooled (a
        recording's buckets: each record's own `itl_s` is then empty); they count in the ITL
        of the segment all their records fall in, and nowhere when those span two or the
        segment was already full.
        """
        self._place(list(records), tuple(pooled_itl_s) if pooled_itl_s is not None else None)

    def _step_start(self, record: ProbeRecord) -> _StepStart | None:
        starts = self._step_starts.get(record.step)
        if not starts:
            return None
        position = bisect.bisect_right(starts, record.sent_at_s, key=_when)
        return starts[max(position - 1, 0)]

    def _arrays(self, record: ProbeRecord) -> RecordArrays:
        """A record made arrays; a builder that lets old configurations go keeps its gaps and
        lags only as arrays (a fifth of the memory of Python floats), not in the record too."""
        made = arrays_of(record)
        if self.keep_configurations is None:
            return made
        slim = dataclasses.replace(record, itl_s=(), lag_s=None)
        return RecordArrays(slim, made.itl_s, made.lag_s)

    def _place(
        self,
        records: list[ProbeRecord],
        pooled: tuple[float, ...] | None,
        made: list[RecordArrays] | None = None,
    ) -> None:
        """Place records (`made`: already made arrays, as a move hands them over)."""
        touched: set[_Key] = set()
        homes: set[_Key | None] = set()  # where each record with gaps went (None: nowhere)
        for number, record in enumerate(records):
            configuration = self._configuration_at(record.sent_at_s)
            start = self._step_start(record)
            if configuration is None or start is None:
                if record.ok and record.chunk_count > 1:
                    homes.add(None)
                if configuration is None:
                    self.records_before_first += 1
                else:
                    self._unplaced.append(record)
                continue
            key = (configuration, start.step, start.at_s)
            segment = self._segments.get(key)
            if segment is None:
                segment = self._segments[key] = _Segment(configuration, start)
                if self.keep_configurations is not None:
                    segment.frozen = configuration <= len(self._configurations) - (
                        self.keep_configurations
                    )
            if segment.frozen:
                continue
            if len(segment.arrays) < MAX_RECORDS_PER_SEGMENT:
                segment.arrays.append(made[number] if made is not None else self._arrays(record))
                segment.changed = True
                touched.add(key)
            if record.ok and record.chunk_count > 1:
                homes.add(key)
        del self._unplaced[:-MAX_UNPLACED_RECORDS]
        home = homes.pop() if pooled and len(homes) == 1 else None
        if home is not None and home in touched and pooled is not None:
            sent = [r.sent_at_s for r in records if r.ok and r.chunk_count > 1]
            self._segments[home].pooled.append(_Pooled(min(sent), max(sent), pooled))

    def _move_after(self, index: int, at_s: float) -> None:
        """Move what configuration `index` holds that was sent from `at_s` on to the new one."""
        for key, segment in list(self._segments.items()):
            if segment.configuration != index:
                continue
            later = [a for a in segment.arrays if a.record.sent_at_s >= at_s]
            if not later:
                continue
            segment.arrays = [a for a in segment.arrays if a.record.sent_at_s < at_s]
            moving = [p for p in segment.pooled if p.first_sent_s >= at_s]
            segment.pooled = [p for p in segment.pooled if p.last_sent_s < at_s]
            segment.changed = True
            if not segment.arrays:
                del self._segments[key]
            self._place([a.record for a in later], None, later)
            moved_key = (index + 1, segment.start.step, segment.start.at_s)
            moved = self._segments.get(moved_key)
            if moved is not None and moving:
                moved.pooled.extend(moving)
                moved.changed = True

    def _point(self, segment: _Segment) -> CurvePoint | None:
        """The segment's point, worked out again only if it changed since last asked."""
        if segment.changed:
            segment.point = self._work_out(segment)
            segment.changed = False
        return segment.point

    def _work_out(self, segment: _Segment) -> CurvePoint | None:
        concurrency = segment.start.concurrency
        records = segment.records
        if concurrency is None or concurrency < 1 or not records:
            return None
        stats = stats_of_arrays(
            segment.arrays,
            min(r.sent_at_s for r in records),
            max(r.done_at_s for r in records),
            self._percentiles,
            self.goodput_targets,
            detail=False,
        )
        if stats.requests_ok < MIN_REQUESTS_PER_POINT:
            return None
        itl = stats.itl
        if segment.pooled:
            exact = [float(gap) for a in segment.arrays if a.record.ok for gap in a.itl_s]
            pooled = [gap for group in segment.pooled for gap in group.gaps_s]
            itl = summarize_latency(exact + pooled, self._percentiles, intervals=False)
        return CurvePoint(
            concurrency=concurrency,
            ttft_s=stats.ttft.at(self.ttft_percentile),
            itl_s=itl.at(self.itl_percentile),
            requests=stats.requests_ok,
            output_tokens_per_s=stats.output_tokens_per_s,
            goodput_rps=stats.goodput.rate_rps if stats.goodput is not None else None,
            requests_failed=stats.requests_failed,
        )

    # curves

    def curve(self, index: int) -> tuple[CurvePoint, ...]:
        """Configuration `index`'s points, one per concurrency (its latest segment), ascending."""
        latest: dict[int, tuple[tuple[float, int], CurvePoint]] = {}
        for segment in self._segments.values():
            if segment.configuration != index:
                continue
            point = self._point(segment)
            if point is None:
                continue
            when = (segment.start.at_s, segment.start.step)
            held = latest.get(point.concurrency)
            if held is None or when >= held[0]:
                latest[point.concurrency] = (when, point)
        return tuple(latest[c][1] for c in sorted(latest))

    def curve_of(self, configuration: Configuration | None) -> ConfigurationCurve | None:
        """A configuration with its curve (None for none)."""
        if configuration is None:
            return None
        return ConfigurationCurve(configuration, self.curve(configuration.index))

    def operating_point(
        self, index: int, ttft_target_s: float, itl_target_s: float
    ) -> OperatingPoint:
        """Configuration `index`'s operating point, failures counted at the SLO's percentiles."""
        return curve_operating_point(
            self.curve(index),
            ttft_target_s,
            itl_target_s,
            (self.ttft_percentile, self.itl_percentile),
        )
