"""What reading a replica costs: one scrape's parse + window update, and a 1 Hz poll loop's CPU.

Part 1 replays the real vLLM 0.32 captures in tests/fixtures/metrics/ (about 600 lines each)
through one warm reader (the monitor's) and window, and prints the median and p90 of parse +
reduce + window push, and of building the Snapshot from the window. The captures differ in
shape, so each scrape here is read the long way; a live replica's keep theirs.
Part 2 serves those captures over HTTP/1.1 from a separate process and prints the CPU of one
exchange (/health, /metrics) through slotop's replica client and through httpx.Client, side by
side. Part 3 runs the real poll loop (ReplicaMonitor in a Poller) at 1 Hz against that server,
printing this process's CPU time over the wall time.

    .venv/bin/python -m bench.bench_collectors                  # 60 s poll loop
    .venv/bin/python -m bench.bench_collectors --loop-s 10      # shorter
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.poller import Poller, PollResult
from slotop.collectors.reading import ScrapeReader
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import Snapshot, build_snapshot
from slotop.collectors.window import Window
from tests.support.paths import CAPTURES
from tests.support.vllm_replica import free_port

ORDER = ("idle", "load", "restart-a", "restart-b", "queue", "preempt")


def _captures() -> list[str]:
    return [(CAPTURES / f"vllm-0.32-cpu-{name}.txt").read_text("utf-8") for name in ORDER]


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {statistics.median(ordered) * 1e3:.3f} ms, p90 {p90 * 1e3:.3f} ms"


def bench_update(rounds: int) -> None:
    """Time parse + reduce + window push, and the snapshot build, per scrape."""
    bodies = _captures()
    lines = statistics.mean(body.count("\n") for body in bodies)
    reader = ScrapeReader()  # as the monitor reads a replica
    window = Window(60.0, max_readings=70)
    update_s: list[float] = []
    build_s: list[float] = []
    cold_start = time.perf_counter()
    reader.read(bodies[0])
    cold_s = time.perf_counter() - cold_start
    for second, body in zip(range(1, rounds + 1), itertools.cycle(bodies), strict=False):
        started = time.perf_counter()
        reading = reader.read(body)
        window.push(float(second), reading)
        middle = time.perf_counter()
        view = window.view(60.0)
        short = window.view(10.0)
        if view is not None:
            build_snapshot(
                taken_at_s=0.0,
                reading=reading,
                view=view,
                short_view=short,
                ttft_percentile=99.0,
                itl_percentile=99.0,
            )
        ended = time.perf_counter()
        update_s.append(middle - started)
        build_s.append(ended - middle)
    print(f"captures: {len(bodies)} real vLLM 0.32 dumps, {lines:.0f} lines each on average")
    print(f"first parse (cold, every line through prometheus_client): {cold_s * 1e3:.2f} ms")
    print(f"parse + reduce + window push, warm, {rounds} scrapes: {_ms(update_s)}")
    print(f"snapshot build (60 s and 10 s views, 6 histograms): {_ms(build_s)}")


@contextlib.contextmanager
def _served_captures() -> Iterator[str]:
    """Serve the load capture and the identity endpoints over HTTP/1.1 from another process."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "metrics").write_text((CAPTURES / "vllm-0.32-cpu-load.txt").read_text("utf-8"))
        (root / "version").write_text('{"version": "0.32.0"}')
        (root / "health").write_text("")
        (root / "v1").mkdir()
        (root / "v1" / "models").write_text('{"data": [{"id": "tiny-llama"}]}')
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(port)],
            cwd=root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            with ReplicaClient(url, timeout_s=5.0) as client:
                for _ in range(100):
                    if client.health().healthy:
                        break
                    time.sleep(0.1)
            yield url
        finally:
            server.terminate()
            server.wait(10)


_SERVER = """
import functools, http.server, sys
class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # kept alive, as vLLM's server keeps it
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def bench_poll_loop(url: str, duration_s: float) -> None:
    """Run the real 1 Hz poll loop against the served captures; print its CPU share."""
    client = ReplicaClient(url, timeout_s=5.0)
    monitor = ReplicaMonitor(client, interval_s=1.0)
    polls: list[PollResult[Snapshot]] = []
    done = threading.Event()
    poller: Poller[Snapshot] = Poller(monitor.poll, polls.append, interval_s=1.0)
    cpu_start, wall_start = time.process_time(), time.monotonic()
    poller.start()
    done.wait(duration_s)
    poller.stop()
    cpu_s, wall_s = time.process_time() - cpu_start, time.monotonic() - wall_start
    client.close()
    failed = sum(1 for poll in polls if poll.stale)
    print(
        f"1 Hz poll loop over {wall_s:.0f} s: {len(polls)} polls ({failed} failed), "
        f"CPU {cpu_s * 1e3:.0f} ms = {100 * cpu_s / wall_s:.2f}% of one core "
        f"({cpu_s / max(len(polls), 1) * 1e3:.1f} ms per poll: 2 HTTP GETs, parse, window, "
        "snapshot)"
    )


def bench_clients(url: str, requests: int) -> None:
    """CPU of one exchange, /health and /metrics, through slotop's client and through httpx's,
    side by side against the same server (this thread's CPU time, so the server's is apart)."""
    figures: dict[str, dict[str, list[float]]] = {"slotop": {}, "httpx": {}}
    with ReplicaClient(url) as ours, httpx.Client(base_url=url) as theirs:
        asks = {
            "slotop": {"/health": ours.health, "/metrics": ours.metrics_text},
            "httpx": {
                "/health": lambda: theirs.get("/health").content,
                "/metrics": lambda: theirs.get("/metrics").content,
            },
        }
        for _ in range(requests):  # interleaved, so a busy moment lands on both
            for name, paths in asks.items():
                for path, ask in paths.items():
                    started = time.thread_time()
                    ask()
                    figures[name].setdefault(path, []).append(time.thread_time() - started)
    for path in ("/health", "/metrics"):
        mine, base = figures["slotop"][path], figures["httpx"][path]
        ratio = statistics.median(mine) / statistics.median(base)
        print(
            f"GET {path:8} CPU per exchange, {requests} each: slotop's client {_ms(mine)}; "
            f"httpx.Client {_ms(base)}; ratio {ratio:.2f}×"
        )


def main() -> None:
    """Run both parts and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=600, help="scrapes replayed in part 1")
    parser.add_argument("--requests", type=int, default=300, help="exchanges per client, part 2")
    parser.add_argument("--loop-s", type=float, default=60.0, help="poll loop duration, part 3")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    bench_update(args.rounds)
    with _served_captures() as url:
        bench_clients(url, args.requests)
        bench_poll_loop(url, args.loop_s)


if __name__ == "__main__":
    main()
