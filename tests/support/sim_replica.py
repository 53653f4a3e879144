"""The simulated replica as a subprocess for tests: start it on a free port, wait, stop it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support.vllm_replica import free_port


def run_sim(*flags: str, model: str = "qwen2.5-0.5b", timeout_s: float = 60.0) -> Iterator[str]:
    """Yield the URL of `python -m slotop.sim` started with ``flags``; stop it afterwards."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "slotop.sim", "--port", str(port), "--model", model, *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                assert process.stderr is not None
                pytest.fail(f"the simulated replica exited: {process.stderr.read()!r}")
            try:
                if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the simulated replica did not answer within {timeout_s:g} s")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)
