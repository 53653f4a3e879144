"""Entry points behind `slotop [attach] [URL]` and `slotop demo`: build the session, run the app.

`demo` starts the simulated replica as a child process on a free loopback port and always stops
it when the app ends, however it ends; the child also dies with slotop if slotop is killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from multiprocessing import resource_tracker
from pathlib import Path

import httpx
from textual.message import Message

from slotop.actions.probe_control import (
    ProbeControl,
    load_shape_from_settings,
    probe_target_from_settings,
)
from slotop.actions.sweep_run import MonitorWatch
from slotop.collectors.gpu import GpuReader
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.replica import ReplicaClient, normalize_base_url
from slotop.config import Settings
from slotop.errors import SlotopError
from slotop.tui.app import SlotopApp
from slotop.tui.feed import Feed

DEFAULT_URL = "http://127.0.0.1:8000"
SCAN_PORTS = range(8000, 8016)
_PR_SET_PDEATHSIG = 1


class DemoError(SlotopError):
    """The simulated replica of `slotop demo` could not start."""


def answers_like_vllm(url: str, timeout_s: float = 0.3) -> bool:
    """Whether a URL answers /metrics with vLLM metric names."""
    try:
        response = httpx.get(f"{url}/metrics", timeout=timeout_s)
    except httpx.HTTPError:
        return False
    return response.status_code == 200 and "vllm:" in response.text


def find_local_replicas(ports: Sequence[int] = SCAN_PORTS) -> list[str]:
    """Loopback URLs on the given ports that answer like vLLM."""
    found = []
    for port in ports:
        with socket.socket() as sock:
            sock.settimeout(0.05)
            if sock.connect_ex(("127.0.0.1", port)) != 0:
                continue
        url = f"http://127.0.0.1:{port}"
        if answers_like_vllm(url):
            found.append(url)
    return found


def build_app(
    settings: Settings, *, simulated: bool = False, start_probe_at: int | None = None
) -> SlotopApp:
    """The app wired to the real replica client, NVML reader and probe."""
    # The probe is spawned from a worker thread while Textual has replaced sys.stderr with an
    # object without a file descriptor; the resource tracker must exist before that.
    resource_tracker.ensure_running()
    replica = settings.replica
    control = ProbeControl(
        probe_target_from_settings(settings),
        load_shape_from_settings(settings.load, Path.cwd()),
        settings.load.allow_remote_load,
    )
    slo = settings.slo

    def feed_factory(post: Callable[[Message], object]) -> Feed:
        client = ReplicaClient(replica.url, api_key=replica.api_key, timeout_s=replica.timeout_s)
        monitor = ReplicaMonitor(
            client,
            long_window_s=settings.window.long_s,
            short_window_s=settings.window.short_s,
            interval_s=replica.scrape_interval_s,
            ttft_percentile=slo.ttft_percentile,
            itl_percentile=slo.itl_percentile,
        )
        return Feed(
            monitor,
            post,
            gpu=GpuReader(device_indices=settings.gpu.indices or None),
            probe=control,
            scrape_interval_s=replica.scrape_interval_s,
            refresh_s=settings.tui.refresh_s,
            long_window_s=settings.window.long_s,
            short_window_s=settings.window.short_s,
            slo_percentiles=(slo.ttft_percentile, slo.itl_percentile),
            goodput_targets=(slo.ttft_ms / 1e3, slo.itl_ms / 1e3),
        )

    def sweep_watch() -> MonitorWatch:
        client = ReplicaClient(replica.url, api_key=replica.api_key, timeout_s=replica.timeout_s)
        return MonitorWatch(
            ReplicaMonitor(
                client,
                long_window_s=settings.window.long_s,
                short_window_s=settings.window.short_s,
                interval_s=replica.scrape_interval_s,
                ttft_percentile=slo.ttft_percentile,
                itl_percentile=slo.itl_percentile,
            )
        )

    return SlotopApp(
        settings,
        feed_factory=feed_factory,
        sweep_watch=sweep_watch,
        probe_control=control,
        simulated=simulated,
        start_probe_at=start_probe_at,
    )


def with_url(settings: Settings, url: str) -> Settings:
    """Settings pointing at another replica."""
    replica = dataclasses.replace(settings.replica, url=normalize_base_url(url))
    return dataclasses.replace(settings, replica=replica)


def attach(settings: Settings, url: str | None) -> int:
    """Run the dashboard on a replica; with no URL and nothing at the default, scan local ports."""
    if url is None and settings.replica.url == DEFAULT_URL and not answers_like_vllm(DEFAULT_URL):
        found = find_local_replicas()
        if len(found) == 1:
            url = found[0]
        elif found:
            print("slotop: several vLLM replicas answer here; pick one:", file=sys.stderr)
            for candidate in found:
                print(f"  slotop {candidate}", file=sys.stderr)
            return 2
        else:
            print(
                f"slotop: no vLLM replica answers at {DEFAULT_URL} or on ports "
                f"{SCAN_PORTS.start}-{SCAN_PORTS.stop - 1}; attaching anyway (it shows as "
                "stale until one answers). `slotop demo` runs a simulated one.",
                file=sys.stderr,
            )
    if url is not None:
        settings = with_url(settings, url)
    result = build_app(settings).run()
    return result or 0


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    """In the child: ask Linux to send SIGTERM when slotop dies (no-op elsewhere)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def simulated_replica(
    sim_args: Sequence[str], *, startup_timeout_s: float = 30.0
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run `slotop sim` on a free loopback port; yield its URL and process; always stop it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_fd, log_name = tempfile.mkstemp(prefix="slotop-demo-sim-", suffix=".log")
    log = os.fdopen(log_fd, "wb")
    command = [sys.executable, "-m", "slotop.sim", "--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(
        [*command, *sim_args],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
    )
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not _healthy(url):
            if process.poll() is not None:
                raise DemoError(
                    f"the simulated replica exited with code {process.returncode}; "
                    f"its log: {log_name}"
                )
            if time.monotonic() > deadline:
                raise DemoError(
                    f"the simulated replica did not answer in time; its log: {log_name}"
                )
            time.sleep(0.1)
        yield url, process
    finally:
        stop_process(process)
        log.close()
        with contextlib.suppress(OSError):
            if process.returncode in (0, -signal.SIGTERM):
                Path(log_name).unlink()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=0.5).status_code == 200
    except httpx.HTTPError:
        return False


def stop_process(process: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM, wait, then SIGKILL: the child never outlives this call."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def demo(settings: Settings, sim_args: Sequence[str], concurrency: int | None = None) -> int:
    """Start the simulated replica, attach with the probe on at a low concurrency, stop it at the end."""
    start_at = concurrency if concurrency is not None else settings.tui.demo_concurrency
    with simulated_replica(sim_args) as (url, _):
        app = build_app(with_url(settings, url), simulated=True, start_probe_at=start_at)
        result = app.run()
    return result or 0
