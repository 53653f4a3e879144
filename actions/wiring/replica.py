"""Build what reads and loads a replica from settings: its client, its monitor, the probe control.

The dashboard, the sweep command and the command line reach a replica through these, so a
setting means the same thing on every path.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

from slotop.actions.probe_control import (
    ProbeControl,
    load_shape_from_settings,
    probe_target_from_settings,
)
from slotop.actions.session.recorder import SessionRecorder
from slotop.actions.session.taps import record_monitor, recording_start
from slotop.collectors.engines import parse_engine
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.names import Engine
from slotop.collectors.poller import Poller
from slotop.collectors.replica import ReplicaClient, normalize_base_url
from slotop.config import Settings


def with_url(settings: Settings, url: str) -> Settings:
    """Settings pointing at another replica."""
    replica = dataclasses.replace(settings.replica, url=normalize_base_url(url))
    return dataclasses.replace(settings, replica=replica)


def replica_client(settings: Settings) -> ReplicaClient:
    """An HTTP client of the [replica] URL, with its API key and timeout."""
    replica = settings.replica
    return ReplicaClient(
        replica.url,
        api_key=replica.api_key,
        timeout_s=replica.timeout_s,
        max_body_bytes=scrape_cap_bytes(settings),
    )


def scrape_cap_bytes(settings: Settings) -> int:
    """The most of one answer a client reads ([replica] max_scrape_mb), in bytes."""
    return int(settings.replica.max_scrape_mb * 1024 * 1024)


def replica_monitor(
    settings: Settings,
    client: ReplicaClient | None = None,
    *,
    long_window_s: float | None = None,
    short_window_s: float | None = None,
    interval_s: float | None = None,
    percentiles: tuple[float, float] | None = None,
) -> ReplicaMonitor:
    """A monitor of the replica with [window], [replica] and [slo] timing unless told otherwise.

    `percentiles` is (TTFT, ITL); a sweep resumed from a file brings its own.
    """
    slo = settings.slo
    ttft_percentile, itl_percentile = percentiles or (slo.ttft_percentile, slo.itl_percentile)
    return ReplicaMonitor(
        client if client is not None else replica_client(settings),
        long_window_s=settings.window.long_s if long_window_s is None else long_window_s,
        short_window_s=settings.window.short_s if short_window_s is None else short_window_s,
        interval_s=settings.replica.scrape_interval_s if interval_s is None else interval_s,
        ttft_percentile=ttft_percentile,
        itl_percentile=itl_percentile,
        engine=named_engine(settings),
    )


def named_engine(settings: Settings) -> Engine | None:
    """The engine [replica] engine names; None (auto) tells it from what the replica serves."""
    chosen = settings.replica.engine
    return None if chosen == "auto" else parse_engine(chosen)


def probe_control(
    settings: Settings, base_dir: Path | None = None, *, recorder: SessionRecorder | None = None
) -> ProbeControl:
    """The load probe's controller from [load] and [replica]; prompts files relative to `base_dir`.

    With a recorder, every probe it starts records what is drained from it.
    """
    return ProbeControl(
        probe_target_from_settings(settings),
        load_shape_from_settings(settings.load, base_dir),
        settings.load.allow_remote_load,
        start_probe=recording_start(recorder),
    )


@contextlib.contextmanager
def recorded_polls(
    settings: Settings, recorder: SessionRecorder | None
) -> Iterator[ReplicaMonitor | None]:
    """Poll the replica in the background while recording, for a command that has no monitor.

    Yields the monitor (None without a recorder); a failed poll is only a gap in the recording.
    """
    if recorder is None or not recorder.recording:
        yield None
        return
    client = replica_client(settings)
    monitor = record_monitor(replica_monitor(settings, client), recorder)

    def poll() -> object:
        try:
            return monitor.poll()
        except Exception:
            monitor.forget_identity()  # it was down: ask who it is when it answers again
            raise

    poller: Poller[object] = Poller(
        poll,
        lambda _: None,
        interval_s=settings.replica.scrape_interval_s,
        name="slotop-recorded-polls",
    )
    poller.start()
    try:
        yield monitor
    finally:
        poller.stop()
        client.close()
