"""A fleet scraped directly: one ReplicaMonitor per replica URL, polled side by side.

Each replica is read exactly as `slotop attach` reads one (its monitor, window and quantiles),
then reduced to the figures a fleet row needs; a replica that does not answer is a row of unread
figures with the reason, never a failed poll.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from slotop.collectors.errors import CollectorError
from slotop.collectors.fleet import (
    FleetPoll,
    ReplicaFigures,
    ReplicaKey,
    figures_from_snapshot,
    unread_figures,
)
from slotop.collectors.monitor import ReplicaEndpoints, ReplicaMonitor

URL_LABEL = "url"


class DirectFleet:
    """Polls every replica's /metrics itself; `close` closes the clients it was given."""

    def __init__(
        self,
        clients: Sequence[ReplicaEndpoints],
        *,
        long_window_s: float,
        short_window_s: float,
        interval_s: float,
        ttft_percentile: float,
        itl_percentile: float,
        wall_clock: Callable[[], float] = time.time,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.monitors = [
            ReplicaMonitor(
                client,
                long_window_s=long_window_s,
                short_window_s=short_window_s,
                interval_s=interval_s,
                ttft_percentile=ttft_percentile,
                itl_percentile=itl_percentile,
                history_size=2,
                wall_clock=wall_clock,
            )
            for client in clients
        ]
        self.long_window_s = long_window_s
        self._models: dict[str, str] = {}
        self._engines: dict[str, str | None] = {}
        self._close = close
        self._wall_clock = wall_clock
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, min(16, len(self.monitors))), thread_name_prefix="slotop-fleet"
        )

    @property
    def source(self) -> str:
        """Where the figures come from, in words."""
        count = len(self.monitors)
        return f"direct scrapes of {count} replica{'s' if count != 1 else ''}"

    def close(self) -> None:
        """Stop the scrape threads and close the clients."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._close is not None:
            self._close()

    def _one(self, monitor: ReplicaMonitor) -> tuple[ReplicaFigures, float]:
        url = monitor.client.base_url
        key = ReplicaKey(((URL_LABEL, url),), url=url)
        try:
            snapshot = monitor.poll()
        except CollectorError as exc:
            monitor.forget_identity()  # ask who it is when it answers again
            model, engine = self._models.get(url, ""), self._engines.get(url)
            return unread_figures(key, str(exc), model=model, up=False, engine=engine), 0.0
        figures = figures_from_snapshot(key, snapshot, monitor.window.view(self.long_window_s))
        self._models[url] = figures.model
        self._engines[url] = figures.engine
        return figures, snapshot.taken_at_s

    def poll(self) -> FleetPoll:
        """Scrape every replica once, side by side; a replica that fails is a row saying why."""
        done = list(self._pool.map(self._one, self.monitors))
        taken = max((at for _, at in done), default=0.0)
        return FleetPoll(
            taken_at_s=taken or self._wall_clock(),
            replicas=tuple(figures for figures, _ in done),
            source=self.source,
        )
