"""Watching one replica: scrape, parse, push into the window, build a Snapshot; IO injected.

The monitor owns the parser (it remembers line shapes between scrapes), the window and a bounded
history of snapshots. `poll` is what a Poller calls once a second; `on_poll`, when set, sees each
poll's reading and snapshot (a session recorder), and `observe` pushes a recorded reading back, so
a replay builds its snapshots with this same code.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from slotop.collectors.errors import EndpointMissingError, ScrapeError
from slotop.collectors.history import History
from slotop.collectors.names import Engine
from slotop.collectors.reading import Reading, ScrapeReader, with_exact_loads
from slotop.collectors.replica import Health, Identity, Loads
from slotop.collectors.snapshot import ReplicaInfo, Snapshot, build_snapshot
from slotop.collectors.window import Window, WindowView

DEFAULT_HISTORY_SIZE = 16
"""Snapshots a monitor keeps: the dashboard's latency trend keeps rows of its own and reads only
the snapshots since its last, so a few are enough; each holds some 6 KB, and 900 held a quarter
of an hour of them on a dashboard left open."""
# Readings the window keeps beyond what the longest span needs at the poll interval.
_SPARE_READINGS = 8
HEALTH_EVERY_S = 5.0
"""How often a healthy replica's /health is asked (every poll while it says unhealthy): a replica
that stops answering shows at the next scrape, one that answers but calls itself unhealthy within
this many seconds."""


class ReplicaEndpoints(Protocol):
    """What the monitor needs from a replica client (ReplicaClient, or a fake in tests)."""

    base_url: str

    def metrics_text(self) -> str: ...

    def identity(self) -> Identity: ...

    def loads(self) -> Loads: ...

    def served_models(self) -> tuple[str, ...]: ...

    def health(self) -> Health: ...


@dataclass(frozen=True, slots=True)
class MonitorPoll:
    """One successful poll: the reading, when it was pushed, who answered, and the snapshot built."""

    mono_s: float
    reading: Reading
    info: ReplicaInfo
    notes: tuple[str, ...]
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class MonitorShape:
    """The spans, scrape interval and SLO percentiles a monitor builds its snapshots with."""

    long_window_s: float
    short_window_s: float
    interval_s: float
    ttft_percentile: float | None
    itl_percentile: float | None


def empty_view(span_s: float) -> WindowView:
    """Return a view with no data yet: rates and quantiles come out as None."""
    return WindowView(requested_s=span_s, covered_s=0.0, counters={}, histograms={})


class ReplicaMonitor:
    """Scrapes one replica into a sliding window and builds Snapshots from it."""

    def __init__(
        self,
        client: ReplicaEndpoints,
        *,
        long_window_s: float = 60.0,
        short_window_s: float = 10.0,
        interval_s: float = 1.0,
        ttft_percentile: float | None = None,
        itl_percentile: float | None = None,
        history_size: int = DEFAULT_HISTORY_SIZE,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        engine: Engine | None = None,
    ) -> None:
        self.client = client
        self.engine = engine
        """The engine the operator named (`--engine`); None tells it from what the replica serves."""
        self.interval_s = interval_s
        self.on_poll: Callable[[MonitorPoll], None] | None = None
        self.long_window_s = long_window_s
        self.short_window_s = short_window_s
        self.ttft_percentile = ttft_percentile
        self.itl_percentile = itl_percentile
        longest_s = max(long_window_s, short_window_s)
        readings = math.ceil(longest_s / interval_s) + _SPARE_READINGS
        self.window = Window(longest_s, max_readings=readings)
        self.history: History[Snapshot] = History(history_size)
        self._reader = ScrapeReader(engine)
        self._ask_loads = True
        self._clock = clock
        self._wall_clock = wall_clock
        self._info: ReplicaInfo | None = None
        self._notes: tuple[str, ...] = ()
        self._pushed_at_s = 0.0
        self._health_at_s = -math.inf

    @property
    def shape(self) -> MonitorShape:
        """The spans, interval and percentiles this monitor builds with (a replay needs them)."""
        return MonitorShape(
            self.long_window_s,
            self.short_window_s,
            self.interval_s,
            self.ttft_percentile,
            self.itl_percentile,
        )

    @classmethod
    def replaying(cls, url: str, shape: MonitorShape) -> ReplicaMonitor:
        """A monitor that only `observe`s recorded readings, built as the recorded one was."""
        return cls(
            _NoEndpoints(url),
            long_window_s=shape.long_window_s,
            short_window_s=shape.short_window_s,
            interval_s=shape.interval_s,
            ttft_percentile=shape.ttft_percentile,
            itl_percentile=shape.itl_percentile,
        )

    def refresh_info(self) -> ReplicaInfo:
        """Ask the replica who it is (engine and version, models, health); what fails is noted,
        not raised."""
        notes: list[str] = []
        identity = Identity(None, None)
        models: tuple[str, ...] = ()
        try:
            identity = self.client.identity()
        except ScrapeError as exc:
            notes.append(f"engine version unknown: {exc}")
        try:
            models = self.client.served_models()
        except ScrapeError as exc:
            notes.append(f"served models unknown: {exc}")
        health = self.client.health()
        self._info = ReplicaInfo(
            url=self.client.base_url,
            served_models=models,
            version=identity.version,
            engine=self.engine or identity.engine or "vllm",
            kv_cache_dtype=identity.kv_cache_dtype,
            model_dtype=identity.model_dtype,
            kv_tokens_cap=identity.kv_tokens_cap,
            healthy=health.healthy,
            health_detail=health.detail,
        )
        self._notes = tuple(notes)
        return self._info

    def scrape(self) -> Reading:
        """Scrape /metrics once (and an SGLang replica's /v1/loads) and push the reading into
        the window."""
        reading = self._reader.read(self.client.metrics_text())
        if reading.engine == "sglang" and self._ask_loads:
            reading = self._exact_loads(reading)
        self._pushed_at_s = self._clock()
        self.window.push(self._pushed_at_s, reading)
        return reading

    def _exact_loads(self, reading: Reading) -> Reading:
        """SGLang's running, queued and KV counts as its scheduler holds them now; where it has
        no /v1/loads (older than 0.5), its /metrics gauges, noted once; where the ask fails
        this time, the gauges for this scrape."""
        try:
            loads = self.client.loads()
        except EndpointMissingError as exc:
            self._ask_loads = False
            self._notes = (
                *self._notes,
                f"running, queued and KV counts from /metrics, which lag: {exc}",
            )
            return reading
        except ScrapeError:
            return reading
        return with_exact_loads(
            reading, loads.running, loads.waiting, loads.used_tokens, loads.total_tokens
        )

    def observe(
        self, mono_s: float, reading: Reading, info: ReplicaInfo, notes: tuple[str, ...]
    ) -> None:
        """Push a reading taken elsewhere (a recording) as if scraped at ``mono_s``."""
        self.window.push(mono_s, reading)
        self._info = info
        self._notes = notes

    def snapshot(self, taken_at_s: float | None = None) -> Snapshot:
        """Build a Snapshot from the window (stamped now, or ``taken_at_s``).

        Raises ScrapeError before the first scrape.
        """
        reading = self.window.latest
        if reading is None:
            raise ScrapeError(f"no scrape of {self.client.base_url} has succeeded yet")
        view = self.window.view(self.long_window_s) or empty_view(self.long_window_s)
        short = self.window.view(self.short_window_s) or empty_view(self.short_window_s)
        return build_snapshot(
            taken_at_s=self._wall_clock() if taken_at_s is None else taken_at_s,
            reading=reading,
            view=view,
            short_view=short,
            replica=self._info or ReplicaInfo(url=self.client.base_url),
            ttft_percentile=self.ttft_percentile,
            itl_percentile=self.itl_percentile,
            notes=self._notes,
        )

    def poll(self) -> Snapshot:
        """Scrape, check health (every HEALTH_EVERY_S; who the replica is on the first poll),
        build a Snapshot."""
        if self._info is None:
            self.refresh_info()
            self._health_at_s = self._clock()
        elif not self._info.healthy or self._clock() - self._health_at_s >= HEALTH_EVERY_S:
            health = self.client.health()
            self._health_at_s = self._clock()
            self._info = replace(self._info, healthy=health.healthy, health_detail=health.detail)
        reading = self.scrape()
        snapshot = self.snapshot()
        self.history.append(self._clock(), snapshot)
        if self.on_poll is not None:
            info = self._info or ReplicaInfo(url=self.client.base_url)
            self.on_poll(MonitorPoll(self._pushed_at_s, reading, info, self._notes, snapshot))
        return snapshot

    def forget_identity(self) -> None:
        """Ask again who the replica is on the next poll (after a restart, say)."""
        self._info = None


class _NoEndpoints:
    """A replica that is never asked: what a replaying monitor holds in place of a client."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def metrics_text(self) -> str:
        raise ScrapeError(f"{self.base_url} is replayed from a recording; it cannot be scraped")

    def identity(self) -> Identity:
        return Identity(None, None)

    def loads(self) -> Loads:
        raise ScrapeError(f"{self.base_url} is replayed from a recording; it cannot be asked")

    def served_models(self) -> tuple[str, ...]:
        return ()

    def health(self) -> Health:
        return Health(False, "replayed from a recording")
