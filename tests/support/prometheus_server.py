"""A real Prometheus server for tests and benches: started by hand on a free loopback port.

The binary is Debian's `prometheus` package (`.ci/run` installs it), or $SLOTOP_PROMETHEUS. It
runs with a temporary storage folder and a scrape interval of its own (1 s by default), never as
the package's service. Without the binary a test skips, except under CI=true, where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.vllm_replica import free_port

PROMETHEUS_ENV = "SLOTOP_PROMETHEUS"


def prometheus_binary() -> str | None:
    """The Prometheus binary: $SLOTOP_PROMETHEUS, else `prometheus` on PATH (or /usr/bin)."""
    named = os.environ.get(PROMETHEUS_ENV)
    if named:
        return named
    return shutil.which("prometheus") or shutil.which("prometheus", path="/usr/bin:/usr/sbin")


def require_prometheus() -> str:
    """The binary, or skip the calling test without one (fail it under CI=true)."""
    binary = prometheus_binary()
    if binary is not None:
        return binary
    reason = "no prometheus binary (apt-get install prometheus, or set $SLOTOP_PROMETHEUS)"
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def scrape_config(targets: Sequence[str], *, interval_s: float, job: str = "vllm") -> str:
    """A prometheus.yml scraping `host:port` targets every `interval_s` under one job."""
    listed = ", ".join(f"'{target}'" for target in targets)
    interval = f"{max(1, round(interval_s * 1000))}ms"
    return (
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  evaluation_interval: {interval}\n"
        "scrape_configs:\n"
        f"  - job_name: '{job}'\n"
        f"    scrape_interval: {interval}\n"
        f"    scrape_timeout: {interval}\n"
        f"    static_configs:\n"
        f"      - targets: [{listed}]\n"
    )


@dataclass
class PrometheusServer:
    """A running server: its URL, its process and its folder."""

    url: str
    process: subprocess.Popen[bytes]
    folder: Path

    def up_targets(self) -> int:
        """How many targets answered their last scrape (`sum(up)`)."""
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": "sum(up)"}, timeout=5)
        result = response.json()["data"]["result"]
        return int(float(result[0]["value"][1])) if result else 0

    def wait_for_up(self, targets: int, timeout_s: float = 60.0) -> None:
        """Wait until `targets` targets have been scraped successfully."""
        deadline = time.monotonic() + timeout_s
        while self.up_targets() < targets:
            if time.monotonic() > deadline:
                pytest.fail(f"Prometheus did not scrape {targets} targets in {timeout_s:g} s")
            time.sleep(0.25)

    def query(self, query: str, at_s: float | None = None) -> list[dict[str, Any]]:
        """An instant query's result vector, evaluated at `at_s` (now by default)."""
        form = {"query": query} if at_s is None else {"query": query, "time": f"{at_s:.3f}"}
        body = httpx.post(f"{self.url}/api/v1/query", data=form, timeout=10).json()
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def counted(self, bucket: str, span: str, at_s: float) -> tuple[float, float]:
        """What Prometheus counts of one histogram over `span` at `at_s`: the increase of its
        `+Inf` bucket summed over its series (what a fleet row counts), and the most that
        increase may read above the raw count. `increase` extrapolates past the first and last
        samples to the window's edges, by up to 1.1 of the mean scrape gap at each end, so over
        n samples it reads at most 1 + 2.2/(n - 1) times the raw count. `bucket` is the series
        with its matchers, `name_bucket{le="+Inf", ...}`."""
        (increase,) = self.query(f"sum(increase({bucket}[{span}]))", at_s)
        (samples,) = self.query(f"min(count_over_time({bucket}[{span}]))", at_s)
        n = float(samples["value"][1])
        assert n >= 2, f"{bucket}: {n:g} samples in {span}"
        return float(increase["value"][1]), 1 + 2.2 / (n - 1)

    def log(self) -> str:
        """What the server wrote to its log."""
        path = self.folder / "prometheus.log"
        return path.read_text(errors="replace") if path.exists() else ""


def run_prometheus(
    targets: Sequence[str], *, interval_s: float = 1.0, timeout_s: float = 60.0
) -> Iterator[PrometheusServer]:
    """Yield a Prometheus scraping `targets` (`host:port`); stop it and remove its data after."""
    binary = require_prometheus()
    folder = Path(tempfile.mkdtemp(prefix="slotop-prometheus-"))
    config = folder / "prometheus.yml"
    config.write_text(scrape_config(targets, interval_s=interval_s), encoding="utf-8")
    port = free_port()
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    server = PrometheusServer(f"http://127.0.0.1:{port}", process, folder)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"prometheus exited ({process.returncode}):\n{server.log()}")
            try:
                if httpx.get(f"{server.url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus was not ready in {timeout_s:g} s:\n{server.log()}")
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
