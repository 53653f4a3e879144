"""What the dashboard costs: CPU share attached to an idle and a busy replica, first paint, one frame.

1. CPU share: `slotop URL` runs in a real terminal (a private tmux server, 160×50) attached to the
   simulated replica, monitor only (probe off), for --seconds at the default 1 Hz; its user+system
   CPU time from /proc over that span, as a percentage of one core; once from attach (the SLO
   pane repaints each second while the 60 s window fills) and once after it filled. "busy": a load
   process keeps --busy-concurrency streams in flight against the replica meanwhile.
2. First paint: from launching `slotop URL` to the first screen tmux shows with the header drawn,
   and to the first screen with fresh data (median of --paint-runs).
3. One frame at 160×50: the app headless (Pilot) fed a snapshot that changes every time: a full
   reflow and compose of the screen, and handing the changed snapshot to the panes (of which
   building the views), medians.

4. With --render-modes N: the busy case again, N spans of --seconds in each of the two ways the
   dashboard can draw, taken in turns in one run: with the Textual internals it relies on
   (`tui/textual_internals.py`) and with Textual's own path (SLOTOP_PLAIN_RENDER=1), medians and
   their ratio, so the trade the internals make is in view.

    .venv/bin/python -m bench.bench_tui
    .venv/bin/python -m bench.bench_tui --seconds 20 --paint-runs 3
    .venv/bin/python -m bench.bench_tui --render-modes 3 --seconds 30

The simulated replica is light and its numbers move little; bench_tui_load measures the dashboard
on the real vLLM CPU replica under load, beside vllm-htop.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.support.vllm_replica import free_port

LOAD_SCRIPT = """
import signal, sys, time
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.stream import ProbeTarget
from slotop.actions.probe_control import load_shape_from_settings
from slotop.config import LoadSettings
if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the probe stops its workers
    shape = load_shape_from_settings(LoadSettings(output_tokens=256))
    with Probe.start(ProbeTarget(base_url=sys.argv[1]), shape, concurrency=int(sys.argv[2])):
        while True:
            time.sleep(1)
"""


@contextlib.contextmanager
def simulated_replica() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "slotop.sim", "--port", str(port), "--max-model-len", "4096"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=0.5).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise SystemExit("the simulated replica did not start")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@contextlib.contextmanager
def load(url: str, concurrency: int) -> Iterator[None]:
    process = subprocess.Popen([sys.executable, "-c", LOAD_SCRIPT, url, str(concurrency)])
    try:
        time.sleep(3)  # the probe is spawned and streaming
        yield
    finally:
        process.terminate()
        process.wait(10)


class Tmux:
    """A private tmux server running one command in a window of its own, 160×50 by default."""

    def __init__(self, command: str, name: str = "b", width: int = 160, height: int = 50) -> None:
        self.socket = f"slotop-bench-{os.getpid()}-{name}"
        self.run("new-session", "-d", "-s", "b", "-x", str(width), "-y", str(height), command)
        self.run("set-option", "-t", "b", "window-size", "manual")
        self.run("resize-window", "-t", "b", "-x", str(width), "-y", str(height))

    def run(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False
        ).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "b")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "b", *keys)

    def pid(self) -> int:
        return int(self.run("display", "-p", "-t", "b", "#{pane_pid}").strip())

    def close(self) -> None:
        self.run("send-keys", "-t", "b", "q")
        time.sleep(1.0)
        self.run("kill-server")


def slotop_command(url: str, *, plain: bool = False) -> str:
    mode = "SLOTOP_PLAIN_RENDER=1 " if plain else ""
    return f"unset COLUMNS LINES; {mode}exec {sys.executable} -m slotop attach {url}"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def cpu_share(url: str, seconds: float, settle_s: float = 2.0, *, plain: bool = False) -> float:
    tmux = Tmux(slotop_command(url, plain=plain))
    try:
        pid = tmux.pid()
        deadline = time.monotonic() + 30
        while "fresh" not in tmux.screen():
            if time.monotonic() > deadline:
                raise SystemExit("slotop never showed fresh data:\n" + tmux.screen())
            time.sleep(0.2)
        time.sleep(settle_s)  # past start-up (and, when long, past the window filling up)
        before, start = cpu_seconds(pid), time.monotonic()
        time.sleep(seconds)
        after, end = cpu_seconds(pid), time.monotonic()
        return 100 * (after - before) / (end - start)
    finally:
        tmux.close()


def first_paint(url: str) -> tuple[float, float]:
    start = time.monotonic()
    tmux = Tmux(slotop_command(url))
    painted = fresh = None
    try:
        while fresh is None and time.monotonic() - start < 30:
            text = tmux.screen()
            now = time.monotonic() - start
            if painted is None and ("vLLM" in text and "binds:" in text):
                painted = now
            if "fresh" in text:
                fresh = now
            time.sleep(0.005)
    finally:
        tmux.close()
    if painted is None or fresh is None:
        raise SystemExit("slotop never painted")
    return painted, fresh


async def frame_costs(frames: int) -> tuple[float, float, float]:
    """Medians of: routing a changed snapshot to the panes, composing the full screen, the views."""
    from slotop.config import Settings
    from slotop.tui.app import SlotopApp
    from slotop.tui.messages import LatencyTrend, SnapshotCollected
    from slotop.tui.views.dashboard import build_views
    from tests.support.tui_fakes import capture_snapshot, fresh

    base = capture_snapshot()
    trend = LatencyTrend(
        times_s=tuple(float(i) for i in range(240)),
        ttft_p50_s=tuple(0.01 * (i % 7) for i in range(240)),
        ttft_p90_s=tuple(0.02 * (i % 7) for i in range(240)),
        ttft_p99_s=tuple(0.05 * (i % 7) for i in range(240)),
        itl_p50_s=tuple(0.001 * (i % 5) for i in range(240)),
        itl_p90_s=tuple(0.002 * (i % 5) for i in range(240)),
        itl_p99_s=tuple(0.004 * (i % 5) for i in range(240)),
    )
    app = SlotopApp(Settings())
    route_s: list[float] = []
    compose_s: list[float] = []
    views_s: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        for i in range(frames):
            requests = dataclasses.replace(base.requests, running=float(i), waiting=float(i % 3))
            kv = dataclasses.replace(base.kv, usage_ratio=(i % 100) / 100)
            snapshot = dataclasses.replace(base, requests=requests, kv=kv)
            started = time.perf_counter()
            app.on_snapshot_collected(SnapshotCollected(fresh(snapshot), trend))
            route_s.append(time.perf_counter() - started)
            screen = app.screen
            started = time.perf_counter()
            screen._refresh_layout(screen.size)  # a full reflow and
            screen._compositor.render_full_update()  # every line of every pane drawn again
            compose_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            build_views(app.inputs)
            views_s.append(time.perf_counter() - started)
            await pilot.pause()
    return statistics.median(route_s), statistics.median(compose_s), statistics.median(views_s)


def render_modes(spans: int, seconds: float, concurrency: int) -> None:
    """CPU share with Textual's internals used and with Textual's own path, in turns."""
    shares: dict[bool, list[float]] = {False: [], True: []}
    with simulated_replica() as url, load(url, concurrency):
        for span in range(spans):
            for plain in (False, True):
                share = cpu_share(url, seconds, plain=plain)
                shares[plain].append(share)
                mode = "Textual's own path" if plain else "internals used"
                load_avg = " ".join(f"{v:.1f}" for v in os.getloadavg())
                print(f"  span {span + 1}, {mode}: {share:.2f}% of one core (load {load_avg})")
    internals, plain = statistics.median(shares[False]), statistics.median(shares[True])
    print(
        f"CPU, busy replica ({concurrency} streams), medians of {spans} spans of {seconds:g} s: "
        f"internals used {internals:.2f}%, Textual's own path (SLOTOP_PLAIN_RENDER=1) "
        f"{plain:.2f}% of one core; own path / internals {plain / internals:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--busy-concurrency", type=int, default=8)
    parser.add_argument("--paint-runs", type=int, default=5)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument(
        "--render-modes",
        type=int,
        default=0,
        metavar="N",
        help="only compare the two ways of drawing: N busy spans of each, in turns",
    )
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; 160x50; 1 Hz")
    if args.render_modes:
        render_modes(args.render_modes, args.seconds, args.busy_concurrency)
        return
    with simulated_replica() as url:
        paints = [first_paint(url) for _ in range(args.paint_runs)]
        painted = statistics.median(p for p, _ in paints)
        fresh = statistics.median(f for _, f in paints)
        print(
            f"first paint: median {painted:.2f} s; first fresh data: median {fresh:.2f} s "
            f"({args.paint_runs} launches)"
        )
        idle = cpu_share(url, args.seconds)
        print(f"CPU, idle replica: {idle:.2f}% of one core over {args.seconds:g} s from attach")
        settled = cpu_share(url, args.seconds, settle_s=65.0)
        print(
            f"CPU, idle replica, once the 60 s window is full: {settled:.2f}% of one core "
            f"over {args.seconds:g} s"
        )
        with load(url, args.busy_concurrency):
            busy = cpu_share(url, args.seconds)
        print(
            f"CPU, busy replica ({args.busy_concurrency} streams): {busy:.2f}% of one core "
            f"over {args.seconds:g} s"
        )
    route, compose, views = asyncio.run(frame_costs(args.frames))
    print(
        f"one frame at 160x50, medians of {args.frames}: full reflow + compose {compose * 1e3:.1f} ms;"
        f" routing a changed snapshot to the panes {route * 1e3:.2f} ms (of which building the "
        f"views {views * 1e3:.2f} ms)"
    )


if __name__ == "__main__":
    main()
