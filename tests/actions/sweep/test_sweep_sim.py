"""Sweeps against the simulated replica, sized so the knee falls at a concurrency known in advance."""

from __future__ import annotations

import json
import math
import multiprocessing
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from slotop.actions.probe_control import ProbeControl
from slotop.actions.slo import Binding
from slotop.actions.sweep.decide import ReplicaLimits, StopReason
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import MonitorWatch, SweepProgress, SweepResult, SweepRunner
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.replica import ReplicaClient
from slotop.slo import Slo
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow

PROMPT_TOKENS = 64
OUTPUT_TOKENS = 200
BLOCK_TOKENS = 16
SEQ_CAP = 4
KV_BLOCKS = 40
SHAPE = LoadShape(
    prompt_lengths=LengthDistribution("fixed", PROMPT_TOKENS),
    output_lengths=LengthDistribution("fixed", OUTPUT_TOKENS),
    max_concurrency=16,
)
SLO = Slo(ttft_s=2.0, itl_s=0.2)
"""Loose enough that the sim on a busy machine holds it: these sweeps end at a resource limit."""
PLAN = (1, 2, 4, 8, 16)
FAST = {"warmup_s": 1.0, "dwell_s": 2.5, "min_requests": 4, "max_dwell_s": 10.0, "tick_s": 0.5}


@pytest.fixture(scope="module")
def seq_cap_sim() -> Iterator[str]:
    """A replica whose batch holds at most SEQ_CAP sequences; its KV cache is ample."""
    yield from run_sim("--max-num-seqs", str(SEQ_CAP))


@pytest.fixture(scope="module")
def small_kv_sim() -> Iterator[str]:
    """A replica whose KV cache holds KV_BLOCKS blocks; its batch cap is ample."""
    yield from run_sim("--num-gpu-blocks-override", str(KV_BLOCKS), "--max-model-len", "512")


def sweep(
    url: str,
    limits: ReplicaLimits | None = None,
    cancel: threading.Event | None = None,
    on_progress: object = None,
) -> SweepResult:
    spec = SweepSpec(plan=PLAN, slo=SLO, limits=limits or ReplicaLimits(), **FAST)  # type: ignore[arg-type]
    control = ProbeControl(ProbeTarget(url), SHAPE, allow_remote_load=False)
    with ReplicaClient(url) as client:
        monitor = ReplicaMonitor(client, long_window_s=30.0, interval_s=FAST["tick_s"])
        runner = SweepRunner(
            control,
            MonitorWatch(monitor),
            spec,
            cancel=cancel,
            on_progress=on_progress,  # type: ignore[arg-type]
        )
        return runner.run()


def running_requests(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:num_requests_running")
    )


def probe_children_of(pid: int) -> list[int]:
    """Live processes `pid` spawned through multiprocessing (its resource tracker left out)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z" and b"spawn_main" in command:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def probe_processes() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name == "slotop-probe"]


def test_the_sweep_stops_at_the_seq_cap_and_names_it(seq_cap_sim: str) -> None:
    result = sweep(seq_cap_sim, ReplicaLimits(max_num_seqs=SEQ_CAP))
    assert [s.concurrency for s in result.steps] == [1, 2, 4, 8]
    assert result.stop is StopReason.QUEUE
    assert result.recommendation.concurrency == SEQ_CAP
    assert result.recommendation.binding is Binding.SEQ_CAP
    assert f"running held at {SEQ_CAP} (max_num_seqs {SEQ_CAP})" in (
        result.recommendation.binding_detail
    )
    past = result.steps[-1]
    assert past.server.running_max == SEQ_CAP
    assert past.server.waiting_mean is not None and past.server.waiting_mean >= 1
    assert all(s.client.requests_failed == 0 for s in result.steps)
    assert probe_processes() == []


def test_the_sweep_stops_where_the_kv_cache_runs_out(small_kv_sim: str) -> None:
    blocks_per_sequence = math.ceil((PROMPT_TOKENS + OUTPUT_TOKENS) / BLOCK_TOKENS)
    sequences_that_fit = (KV_BLOCKS - 1) // blocks_per_sequence  # vLLM keeps one null block
    assert sequences_that_fit == 2
    result = sweep(small_kv_sim)
    assert result.recommendation.concurrency == sequences_that_fit
    assert result.recommendation.binding is Binding.KV_CAPACITY
    assert [s.concurrency for s in result.steps] == [1, 2, 4]
    assert result.stop in (StopReason.PREEMPTIONS, StopReason.QUEUE)
    full = result.steps[-1]
    assert full.server.kv_usage_max_ratio is not None and full.server.kv_usage_max_ratio >= 0.9
    assert probe_processes() == []


def test_an_interrupted_sweep_leaves_no_probe_and_no_load(seq_cap_sim: str) -> None:
    cancel = threading.Event()

    def progress(update: SweepProgress) -> None:
        if update.concurrency == 2 and update.phase == "dwell":
            assert len(probe_processes()) == 1
            cancel.set()

    result = sweep(seq_cap_sim, cancel=cancel, on_progress=progress)
    assert result.stop is StopReason.INTERRUPTED
    assert [s.concurrency for s in result.steps] == [1]
    assert probe_processes() == []
    deadline = time.monotonic() + 10
    while running_requests(seq_cap_sim) > 0:
        assert time.monotonic() < deadline, "the replica still runs the sweep's requests"
        time.sleep(0.2)


def test_the_cli_sweep_is_interrupted_then_resumed_from_its_json(
    seq_cap_sim: str, tmp_path: Path
) -> None:
    saved = tmp_path / "sweep.json"
    common = ["--warmup-s", "1", "--dwell-s", "2.5", "--min-requests", "4", "--json", str(saved)]
    config = tmp_path / "slotop.toml"
    config.write_text(
        "[replica]\nscrape_interval_s = 0.5\n[load]\nprompt_tokens = 64\noutput_tokens = 200\n"
        "max_concurrency = 16\n[slo]\nttft_ms = 2000\nitl_ms = 200\n",
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "slotop", "sweep", "--config", str(config)]
    first = subprocess.Popen(
        [*command, seq_cap_sim, "--concurrency", "1,2,4,8,16", *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not saved.exists():  # written after the first step
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "no step was saved within 60 s"
        time.sleep(0.1)
    probe_pids = probe_children_of(first.pid)
    assert len(probe_pids) == 1, "the sweep runs one probe process"
    first.send_signal(signal.SIGINT)  # one Ctrl-C
    _, err = first.communicate(timeout=30)
    assert first.returncode == 130, err
    assert [pid for pid in probe_pids if alive(pid)] == []
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert data["stop"] == "interrupted" and data["finished"] is False
    measured = [row["concurrency"] for row in data["steps"]]
    assert measured and measured == [1, 2, 4, 8][: len(measured)]
    assert f"slotop sweep --resume {saved}" in err
    deadline = time.monotonic() + 30
    while running_requests(seq_cap_sim) > 0:
        assert time.monotonic() < deadline, "the interrupted CLI left load running"
        time.sleep(0.2)

    second = subprocess.run(
        [*command, "--resume", str(saved)], capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    assert f"Resuming {saved}: {len(measured)} steps measured." in second.stderr
    data = json.loads(saved.read_text(encoding="utf-8"))
    assert [row["concurrency"] for row in data["steps"]] == [1, 2, 4, 8]
    assert data["stop"] == "queue"
    assert data["recommendation"]["concurrency"] == SEQ_CAP
    assert data["recommendation"]["binding"] == "seq_cap"
    assert "Operating point: concurrency 4." in second.stdout
