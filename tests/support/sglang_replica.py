"""Start, restart and stop a real SGLang CPU server serving the tiny dummy-weight Llama, for tests.

The SGLang counterpart of `vllm_replica`: the same tiny model (`build_tiny_model`, run by the
SGLang venv's Python), the same served name and the same streaming load (`drive_load`). The server
runs in its own process group under the SGLang virtual environment's Python (.ci/install-sglang)
and is always stopped (SIGTERM, then SIGKILL) when the caller is done or the interpreter exits.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from slotop.actions.replica.process import group_exists, root_cause
from slotop.config import SGLANG_DIAL_FLAGS
from tests.support.paths import REPO_ROOT
from tests.support.vllm_replica import SERVED_MODEL_NAME, ReplicaError, build_tiny_model, free_port

SGLANG_ENV = {
    "SGLANG_USE_CPU_ENGINE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
}

FP8_REFUSED = "is not supported on CPU"
"""What SGLang 0.5.23 says when it refuses `--kv-cache-dtype fp8_e5m2`, on any CPU, before /health
answers (`... fp8_e5m2 is not supported on CPU.`). It refuses `fp8_e4m3` on a CPU without AMX
(`CPU FP8 KV cache requires Intel AMX support.`); `bf16` starts."""


def sglang_python() -> Path | None:
    """Return the SGLang venv's Python: $SLOTOP_SGLANG_PYTHON, else <repo>/.venv-sglang/bin/python."""
    override = os.environ.get("SLOTOP_SGLANG_PYTHON")
    if override:
        return Path(override)
    default = REPO_ROOT / ".venv-sglang" / "bin" / "python"
    return default if default.exists() else None


def _require_python(python: Path | None) -> Path:
    """Return python, or the discovered SGLang Python, or raise saying how to install one."""
    found = python or sglang_python()
    if found is None or not found.exists():
        raise ReplicaError(
            f"no SGLang Python at {found or '.venv-sglang/bin/python'}: run .ci/install-sglang "
            "or set SLOTOP_SGLANG_PYTHON"
        )
    return found


def managed_sglang_settings(
    model_dir: Path, log_path: Path, python: Path | None = None
) -> dict[str, Any]:
    """A slotop.toml's [replica] and [launch] for the tiny server as slotop's own managed
    replica: this helper's command without the dial flags slotop adds, on a free port."""
    helper = SglangReplica(model_dir, log_path, SglangFlags(), python=python, port=free_port())
    command = [a for a in helper.argv() if not a.startswith(SGLANG_DIAL_FLAGS)]
    return {
        "replica": {"url": helper.url},
        "launch": {
            "command": command,
            "env": SGLANG_ENV,
            "log_file": str(log_path),
            "health_timeout_s": 240.0,
            "stop_grace_s": 15.0,
        },
    }


def build_tiny_model_for_sglang(dest: Path, python: Path | None = None) -> Path:
    """Write the tiny Llama into dest with the SGLang venv's Python (it has `tokenizers`)."""
    return build_tiny_model(dest, _require_python(python))


@dataclass(frozen=True, slots=True)
class SglangFlags:
    """The `sglang.launch_server` flags a test may vary; None leaves SGLang's default."""

    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    kv_cache_dtype: str = "auto"
    max_total_tokens: int = 4096
    extra_args: tuple[str, ...] = ()

    def to_args(self) -> list[str]:
        """Return these flags as command-line arguments."""
        args = [
            f"--kv-cache-dtype={self.kv_cache_dtype}",
            f"--max-total-tokens={self.max_total_tokens}",
        ]
        if self.max_running_requests is not None:
            args.append(f"--max-running-requests={self.max_running_requests}")
        if self.chunked_prefill_size is not None:
            args.append(f"--chunked-prefill-size={self.chunked_prefill_size}")
        return [*args, *self.extra_args]


_LIVE: set[SglangReplica] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all_live() -> None:
    """Stop every server still running when the interpreter exits."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for replica in live:
        replica.stop()


atexit.register(_stop_all_live)


class SglangReplica:
    """One SGLang OpenAI-compatible server on a loopback port, started and stopped on demand."""

    def __init__(
        self,
        model_dir: Path,
        log_path: Path,
        flags: SglangFlags | None = None,
        *,
        python: Path | None = None,
        port: int | None = None,
        startup_timeout_s: float = 240.0,
        stop_grace_s: float = 15.0,
    ) -> None:
        self.model_dir = model_dir
        self.log_path = log_path
        self.flags = flags or SglangFlags()
        self.python = _require_python(python)
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.last_startup_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @property
    def url(self) -> str:
        """Base URL of the server, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the HTTP server process (also its process group id), or None when stopped."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def argv(self) -> list[str]:
        """Return the full command line this server starts with."""
        return [
            str(self.python),
            "-m",
            "sglang.launch_server",
            f"--model-path={self.model_dir}",
            f"--served-model-name={SERVED_MODEL_NAME}",
            "--load-format=dummy",
            "--dtype=float32",
            "--device=cpu",
            "--attention-backend=torch_native",
            "--enable-metrics",
            "--random-seed=0",
            "--host=127.0.0.1",
            f"--port={self.port}",
            *self.flags.to_args(),
        ]

    def start(self) -> None:
        """Start the server and wait until /health answers, or raise with the log tail."""
        if self.running:
            raise ReplicaError(f"SGLang server on {self.url} is already running")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(SGLANG_ENV)
        argv = self.argv()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"\n=== slotop test replica: {' '.join(argv)}\n".encode())
            log.flush()
            self._log_offset = log.tell()
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.log_path.parent,
                env=env,
                start_new_session=True,
            )
        with _LIVE_LOCK:
            _LIVE.add(self)
        started = time.monotonic()
        try:
            self._wait_healthy(started)
        except BaseException:
            self.stop()
            raise
        self.last_startup_s = time.monotonic() - started

    def _wait_healthy(self, started: float) -> None:
        """Poll /health until it answers 200 (SGLang says 503 until its warm-up request is
        done), the process dies, or the timeout passes."""
        assert self._process is not None
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self._process.poll()
                if code is not None:
                    cause = root_cause(self.log_text()) or "the log names no error"
                    raise ReplicaError(
                        f"SGLang server exited with {code} before /health answered ({cause}); "
                        f"log tail:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                if time.monotonic() - started > self.startup_timeout_s:
                    raise ReplicaError(
                        f"SGLang server not healthy after {self.startup_timeout_s:.0f} s; "
                        f"log tail:\n{self.log_tail()}"
                    )
                time.sleep(0.5)

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after the grace period."""
        process = self._process
        if process is None:
            return
        pgid = process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            process.wait(timeout=self.stop_grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            process.wait(timeout=30)
        # The scheduler, detokenizer and resource tracker may outlive the server by a moment.
        deadline = time.monotonic() + self.stop_grace_s
        while group_exists(pgid):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
                break
            time.sleep(0.1)
        self._process = None
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def restart(self, **changes: object) -> None:
        """Stop, replace the named SglangFlags fields, and start again on the same port; a start
        that fails leaves the flags as they were, so the next start is the last good one."""
        self.stop()
        before = self.flags
        self.flags = dataclasses.replace(self.flags, **changes)  # type: ignore[arg-type]
        try:
            self.start()
        except ReplicaError:
            self.flags = before
            raise

    def log_text(self) -> str:
        """Return the log written since the latest start."""
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        """Return the last lines of the log written since the latest start."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def __enter__(self) -> SglangReplica:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """Serve the tiny model until Ctrl-C: `python -m tests.support.sglang_replica [MODEL_DIR]`."""
    args = list(sys.argv[1:] if argv is None else argv)
    model_dir = Path(args[0]) if args else REPO_ROOT / "var" / "tiny-llama-sglang"
    build_tiny_model_for_sglang(model_dir)
    replica = SglangReplica(model_dir, model_dir.parent / "sglang-replica.log")
    with replica:
        print(
            f"serving {SERVED_MODEL_NAME} at {replica.url} (log {replica.log_path}); Ctrl-C stops"
        )
        with contextlib.suppress(KeyboardInterrupt):
            while replica.running:
                time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
