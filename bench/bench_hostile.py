"""How fast the dashboard answers a key, and how much memory it holds, attached to hostile replicas.

Each replica of tests/support/hostile_replica.py (slow, hung, huge, endless, dripping, garbage,
counters going back, a duplicated series) runs as a process of its own on loopback; beside them,
the simulated replica as it should be, and the huge page once more with [replica] max_scrape_mb
below its size. `slotop attach URL` runs in a real terminal (a private tmux server, 160×50) with
the default settings (5 s timeout, 32 MiB cap) and its session recorded, as by default. Once the
header shows STALE or fresh, `p` (pause, then resume) is pressed --presses times, --gap-s apart
(so the presses span several polls of a replica that takes 5 s to fail), each timed from
send-keys to the screen showing it, looked at every 3 ms with `tmux capture-pane`. slotop's RSS
is read at the first press and after the last, and its most in between.

    .venv/bin/python -m bench.bench_hostile
    .venv/bin/python -m bench.bench_hostile --kinds slow,huge --presses 10
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from bench.bench_soak import rss_mb
from bench.bench_tui import Tmux
from tests.support.hostile_replica import KINDS
from tests.support.vllm_replica import free_port

TARGET_MS = 100.0


@contextlib.contextmanager
def replica(kind: str) -> Iterator[str]:
    """A hostile replica (or `sim`, the simulated one) in a process of its own; its URL."""
    port = free_port()
    if kind == "sim":
        argv = [sys.executable, "-m", "slotop.sim", "--port", str(port), "--model", "qwen2.5-0.5b"]
    else:
        argv = [sys.executable, "-m", "tests.support.hostile_replica", kind, str(port)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise SystemExit(f"the {kind} replica did not start")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def presses(term: Tmux, count: int, gap_s: float, pid: int) -> tuple[list[float], float]:
    """Milliseconds from each `p` to the screen showing it; and the most RSS seen meanwhile."""
    answers: list[float] = []
    most = rss_mb(pid)
    for _ in range(count):
        for shown in (True, False):  # p pauses (PAUSED shows), p again resumes (it goes)
            sent = time.monotonic()
            term.keys("p")
            while ("PAUSED" in term.screen()) is not shown:
                if time.monotonic() - sent > 10:
                    raise SystemExit("p was not answered in 10 s:\n" + term.screen())
                time.sleep(0.003)
            answers.append((time.monotonic() - sent) * 1e3)
            most = max(most, rss_mb(pid))
            time.sleep(gap_s)
    return answers, most


def state_line(screen: str) -> str:
    """The header's first line: fresh, or STALE and why."""
    return screen.splitlines()[0].strip() if screen.strip() else ""


def measure(kind: str, args: argparse.Namespace, scratch: Path) -> str:
    name, _, cap = kind.partition(":")
    config = scratch / f"{name}-{cap or 'default'}.toml"
    config.write_text(f"[replica]\nmax_scrape_mb = {cap}\n" if cap else "", encoding="utf-8")
    state = scratch / f"state-{name}-{cap}"
    with replica(name) as url:
        command = (
            f"unset COLUMNS LINES; export XDG_STATE_HOME={state}; exec {sys.executable} -m "
            f"slotop attach {url} --config {config}"
        )
        term = Tmux(command, name=f"hostile-{name}")
        try:
            deadline = time.monotonic() + 60
            while not any(w in state_line(term.screen()) for w in ("STALE", "fresh")):
                if time.monotonic() > deadline:
                    raise SystemExit(f"{kind}: no state shown:\n{term.screen()}")
                time.sleep(0.1)
            time.sleep(args.settle_s)
            pid = term.pid()
            first = rss_mb(pid)
            shown = state_line(term.screen())
            answers, most = presses(term, args.presses, args.gap_s, pid)
            last = rss_mb(pid)
        finally:
            term.close()
    answers.sort()
    over = sum(1 for a in answers if a > TARGET_MS)
    p90 = answers[int(0.9 * (len(answers) - 1))]
    return (
        f"{kind:<14} {statistics.median(answers):6.0f} {p90:6.0f} {answers[-1]:6.0f} {over:5d}  "
        f"{first:6.1f} {last:6.1f} {most:6.1f}  {shown[:90]}"
    )


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kinds",
        default=",".join(["sim", *KINDS, "huge:16"]),
        help="replicas, comma-separated (KIND:MB sets max_scrape_mb)",
    )
    parser.add_argument("--presses", type=int, default=15)
    parser.add_argument("--gap-s", type=float, default=0.5)
    parser.add_argument("--settle-s", type=float, default=3.0)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so each terminal is closed
    scratch = Path(tempfile.mkdtemp(prefix="slotop-hostile-"))
    print(f"load average {load_average()}", flush=True)
    print(
        f"{'replica':<14} {'key ms':>6} {'p90':>6} {'max':>6} {'>100':>5}  "
        f"{'RSS MB':>6} {'end':>6} {'most':>6}  header",
        flush=True,
    )
    try:
        for kind in args.kinds.split(","):
            print(measure(kind, args, scratch), flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load average {load_average()}")


if __name__ == "__main__":
    main()
