"""A small fleet for tests: simulated replicas on free ports, scraped by a real Prometheus."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from slotop.actions.fleet.table import FleetTable
from slotop.actions.fleet.wiring import FleetWatch, prometheus_fleet
from slotop.config import Settings
from tests.support.prometheus_server import PrometheusServer, require_prometheus, run_prometheus
from tests.support.sim_replica import run_sim


@dataclass
class SimFleet:
    """The replicas' URLs, in the order asked for, and the server that scrapes them."""

    urls: list[str]
    prometheus: PrometheusServer

    @property
    def instances(self) -> list[str]:
        """Each replica's `instance` label in Prometheus (host:port)."""
        return [url.removeprefix("http://") for url in self.urls]


def run_sim_fleet(
    flags: Sequence[Sequence[str]], *, interval_s: float = 1.0, model: str = "qwen2.5-0.5b"
) -> Iterator[SimFleet]:
    """Yield one simulated replica per entry of `flags` (its `slotop sim` flags) and a Prometheus
    scraping them every `interval_s`, once it has scraped each; stop them all afterwards."""
    require_prometheus()
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(contextlib.contextmanager(run_sim)(*each, model=model))
            for each in flags
        ]
        targets = [url.removeprefix("http://") for url in urls]
        server = stack.enter_context(
            contextlib.contextmanager(run_prometheus)(targets, interval_s=interval_s)
        )
        server.wait_for_up(len(urls))
        yield SimFleet(urls, server)


def refreshed_once(settings: Settings, at_s: float | None = None) -> FleetTable:
    """The fleet through `[fleet] prometheus_url`, one refresh, as the dashboard's first;
    evaluated at wall time `at_s` where given (a time Prometheus has ingested every scrape of,
    so a query of the test's own at that time reads the same samples), else now."""
    clock = time.time if at_s is None else lambda: at_s
    watch = FleetWatch(prometheus_fleet(settings, wall_clock=clock), settings)
    try:
        return watch.refresh()
    finally:
        watch.close()
