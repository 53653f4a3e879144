"""`slotop sweep` end to end against `slotop sim --engine sglang`: what only real time shows, that
the command reads the engine from the replica it scrapes and says so in every output."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow

SEQ_CAP = 4


@pytest.fixture(scope="module")
def sglang_sim() -> Iterator[str]:
    """The simulated SGLang replica, its /metrics on, running at most SEQ_CAP requests."""
    yield from run_sim(
        "--engine", "sglang", "--enable-metrics", "--max-running-requests", str(SEQ_CAP)
    )


def test_the_cli_sweep_of_sglang_speaks_its_terms_and_says_what_it_cannot_see(
    sglang_sim: str, tmp_path: Path
) -> None:
    config = tmp_path / "slotop.toml"
    config.write_text(
        "[replica]\nscrape_interval_s = 0.5\n[load]\nprompt_tokens = 64\noutput_tokens = 200\n"
        f"max_concurrency = 16\n[slo]\nttft_ms = 2000\nitl_ms = 200\n[launch]\n"
        f"max_num_seqs = {SEQ_CAP}\n",
        encoding="utf-8",
    )
    saved = tmp_path / "sweep.json"
    argv = [
        sys.executable, "-m", "slotop", "sweep", sglang_sim, "--config", str(config),
        "--concurrency", "2,4,8", "--warmup-s", "1", "--dwell-s", "2.5", "--min-requests", "4",
        "--json", str(saved), "--no-record",
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "(SGLang)" in text.splitlines()[0]
    assert " retract " in text.splitlines()[1]
    assert "Operating point: concurrency 4." in text
    assert "the sequence cap (max_running_requests) at concurrency 8" in text
    assert f"(max_running_requests {SEQ_CAP})" in text
    assert "Tokens per step: SGLang has no such metric" in text
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["settings"]["limits"]["engine"] == "sglang"
    assert data["recommendation"]["binding"] == "seq_cap"
    assert set(data["unmeasured"]) == {
        "batch_tokens_p99", "batch_tokens_p99_lower", "batch_tokens_p99_upper"
    }  # fmt: skip
    assert all(step["batch_tokens_p99"] is None for step in data["steps"])
    busiest = max(data["steps"], key=lambda step: step["concurrency"])
    assert busiest["running_max"] == SEQ_CAP and busiest["waiting_mean"] >= 1
