"""Start, restart and stop a real vLLM CPU replica serving a tiny dummy-weight Llama, for tests.

Plain Python (no pytest) so tests, benches and the fixture-capture script share it. The replica
runs in its own process group under the vLLM virtual environment's Python and is always stopped
(SIGTERM, then SIGKILL) when the caller is done or the interpreter exits.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, ClassVar, Self

import httpx

from slotop.actions.replica.process import group_exists, root_cause
from slotop.actions.replica.spec import LaunchSpec
from slotop.config import LAUNCH_DIAL_FLAGS
from tests.support.paths import REPO_ROOT, TINY_MODEL_SCRIPT

SERVED_MODEL_NAME = "tiny-llama"
MIB = 1024 * 1024

# Token ids 0-2 are <unk>, <s>, </s>; prompts use ids from this range so they decode to text.
_PROMPT_TOKEN_LOW = 3
_PROMPT_TOKEN_SPAN = 800

HIDE_AVX512 = os.environ.get("SLOTOP_VLLM_HIDE_AVX512") == "1"
"""Run the replicas as on a host without AVX-512 or AMX (tests/support/no_avx512): vLLM's CPU build
then refuses an fp8 KV cache, and the tests expect its rollback where they expect fp8 elsewhere."""
NO_AVX512 = Path(__file__).resolve().parent / "no_avx512"
FP8_REFUSED = "FP8 KV cache on CPU requires x86 with AVX-512 or AMX"
"""What vLLM 0.32's CPU build says when it refuses an fp8 KV cache."""

REPLICA_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONUNBUFFERED": "1",
    **({"PYTHONPATH": str(NO_AVX512)} if HIDE_AVX512 else {}),
}


class ReplicaError(RuntimeError):
    """The vLLM replica could not be built, started or stopped; the message carries its log tail."""


def vllm_python() -> Path | None:
    """Return the vLLM venv's Python: $SLOTOP_VLLM_PYTHON, else <repo>/.venv-vllm/bin/python."""
    override = os.environ.get("SLOTOP_VLLM_PYTHON")
    if override:
        return Path(override)
    default = REPO_ROOT / ".venv-vllm" / "bin" / "python"
    return default if default.exists() else None


@functools.cache
def vllm_accepts_fp8_kv(python: Path | None = None) -> bool:
    """Whether this host's vLLM CPU build starts with an fp8 KV cache: the checks it makes
    itself (torch's AVX-512 and AMX tests, in the replicas' environment), asked in a second."""
    interpreter = _require_python(python)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(REPLICA_ENV)
    check = "import torch; c = torch.cpu; print(int(c._is_avx512_supported() or c._is_amx_tile_supported()))"
    result = subprocess.run(
        [str(interpreter), "-c", check], capture_output=True, text=True, env=env, timeout=120
    )
    if result.returncode != 0:
        raise ReplicaError(f"could not ask vLLM's torch about the CPU:\n{result.stderr}")
    return result.stdout.strip() == "1"


def _require_python(python: Path | None) -> Path:
    """Return python, or the discovered vLLM Python, or raise saying how to install one."""
    found = python or vllm_python()
    if found is None or not found.exists():
        raise ReplicaError(
            f"no vLLM Python at {found or '.venv-vllm/bin/python'}: run .ci/install-vllm "
            "or set SLOTOP_VLLM_PYTHON"
        )
    return found


def build_tiny_model(dest: Path, python: Path | None = None) -> Path:
    """Write the tiny Llama config and tokenizer into dest (byte-identical each run) and return it."""
    interpreter = _require_python(python)
    result = subprocess.run(
        [str(interpreter), str(TINY_MODEL_SCRIPT), str(dest)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise ReplicaError(f"tiny model generation failed ({result.returncode}):\n{result.stderr}")
    return dest


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True, slots=True)
class ReplicaFlags:
    """The `vllm serve` flags a test may vary; None leaves vLLM's default."""

    kv_cache_memory_bytes: int = 64 * MIB
    kv_cache_dtype: str = "auto"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int = 1024
    block_size: int | None = None
    extra_args: tuple[str, ...] = ()

    def to_args(self) -> list[str]:
        """Return these flags as command-line arguments."""
        args = [
            f"--kv-cache-memory-bytes={self.kv_cache_memory_bytes}",
            f"--kv-cache-dtype={self.kv_cache_dtype}",
            f"--max-model-len={self.max_model_len}",
        ]
        if self.max_num_seqs is not None:
            args.append(f"--max-num-seqs={self.max_num_seqs}")
        if self.max_num_batched_tokens is not None:
            args.append(f"--max-num-batched-tokens={self.max_num_batched_tokens}")
        if self.block_size is not None:
            args.append(f"--block-size={self.block_size}")
        return [*args, *self.extra_args]


_LIVE: set[ServerProcess] = set()
_LIVE_LOCK = threading.Lock()


def _stop_all_live() -> None:
    """Stop every replica still running when the interpreter exits."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for replica in live:
        replica.stop()


atexit.register(_stop_all_live)


class ServerProcess:
    """One engine's OpenAI-compatible server on a loopback port, in a process group of its own,
    started (waiting for /health) and stopped on demand; `argv` says what runs (VllmReplica,
    SglangReplica), `NAME` what to call it and `ENV` what its environment adds."""

    NAME: ClassVar[str] = "server"
    ENV: ClassVar[Mapping[str, str]] = MappingProxyType({})

    def __init__(
        self,
        model_dir: Path,
        log_path: Path,
        flags: Any = None,
        *,
        python: Path | None = None,
        port: int | None = None,
        startup_timeout_s: float = 240.0,
        stop_grace_s: float = 15.0,
    ) -> None:
        self.model_dir = model_dir
        self.log_path = log_path
        self.flags = flags if flags is not None else self.default_flags()
        self.python = self.engine_python(python)
        self.port = port or free_port()
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.last_startup_s: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    @classmethod
    def default_flags(cls) -> Any:
        """The flags a test that names none starts with."""
        raise NotImplementedError

    @classmethod
    def engine_python(cls, python: Path | None) -> Path:
        """`python`, or the engine's own environment's, or an error saying how to install it."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """Base URL of the server, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the API server process (also its process group id), or None when stopped."""
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def argv(self) -> list[str]:
        """Return the full command line this server starts with."""
        raise NotImplementedError

    def start(self) -> None:
        """Start the server and wait until /health answers, or raise with the log tail."""
        if self.running:
            raise ReplicaError(f"{self.NAME} on {self.url} is already running")
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(self.ENV)
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
        """Poll /health until it answers 200, the process dies, or the timeout passes."""
        assert self._process is not None
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self._process.poll()
                if code is not None:
                    cause = root_cause(self.log_text()) or "the log names no error"
                    raise ReplicaError(
                        f"{self.NAME} exited with {code} before /health answered ({cause}); "
                        f"log tail:\n{self.log_tail()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                if time.monotonic() - started > self.startup_timeout_s:
                    raise ReplicaError(
                        f"{self.NAME} not healthy after {self.startup_timeout_s:.0f} s; "
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
        # Children (the engine core, resource tracker) may outlive the server by a moment.
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

    def log_text(self) -> str:
        """Return the log written since the latest start."""
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")

    def log_tail(self, lines: int = 40) -> str:
        """Return the last lines of the log written since the latest start."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class VllmReplica(ServerProcess):
    """One vLLM OpenAI-compatible server on a loopback port, started and stopped on demand."""

    NAME = "vLLM replica"
    ENV = REPLICA_ENV

    flags: ReplicaFlags

    @classmethod
    def default_flags(cls) -> ReplicaFlags:
        return ReplicaFlags()

    @classmethod
    def engine_python(cls, python: Path | None) -> Path:
        return _require_python(python)

    def argv(self) -> list[str]:
        """Return the full command line this replica starts with."""
        return [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            f"--model={self.model_dir}",
            f"--served-model-name={SERVED_MODEL_NAME}",
            "--load-format=dummy",
            "--dtype=float32",
            "--enforce-eager",
            "--distributed-executor-backend=uni",
            "--seed=0",
            "--host=127.0.0.1",
            f"--port={self.port}",
            *self.flags.to_args(),
        ]


def managed_spec(model_dir: Path, log_path: Path, state_path: Path) -> LaunchSpec:
    """The tiny replica as slotop's [launch] starts and restarts it: this helper's command
    without the dial flags slotop adds itself, on a free port."""
    helper = VllmReplica(model_dir, log_path, ReplicaFlags(), port=free_port())
    command = tuple(a for a in helper.argv() if not a.startswith(LAUNCH_DIAL_FLAGS))
    return LaunchSpec(
        url=helper.url,
        command=command,
        env=tuple(REPLICA_ENV.items()),
        log_path=log_path,
        state_path=state_path,
        health_timeout_s=300.0,
        stop_grace_s=15.0,
    )


def proc_stats() -> dict[int, tuple[str, int, int]]:
    """Return state, parent PID and process group of every process, read from /proc."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the parenthesised command: state ppid pgrp ...
        fields = stat[stat.rindex(")") + 2 :].split()
        stats[int(entry.name)] = (fields[0], int(fields[1]), int(fields[2]))
    return stats


def live_descendants(pid: int) -> list[int]:
    """Return pid and every live (non-zombie) process below it or in its process group."""
    stats = proc_stats()
    found = {pid} if pid in stats else set()
    found |= {other for other, (_, _, pgrp) in stats.items() if pgrp == pid}
    grew = True
    while grew:
        children = {other for other, (_, ppid, _) in stats.items() if ppid in found}
        grew = not children <= found
        found |= children
    return sorted(other for other in found if stats[other][0] != "Z")


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and every live process below it or in its group (a browser, an
    engine's workers), each read from its own /proc/PID/stat, which counts its threads once."""
    total = 0.0
    for member in live_descendants(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def still_alive(pids: Sequence[int]) -> list[int]:
    """Return those of pids that still exist and are not zombies."""
    stats = proc_stats()
    return [pid for pid in pids if pid in stats and stats[pid][0] != "Z"]


# ---- streaming load -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One streamed completion as the client saw it; ttft_s is None when no text came."""

    ttft_s: float | None
    e2e_s: float
    chunk_count: int
    completion_tokens: int | None
    text: str
    error: str | None


@dataclass(frozen=True, slots=True)
class LoadResult:
    """Every request of one load run, with its wall time."""

    records: tuple[RequestRecord, ...]
    wall_s: float

    @property
    def ok_count(self) -> int:
        """Number of requests that finished without error."""
        return sum(1 for record in self.records if record.error is None)

    @property
    def errors(self) -> list[str]:
        """The error messages of the failed requests."""
        return [record.error for record in self.records if record.error is not None]


def prompt_token_ids(index: int, prompt_tokens: int) -> list[int]:
    """Return a deterministic token-id prompt, distinct per request index (no prefix-cache hits)."""
    return [
        _PROMPT_TOKEN_LOW
        + (index * 7919 + position * 31 + position * position) % _PROMPT_TOKEN_SPAN
        for position in range(prompt_tokens)
    ]


def stream_completion(
    client: httpx.Client,
    url: str,
    prompt: Sequence[int],
    max_tokens: int,
    model: str = SERVED_MODEL_NAME,
) -> RequestRecord:
    """Send one streaming /v1/completions request and time its chunks."""
    body = {
        "model": model,
        "prompt": list(prompt),
        "max_tokens": max_tokens,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0.0,
        "stream_options": {"include_usage": True},
    }
    started = time.monotonic()
    ttft_s: float | None = None
    chunk_count = 0
    completion_tokens: int | None = None
    pieces: list[str] = []
    try:
        with client.stream("POST", f"{url}/v1/completions", json=body) as response:
            if response.status_code != 200:
                response.read()
                raise ReplicaError(f"HTTP {response.status_code}: {response.text[:200]}")
            for line in _data_lines(response.iter_lines()):
                chunk = json.loads(line)
                if chunk.get("usage"):
                    completion_tokens = chunk["usage"]["completion_tokens"]
                text = "".join(choice.get("text") or "" for choice in chunk.get("choices", ()))
                if text:
                    if ttft_s is None:
                        ttft_s = time.monotonic() - started
                    chunk_count += 1
                    pieces.append(text)
    except (httpx.HTTPError, ReplicaError, ValueError, KeyError) as error:
        failure: str | None = f"{type(error).__name__}: {error}"
    else:
        failure = None
    e2e_s = time.monotonic() - started
    return RequestRecord(ttft_s, e2e_s, chunk_count, completion_tokens, "".join(pieces), failure)


def _data_lines(lines: Iterator[str]) -> Iterator[str]:
    """Yield the payloads of server-sent-event data lines up to [DONE]."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            return
        yield payload


def drive_load(
    url: str,
    concurrency: int,
    requests: int,
    max_tokens: int,
    prompt_tokens: int,
    *,
    model: str = SERVED_MODEL_NAME,
    timeout_s: float = 600.0,
    stop: threading.Event | None = None,
) -> LoadResult:
    """Send `requests` streaming completions, `concurrency` at a time, and return their records;
    once `stop` is set, the requests not yet sent are not sent (those in flight finish)."""
    started = time.monotonic()
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    def one(client: httpx.Client, index: int) -> RequestRecord | None:
        if stop is not None and stop.is_set():
            return None
        return stream_completion(
            client, url, prompt_token_ids(index, prompt_tokens), max_tokens, model
        )

    with (
        httpx.Client(timeout=timeout_s, limits=limits) as client,
        ThreadPoolExecutor(max_workers=concurrency) as pool,
    ):
        futures = [pool.submit(one, client, index) for index in range(requests)]
        records = tuple(r for r in (future.result() for future in futures) if r is not None)
    return LoadResult(records, time.monotonic() - started)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the tiny model until Ctrl-C: `python -m tests.support.vllm_replica [MODEL_DIR]`."""
    args = list(sys.argv[1:] if argv is None else argv)
    model_dir = Path(args[0]) if args else REPO_ROOT / "var" / "tiny-llama"
    build_tiny_model(model_dir)
    replica = VllmReplica(model_dir, model_dir.parent / "vllm-replica.log")
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
