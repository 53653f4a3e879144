"""Entry point behind `slotop fleet`: the fleet screen, and a replica's dashboard from it.

Enter on a replica ends the fleet screen with that replica; its dashboard then runs (the same
panes as `slotop attach`) and, when it is quit, the fleet screen comes back with its last
values. Through Prometheus the dashboard reads the replica's series from the server; it loads
and restarts the replica only where a URL of its own is known ([fleet] direct_from_instance, or
[replica] url naming it), and then by [load] and [launch] rules as for any replica. Scraped
directly, the dashboard is `slotop attach URL`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from multiprocessing import resource_tracker
from pathlib import Path
from urllib.parse import urlsplit

from textual.message import Message

from slotop.actions.fleet.wiring import FleetWatch, prometheus_client
from slotop.actions.sweep.runner import MonitorWatch
from slotop.actions.wiring.replica import probe_control, replica_monitor, with_url
from slotop.collectors.gpu.reader import GpuReader, GpuSnapshot
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.prometheus_replica import PrometheusReplica
from slotop.config import Settings
from slotop.redact import shown_url
from slotop.tui.app import SlotopApp
from slotop.tui.feed import Feed, GpuSource
from slotop.tui.fleet.app import DrillIn, FleetApp
from slotop.tui.restarting import AccessFinder
from slotop.tui.run import build_app, restart_finder

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class RemoteGpu:
    """The GPU source of a replica on another machine: this machine's GPUs are not its own."""

    def read(self) -> GpuSnapshot:
        return GpuSnapshot(
            taken_at_s=time.time(),
            unavailable_cause="the replica is on another machine; Prometheus holds no GPU series",
        )

    def close(self) -> None:
        """Nothing to release."""


def _no_direct_url(name: str) -> AccessFinder:
    def why() -> str:
        return (
            f"{name} is read through Prometheus and slotop knows no URL of its own: set [fleet] "
            "direct_from_instance = true, or [replica] url to it, to restart it"
        )

    return why


def _own_url(settings: Settings, shown: str | None) -> str:
    """The URL a drilled-in dashboard reads: [replica] url (with its credentials) when the row is
    that replica, as the table shows it without them."""
    own = settings.replica.url
    return own if shown is None or shown == shown_url(own) else shown


def prometheus_dashboard(settings: Settings, choice: DrillIn, prometheus_url: str) -> SlotopApp:
    """One replica's dashboard fed from Prometheus; probe and restarts only with a URL of its own."""
    resource_tracker.ensure_running()
    url = choice.key.url
    shown = with_url(settings, _own_url(settings, url)) if url is not None else settings
    client = prometheus_client(settings, prometheus_url)
    endpoints = PrometheusReplica(
        client, choice.key, model_label=settings.fleet.model_label, name=choice.name
    )
    slo = settings.slo
    monitor = ReplicaMonitor(
        endpoints,
        long_window_s=settings.window.long_s,
        short_window_s=settings.window.short_s,
        interval_s=settings.tui.refresh_s,
        ttft_percentile=slo.ttft_percentile,
        itl_percentile=slo.itl_percentile,
    )
    control = probe_control(shown, Path.cwd()) if url is not None else None
    local = url is not None and urlsplit(url).hostname in LOOPBACK_HOSTS
    gpu: GpuSource = (
        GpuReader(device_indices=settings.gpu.indices or None) if local else RemoteGpu()
    )

    def feed_factory(post: Callable[[Message], object]) -> Feed:
        return Feed(
            monitor,
            post,
            gpu=gpu,
            probe=control,
            scrape_interval_s=settings.tui.refresh_s,
            refresh_s=settings.tui.refresh_s,
            long_window_s=settings.window.long_s,
            short_window_s=settings.window.short_s,
            slo_percentiles=(slo.ttft_percentile, slo.itl_percentile),
            goodput_targets=slo.goodput_targets,
        )

    def sweep_watch() -> MonitorWatch:
        return MonitorWatch(replica_monitor(shown))

    app = SlotopApp(
        shown,
        feed_factory=feed_factory,
        probe_control=control,
        sweep_watch=sweep_watch if url is not None else None,
        restart_access=restart_finder(shown) if url is not None else _no_direct_url(choice.name),
    )
    app.sub_title = endpoints.base_url
    return app


def run_fleet(
    settings: Settings,
    watch: FleetWatch,
    *,
    prometheus_url: str | None,
) -> int:
    """Run the fleet screen until it is quit, opening a replica's dashboard on Enter."""
    first = None
    try:
        while True:
            app = FleetApp(settings, watch.refresh, first=first)
            choice = app.run()
            first = app.fleet
            if not isinstance(choice, DrillIn):
                return app.return_code or 0
            if prometheus_url is not None:
                dashboard = prometheus_dashboard(settings, choice, prometheus_url)
            else:
                dashboard = build_app(with_url(settings, _own_url(settings, choice.key.url)))
            dashboard.run()
    finally:
        watch.close()
