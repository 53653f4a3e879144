"""The published step-level figures the step-time model is fitted to or checked against.

Each point names its source and setup, how the model reads it (`kind`), what was measured, what
the model predicts today, and how close it must land (`tests/sim/test_timing.py` holds both). Whole
benchmark runs, replayed through the engine and the API server, are in
`bench/bench_sim_published.py`, which marks the runs these points come from as calibration.

Where the sources disagree, the model follows current vLLM (V1 engine, 0.2x releases):
- Batch-1 decode on H100: 6.48 ms (vLLM 0.21) vs 7.05 ms in Lambda's 2024 prompt_10 run (vLLM 0.6,
  older kernels). The GPU constants follow the 0.21 figure; the Lambda 320-prompt run, the only
  one with per-step times up to batch ~200, sets the per-request slope of the GPU's time (its
  multi-step scheduling spreads the host's work over ten steps, so only the GPU shows).
- The host's CPU time per step is set by three steps where it, not the GPU, is the longer: a
  0.5B model on the L4 VM at 1 and 32 streams, and a 0.6B model on an H100 host (the last in the
  bench, as a replay of its Poisson run).
- vLLM's CI latency test on H200 and H100 (an engine before V1, offline, batch 8) is a check
  in the bench, not a point here: the host time of that engine is not known.
Not calibrated against any measurement: prefill GEMM and attention efficiencies, tensor-parallel
communication, fp8 KV, L40S, H100 PCIe, A100 80GB at batch 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

PointKind = Literal["decode", "decode-gpu", "ttft", "replay"]
"""What a calibration point measures.

decode: one decode step (TPOT/ITL) at `batch_size` sequences of `context_tokens`, as the step
model prices it (the GPU's time or the host's, whichever is longer);
decode-gpu: the GPU's share of that step alone (runs whose scheduling hid the host's time);
ttft: one chat prompt of `prefill_tokens` prefilled alone, plus the API server's time on the GPU's
usual host (`slotop.sim.apiserver`);
replay: a whole benchmark run through the engine (the test holds its request lengths).
"""


@dataclass(frozen=True, slots=True)
class CalibrationPoint:
    """One published measurement, how the model reads it, what the model predicts, and how close."""

    source: str
    setup: str
    published: str
    kind: PointKind
    gpu: str
    model: str
    tensor_parallel_size: int
    batch_size: int
    context_tokens: int
    prefill_tokens: int
    output_tokens: int
    measured_s: float
    predicted_s: float
    tolerance_ratio: float
    fitted: bool


_INFERENCEBENCH = (
    "InferenceBench 'Recipe: concurrency sweep', https://yobitelcomm.github.io/bench/recipes/"
    "concurrency-sweep/ (prompts: yobitelcomm/bench plugins/llm-inference datasets.py builtin set)"
)
_INFERENCEBENCH_SETUP = (
    "1x H100 80GB HBM3, Llama-3.1-8B-Instruct fp16, vLLM 0.21.0 (run of 2026-05-16), chat "
    "completions of ~50-token prompts, closed loop"
)
_LAMBDA = (
    "LambdaLabsML/vllm-benchmark, results/prompt_320/1xH100-80GB-SXM/"
    "Meta-Llama-3-8B-Instruct_tp1_len2048.json (raw per-token ITLs, run of 2024-09-07)"
)
_LAMBDA_SETUP = (
    "1x H100 80GB SXM, Meta-Llama-3-8B-Instruct bf16 (same shapes as 3.1), vLLM >= 0.6.0 with "
    "--num-scheduler-steps 10 (tokens arrive in bursts of 10), 320 ShareGPT prompts sent at once "
    "(65,578 in / 65,331 out tokens), max-num-seqs 1024. Step time = a 10-token burst / 10; "
    "sequences and their mean context counted from the file's input/output lengths at that burst"
)
_WMX = "ai.wmx.dev 'Benchmark results' (serving/raw-vllm), https://ai.wmx.dev/benchmarks"
_WMX_SETUP = (
    "1x L4 (g2-standard-4 VM), Qwen2.5-0.5B-Instruct bf16, vLLM 0.23.0 (V1), vllm bench serve "
    "256 in / 128 out --ignore-eos, closed loop at fixed max-concurrency"
)

CALIBRATION_POINTS: tuple[CalibrationPoint, ...] = (
    CalibrationPoint(
        source=_INFERENCEBENCH,
        setup=_INFERENCEBENCH_SETUP + ", concurrency 1; output length not published, context "
        "taken as 200 (its KV is 0.01 ms of reads)",
        published="tpot_p50_ms 6.48 at conc 1",
        kind="decode",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=1,
        context_tokens=200,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=6.48e-3,
        predicted_s=6.586e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_INFERENCEBENCH,
        setup=_INFERENCEBENCH_SETUP + ", concurrency 4, context taken as 200",
        published="tpot_p50_ms 6.59 at conc 4",
        kind="decode",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=4,
        context_tokens=200,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=6.59e-3,
        predicted_s=6.683e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_INFERENCEBENCH,
        setup=_INFERENCEBENCH_SETUP + ", concurrency 1; prompt ~50 tokens (Llama-3.1 chat "
        "template ~30 + a 10-20 token question); the datacenter host's request latency "
        "(`tables.HOSTS`) is fitted to this point",
        published="ttft_p50_ms 13.98 at conc 1",
        kind="ttft",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=1,
        context_tokens=0,
        prefill_tokens=50,
        output_tokens=0,
        measured_s=13.98e-3,
        predicted_s=14.08e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 55: 20 sequences, mean context 674",
        published="10-token burst of 81.7 ms",
        kind="decode-gpu",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=20,
        context_tokens=674,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=8.17e-3,
        predicted_s=7.672e-3,
        tolerance_ratio=0.10,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 42: 50 sequences, mean context 586",
        published="10-token burst of 91.2 ms",
        kind="decode-gpu",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=50,
        context_tokens=586,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=9.12e-3,
        predicted_s=9.127e-3,
        tolerance_ratio=0.10,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 30: 104 sequences, mean context 437",
        published="10-token burst of 107.4 ms",
        kind="decode-gpu",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=104,
        context_tokens=437,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=10.74e-3,
        predicted_s=11.13e-3,
        tolerance_ratio=0.10,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 6: 203 sequences, mean context 192",
        published="10-token burst of 133.1 ms",
        kind="decode-gpu",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=203,
        context_tokens=192,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=13.31e-3,
        predicted_s=12.99e-3,
        tolerance_ratio=0.10,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA.replace("raw per-token ITLs", "summary fields"),
        setup=_LAMBDA_SETUP.split(". Step time")[0] + "; the engine replays the 320 requests "
        "(tests/sim/test_timing.py holds their lengths). The run's first TTFT is 0.81 s: requests "
        "trickle in through the API server, which the engine does not model",
        published="duration 10.84 s, output throughput 6,027 tok/s",
        kind="replay",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=320,
        context_tokens=0,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=10.84,
        predicted_s=9.222,
        tolerance_ratio=0.20,
        fitted=False,
    ),
    CalibrationPoint(
        source="J. Musgrave, 'vLLM throughput-latency sweep on NVIDIA A100', "
        "https://johnmusgrave.com/p/vllm-throughput-latency-sweep-on",
        setup="1x A100 40GB (Lambda), Llama-3.1-8B-Instruct bf16, vLLM 0.23.0 defaults, vllm bench "
        "serve random 1024 in / 128 out --ignore-eos, max-concurrency 1; mean context 1088",
        published="decode at one request ~75 tokens/s (13.3 ms per token)",
        kind="decode",
        gpu="a100-40gb",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=1,
        context_tokens=1088,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=1 / 75,
        predicted_s=13.33e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_WMX,
        setup=_WMX_SETUP + "; concurrency 1, mean context 320. The host's CPU sets this step "
        "(the L4's kernels take 5.09 ms)",
        published="ITL p50 5.1 ms at concurrency 1",
        kind="decode",
        gpu="l4",
        model="qwen2.5-0.5b",
        tensor_parallel_size=1,
        batch_size=1,
        context_tokens=320,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=5.1e-3,
        predicted_s=5.104e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_WMX,
        setup=_WMX_SETUP + "; concurrency 32. The host's CPU sets this step: with concurrency 1 "
        "it fits the CPU's time per step and per request on this VM",
        published="ITL p50 7.1 ms at concurrency 32",
        kind="decode",
        gpu="l4",
        model="qwen2.5-0.5b",
        tensor_parallel_size=1,
        batch_size=32,
        context_tokens=320,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=7.1e-3,
        predicted_s=7.101e-3,
        tolerance_ratio=0.15,
        fitted=True,
    ),
)
"""Every published step-level figure the constants were fitted to (`fitted`) or checked against."""
