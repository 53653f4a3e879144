"""The simulated replica `slotop tune` is tested on: a KV pool that fills first, a low cap.

Llama-3.1-8B on a simulated H100 given 21.7% of its memory: 288 KV blocks at 16 bits (4,608
tokens), 577 at fp8 (`slotop sim --dry-run` says so), and max_num_seqs 6. A probe request holds
1,024 prompt and 32 output tokens (66 blocks), so 4 fit at 16 bits and 8 at fp8. Sweeps are short
(3 s dwells: long enough to cut into the three batches of two request lifetimes that a goodput's
noise is estimated from) so a whole tune takes about two minutes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from slotop.actions.replica.spec import Dials
from slotop.cli import main
from tests.support.vllm_replica import free_port

ORIGINAL = Dials("auto", 6)


def tune_sim_config(folder: Path, *, extra: str = "") -> Path:
    """Write the settings of a managed simulated replica on a free port into `folder`."""
    port = free_port()
    command = [
        sys.executable, "-m", "slotop.sim", "--host", "127.0.0.1", "--port", str(port),
        "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpu-memory-utilization", "0.217",
        "--max-model-len", "2048",
    ]  # fmt: skip
    path = folder / "slotop.toml"
    path.write_text(
        f'[replica]\nurl = "http://127.0.0.1:{port}"\nscrape_interval_s = 0.5\n'
        "[slo]\nttft_ms = 500\nitl_ms = 100\n"
        "[load]\nprompt_tokens = 1024\noutput_tokens = 32\nmax_concurrency = 16\n"
        "[sweep]\nconcurrency = [2, 4, 8, 16]\nwarmup_s = 0.5\ndwell_s = 3.0\nmin_requests = 6\n"
        "max_dwell_s = 6.0\nmax_follow_s = 1.0\nqueue_waiting_requests = 2.0\n"
        f"[launch]\ncommand = {json.dumps(command)}\nmax_num_seqs = {ORIGINAL.max_num_seqs}\n"
        "health_timeout_s = 30.0\nstop_grace_s = 3.0\n"
        f'[session]\nfolder = "{folder / "sessions"}"\n' + extra,
        encoding="utf-8",
    )
    return path


@contextmanager
def launched(config: Path) -> Iterator[Path]:
    """The replica of `config` started by `slotop launch`, stopped after."""
    assert main(["launch", "--config", str(config), "--no-attach"]) == 0
    try:
        yield config
    finally:
        main(["launch", "--config", str(config), "--stop"])
