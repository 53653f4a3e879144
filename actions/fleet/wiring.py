"""Build a fleet source from settings, and the watch that turns its polls into tables.

The command line and the fleet screen reach a fleet through these, so `[fleet]` means the same
thing on every path: the server, its credentials, the labels, and which replica has a URL of its
own (what a drill-in may probe or restart).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol
from urllib.parse import urlsplit

from slotop.actions.fleet.outliers import OutlierThresholds
from slotop.actions.fleet.table import FleetTable, fleet_table
from slotop.actions.fleet.tracker import FleetTracker
from slotop.collectors.errors import CollectorError
from slotop.collectors.fleet import FleetPoll, ReplicaKey
from slotop.collectors.fleet_direct import DirectFleet
from slotop.collectors.prometheus import PrometheusClient, read_auth
from slotop.collectors.prometheus_fleet import PrometheusFleet
from slotop.collectors.replica import ReplicaClient
from slotop.config import Settings
from slotop.redact import shown_url


class FleetSource(Protocol):
    """What the watch needs from a source (PrometheusFleet, DirectFleet, or a fake)."""

    @property
    def source(self) -> str: ...

    def poll(self) -> FleetPoll: ...

    def close(self) -> None: ...


def instance_url(settings: Settings) -> Callable[[ReplicaKey], str | None]:
    """Which replica has a URL of its own: every one when [fleet] direct_from_instance (its
    instance label as host:port), else the one whose instance is [replica] url's host:port."""
    own = urlsplit(shown_url(settings.replica.url))

    def url_of(key: ReplicaKey) -> str | None:
        instance = key.label("instance")
        if not instance:
            return None
        if settings.fleet.direct_from_instance:
            return f"http://{instance}"
        return shown_url(settings.replica.url).rstrip("/") if own.netloc == instance else None

    return url_of


def prometheus_client(settings: Settings, url: str | None = None) -> PrometheusClient:
    """A client of the server (`url`, else [fleet] prometheus_url) with [fleet]'s credentials."""
    fleet = settings.fleet
    auth = read_auth(
        bearer_token_file=fleet.bearer_token_file,
        bearer_token_env=fleet.bearer_token_env,
        basic_auth_file=fleet.basic_auth_file,
        basic_auth_env=fleet.basic_auth_env,
    )
    return PrometheusClient(
        url or fleet.prometheus_url,
        auth=auth,
        timeout_s=fleet.query_timeout_s,
        tls_verify=fleet.tls_verify,
        ca_file=fleet.ca_file,
    )


def prometheus_fleet(
    settings: Settings, url: str | None = None, *, wall_clock: Callable[[], float] = time.time
) -> PrometheusFleet:
    """The fleet Prometheus scrapes, over [window] long_s at [slo]'s percentiles, each refresh
    evaluated at `wall_clock()`."""
    fleet = settings.fleet
    return PrometheusFleet(
        prometheus_client(settings, url),
        window_s=settings.window.long_s,
        ttft_percentile=settings.slo.ttft_percentile,
        itl_percentile=settings.slo.itl_percentile,
        replica_labels=fleet.replica_labels,
        model_label=fleet.model_label,
        direct_url=instance_url(settings),
        wall_clock=wall_clock,
    )


def direct_fleet(settings: Settings, urls: Sequence[str]) -> DirectFleet:
    """The replicas at `urls`, each scraped as `slotop attach` scrapes one."""
    replica = settings.replica
    clients = [
        ReplicaClient(
            url,
            api_key=replica.api_key,
            timeout_s=replica.timeout_s,
            max_body_bytes=int(replica.max_scrape_mb * 1024 * 1024),
        )
        for url in urls
    ]

    def close() -> None:
        for client in clients:
            client.close()

    return DirectFleet(
        clients,
        long_window_s=settings.window.long_s,
        short_window_s=settings.window.short_s,
        interval_s=replica.scrape_interval_s,
        ttft_percentile=settings.slo.ttft_percentile,
        itl_percentile=settings.slo.itl_percentile,
        close=close,
    )


class FleetWatch:
    """Polls a source and returns the table: a failed poll is a table of stale rows saying why.

    Refreshes never overlap: one asked while another runs (a fleet screen left with a poll in
    flight, the next screen's first poll) waits for it, so the source is polled and the tracker
    folds each poll one at a time, in order.
    """

    def __init__(
        self,
        source: FleetSource,
        settings: Settings,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.source = source
        self._settings = settings
        self._tracker = FleetTracker()
        self._thresholds = OutlierThresholds.from_settings(settings.fleet)
        self._wall_clock = wall_clock
        self._refreshing = threading.Lock()

    def refresh(self) -> FleetTable:
        """Poll once and build the table, after any refresh in flight; never raises for the
        source's failures."""
        with self._refreshing:
            try:
                state = self._tracker.update(self.source.poll())
            except CollectorError as exc:
                state = self._tracker.failed(str(exc), self._wall_clock(), self.source.source)
        return fleet_table(
            state,
            self._settings.slo,
            self._thresholds,
            model_label=self._settings.fleet.model_label,
        )

    def close(self) -> None:
        """Close the source."""
        self.source.close()
