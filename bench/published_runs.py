"""Published vLLM benchmark runs, each with its source, setup, load and measured figures.

Every figure is copied from its source as published (milliseconds unless the metric says
otherwise); nothing here is derived from the sim. `role` says how a run is used: `calibration`
runs set the sim's constants (each constant's docstring names its runs), `check` runs test it,
and `harness` runs measured their own client more than vLLM (the note says why) and are shown
but not scored. Runs of vLLM before the V1 engine are checks of the GPU's kernels more than of
the host: their versions are in `setup`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from slotop.sim.openai import RequestKind

Role = Literal["calibration", "check", "harness"]
Load = Literal["closed", "poisson", "burst", "offline", "steps"]

SOURCES: dict[str, str] = {
    "inferencebench": "InferenceBench 'Recipe: concurrency sweep', "
    "https://yobitelcomm.github.io/bench/recipes/concurrency-sweep/ (table 'Sweep results')",
    "wmx": "ai.wmx.dev 'Benchmark results' (serving/raw-vllm), https://ai.wmx.dev/benchmarks "
    "(table 'Results: concurrency sweep')",
    "musgrave": "J. Musgrave, 'vLLM throughput-latency sweep on NVIDIA A100', "
    "https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on (text: decode at one request)",
    "lambda-320": "LambdaLabsML/vllm-benchmark on GitHub, results/prompt_320/1xH100-80GB-SXM/"
    "Meta-Llama-3-8B-Instruct_tp1_len2048.json (summary fields and raw per-token ITLs)",
    "lambda-10-h100": "LambdaLabsML/vllm-benchmark on GitHub, results/prompt_10/1xH100-80GB-SXM/"
    "Meta-Llama-3-8B-Instruct_tp1_len2048.json (median_ttft_ms, median_itl_ms)",
    "lambda-10-a100": "LambdaLabsML/vllm-benchmark on GitHub, results/prompt_10/1xA100-80GB-SXM/"
    "Meta-Llama-3-8B-Instruct_tp1_len2048.json (median_ttft_ms, median_itl_ms)",
    "kvcached": "ovg-project/kvcached pull request #331 on GitHub, "
    "benchmarks/bench_layout/H100_results.md (table 'E2E Sweep Results', row A/F vanilla)",
    "vllm-ci-h200": "vLLM CI performance benchmark, latency_llama8B_tp1, "
    "https://buildkite.com/vllm/performance-benchmark/builds/9515",
    "vllm-ci-h100": "vLLM CI performance benchmark, latency_llama8B_tp1, a build run on 8xH100 "
    "(read from the stored copy at https://buildkite.com/elastic/enterprise-search-ruby/builds/571)",
}
"""Where each run's figures were read."""

LAMBDA_10_PROMPT_TOKENS = (13, 25, 27, 10, 329, 29, 399, 328, 4, 205)
"""Input lengths of the Lambda prompt_10 runs (the file's input_lens, the same on both GPUs)."""

LAMBDA_10_OUTPUT_TOKENS = {
    "h100-sxm": (120, 429, 233, 194, 101, 741, 9, 3, 6, 31),
    "a100-80gb": (120, 507, 233, 194, 101, 741, 9, 3, 6, 31),
}
"""Output lengths of the Lambda prompt_10 runs (each file's output_lens)."""


@dataclass(frozen=True, slots=True)
class PublishedRun:
    """One published run: where, what, how it was loaded, what was measured, and its role.

    `load`: `closed` keeps `concurrency` requests in flight (`requests_per_client` each);
    `poisson` sends `requests` at `rate_rps` (averaged over `seeds`); `burst` sends the requests
    (of `prompt_lengths`/`output_lengths`, or `requests` equal ones) at once; `offline` runs
    `concurrency` equal prompts through the engine alone (vLLM's latency benchmark); `steps`
    reads decode steps of the sizes in `steps` (batch, mean context) as the GPU priced them.
    `measured` maps a metric to its published value: ttft_p50, ttft_mean, itl_p50, tpot_p50,
    tpot_mean, latency_mean, step_<batch> (the decode step at that batch). `async_scheduling` is
    off for engines that had none (vLLM before V1 scheduled each step after the last one ended).
    """

    key: str
    source: str
    gpu: str
    model: str
    setup: str
    role: Role
    load: Load
    measured: dict[str, float]
    kind: RequestKind = "completion"
    prompt_tokens: int = 0
    output_tokens: int = 0
    concurrency: int = 1
    requests_per_client: int = 20
    rate_rps: float = 0.0
    requests: int = 0
    seeds: int = 1
    distinct_prompts: int = 0
    prompt_lengths: tuple[int, ...] = ()
    output_lengths: tuple[int, ...] = ()
    steps: tuple[tuple[int, int], ...] = ()
    max_model_len: int = 8192
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int | None = None
    async_scheduling: bool = True
    note: str = ""


_IB_SETUP = (
    "1x H100 80GB HBM3 (Xeon 8462Y+ host), Llama-3.1-8B-Instruct fp16, vLLM 0.21.0, chat "
    "completions of the suite's 10 built-in questions (~50 tokens with the template; repeated, so "
    "the prefix cache hits), 128 tokens out, closed loop"
)
_WMX_SETUP = (
    "1x L4 on a g2-standard-4 VM (4 vCPUs), Qwen2.5-0.5B-Instruct bf16, vLLM 0.23.0 (V1), "
    "--gpu-memory-utilization 0.6 --max-model-len 8192, vllm bench serve random 256 in / 128 out "
    "--ignore-eos, closed loop at fixed max-concurrency"
)
_LAMBDA_10_SETUP = (
    "Meta-Llama-3-8B-Instruct bf16 (the shapes of 3.1), vLLM >= 0.6.0 with "
    "--num-scheduler-steps 10 (tokens come in bursts of 10: the ITL is a burst / 10), 10 "
    "ShareGPT prompts (1,369 tokens in) sent at once, max-model-len 2048"
)
_KVCACHED_SETUP = (
    "1x H100 80GB HBM3, Qwen3-0.6B bf16, vLLM 0.19.0, --gpu-memory-utilization 0.5 "
    "--max-model-len 2048, vllm bench serve random 512 in / 128 out, 500 prompts, means over "
    "seeds 42/99/7"
)
_CI_SETUP = (
    "Llama-3.1-8B, TP 1, vLLM's offline latency benchmark (an older vLLM: the build predates the "
    "V1 engine): 8 prompts of 32 tokens, 128 output tokens, mean end-to-end latency of the batch"
)

RUNS: tuple[PublishedRun, ...] = (
    *(
        PublishedRun(
            key=f"inferencebench-c{c}",
            source="inferencebench",
            gpu="h100-sxm",
            model="llama-3.1-8b",
            setup=_IB_SETUP,
            role=role,
            load="closed",
            measured={"ttft_p50": ttft, "tpot_p50": tpot},
            kind="chat",
            prompt_tokens=50,
            output_tokens=128,
            concurrency=c,
            distinct_prompts=10,
            note=note,
        )
        for c, ttft, tpot, role, note in (
            (1, 13.98, 6.48, "calibration", "fits the datacenter host's request latency"),
            (4, 22.75, 6.59, "check", ""),
            (
                16,
                41.69,
                10.94,
                "harness",
                "client-bound: 1,384 tok/s here and 1,312 at 64 streams, a plateau the GPU "
                "does not set (its step at 64 sequences is ~9 ms, not 47)",
            ),
            (
                64,
                86.92,
                46.91,
                "harness",
                "client-bound: the same throughput plateau as at 16 streams",
            ),
        )
    ),
    *(
        PublishedRun(
            key=f"wmx-l4-c{c}",
            source="wmx",
            gpu="l4",
            model="qwen2.5-0.5b",
            setup=_WMX_SETUP,
            role="calibration" if c in (1, 32) else "check",
            load="closed",
            measured={"ttft_p50": ttft, "itl_p50": itl},
            prompt_tokens=256,
            output_tokens=128,
            concurrency=c,
            gpu_memory_utilization=0.6,
            note={
                1: "fits the small VM's request latency and its CPU time per step",
                32: "its step fits the small VM's CPU time per request",
            }.get(c, ""),
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
    PublishedRun(
        key="musgrave-a100-40gb-c1",
        source="musgrave",
        gpu="a100-40gb",
        model="llama-3.1-8b",
        setup="1x A100 40GB (Lambda, 30 vCPUs), Llama-3.1-8B-Instruct bf16, vLLM 0.23.0 "
        "defaults, vllm bench serve random 1024 in / 128 out --ignore-eos, max-concurrency 1",
        role="calibration",
        load="closed",
        measured={"tpot_p50": 1000 / 75},
        prompt_tokens=1024,
        output_tokens=128,
        concurrency=1,
        note="'decode at one request ~75 tokens/s'; fits the HBM efficiency",
    ),
    PublishedRun(
        key="lambda-320-h100-steps",
        source="lambda-320",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        setup="1x H100 80GB SXM, Meta-Llama-3-8B-Instruct, vLLM >= 0.6.0 with "
        "--num-scheduler-steps 10, 320 ShareGPT prompts at once; a step = a 10-token burst / 10, "
        "sequences and mean context counted from the file's lengths at that burst",
        role="calibration",
        load="steps",
        measured={"step_20": 8.17, "step_50": 9.12, "step_104": 10.74, "step_203": 13.31},
        steps=((20, 674), (50, 586), (104, 437), (203, 192)),
        note="fits the GPU's time per request; multi-step hides the host's time",
    ),
    PublishedRun(
        key="lambda-10-h100",
        source="lambda-10-h100",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        setup="1x H100 80GB SXM, " + _LAMBDA_10_SETUP,
        role="check",
        load="burst",
        measured={"ttft_median": 62.19, "itl_median": 72.30 / 10},
        prompt_lengths=LAMBDA_10_PROMPT_TOKENS,
        output_lengths=LAMBDA_10_OUTPUT_TOKENS["h100-sxm"],
        max_model_len=2048,
    ),
    PublishedRun(
        key="lambda-10-a100",
        source="lambda-10-a100",
        gpu="a100-80gb",
        model="llama-3.1-8b",
        setup="1x A100 80GB SXM, " + _LAMBDA_10_SETUP,
        role="check",
        load="burst",
        measured={"ttft_median": 126.73, "itl_median": 114.85 / 10},
        prompt_lengths=LAMBDA_10_PROMPT_TOKENS,
        output_lengths=LAMBDA_10_OUTPUT_TOKENS["a100-80gb"],
        max_model_len=2048,
    ),
    PublishedRun(
        key="kvcached-h100-rate16",
        source="kvcached",
        gpu="h100-sxm",
        model="qwen3-0.6b",
        setup=_KVCACHED_SETUP + ", Poisson at 16 requests/s",
        role="calibration",
        load="poisson",
        measured={"ttft_mean": 38.9, "tpot_mean": 2.39},
        prompt_tokens=512,
        output_tokens=128,
        rate_rps=16.0,
        requests=500,
        seeds=3,
        max_model_len=2048,
        gpu_memory_utilization=0.5,
        note="its TPOT fits the datacenter host's CPU time per step (its TTFT shows a "
        "frontend slower than the datacenter host's; see kvcached-h100-inf)",
    ),
    PublishedRun(
        key="kvcached-h100-inf",
        source="kvcached",
        gpu="h100-sxm",
        model="qwen3-0.6b",
        setup=_KVCACHED_SETUP + ", all sent at once (--request-rate inf)",
        role="check",
        load="burst",
        measured={"ttft_mean": 2905.0, "tpot_mean": 5.45},
        prompt_tokens=512,
        output_tokens=128,
        requests=500,
        max_model_len=2048,
        gpu_memory_utilization=0.5,
        note="not met. What the sim lacks: the API server's own CPU work on every streamed "
        "token (68 us each on vLLM 0.32, bench_vllm_first_token), which caps one server process "
        "near 15k tokens/s and delays the requests it takes in; this run streamed ~12k/s and "
        "held ~95 requests/s in every configuration of its table whatever their TPOT (5.45-6.43 "
        "ms), a cap outside the GPU. The sim takes the 500 in within ~0.6 s, so their prefill "
        "stalls the decodes (TPOT 22 ms) and the queue before the engine is missing (TTFT)",
    ),
    PublishedRun(
        key="vllm-ci-h200",
        source="vllm-ci-h200",
        gpu="h200",
        model="llama-3.1-8b",
        setup="1x H200, " + _CI_SETUP,
        role="check",
        load="offline",
        measured={"latency_mean": 833.421},
        prompt_tokens=32,
        output_tokens=128,
        concurrency=8,
        async_scheduling=False,
        note="an engine before V1: host and GPU take turns; its host time per step is not known",
    ),
    PublishedRun(
        key="vllm-ci-h100",
        source="vllm-ci-h100",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        setup="1 of 8x H100, " + _CI_SETUP,
        role="check",
        load="offline",
        measured={"latency_mean": 997.542},
        prompt_tokens=32,
        output_tokens=128,
        concurrency=8,
        async_scheduling=False,
        note="as vllm-ci-h200",
    ),
)
"""Every published run the table holds, by source."""
