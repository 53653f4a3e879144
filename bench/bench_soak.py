"""A week in a day: the dashboard left open with its probe on, restarted and its replica killed.

`slotop demo` runs in a real terminal (a private tmux server, 160×50): the simulated replica as a
managed child, the probe on at --concurrency, the session recorded as by default (into a folder
of the bench's own, with the default budget). Every --restart-every-s seconds the bench restarts
the replica from the dashboard (k, the KV dtype auto ↔ fp8, y); every --kill-every-s seconds it
first kills the replica's process group with SIGKILL and leaves it down --down-s seconds (the
dashboard goes STALE, the probe's requests fail), and the restart that follows brings it back.

Every --sample-every-s seconds it prints, for slotop's own process: RSS, CPU (user + system, % of
one core, over the last span), open file descriptors and threads; the probe workers' RSS beside
it; the recording's size; and how long `p` (pause) took to show on screen. At the end: RSS and
file descriptors at five minutes against the end, the most each reached, and the restarts,
kills and key answers counted.

    .venv/bin/python -m bench.bench_soak --minutes 60
    .venv/bin/python -m bench.bench_soak --minutes 6 --restart-every-s 60 --kill-every-s 150
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.bench_tui import Tmux, cpu_seconds
from tests.support.vllm_replica import live_descendants

SETTLE_S = 300.0
"""Growth is counted from here: start-up, the windows and the latency trend filled."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One look at slotop: when, its memory, CPU over the last span, descriptors, threads."""

    at_s: float
    rss_mb: float
    cpu_pct: float
    fds: int
    threads: int
    children_rss_mb: float
    recording_mb: float
    key_ms: float | None


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def rss_mb(pid: int) -> float:
    """Resident memory of one process, MB."""
    try:
        return _status(pid, "VmRSS") / 1024
    except OSError:
        return 0.0


def fds(pid: int) -> int:
    """Open file descriptors of one process."""
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def sim_pids(slotop: int) -> list[int]:
    """The simulated replica's processes below slotop."""
    found = []
    for pid in live_descendants(slotop):
        try:
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"slotop.sim" in words:
            found.append(pid)
    return found


def key_ms(term: Tmux) -> float | None:
    """Milliseconds from `p` to PAUSED on screen (then `p` again resumes); None past 10 s."""
    sent = time.monotonic()
    term.keys("p")
    while "PAUSED" not in term.screen():
        if time.monotonic() - sent > 10:
            return None
        time.sleep(0.003)
    answered = (time.monotonic() - sent) * 1e3
    term.keys("p")
    deadline = time.monotonic() + 10
    while "PAUSED" in term.screen() and time.monotonic() < deadline:
        time.sleep(0.01)
    return answered


def wait_for(term: Tmux, words: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while words not in term.screen():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def restart(term: Tmux) -> tuple[str, str]:
    """Turn the KV dtype from the dashboard, to fp8 from auto and back as the dial screen says
    it runs now (an outcome missed on screen then leaves no later restart asking for the dtype
    it already runs): where to, and the outcome's first words."""
    term.keys("k")
    if not wait_for(term, "fp8_e4m3", 15):
        term.keys("Escape")
        return "?", "no dial screen"
    to_fp8 = "now: fp8" not in term.screen()
    term.keys(*(["Down"] * 3 if to_fp8 else []), "Enter")  # auto, bfloat16, float16, fp8
    where = "fp8" if to_fp8 else "auto"
    if not wait_for(term, "Restart the replica?", 15):
        term.keys("Escape")
        return where, "no plan"
    term.keys("y")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        screen = term.screen()
        for outcome in ("Restarted with the new dials", "ROLLED BACK", "DOWN"):
            if outcome in screen:
                return where, outcome
        time.sleep(0.2)
    return where, "no outcome in 120 s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--restart-every-s", type=float, default=180.0)
    parser.add_argument("--kill-every-s", type=float, default=600.0)
    parser.add_argument("--down-s", type=float, default=30.0)
    parser.add_argument("--sample-every-s", type=float, default=60.0)
    args = parser.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the terminal is closed below
    scratch = Path(tempfile.mkdtemp(prefix="slotop-soak-"))
    state = scratch / "state"
    command = (
        f"unset COLUMNS LINES; export XDG_STATE_HOME={state}; exec {sys.executable} -m slotop "
        f"demo --concurrency {args.concurrency} --model qwen2.5-0.5b --gpu l4"
    )
    term = Tmux(command, name="soak")
    samples: list[Sample] = []
    restarts: list[str] = []
    kills = 0
    try:
        if not wait_for(term, "fresh", 90) or not wait_for(term, "load ON", 60):
            raise SystemExit("the demo never showed fresh data with its load on:\n" + term.screen())
        pid = term.pid()
        started = time.monotonic()
        next_sample = started
        next_restart = started + args.restart_every_s
        next_kill = started + args.kill_every_s
        last_cpu, last_at = cpu_seconds(pid), started
        print(
            "  min   RSS MB  CPU %  fds  threads  children RSS MB  recording MB  key ms",
            flush=True,
        )
        while time.monotonic() - started < args.minutes * 60:
            now = time.monotonic()
            if now >= next_kill:
                for sim in sim_pids(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(sim, signal.SIGKILL)
                kills += 1
                print(f"  [{(now - started) / 60:5.1f} min] replica killed (SIGKILL)", flush=True)
                time.sleep(args.down_s)
                next_kill += args.kill_every_s
                next_restart = time.monotonic()
            if time.monotonic() >= next_restart:
                where, outcome = restart(term)
                restarts.append(outcome)
                at = (time.monotonic() - started) / 60
                print(f"  [{at:5.1f} min] restart to {where}: {outcome}")
                next_restart = time.monotonic() + args.restart_every_s
            if time.monotonic() >= next_sample:
                cpu, at = cpu_seconds(pid), time.monotonic()
                children = [c for c in live_descendants(pid) if c != pid]
                sample = Sample(
                    at_s=at - started,
                    rss_mb=rss_mb(pid),
                    cpu_pct=100 * (cpu - last_cpu) / max(at - last_at, 1e-9),
                    fds=fds(pid),
                    threads=_status(pid, "Threads"),
                    children_rss_mb=sum(rss_mb(c) for c in children),
                    recording_mb=folder_mb(state),
                    key_ms=key_ms(term),
                )
                last_cpu, last_at = cpu, at
                samples.append(sample)
                key = f"{sample.key_ms:6.0f}" if sample.key_ms is not None else "  none"
                print(
                    f"{sample.at_s / 60:5.1f}  {sample.rss_mb:7.1f}  {sample.cpu_pct:5.1f}  "
                    f"{sample.fds:3d}  {sample.threads:7d}  {sample.children_rss_mb:15.1f}  "
                    f"{sample.recording_mb:12.1f}  {key}",
                    flush=True,
                )
                next_sample += args.sample_every_s
            time.sleep(0.5)
    finally:
        term.close()
        shutil.rmtree(scratch, ignore_errors=True)
    summary(samples, restarts, kills)


def summary(samples: list[Sample], restarts: list[str], kills: int) -> None:
    settled = [s for s in samples if s.at_s >= SETTLE_S] or samples[-1:]
    if not settled:
        print("no samples")
        return
    first, last = settled[0], samples[-1]
    keys = [s.key_ms for s in samples if s.key_ms is not None]
    print(
        f"RSS {first.rss_mb:.1f} MB at {first.at_s / 60:.1f} min, {last.rss_mb:.1f} MB at "
        f"{last.at_s / 60:.1f} min: {last.rss_mb - first.rss_mb:+.1f} MB "
        f"(most {max(s.rss_mb for s in settled):.1f})"
    )
    print(
        f"fds {first.fds} at {first.at_s / 60:.1f} min, {last.fds} at the end, "
        f"{min(s.fds for s in settled)}-{max(s.fds for s in settled)} after it; threads "
        f"{min(s.threads for s in settled)}-{max(s.threads for s in settled)}"
    )
    print(f"CPU {statistics.median(s.cpu_pct for s in settled):.1f}% of a core (median)")
    if keys:
        print(
            f"key p answered in {statistics.median(keys):.0f} ms (median), {max(keys):.0f} ms "
            f"at most, over {len(keys)} presses; {len(samples) - len(keys)} unanswered"
        )
    done = sum(1 for r in restarts if r.startswith("Restarted"))
    print(
        f"restarts {done} applied of {len(restarts)} ({', '.join(sorted(set(restarts)))}); "
        f"replica killed {kills} times"
    )


if __name__ == "__main__":
    main()
