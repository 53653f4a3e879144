"""Build what reads and loads a replica from settings: its client, its monitor, the probe control.

The dashboard, the sweep command and the command line reach a replica through these, so a
setting means the same thing on every path.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from slotop.actions.probe_control import (
    ProbeControl,
    load_shape_from_settings,
    probe_target_from_settings,
)
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.replica import ReplicaClient, normalize_base_url
from slotop.config import Settings


def with_url(settings: Settings, url: str) -> Settings:
    """Settings pointing at another replica."""
    replica = dataclasses.replace(settings.replica, url=normalize_base_url(url))
    return dataclasses.replace(settings, replica=replica)


def replica_client(settings: Settings) -> ReplicaClient:
    """An HTTP client of the [replica] URL, with its API key and timeout."""
    replica = settings.replica
    return ReplicaClient(replica.url, api_key=replica.api_key, timeout_s=replica.timeout_s)


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
    )


def probe_control(settings: Settings, base_dir: Path | None = None) -> ProbeControl:
    """The load probe's controller from [load] and [replica]; prompts files relative to `base_dir`."""
    return ProbeControl(
        probe_target_from_settings(settings),
        load_shape_from_settings(settings.load, base_dir),
        settings.load.allow_remote_load,
    )
