"""What `slotop web` costs per viewer, beside `slotop attach` in a terminal on the same replica.

The simulated replica serves --clients streams from slotop's own load probe, run in a process of
its own (or --url names a replica to watch). Side by side, over the same spans:

- `slotop attach URL --no-record` in a tmux session of its own at 160×50;
- `slotop web URL --no-record`: the server, and the one dashboard it runs (its child process),
  watched by 1, 2, 4, … viewers (--viewers): websocket clients that open the page's websocket
  at 160×50 and read everything it sends, as a browser's page does, in a process of their own.
  With --browser the first viewer is a headless Chromium showing the page instead (its own CPU,
  the cost on the watching machine, printed apart).

For each number of viewers, --runs spans of --seconds after --settle seconds: CPU (user + system,
from /proc/PID/stat) as a percentage of one core, and bytes written per second (/proc/PID/io
`wchar`): the dashboard's to the server's pipe, which every viewer is sent as it is (one websocket
message a write), and attach's to its terminal. (A socket's sends are not counted in `wchar`.) Medians of the runs; the last lines give what each viewer past the first adds. The
machine may be shared: the load average is printed at the start and the end, and only figures
measured side by side in one run compare.

    .venv/bin/python -m bench.bench_web
    .venv/bin/python -m bench.bench_web --viewers 1,2,4,8 --runs 3 --seconds 30
    .venv/bin/python -m bench.bench_web --browser --viewers 1,2
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.bench_tui import Tmux, load, simulated_replica
from bench.bench_tui_load import (
    Reading,
    compiled_python,
    load_average,
    read,
    share,
    spread,
    warm_up,
)
from tests.support.browser import FLAGS as CHROMIUM_FLAGS
from tests.support.browser import chromium_path
from tests.support.vllm_replica import live_descendants, tree_cpu_seconds

VIEWERS_SCRIPT = """
import asyncio, sys
import aiohttp

async def watch(session, url):
    async with session.ws_connect(url, max_msg_size=0) as socket:
        async for _ in socket:
            pass

async def main(url, count):
    async with aiohttp.ClientSession() as session:
        await asyncio.gather(*(watch(session, url) for _ in range(count)))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""
"""Run with the websocket's URL and a count: that many viewers, each reading all it is sent."""


@dataclass(frozen=True, slots=True)
class Span:
    """One span's CPU (% of one core) and bytes written per second of each process."""

    server_cpu: float
    app_cpu: float
    attach_cpu: float
    browser_cpu: float
    app_bps: float
    attach_bps: float


@contextlib.contextmanager
def served(url: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`slotop web URL` on a free port: the process and the page's address."""
    command = f"{compiled_python()} exec {sys.executable} -m slotop web {url} --port 0 --no-record"
    process = subprocess.Popen(
        ["sh", "-c", command], stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    found: list[str] = []
    said = threading.Event()

    def listen() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if match := re.search(r"http://127\.0\.0\.1:\d+/\S+/", line):
                found.append(match.group())
                said.set()

    threading.Thread(target=listen, daemon=True).start()
    try:
        if not said.wait(30):
            raise SystemExit("slotop web printed no address")
        yield process, found[0]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def dashboard_pid(server_pid: int, timeout_s: float = 30) -> int:
    """The dashboard the server runs (`slotop attach`), once the first viewer started it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in live_descendants(server_pid):
            with contextlib.suppress(OSError):
                words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if words[1:4] == [b"-m", b"slotop", b"attach"]:
                    return pid
        time.sleep(0.2)
    raise SystemExit("slotop web started no dashboard")


def browser(address: str, profile: Path) -> subprocess.Popen[bytes]:
    """A headless Chromium showing the page (large enough for 160×50 at its default font)."""
    found = chromium_path()
    if found is None:
        raise SystemExit("--browser needs Chromium (.ci/install-chromium)")
    return subprocess.Popen(
        [
            found,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1700,1100",
            "--remote-debugging-port=0",  # keeps the headless browser open on the page
            f"{address}?fontsize=14",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--viewers", default="1,2,4,8", help="numbers of viewers, rising")
    parser.add_argument("--seconds", type=float, default=30.0, help="span of each measurement")
    parser.add_argument("--runs", type=int, default=3, help="spans at each number of viewers")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds before each level")
    parser.add_argument("--clients", type=int, default=16, help="streams kept in flight")
    parser.add_argument("--url", help="a replica to watch (default: the simulated one, loaded)")
    parser.add_argument("--browser", action="store_true", help="the first viewer is Chromium")
    args = parser.parse_args()
    levels = [int(n) for n in args.viewers.split(",")]
    if levels != sorted(set(levels)) or levels[0] < 1:
        raise SystemExit("--viewers: rising numbers from 1, e.g. 1,2,4,8")
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed")
    warm_up()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load_average()} "
        "at the start (the machine may be shared: compare figures of one run)"
    )
    with contextlib.ExitStack() as stack:
        url = args.url
        if url is None:
            url = stack.enter_context(simulated_replica())
            stack.enter_context(load(url, args.clients))
            print(f"the simulated replica, {args.clients} outside streams of 256 output tokens")
        rows = measure(url, levels, args, stack)
    report(levels, rows, args.browser)
    print(f"load average at the end {load_average()}")


def measure(
    url: str, levels: list[int], args: argparse.Namespace, stack: contextlib.ExitStack
) -> dict[int, list[Span]]:
    attach = Tmux(
        f"unset COLUMNS LINES; {compiled_python()} exec {sys.executable} -m slotop attach "
        f"{url} --no-record",
        name="attach",
    )
    stack.callback(attach.close)
    server, address = stack.enter_context(served(url))
    socket_url = address.replace("http", "ws", 1) + "ws?width=160&height=50"
    profile = Path(tempfile.mkdtemp(prefix="slotop-bench-chromium-"))
    stack.callback(shutil.rmtree, profile, ignore_errors=True)
    watchers: list[subprocess.Popen[bytes]] = []
    stack.callback(stop_all, watchers)
    rows: dict[int, list[Span]] = {}
    browser_pid: int | None = None
    watching = 0
    for level in levels:
        added = level - watching
        if args.browser and watching == 0:
            watchers.append(browser(address, profile))
            browser_pid = watchers[-1].pid
            added -= 1
        if added:
            viewers = [sys.executable, "-c", VIEWERS_SCRIPT, socket_url, str(added)]
            watchers.append(subprocess.Popen(viewers, start_new_session=True))
        watching = level
        app = dashboard_pid(server.pid)
        time.sleep(args.settle)
        pids = {"server": server.pid, "app": app, "attach": attach.pid()}
        spans = []
        for _ in range(args.runs):
            begin = {name: read(pid) for name, pid in pids.items()}
            browser_begin = tree_cpu_seconds(browser_pid) if browser_pid else 0.0
            time.sleep(args.seconds)
            end = {name: read(pid) for name, pid in pids.items()}
            browser_end = tree_cpu_seconds(browser_pid) if browser_pid else 0.0
            spans.append(span(begin, end, 100 * (browser_end - browser_begin) / args.seconds))
        rows[level] = spans
        print(f"  {level} viewer(s) measured", flush=True)
    return rows


def span(begin: dict[str, Reading], end: dict[str, Reading], browser_cpu: float) -> Span:
    server_cpu, _ = share(begin["server"], end["server"])  # its sends are not in wchar
    app_cpu, app_bps = share(begin["app"], end["app"])
    attach_cpu, attach_bps = share(begin["attach"], end["attach"])
    return Span(server_cpu, app_cpu, attach_cpu, browser_cpu, app_bps, attach_bps)


def stop_all(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)


def report(levels: list[int], rows: dict[int, list[Span]], with_browser: bool) -> None:
    print()
    print("CPU, % of one core (medians of the runs); bytes written per second")
    header = (
        f"{'viewers':>7}  {'server':>7}  {'app':>7}  {'web':>7}  {'attach':>7}  "
        f"{'web/attach':>10}  {'app B/s':>8}  {'attach B/s':>10}"
    )
    if with_browser:
        header += f"  {'Chromium':>8}"
    print(header)
    medians = {}
    for level in levels:
        spans = rows[level]
        server = statistics.median(s.server_cpu for s in spans)
        app = statistics.median(s.app_cpu for s in spans)
        attach = statistics.median(s.attach_cpu for s in spans)
        web = statistics.median(s.server_cpu + s.app_cpu for s in spans)
        medians[level] = (server, app)
        line = (
            f"{level:>7}  {server:>7.2f}  {app:>7.2f}  {web:>7.2f}  {attach:>7.2f}  "
            f"{web / attach if attach else float('nan'):>9.2f}×  "
            f"{statistics.median(s.app_bps for s in spans):>8.0f}  "
            f"{statistics.median(s.attach_bps for s in spans):>10.0f}"
        )
        if with_browser:
            line += f"  {statistics.median(s.browser_cpu for s in spans):>8.2f}"
        print(line)
    for level in levels:
        print(
            f"  server: {level} viewer(s) {spread([s.server_cpu for s in rows[level]], 2)}; "
            f"app {spread([s.app_cpu for s in rows[level]], 2)}; "
            f"attach {spread([s.attach_cpu for s in rows[level]], 2)}"
        )
    first, last = levels[0], levels[-1]
    if last > first:
        added = last - first
        server_each = (medians[last][0] - medians[first][0]) / added
        app_each = (medians[last][1] - medians[first][1]) / added
        print(
            f"each viewer past the first adds {server_each:+.3f} % of a core to the server and "
            f"{app_each:+.3f} % to the app ({first} → {last} viewers)"
        )


if __name__ == "__main__":
    main()
