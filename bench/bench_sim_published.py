"""Published light- and medium-load TTFT and ITL of vLLM beside what the simulated replica predicts.

Each published run is replayed through the sim's own parts in simulated time, as `vllm bench
serve --max-concurrency C --request-rate inf` drives a replica: C clients, each sending its next
request the moment its last one has ended; a request reaches the engine the API server's time
after it is sent, behind the requests before it (`timing.API_SERVER`, `realtime.ApiServerQueue`,
as the real-time loop holds them), each token
reaches the client its response time after the step that made it, and a request that reaches a
busy engine waits for the step already running, as the engine schedules it. No wall clock is
involved, so the figures are the model's alone, the same on any host.

The table prints, per run, the published TTFT and ITL (or TPOT, as the source reports it), the
simulated one and the error of each, with the source beside it, and the TTFT the sim gave before
it priced the API server (`no-API`). Rows whose host or harness the model is known not to match
say so in their note. Where the sim stays low at medium load on the L4 host, three things it does
not model may each be part of the gap: that host's 4 vCPUs (its API server's time at one stream
is ~3x a GPU server's), the API server's own work on every streamed token, which queues ahead of
new requests and can saturate its one process, and mixed prefill steps of a small model costing
more than their roofline.

    .venv/bin/python -m bench.bench_sim_published
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from dataclasses import dataclass
from typing import Literal

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.openai import RequestKind
from slotop.sim.realtime import ApiServerQueue
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.timing import API_SERVER, NO_API_SERVER, ApiServerTiming

GapMetric = Literal["itl_p50", "tpot_p50"]

_INFERENCEBENCH = (
    "yobitelcomm.github.io/bench/recipes/concurrency-sweep (InferenceBench, vLLM 0.21)"
)
_WMX = "ai.wmx.dev/benchmarks serving/raw-vllm (vllm bench serve, vLLM 0.23)"
_MUSGRAVE = "johnmusgrave.com/p/vllm-throughput-latency-sweep-on (vllm bench serve, vLLM 0.23)"


@dataclass(frozen=True, slots=True)
class PublishedRun:
    """One published closed-loop run: its setup, its figures (ms, None if not published), its source."""

    source: str
    gpu: str
    model: str
    kind: RequestKind
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    ttft_p50_ms: float | None
    gap_ms: float | None
    gap_metric: GapMetric
    distinct_prompts: int = 0
    note: str = ""


RUNS: tuple[PublishedRun, ...] = (
    # H100 SXM (Xeon 8462Y+ host), Llama-3.1-8B-Instruct fp16, chat completions of the suite's 10
    # built-in questions (~50 tokens with the chat template; repeated, so the prefix cache hits),
    # 128 tokens out (the suite's Qwen-72B envelope: total p50 = TTFT + 127 TPOTs).
    *(
        PublishedRun(
            _INFERENCEBENCH, "h100-sxm", "llama-3.1-8b", "chat", 50, 128, c, ttft, tpot,
            "tpot_p50", distinct_prompts=10, note=note,
        )
        for c, ttft, tpot, note in (
            (1, 13.98, 6.48, "the API server's time is scaled to this TTFT"),
            (4, 22.75, 6.59, ""),
            (16, 41.69, 10.94, "client-limited (timing.py): TPOT 2x the Lambda per-step times"),
        )
    ),
    # 1x L4 on a g2-standard-4 VM (4 vCPUs), Qwen2.5-0.5B-Instruct bf16, random 256 in / 128 out
    # text prompts, --ignore-eos, /v1/completions; TTFT p50 and ITL p50.
    *(
        PublishedRun(
            _WMX, "l4", "qwen2.5-0.5b", "completion", 256, 128, c, ttft, itl, "itl_p50",
            note="4-vCPU host: its API server runs ~3x a GPU server's" if c == 1 else "",
        )
        for c, ttft, itl in (
            (1, 27.0, 5.1),
            (2, 37.8, 5.2),
            (4, 50.1, 5.3),
            (8, 60.9, 5.5),
            (16, 103.8, 6.0),
            (32, 135.3, 7.1),
        )
    ),
    # 1x A100 40GB (Lambda, 30 vCPUs), Llama-3.1-8B-Instruct bf16, random 1024 in / 128 out,
    # --ignore-eos; "decode at one request ~75 tokens/s". Its TTFTs are in plots only.
    PublishedRun(
        _MUSGRAVE, "a100-40gb", "llama-3.1-8b", "completion", 1024, 128, 1, None, 1000 / 75,
        "itl_p50",
    ),
)  # fmt: skip
"""Every published light- or medium-load run used, by source."""


@dataclass(frozen=True, slots=True)
class Simulated:
    """What the sim predicts for one run, in milliseconds."""

    ttft_p50_ms: float
    itl_p50_ms: float
    tpot_p50_ms: float

    def gap_ms(self, metric: GapMetric) -> float:
        """The inter-token figure the source reports."""
        return self.itl_p50_ms if metric == "itl_p50" else self.tpot_p50_ms


def simulate(
    run: PublishedRun, requests_per_client: int = 20, api: ApiServerTiming = API_SERVER
) -> Simulated:
    """Replay a closed loop of `run.concurrency` clients through the engine in simulated time."""
    config = resolve_engine_config(MODELS[run.model], GPUS[run.gpu], max_model_len=8192)
    engine = Engine(config)
    pending = ApiServerQueue()
    to_engine_s = api.to_engine_s(run.kind, run.prompt_tokens)
    total = run.concurrency * requests_per_client
    sent: dict[str, float] = {}
    token_times: dict[str, list[float]] = {}
    serial = 0

    def send(at_s: float) -> None:
        nonlocal serial
        request_id = f"r{serial}"
        prompt: int | tuple[int, ...] = run.prompt_tokens
        if run.distinct_prompts:
            base = 3 + (serial % run.distinct_prompts) * run.prompt_tokens
            prompt = tuple(range(base, base + run.prompt_tokens))
        serial += 1
        sent[request_id] = at_s
        token_times[request_id] = []
        pending.hold(pending.take(at_s, to_engine_s), request_id, prompt, run.output_tokens, True)

    for _ in range(run.concurrency):
        send(0.0)
    while engine.has_work() or len(pending):
        if engine.has_work():
            start_s = engine.end_s
        else:
            ready_s = pending.next_ready_s()
            assert ready_s is not None
            start_s = max(engine.end_s, ready_s)
        pending.admit(engine, start_s, sent)
        outcome = engine.step(start_s)
        arrive_s = outcome.end_s + api.response_s
        for request_id in outcome.emitted_ids:
            token_times[request_id].append(arrive_s)
        for _finished in outcome.finished:
            if serial < total:
                send(arrive_s)
    ttfts, itls, tpots = [], [], []
    for request_id, times in token_times.items():
        ttfts.append(times[0] - sent[request_id])
        itls.extend(later - earlier for earlier, later in itertools.pairwise(times))
        if len(times) > 1:
            tpots.append((times[-1] - times[0]) / (len(times) - 1))
    return Simulated(
        statistics.median(ttfts) * 1000,
        statistics.median(itls) * 1000,
        statistics.median(tpots) * 1000,
    )


def _cell(published: float | None, simulated: float) -> str:
    """Published, simulated and the error, or the simulated figure alone."""
    if published is None:
        return f"{'-':>7} {simulated:>7.2f} {'':>6}"
    error = (simulated - published) / published
    return f"{published:>7.2f} {simulated:>7.2f} {error:>+6.0%}"


def main() -> int:
    """Print the table and the median absolute error of each column."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests-per-client", type=int, default=20)
    args = parser.parse_args()
    print(
        f"API server (timing.API_SERVER): chat {API_SERVER.chat_request_s * 1000:.2f} ms, "
        f"completion {API_SERVER.completion_request_s * 1000:.2f} ms + "
        f"{API_SERVER.tokenize_s_per_token * 1e6:.2f} us/prompt token to the engine; "
        f"{API_SERVER.response_s * 1000:.2f} ms from a step's end to the client"
    )
    print(
        f"{'gpu':<9} {'model':<13} {'kind':<4} {'in/out':>8} {'c':>3}  "
        f"{'TTFT p50 ms: pub':>16} {'sim':>7} {'err':>6} {'no-API':>7}  "
        f"{'ITL ms: pub':>11} {'sim':>7} {'err':>6} {'(metric)':<10} source; note"
    )
    ttft_errors: dict[str, list[float]] = {}
    bare_errors: dict[str, list[float]] = {}
    gap_errors: list[float] = []
    for run in RUNS:
        sim = simulate(run, args.requests_per_client)
        bare = simulate(run, args.requests_per_client, NO_API_SERVER)
        gap = sim.gap_ms(run.gap_metric)
        counted = not run.note.startswith("client-limited")
        if run.ttft_p50_ms is not None and counted:
            for errors, ttft in ((ttft_errors, sim.ttft_p50_ms), (bare_errors, bare.ttft_p50_ms)):
                errors.setdefault(run.gpu, []).append(abs(ttft - run.ttft_p50_ms) / run.ttft_p50_ms)
        if run.gap_ms is not None and counted:
            gap_errors.append(abs(gap - run.gap_ms) / run.gap_ms)
        note = f"; {run.note}" if run.note else ""
        print(
            f"{run.gpu:<9} {run.model:<13} {run.kind[:4]:<4} "
            f"{f'{run.prompt_tokens}/{run.output_tokens}':>8} {run.concurrency:>3}  "
            f"{_cell(run.ttft_p50_ms, sim.ttft_p50_ms):>31} {bare.ttft_p50_ms:>7.2f}  "
            f"{_cell(run.gap_ms, gap):>26} {run.gap_metric:<10} {run.source}{note}"
        )
    print("median |error| of TTFT p50 over the rows not marked client-limited, by GPU:")
    for gpu, errors in ttft_errors.items():
        print(
            f"  {gpu:<9} {statistics.median(errors):>4.0%} ({len(errors)} rows; without the API "
            f"server's time {statistics.median(bare_errors[gpu]):.0%})"
        )
    print(
        f"median |error| of ITL/TPOT p50: {statistics.median(gap_errors):.0%} "
        f"({len(gap_errors)} rows)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
