"""What the dashboard costs beside a plain-text monitor, both attached to the real vLLM replica under load.

The real vLLM CPU replica of the tests (tests/support/vllm_replica.py) serves --clients streams
from slotop's own load probe, run in a process of its own. Then:

1. Side by side, each in a tmux session of its own at 160×50: `slotop attach URL` (probe off, the
   session recorded as by default) and vllm-htop 0.5.0 (`--interval 1`). Once both have been
   attached --settle seconds (past start-up, slotop's windows and latency trend full, so its
   sparklines scroll as they do all day), --runs spans of --seconds one after another, each over
   the same span for both: CPU (user + system, from /proc/PID/stat) as a percentage of one core,
   and bytes written to the terminal per second (/proc/PID/io `wchar`; for slotop less what the
   session recording grew by, which is printed apart). Medians and slotop's ratio to vllm-htop;
   slotop's CPU is also split into its main thread (the UI: views, drawing, the compositor) and
   the rest (the replica, GPU and probe polls, the recorder, terminal I/O).
2. The probe on: the outside clients stop and `slotop attach` turns its own probe on (l, y) at
   concurrency --clients; slotop's process and the probe's child, separately and summed, beside
   vllm-htop over the same spans (slotop's bytes then include the few it sends the probe).
3. First paint and keys, the outside clients streaming: from launch to the first screen with every
   pane drawn, and to fresh data (--launches launches); then `p` (pause, then resume) pressed
   --keys times, each timed from send-keys to the screen showing it, polled with
   `tmux capture-pane`.

vllm-htop is installed into a venv of its own (~/.cache/slotop-bench/) the first time; slotop runs
with its modules compiled (into ~/.cache/slotop-bench/pycache), as an installed slotop does. The
machine may be shared: the load average is printed at the start and the end, and only ratios
measured side by side in one run compare. Run it alone, under the lock the other heavy jobs take:

    .venv/bin/python -m bench.bench_tui_load
    .venv/bin/python -m bench.bench_tui_load --runs 1 --seconds 30
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.bench_tui import Tmux, cpu_seconds
from tests.support.vllm_replica import (
    ReplicaFlags,
    VllmReplica,
    build_tiny_model,
    live_descendants,
)

HTOP_VERSION = "0.5.0"
HTOP_VENV = Path.home() / ".cache" / "slotop-bench" / f"vllm-htop-{HTOP_VERSION}"
PYCACHE = Path.home() / ".cache" / "slotop-bench" / "pycache"

LOAD_SCRIPT = """
import signal, sys, time
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.stream import ProbeTarget
from slotop.actions.probe_control import load_shape_from_settings
from slotop.config import LoadSettings
if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the probe stops its workers
    url, clients, prompt, output = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    shape = load_shape_from_settings(LoadSettings(prompt_tokens=prompt, output_tokens=output))
    with Probe.start(ProbeTarget(base_url=url), shape, concurrency=clients):
        while True:
            time.sleep(1)
"""


def vllm_htop() -> Path:
    """vllm-htop's executable, installed into a venv of its own the first time."""
    executable = HTOP_VENV / "bin" / "vllm-htop"
    if not executable.exists():
        print(f"installing vllm-htop {HTOP_VERSION} into {HTOP_VENV}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(HTOP_VENV)], check=True)
        pip = [str(HTOP_VENV / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, f"vllm-htop=={HTOP_VERSION}"], check=True)
    return executable


@contextlib.contextmanager
def clients(url: str, count: int, prompt_tokens: int, output_tokens: int) -> Iterator[None]:
    """Keep `count` streams in flight against `url` from a process of their own."""
    argv = [sys.executable, "-c", LOAD_SCRIPT, url, str(count), str(prompt_tokens)]
    process = subprocess.Popen([*argv, str(output_tokens)])
    try:
        time.sleep(5)  # the probe is spawned and its streams are open
        yield
    finally:
        process.terminate()
        process.wait(30)


def written_bytes(pid: int) -> int:
    """Bytes the process passed to write calls so far (/proc/PID/io wchar)."""
    for row in Path(f"/proc/{pid}/io").read_text().splitlines():
        if row.startswith("wchar:"):
            return int(row.split()[1])
    raise SystemExit(f"/proc/{pid}/io has no wchar")


def folder_bytes(folder: Path) -> int:
    """Total size of the files under a folder (the session recordings)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@dataclass(frozen=True, slots=True)
class Reading:
    """Counters of one process at one instant; main_cpu_s is its main thread's alone."""

    at_s: float
    cpu_s: float
    wchar: int
    main_cpu_s: float


def thread_cpu_seconds(pid: int, tid: int) -> float:
    fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read(pid: int) -> Reading:
    return Reading(
        time.monotonic(), cpu_seconds(pid), written_bytes(pid), thread_cpu_seconds(pid, pid)
    )


def share(before: Reading, after: Reading) -> tuple[float, float]:
    """CPU as % of one core, and bytes written per second, between two readings."""
    span = after.at_s - before.at_s
    return 100 * (after.cpu_s - before.cpu_s) / span, (after.wchar - before.wchar) / span


def wait_for(term: Tmux, found: Callable[[str], bool], what: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        text = term.screen()
        if found(text):
            return text
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} never showed; the screen:\n{text}")
        time.sleep(0.2)


def compiled_python() -> str:
    """Shell words that give Python its compiled modules, as an installed slotop has them.

    An installed package is compiled when it is installed; a checkout run with
    PYTHONDONTWRITEBYTECODE compiles every module at every start, which would be timed as first
    paint. The bytecode goes to a folder of the bench's own, outside the checkout.
    """
    return f"unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX={PYCACHE};"


def warm_up() -> None:
    """Compile every module of slotop, once, before anything is timed."""
    import slotop

    package = Path(slotop.__file__).parent
    skip = r"'/(tests|bench|build|\.[^/]+)/'"  # the package's own modules, not its venvs
    command = f"{compiled_python()} exec {sys.executable} -m compileall -q -x {skip} {package}"
    subprocess.run(["sh", "-c", command], check=False, stdout=subprocess.DEVNULL)


def slotop_command(url: str, state: Path, config: Path | None = None) -> str:
    flags = f"--config {config} " if config is not None else ""
    return (
        f"unset COLUMNS LINES; {compiled_python()} export XDG_STATE_HOME={state}; "
        f"exec {sys.executable} -m slotop attach {flags}{url}"
    )


@dataclass(frozen=True, slots=True)
class RunFigures:
    """One side-by-side span: slotop's CPU and terminal bytes, its recording's, vllm-htop's."""

    slotop_cpu: float
    slotop_tty_bps: float
    recording_bps: float
    htop_cpu: float
    htop_tty_bps: float
    probe_cpu: float = 0.0
    slotop_main_cpu: float = 0.0


def side_by_side(
    url: str, htop: Path, args: argparse.Namespace, scratch: Path, probe_at: int = 0
) -> list[RunFigures]:
    """slotop and vllm-htop in tmux sessions of their own, measured over the same spans."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=scratch))
    config = None
    if probe_at:
        config = state / "slotop.toml"
        config.write_text(
            f"[load]\ninitial_concurrency = {probe_at}\nprompt_tokens = {args.prompt_tokens}\n"
            f"output_tokens = {args.output_tokens}\n"
        )
    slotop = Tmux(slotop_command(url, state, config), name="slotop")
    viewer = Tmux(f"exec {htop} --url {url} --interval 1", name="htop")
    figures: list[RunFigures] = []
    try:
        wait_for(slotop, lambda t: "fresh" in t, "slotop's fresh data")
        wait_for(viewer, lambda t: "Output tokens/s" in t, "vllm-htop's first screen")
        if probe_at:
            slotop.keys("l")
            wait_for(slotop, lambda t: "Turn the load probe on?" in t, "the probe's confirmation")
            slotop.keys("y")
            wait_for(slotop, lambda t: f"concurrency {probe_at}" in t, "the probe at its level")
        time.sleep(args.settle)  # past start-up, the windows and the trend filled
        pid, htop_pid = slotop.pid(), viewer.pid()
        children = [p for p in live_descendants(pid) if p != pid]
        if probe_at and not children:
            raise SystemExit("slotop's probe has no process")
        for _ in range(args.runs):
            begin = (read(pid), read(htop_pid), folder_bytes(state), [read(c) for c in children])
            time.sleep(args.seconds)
            end = (read(pid), read(htop_pid), folder_bytes(state), [read(c) for c in children])
            figures.append(measured(begin, end))
    finally:
        slotop.close()
        viewer.close()
    return figures


Counters = tuple[Reading, Reading, int, list[Reading]]


def measured(begin: Counters, end: Counters) -> RunFigures:
    """What slotop (less its recording), its probe and vllm-htop cost between two readings."""
    slotop_cpu, slotop_bps = share(begin[0], end[0])
    htop_cpu, htop_bps = share(begin[1], end[1])
    recording_bps = (end[2] - begin[2]) / (end[0].at_s - begin[0].at_s)
    probe_cpu = sum(share(b, e)[0] for b, e in zip(begin[3], end[3], strict=True))
    main_cpu = 100 * (end[0].main_cpu_s - begin[0].main_cpu_s) / (end[0].at_s - begin[0].at_s)
    return RunFigures(
        slotop_cpu,
        slotop_bps - recording_bps,
        recording_bps,
        htop_cpu,
        htop_bps,
        probe_cpu,
        main_cpu,
    )


def first_paint(url: str, scratch: Path) -> tuple[float, float, Tmux]:
    """Launch slotop: seconds to the first screen with every pane drawn, and to fresh data."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=scratch))
    started = time.monotonic()
    term = Tmux(slotop_command(url, state), name="paint")
    painted = fresh = None
    while (painted is None or fresh is None) and time.monotonic() - started < 60:
        text = term.screen()
        now = time.monotonic() - started
        if painted is None and all(w in text for w in ("binds:", "SLO", "KV cache", "Latency")):
            painted = now
        if "fresh" in text:
            fresh = now
        time.sleep(0.01)
    if painted is None or fresh is None:
        screen = term.screen()
        term.close()
        raise SystemExit("slotop never painted:\n" + screen)
    return painted, fresh, term


def key_answers(term: Tmux, presses: int) -> list[float]:
    """Seconds from each p (pause, then resume) to the screen showing it."""
    answers: list[float] = []
    for _ in range(presses):
        for shown in (True, False):  # p pauses (PAUSED shows), p again resumes (it goes)
            sent = time.monotonic()
            term.keys("p")
            while ("PAUSED" in term.screen()) is not shown:
                if time.monotonic() - sent > 10:
                    raise SystemExit("p was not answered in 10 s")
                time.sleep(0.003)  # each look starts a tmux client: not back to back, on 2 cores
            answers.append(time.monotonic() - sent)
            time.sleep(0.5)
    return answers


def paint_and_keys(
    url: str, scratch: Path, launches: int, presses: int
) -> tuple[list[float], list[float], list[float]]:
    """First paint and fresh data of each launch; the keys timed on the last one."""
    painted: list[float] = []
    fresh: list[float] = []
    answers: list[float] = []
    for launch in range(launches):
        paint_s, fresh_s, term = first_paint(url, scratch)
        painted.append(paint_s)
        fresh.append(fresh_s)
        try:
            if launch == launches - 1:
                time.sleep(3)
                answers = key_answers(term, presses)
        finally:
            term.close()
    return painted, fresh, answers


def spread(values: list[float], digits: int) -> str:
    return (
        f"{statistics.median(values):.{digits}f} ("
        + ", ".join(f"{v:.{digits}f}" for v in values)
        + ")"
    )


def ratio(mine: list[float], theirs: list[float]) -> str:
    base = statistics.median(theirs)
    return f"{statistics.median(mine) / base:.2f}×" if base > 0 else "n/a"


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="span of each measurement")
    parser.add_argument("--runs", type=int, default=3, help="spans measured one after another")
    parser.add_argument(
        "--settle", type=float, default=80.0, help="seconds attached before the first span"
    )
    parser.add_argument("--clients", type=int, default=16, help="streams kept in flight")
    parser.add_argument("--launches", type=int, default=3, help="launches timed to first paint")
    parser.add_argument("--keys", type=int, default=10, help="pause/resume pairs timed")
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--output-tokens", type=int, default=256)
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed")
    htop = vllm_htop()
    warm_up()
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load_average()} "
        "at the start (the machine may be shared: compare the ratios, measured side by side)"
    )
    print(
        f"terminal 160x50, default refresh; {args.clients} streams of {args.prompt_tokens} prompt "
        f"+ {args.output_tokens} output tokens; spans of {args.seconds:g} s; medians (runs)"
    )
    with tempfile.TemporaryDirectory(prefix="slotop-bench-") as folder:
        scratch = Path(folder)
        replica = VllmReplica(
            build_tiny_model(scratch / "tiny-llama"),
            scratch / "vllm.log",
            ReplicaFlags(max_model_len=1024),
        )
        with replica:
            url = replica.url
            with clients(url, args.clients, args.prompt_tokens, args.output_tokens):
                runs = side_by_side(url, htop, args, scratch)
                painted, fresh, answers = paint_and_keys(url, scratch, args.launches, args.keys)
            probed = side_by_side(url, htop, args, scratch, probe_at=args.clients)
    print()
    print(f"{'':34} {'CPU, % of one core':<32} {'bytes/s to the terminal':<36}")
    table(f"slotop attach ({args.clients} outside streams)", runs)
    if probed:
        print()
        table(f"slotop attach, its probe at {args.clients}", probed, probe=True)
    print()
    print(
        f"first paint (every pane drawn) {spread(painted, 2)} s, fresh data {spread(fresh, 2)} s "
        f"after launch ({len(painted)} launches, under load)"
    )
    ranked = sorted(answers)
    print(
        f"p answered on screen: median {statistics.median(answers) * 1e3:.0f} ms, "
        f"90th percentile {ranked[int(0.9 * (len(ranked) - 1))] * 1e3:.0f} ms, "
        f"max {ranked[-1] * 1e3:.0f} ms over {len(answers)} presses (under load)"
    )
    print(f"load average at the end {load_average()}")


def table(title: str, runs: list[RunFigures], *, probe: bool = False) -> None:
    """Print one block of the table: slotop (and its probe), vllm-htop, their ratio."""
    mine = [r.slotop_cpu for r in runs]
    mine_bps = [r.slotop_tty_bps for r in runs]
    htop = [r.htop_cpu for r in runs]
    htop_bps = [r.htop_tty_bps for r in runs]
    print(title)
    print(f"  {'slotop':32} {spread(mine, 2):<32} {spread(mine_bps, 0):<36}")
    main = [r.slotop_main_cpu for r in runs]
    rest = [r.slotop_cpu - r.slotop_main_cpu for r in runs]
    print(f"  {'  of which its main thread (UI)':32} {spread(main, 2):<32}")
    print(f"  {'  its other threads (polls, I/O)':32} {spread(rest, 2):<32}")
    if probe:
        child = [r.probe_cpu for r in runs]
        both = [r.slotop_cpu + r.probe_cpu for r in runs]
        print(f"  {'its probe (child process)':32} {spread(child, 2):<32}")
        print(f"  {'slotop + probe':32} {spread(both, 2):<32}")
    print(f"  {'vllm-htop --interval 1':32} {spread(htop, 2):<32} {spread(htop_bps, 0):<36}")
    print(
        f"  {'ratio slotop / vllm-htop':32} {ratio(mine, htop):<32} {ratio(mine_bps, htop_bps):<36}"
    )
    recording = [r.recording_bps for r in runs]
    print(f"  (slotop's session recording, not counted above: {spread(recording, 0)} bytes/s)")


if __name__ == "__main__":
    main()
