"""Start, restart and stop a real SGLang CPU server serving the tiny dummy-weight Llama, for tests.

The SGLang counterpart of `vllm_replica`: the same tiny model (`build_tiny_model`, run by the
SGLang venv's Python), the same served name and the same streaming load (`drive_load`). The server
runs in its own process group under the SGLang virtual environment's Python (.ci/install-sglang)
and is always stopped (SIGTERM, then SIGKILL) when the caller is done or the interpreter exits.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotop.config import SGLANG_DIAL_FLAGS
from tests.support.paths import REPO_ROOT
from tests.support.vllm_replica import (
    SERVED_MODEL_NAME,
    ReplicaError,
    ServerProcess,
    build_tiny_model,
    free_port,
)

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


class SglangReplica(ServerProcess):
    """One SGLang OpenAI-compatible server on a loopback port, started and stopped on demand."""

    NAME = "SGLang server"
    ENV = SGLANG_ENV

    flags: SglangFlags

    @classmethod
    def default_flags(cls) -> SglangFlags:
        return SglangFlags()

    @classmethod
    def engine_python(cls, python: Path | None) -> Path:
        return _require_python(python)

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
            "--sleep-on-idle",  # its scheduler otherwise polls, a whole core, while no request runs
            "--random-seed=0",
            "--host=127.0.0.1",
            f"--port={self.port}",
            *self.flags.to_args(),
        ]


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
