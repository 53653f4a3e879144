"""The two clients bench_probe.py compares, run the same way and scored the same way.

`vllm bench serve` runs from the vLLM virtual environment (random dataset, the same lengths,
`--max-concurrency` equal to the probe's streams); the probe runs in closed loop at that many
streams until the first `requests` have ended. Both are scored from their own per-request timings
in the steady window (from 10% into the run to the last send, when both hold every stream): token
chunks per second inside it, and TTFT / ITL p50 / p99 over the requests that lived wholly inside
it. On the paced replica the same window of its truth (when each request arrived, when each chunk
was written) gives the error of each client's percentiles.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.lag import client_error
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.stream import ProbeTarget

REPO = Path(__file__).resolve().parent.parent
VLLM_PYTHON = Path(os.environ.get("SLOTOP_VLLM_PYTHON") or REPO / ".venv-vllm" / "bin" / "python")
WARMUP_FRACTION = 0.1

_VLLM_BENCH = """
import json, os, sys, time
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks import serve
inner = serve.benchmark
async def timed_benchmark(*args, **kwargs):
    started = time.process_time()
    try:
        return await inner(*args, **kwargs)
    finally:
        with open(os.environ["BENCH_PROBE_CPU_FILE"], "w") as out:
            json.dump({"cpu_s": time.process_time() - started,
                       "epoch_offset_s": time.time() - time.perf_counter()}, out)
serve.benchmark = timed_benchmark
parser = FlexibleArgumentParser(prog="vllm bench serve")
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[1:]))
"""


@dataclass(frozen=True, slots=True)
class Load:
    """What one run sends: streams in flight, lengths, and how many requests it scores."""

    streams: int
    prompt_tokens: int
    output_tokens: int
    requests: int


@dataclass(frozen=True, slots=True)
class Timed:
    """One request as a client (or the paced replica's truth) saw it, in Unix seconds."""

    sent_s: float
    ttft_s: float | None
    gaps_s: tuple[float, ...]
    ok: bool

    def chunk_times(self) -> np.ndarray:
        if self.ttft_s is None:
            return np.empty(0)
        return self.sent_s + self.ttft_s + np.concatenate(([0.0], np.cumsum(self.gaps_s)))


@dataclass(frozen=True, slots=True)
class Score:
    """One client's run, scored in the steady window [start_s, end_s]."""

    chunks_per_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    itl_p50_s: float
    itl_p99_s: float
    requests_scored: int
    start_s: float = 0.0
    end_s: float = 0.0
    cpu_per_chunk_s: float | None = None
    reader_cpu_per_chunk_s: float | None = None
    client_bound: bool | None = None
    lag_words: str = ""


def inside(requests: Sequence[Timed], start_s: float, end_s: float) -> list[Timed]:
    """The requests sent at or after `start_s` whose every chunk came by `end_s`."""
    return [
        r
        for r in requests
        if r.ok and r.sent_s >= start_s and r.chunk_times().size and r.chunk_times()[-1] <= end_s
    ]


def score(requests: Sequence[Timed], last_send_s: float) -> Score:
    """Chunk rate in the steady window, and percentiles over requests wholly inside it."""
    first_send = min(r.sent_s for r in requests)
    start = first_send + WARMUP_FRACTION * (last_send_s - first_send)
    return score_window(requests, start, last_send_s)


def score_window(requests: Sequence[Timed], start_s: float, end_s: float) -> Score:
    """Chunk rate and percentiles of `requests` over [start_s, end_s]."""
    times = np.concatenate([r.chunk_times() for r in requests] or [np.empty(0)])
    in_window = int(np.count_nonzero((times >= start_s) & (times <= end_s)))
    scored = inside(requests, start_s, end_s)
    ttfts = [r.ttft_s for r in scored if r.ttft_s is not None]
    itls = [gap for r in scored for gap in r.gaps_s]
    return Score(
        chunks_per_s=in_window / (end_s - start_s),
        ttft_p50_s=float(np.percentile(ttfts, 50)),
        ttft_p99_s=float(np.percentile(ttfts, 99)),
        itl_p50_s=float(np.percentile(itls, 50)),
        itl_p99_s=float(np.percentile(itls, 99)),
        requests_scored=len(scored),
        start_s=start_s,
        end_s=end_s,
    )


def take_truth(url: str) -> list[Timed]:
    """What the paced replica wrote since the last call: each request from its arrival."""
    data = httpx.get(url + "/truth", timeout=60).json()
    truth = []
    for request in data["requests"]:
        writes = np.asarray(request["writes_s"], dtype=float)
        arrived = float(request["arrived_s"])
        truth.append(Timed(arrived, float(writes[0] - arrived), tuple(np.diff(writes)), True))
    return truth


def cpu_s(pid: int, thread: int | None = None) -> float:
    """User + system CPU seconds a live process (or one of its threads) has used, from /proc."""
    path = f"/proc/{pid}/task/{thread}/stat" if thread is not None else f"/proc/{pid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_vllm_bench(
    url: str, model: str, tokenizer: Path, load: Load, seed: int, out_dir: Path
) -> Score:
    """Run `vllm bench serve` once and score its detailed per-request results."""
    result = out_dir / f"vllm-bench-{seed}.json"
    argv = [
        str(VLLM_PYTHON), "-c", _VLLM_BENCH,
        "--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", model, "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(load.prompt_tokens),
        "--random-output-len", str(load.output_tokens),
        "--num-prompts", str(load.requests), "--max-concurrency", str(load.streams),
        "--request-rate", "inf", "--ignore-eos", "--seed", str(seed), "--num-warmups", "0",
        "--disable-tqdm", "--save-result", "--save-detailed",
        "--result-dir", str(out_dir), "--result-filename", result.name,
    ]  # fmt: skip
    cpu_file = out_dir / f"vllm-bench-{seed}.cpu"
    env = {**os.environ, "BENCH_PROBE_CPU_FILE": str(cpu_file)}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800, env=env)
    if done.returncode != 0 or not result.exists():
        raise SystemExit(f"vllm bench serve failed ({done.returncode}):\n{done.stderr[-3000:]}")
    data = json.loads(result.read_text(encoding="utf-8"))
    timing = json.loads(cpu_file.read_text(encoding="utf-8"))
    offset = float(timing["epoch_offset_s"])
    requests = [
        Timed(start + offset, ttft if not error else None, tuple(itl), not error)
        for start, ttft, itl, error in zip(
            data["start_times"], data["ttfts"], data["itls"], data["errors"], strict=True
        )
    ]
    chunks = sum(r.chunk_times().size for r in requests)
    scored = score(requests, max(r.sent_s for r in requests))
    return dataclasses.replace(scored, cpu_per_chunk_s=float(timing["cpu_s"]) / chunks)


def _reader_thread_id() -> int | None:
    for thread in threading.enumerate():
        if thread.name == "probe-reader":
            return thread.native_id
    return None


def run_probe(url: str, model: str, load: Load, seed: int, workers: int | None = None) -> Score:
    """Run the probe at `load.streams` until its first `load.requests` have ended, and score it."""
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", load.prompt_tokens),
        output_lengths=LengthDistribution("fixed", load.output_tokens),
        max_concurrency=load.streams,
        seed=seed,
        workers=workers,
    )
    records: list[ProbeRecord] = []
    wanted = load.requests
    with Probe.start(ProbeTarget(url, model=model), shape, concurrency=load.streams) as probe:
        while probe.status() is None:  # started: imports and spawn are behind it
            probe.wait_for_batch(1.0)
        pids = tuple(pid for pid in probe.pids if pid is not None)
        reader = _reader_thread_id()
        cpu_start = sum(cpu_s(pid) for pid in pids)
        reader_start = cpu_s(os.getpid(), reader) if reader is not None else 0.0
        while sum(1 for r in records if r.request_id < wanted) < wanted:
            probe.wait_for_batch(1.0)
            records.extend(probe.drain_records())
            if not probe.running:
                raise SystemExit(f"the probe stopped early: {probe.events()[-1]}")
        cpu_used = sum(cpu_s(pid) for pid in pids) - cpu_start
        reader_used = cpu_s(os.getpid(), reader) - reader_start if reader is not None else None
    records.extend(probe.drain_records())
    failed = [r for r in records if r.request_id < wanted and not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} probe requests failed, first: {failed[0]}")
    requests = [Timed(r.sent_at_s, r.ttft_s, r.itl_s, r.ok) for r in records]
    last_send = max(r.sent_at_s for r in records if r.request_id < wanted)
    chunks = sum(r.chunk_count for r in records)
    scored = score(requests, last_send)
    return dataclasses.replace(
        scored,
        cpu_per_chunk_s=cpu_used / chunks,
        reader_cpu_per_chunk_s=reader_used / chunks if reader_used is not None else None,
        **_lag_fields(records, scored),
    )


def _lag_fields(records: Sequence[ProbeRecord], scored: Score) -> dict[str, Any]:
    """The probe's own verdict on its lag over the requests it scored."""
    chosen = [
        r for r in records if r.ok and r.sent_at_s >= scored.start_s and r.done_at_s <= scored.end_s
    ]
    error = client_error(chosen)
    if error is None:
        return {"client_bound": None, "lag_words": "no chunk lag observed"}
    return {"client_bound": error.client_bound, "lag_words": error.words()}
