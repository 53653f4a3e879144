"""Entry points behind `slotop [attach] [URL]` and `slotop demo`: build the session, run the app.

`demo` starts the simulated replica through the managed-replica path (so k / n / b can restart
it) on a free loopback port, and stops it, its whole process group, when the app ends: by q, by
an error, or by SIGHUP / SIGTERM (a closed SSH session).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import resource_tracker
from pathlib import Path

import httpx
from textual.message import Message

from slotop.actions.replica.journal import found_cut_restart
from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import demo_launch_spec, launch_spec_from_settings
from slotop.actions.session.recorder import (
    RecordChoice,
    SessionRecorder,
    open_recording,
)
from slotop.actions.session.taps import RecordingGpu, record_monitor
from slotop.actions.sweep.runner import MonitorWatch
from slotop.actions.wiring.replica import probe_control, replica_monitor, with_url
from slotop.actions.wiring.restart import restart_target
from slotop.collectors.gpu.reader import GpuReader
from slotop.config import ReplicaSettings, Settings
from slotop.errors import ConfigError, SlotopError
from slotop.redact import password_warning
from slotop.tui.app import SlotopApp
from slotop.tui.feed import Feed
from slotop.tui.restarting import AccessFinder, RestartAccess

DEFAULT_URL = ReplicaSettings().url
SCAN_PORTS = (*range(8000, 8016), 30000)
"""vLLM's default port and the fifteen after it, and SGLang's default port."""
SIGNAL_EXIT_GRACE_S = 5.0
"""After SIGHUP/SIGTERM, how long the demo waits for an orderly exit before leaving without it."""


SCAN_TIMEOUT_S = 2.0
"""How long a port that took the connection has to answer /metrics: a replica busy serving, or on a
busy machine, can take a few tenths of a second (0.3 s missed one in a loaded test run)."""


def answers_like_a_replica(url: str, timeout_s: float = SCAN_TIMEOUT_S) -> bool:
    """Whether a URL answers /metrics with vLLM's or SGLang's metric names."""
    try:
        response = httpx.get(f"{url}/metrics", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and ("vllm:" in response.text or "sglang:" in response.text)


def find_local_replicas(ports: Sequence[int] = SCAN_PORTS) -> list[str]:
    """Loopback URLs on the given ports that answer like vLLM or SGLang, asked all at once, so the
    scan takes one answer's time at most however many ports are open."""
    urls = []
    for port in ports:
        with socket.socket() as sock:
            sock.settimeout(0.05)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                urls.append(f"http://127.0.0.1:{port}")
    if not urls:
        return []
    with ThreadPoolExecutor(max_workers=len(urls)) as pool:
        answers = list(pool.map(answers_like_a_replica, urls))
    return [url for url, answers_metrics in zip(urls, answers, strict=True) if answers_metrics]


def build_app(
    settings: Settings,
    *,
    simulated: bool = False,
    start_probe_at: int | None = None,
    restart_access: AccessFinder | None = None,
    recorder: SessionRecorder | None = None,
    warnings: tuple[str, ...] = (),
) -> SlotopApp:
    """The app wired to the real replica client, NVML reader and probe, recording to `recorder`;
    `warnings` open its timeline."""
    # The probe is spawned from a worker thread while Textual has replaced sys.stderr with an
    # object without a file descriptor; the resource tracker must exist before that.
    resource_tracker.ensure_running()
    replica = settings.replica
    control = probe_control(settings, Path.cwd(), recorder=recorder)
    slo = settings.slo

    def feed_factory(post: Callable[[Message], object]) -> Feed:
        gpu = GpuReader(device_indices=settings.gpu.indices or None)
        return Feed(
            record_monitor(replica_monitor(settings), recorder),
            post,
            gpu=RecordingGpu(gpu, recorder) if recorder is not None else gpu,
            probe=control,
            scrape_interval_s=replica.scrape_interval_s,
            refresh_s=settings.tui.refresh_s,
            long_window_s=settings.window.long_s,
            short_window_s=settings.window.short_s,
            slo_percentiles=(slo.ttft_percentile, slo.itl_percentile),
            goodput_targets=slo.goodput_targets,
            recorder=recorder,
        )

    def sweep_watch() -> MonitorWatch:
        return MonitorWatch(replica_monitor(settings))

    return SlotopApp(
        settings,
        feed_factory=feed_factory,
        sweep_watch=sweep_watch,
        restart_access=restart_access or restart_finder(settings),
        probe_control=control,
        simulated=simulated,
        start_probe_at=start_probe_at,
        recorder=recorder,
        warnings=warnings,
    )


def replica_to_watch(settings: Settings, url: str | None) -> str | None:
    """The replica to attach to: `url` when given; without one, and with nothing answering at
    the default, the one vLLM or SGLang replica on the local ports. None (with a note) when none answers:
    the settings' URL then stands, stale until one answers. Several is a ConfigError naming each.
    """
    if (
        url is not None
        or settings.replica.url != DEFAULT_URL
        or answers_like_a_replica(DEFAULT_URL)
    ):
        return url
    found = find_local_replicas()
    if len(found) == 1:
        return found[0]
    if found:
        raise ConfigError(f"several replicas answer here; name one: {', '.join(found)}")
    print(
        f"slotop: no vLLM or SGLang replica answers at {DEFAULT_URL} or on ports "
        "8000-8015 and 30000; attaching anyway (it shows as "
        "stale until one answers). `slotop demo` runs a simulated one.",
        file=sys.stderr,
    )
    return None


def attach(
    settings: Settings,
    url: str | None,
    *,
    record: RecordChoice | None = None,
    command: str = "attach",
) -> int:
    """Run the dashboard on a replica; with no URL and nothing at the default, scan local ports.

    The session is recorded as `record` says (by default to a fresh file in the default folder).
    """
    url = replica_to_watch(settings, url)
    if url is not None:
        settings = with_url(settings, url)
    warnings = attach_warnings(settings)
    for warning in warnings:
        if warning != password_warning(settings.replica.url):  # the command line said that one
            print(f"slotop: {warning}", file=sys.stderr)
    recorder = open_recording(record or RecordChoice(), command=command, settings=settings)
    try:
        result = build_app(settings, recorder=recorder, warnings=warnings).run()
    finally:
        if recorder is not None:
            recorder.close()
    return result or 0


def attach_warnings(settings: Settings) -> tuple[str, ...]:
    """What the dashboard's timeline opens with: a password in the URL, and a restart a killed
    slotop cut off on this replica (what runs now, and the way back)."""
    found: list[str] = []
    warning = password_warning(settings.replica.url)
    if warning is not None:
        found.append(warning)
    spec = launch_spec_from_settings(settings)
    if spec.state_path.exists():
        try:
            found_cut_restart(spec, lambda line: found.append(line.strip()))
        except SlotopError as exc:  # a damaged state file is for `slotop restart` to refuse
            found.append(str(exc))
    return tuple(found)


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def restart_finder(settings: Settings) -> AccessFinder:
    """Find, at key press, a replica this session may restart (slotop's own, or by command)."""

    def find() -> RestartAccess | str:
        spec = launch_spec_from_settings(settings)
        try:
            target, _, how = restart_target(spec)
        except SlotopError as exc:
            return str(exc)
        return RestartAccess(target, spec, how)

    return find


def demo(
    settings: Settings,
    sim_args: Sequence[str],
    concurrency: int | None = None,
    *,
    record: RecordChoice | None = None,
) -> int:
    """Start the simulated replica as a managed child, attach with load on, stop it at the end."""
    start_at = concurrency if concurrency is not None else settings.tui.demo_concurrency
    folder = Path(tempfile.mkdtemp(prefix="slotop-demo-"))
    url = f"http://127.0.0.1:{free_port()}"
    spec, dials = demo_launch_spec(url, sim_args, folder)
    replica = ManagedReplica(spec)

    running: list[SlotopApp] = []
    recorder: SessionRecorder | None = None

    def stop_and_exit(signum: int, _: object) -> None:
        app = running[0] if running else None
        if app is None or not app.is_running:
            replica.stop()
            raise SystemExit(128 + signum)
        # Let Textual end in order, and the finally below stop the replica. call_from_thread
        # wakes the app's loop; a signal handler runs on the app's own thread, hence a helper.
        threading.Thread(
            target=app.call_from_thread, args=(app.exit, None, 128 + signum), daemon=True
        ).start()
        # With the terminal gone, Textual's shutdown can hang (its writer waits on a dead
        # terminal, its input thread spins on one): if the process is still here after a grace,
        # stop the replica and leave without it.
        threading.Thread(target=leave_after_grace, args=(128 + signum,), daemon=True).start()

    def leave_after_grace(code: int) -> None:
        time.sleep(SIGNAL_EXIT_GRACE_S)
        if recorder is not None:
            recorder.close("signal")
        replica.stop()
        shutil.rmtree(folder, ignore_errors=True)
        os._exit(code)

    previous = {sig: signal.signal(sig, stop_and_exit) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        print(f"slotop demo: starting the simulated replica on {url} …", file=sys.stderr)
        replica.start(dials)
        access = RestartAccess(replica, spec, "managed")
        settings = with_url(settings, url)
        recorder = open_recording(record or RecordChoice(), command="demo", settings=settings)
        app = build_app(
            settings,
            simulated=True,
            start_probe_at=start_at,
            restart_access=lambda: access,
            recorder=recorder,
        )
        running.append(app)
        result = app.run()
        if app.return_code:
            return app.return_code
    finally:
        if recorder is not None:
            recorder.close()
        replica.stop()
        shutil.rmtree(folder, ignore_errors=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return result or 0
