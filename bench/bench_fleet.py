"""The fleet view at 64 replicas through a real Prometheus: refresh time, PromQL time and CPU.

A page set is recorded first: one simulated replica under the probe's load, its /metrics read
once a second. A small loopback server then plays it back as 64 replicas, one port each (each
a few pages ahead of the last, half of them named another model), and a real Prometheus
(Debian's package) scrapes them every second. The fleet source then refreshes once per refresh
interval; the bench prints the median and worst refresh, the PromQL time inside it, the table
and screen update times, and the CPU this process and Prometheus spent per second of wall time.

    .venv/bin/python -m bench.bench_fleet
    .venv/bin/python -m bench.bench_fleet --replicas 16 --refreshes 10
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import statistics
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from slotop.actions.fleet.outliers import OutlierThresholds
from slotop.actions.fleet.table import FleetTable, fleet_table
from slotop.actions.fleet.tracker import FleetTracker
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.prometheus import PrometheusClient
from slotop.collectors.prometheus_fleet import PrometheusFleet
from slotop.config import Settings
from tests.support.prometheus_server import run_prometheus
from tests.support.sim_replica import run_sim
from tests.support.vllm_replica import free_port

MODEL_B = 'model_name="bench-model-b"'


def record_pages(seconds: int) -> list[str]:
    """One simulated replica's /metrics, once a second, under the probe's load."""
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 256),
        output_lengths=LengthDistribution("fixed", 64),
        max_concurrency=16,
        max_rate_rps=100.0,
    )
    pages: list[str] = []
    with (
        contextlib.contextmanager(run_sim)() as url,
        Probe.start(ProbeTarget(url), shape, concurrency=4),
    ):
        for _ in range(seconds):
            time.sleep(1.0)
            pages.append(httpx.get(f"{url}/metrics", timeout=5).text)
    return pages


def _retitled(page: str) -> str:
    """The page as another model's replica would serve it."""
    import re

    return re.sub(r'model_name="[^"]*"', MODEL_B, page)


def _serve(pages: list[str], ports: list[int]) -> None:
    """Serve the page set on these ports until killed (runs in a process of its own)."""
    started = time.monotonic()
    variants = [pages, [_retitled(page) for page in pages]]

    def handler_for(index: int) -> type[BaseHTTPRequestHandler]:
        class Page(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                tick = int(time.monotonic() - started) + index
                body = variants[index % 2][tick % len(pages)].encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Page

    threads = []
    for index, port in enumerate(ports):
        server = ThreadingHTTPServer(("127.0.0.1", port), handler_for(index))
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()


@contextlib.contextmanager
def serve_pages(pages: list[str], replicas: int) -> Iterator[list[str]]:
    """Serve the page set as `replicas` replicas on loopback ports, from a process of its own
    (so this process's CPU is the fleet view's alone); yield their host:port."""
    ports = [free_port() for _ in range(replicas)]
    server = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(pages, ports), daemon=True
    )
    server.start()
    try:
        yield [f"127.0.0.1:{port}" for port in ports]
    finally:
        server.terminate()
        server.join(10)


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _screen_update_s(tables: list[FleetTable], settings: Settings) -> list[float]:
    """Time the fleet screen bringing its tables up to each table in turn (headless)."""
    from slotop.tui.fleet.app import FleetApp

    times: list[float] = []

    async def run() -> None:
        app = FleetApp(settings, None)
        async with app.run_test(size=(160, 50)) as pilot:
            for table in tables:
                begun = time.perf_counter()
                app.show(table)
                await pilot.pause()
                times.append(time.perf_counter() - begun)

    asyncio.run(run())
    return times


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:.1f} ms, worst {max(values) * 1e3:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=64)
    parser.add_argument("--refreshes", type=int, default=20)
    parser.add_argument("--record-s", type=int, default=20, help="seconds of pages to record")
    parser.add_argument("--window-s", type=float, default=30.0)
    args = parser.parse_args()
    settings = Settings()
    refresh_s = settings.tui.refresh_s
    print(f"recording {args.record_s} pages from a simulated replica under load…", flush=True)
    pages = record_pages(args.record_s)
    with serve_pages(pages, args.replicas) as targets:
        for server in run_prometheus(targets):
            server.wait_for_up(len(targets), timeout_s=120)
            print(f"Prometheus scrapes {len(targets)} replicas every 1 s; filling the window…")
            time.sleep(min(args.window_s, 15.0))
            fleet = PrometheusFleet(
                PrometheusClient(server.url),
                window_s=args.window_s,
                ttft_percentile=settings.slo.ttft_percentile,
                itl_percentile=settings.slo.itl_percentile,
            )
            tracker = FleetTracker()
            walls, queries, per_query, builds = [], [], [], []
            tables: list[FleetTable] = []
            cpu_begun, prom_begun = time.process_time(), _cpu_s(server.process.pid)
            wall_begun = time.monotonic()
            for _ in range(args.refreshes):
                begun = time.monotonic()
                poll = fleet.poll()
                built = time.monotonic()
                table = fleet_table(tracker.update(poll), settings.slo, OutlierThresholds())
                done = time.monotonic()
                walls.append(done - begun)
                builds.append(done - built)
                queries.append(poll.query_s)
                per_query.append(poll.query_s / max(poll.queries, 1))
                tables.append(table)
                time.sleep(max(0.0, refresh_s - (time.monotonic() - begun)))
            wall = time.monotonic() - wall_begun
            cpu = time.process_time() - cpu_begun
            prom_cpu = _cpu_s(server.process.pid) - prom_begun
            fleet.close()
    screen = _screen_update_s(tables, settings)
    rows = len(tables[-1].rows)
    print(
        f"\nfleet of {rows} replicas ({len(tables[-1].models)} models), refresh every {refresh_s:g} s"
    )
    print(
        f"  refresh (poll + table): {_ms(walls)}  within the interval: "
        f"{'yes' if max(walls) < refresh_s else 'NO'}"
    )
    print(
        f"  PromQL time per refresh (summed over {tables[-1].queries} queries run 4 at a "
        f"time): {_ms(queries)}; per query {_ms(per_query)}"
    )
    print(f"  table build (rows, verdicts, outliers, models): {_ms(builds)}")
    print(f"  screen update (160×50, cells changed in place): {_ms(screen)}")
    print(
        f"  CPU: slotop {cpu / wall:.1%} of a core, Prometheus {prom_cpu / wall:.1%} "
        f"(over {wall:.0f} s, Prometheus scraping {rows} targets/s meanwhile; the page server runs apart)"
    )


if __name__ == "__main__":
    main()
