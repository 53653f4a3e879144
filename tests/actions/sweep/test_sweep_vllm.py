"""A short `slotop sweep` end to end against the real vLLM CPU replica."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from slotop.cli import main

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def running_requests(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    )


def test_a_short_sweep_of_the_real_replica(
    vllm_replica: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    config = tmp_path / "slotop.toml"
    config.write_text(
        "[replica]\nscrape_interval_s = 0.5\n"
        "[load]\nprompt_tokens = 32\noutput_tokens = 16\nmax_concurrency = 4\n",
        encoding="utf-8",
    )
    saved, table = tmp_path / "sweep.json", tmp_path / "sweep.csv"
    code = main(
        [
            "sweep",
            vllm_replica.url,
            "--config",
            str(config),
            "--ttft-ms",
            "20000",
            "--itl-ms",
            "5000",
            "--concurrency",
            "1,2",
            "--warmup-s",
            "1",
            "--dwell-s",
            "3",
            "--min-requests",
            "3",
            "--json",
            str(saved),
            "--csv",
            str(table),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert [row["concurrency"] for row in data["steps"]] == [1, 2]
    for row in data["steps"]:
        assert row["requests_ok"] >= 3 and row["requests_failed"] == 0
        assert row["ttft_p99_s"] is not None and row["itl_p99_s"] is not None
        assert row["output_tokens_per_s"] > 0
        assert row["server_ttft_p99_s"] is not None
        assert row["kv_usage_max_ratio"] is not None
        assert row["running_max"] is not None and row["running_max"] >= 1
    assert data["recommendation"]["concurrency"] in (1, 2)
    assert data["finished"] is True
    assert len(table.read_text(encoding="utf-8").splitlines()) == 3
    assert "Operating point: concurrency" in out
    assert [p for p in multiprocessing.active_children() if p.name == "slotop-probe"] == []
    deadline = time.monotonic() + 30
    while running_requests(vllm_replica.url) > 0:
        assert time.monotonic() < deadline, "the replica still runs the sweep's requests"
        time.sleep(0.5)
