"""How long one scheduler step takes: a per-kernel roofline with efficiencies and overheads fitted to
published vLLM measurements.

A step runs every scheduled token through the model once. Per GPU (tensor parallel splits work):

    linear    = max(weight bytes / (HBM × MEMORY_EFFICIENCY),
                    2 × matmul params × tokens / (bf16 peak × GEMM_EFFICIENCY))
    attention = max(KV bytes read / (HBM × MEMORY_EFFICIENCY),
                    4 × layers × heads × head_dim × query·key pairs / (bf16 peak × ATTENTION_EFFICIENCY))
    comm      = 2 all-reduces per layer when tensor parallel: latency + ring bytes / link bandwidth
    step      = linear + attention + comm
                + STEP_OVERHEAD + LAYER_OVERHEAD × layers + REQUEST_OVERHEAD × scheduled requests

Decode is bound by bandwidth (weights once per step, plus every running sequence's KV), prefill by
tensor throughput, and a mixed step by whichever bound its parts hit. A pure roofline decodes
Llama-3.1-8B on an H100 SXM in 4.8 ms; vLLM's measured 6.5 ms is what the efficiencies and overheads
add. Every published figure used is in `CALIBRATION_POINTS` with its setup, the model's prediction and
a tolerance that `tests/sim/test_timing.py` enforces.

Where the sources disagree, the model follows current vLLM (V1 engine, 0.2x releases):
- Batch-1 decode on H100: 6.48 ms (vLLM 0.21) vs 7.05 ms in Lambda's 2024 prompt_10 run (vLLM 0.6,
  older kernels) vs "1 token every 13 ms under light load" in the vLLM 0.6.0 blog about 0.5.3 (CPU
  bound then). The fixed overheads follow the 0.21 figure; the Lambda 320-prompt run, the only one
  with per-step times up to batch ~200, sets the per-request slope; at 20 sequences it runs 6 %
  above the model, the older kernels showing.
- The InferenceBench sweep's 10.9 ms at 16 streams and 46.9 ms at 64 contradict the Lambda per-step
  times (8.2 ms at 20, 9.6 ms at 64) and plateau at 1.3k tok/s, a client limit; they are not used.
- H200: the one vLLM figure found (vLLM CI latency test) runs 22 % slower than the model, the same
  test on H100 13 % slower; that harness carries ~1-1.5 ms more per step than `vllm serve` TPOTs
  imply. H200 uses the H100-fitted efficiencies with its datasheet bandwidth; trust it to ±25 %.
Not calibrated against any measurement: prefill GEMM and attention efficiencies (no published vLLM
TTFT isolates prefill from the API server's own time), tensor-parallel communication, fp8 KV, L40S.

Around the steps, `API_SERVER` prices what vLLM's API server adds to a client's view: the time
from a request's arrival to the engine (parsing, chat template, tokenising, hand-off), one request
after another, and from a step's end to the client (detokenising, the SSE chunk). Its parts are
measured on vLLM 0.32 itself and scaled to the published H100 first token;
`bench/bench_sim_published.py` sets the whole against published TTFTs and ITLs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from slotop.sim.capacity import kv_bytes_per_token, kv_dtype_bytes
from slotop.sim.openai import RequestKind
from slotop.sim.types import EngineConfig

MEMORY_EFFICIENCY = 0.80
"""Fraction of datasheet HBM bandwidth that decode GEMMs and paged attention reach.

Fitted with STEP_OVERHEAD_S to three batch-1 decode TPOTs of current vLLM on three GPUs (H100 SXM
6.48 ms, A100-40GB 13.3 ms, L4 5.1 ms; see CALIBRATION_POINTS); they agree within 2 %.
"""

GEMM_EFFICIENCY = 0.65
"""Fraction of dense bf16 peak that prefill GEMMs reach: a kernel-level estimate, not fitted.

cuBLAS bf16 GEMMs of a few thousand rows reach 60-70 % of an H100's 989 TFLOPS. No published vLLM
figure isolates prefill time from the API server's share of TTFT, so none could pin this.
"""

ATTENTION_EFFICIENCY = 0.50
"""Fraction of bf16 peak that FlashAttention-style prefill kernels reach (causal masks waste some)."""

STEP_OVERHEAD_S = 800e-6
"""Fixed cost of every step: scheduling, input preparation, sampling launch, output processing.

Fitted with MEMORY_EFFICIENCY to the batch-1 TPOTs above: with LAYER_OVERHEAD_S it adds 0.96 ms to
Llama-3.1-8B's 5.6 ms of weight reads on an H100, giving 6.6 ms against vLLM's measured 6.48 ms.
"""

LAYER_OVERHEAD_S = 5e-6
"""Per-layer launch and synchronisation cost left after CUDA graphs (norms, rotary, cache writes)."""

REQUEST_OVERHEAD_S = 24e-6
"""Per scheduled request: sampling over the vocabulary, block tables, per-sequence attention setup.

Fitted to the slope of the Lambda H100 sweep: 8.2 ms per step at 20 sequences to 13.3 ms at 203,
after the extra KV reads are taken out (vLLM 0.6 multi-step, so host-side work is amortised).
"""

ALL_REDUCE_LATENCY_S = 12e-6
"""Latency of one small all-reduce over NVLink with vLLM's custom all-reduce kernel (a datasheet-level
estimate, not fitted: it gives Llama-3.1-70B 16 ms per token at TP 4 and 9.7 ms at TP 8)."""

# --- the API server around the engine -----------------------------------------------------------

API_SERVER_MEASURED_S: dict[str, float] = {
    "completion_request": 1.4e-3,
    "chat_request": 2.07e-3,
    "tokenize_per_token": 1.22e-6,
    "response": 1.36e-3,
}
"""The API server's time outside the engine, measured on vLLM 0.32 itself (seconds).

`bench/bench_vllm_first_token.py` times the tiny vLLM CPU replica one request at a time, medians
of per-request figures with the kinds taken in turn. vLLM's own `time_to_first_token` less its
queue and prefill times is the frontend's work inside vLLM's TTFT (request: parsing, the chat
template, tokenising, handing the request to the engine core), a raw client's TTFT less vLLM's
TTFT the work outside it (response: detokenising, the SSE chunk, the socket). The hand-back from
the engine core falls in the first and the HTTP parsing before vLLM stamps the arrival in the
second; both are small and taken as a wash. Figures from the run on a quiet 2-vCPU box (load
average 0.9): request 1.20 ms for 16 token ids, 1.60 for a 17-token text prompt (taken together
as 1.4), 1.94 for a 27-token chat; response 1.30-1.46 ms for completions (1.36), 1.52 for chat;
tokenising the slope between a 601-token and a 17-token text prompt, 1.22 us a token. Runs at
load averages 3-7 gave 2-3x the request side (the frontend waiting for the CPU) and the same
response side. A chat's extra response time (the role chunk) is counted on its request side, so
every token of every kind leaves `response` after its step.
"""

INFERENCEBENCH_API_SERVER_S = 13.98e-3 - 6.59e-3
"""The published H100 TTFT at concurrency 1 (13.98 ms, a ~50-token chat prompt; see
CALIBRATION_POINTS) less the model's 6.59 ms prefill step of 50 tokens: what that host's API
server, and the benchmark's own client, took outside the GPU."""

API_SERVER_HOST_SCALE = INFERENCEBENCH_API_SERVER_S / (
    API_SERVER_MEASURED_S["chat_request"]
    + 50 * API_SERVER_MEASURED_S["tokenize_per_token"]
    + API_SERVER_MEASURED_S["response"]
)
"""How much longer the published GPU host's first token spent outside the engine than the parts
measured here add up to: every part is scaled by it, so the published point is met and the parts
keep their measured proportions. A slower host runs more (the 4-vCPU L4 VM in
`bench/bench_sim_published.py` about 3x); trust these to ±50 % on any one host."""


@dataclass(frozen=True, slots=True)
class ApiServerTiming:
    """What vLLM's API server adds to a request outside the engine's steps, in seconds.

    A request reaches the engine `to_engine_s` after it arrives over HTTP, and every token reaches
    the client `response_s` after the end of the step that made it (a constant, so inter-token
    gaps keep the steps' rhythm). The server works through requests one at a time, so requests
    that arrive together reach the engine one after another (`realtime.ApiServerQueue`). A
    request that reaches a busy engine waits for the step already running: the engine's schedule
    does that, so nothing here adds it again.

    Not modelled: the server's own work on the tokens it streams (detokenising, one SSE chunk per
    token per stream; 68 us of its CPU a token on the development box's vLLM 0.32, by the same
    bench) also queues ahead of new requests, and past some thousands of tokens a second
    saturates one API server process; the sim delivers every token on time regardless.
    """

    completion_request_s: float
    chat_request_s: float
    tokenize_s_per_token: float
    response_s: float

    def to_engine_s(self, kind: RequestKind, tokenized_prompt_tokens: int) -> float:
        """From a request's arrival over HTTP to the engine core holding it."""
        base = self.chat_request_s if kind == "chat" else self.completion_request_s
        return base + self.tokenize_s_per_token * tokenized_prompt_tokens


API_SERVER = ApiServerTiming(
    completion_request_s=API_SERVER_MEASURED_S["completion_request"] * API_SERVER_HOST_SCALE,
    chat_request_s=API_SERVER_MEASURED_S["chat_request"] * API_SERVER_HOST_SCALE,
    tokenize_s_per_token=API_SERVER_MEASURED_S["tokenize_per_token"] * API_SERVER_HOST_SCALE,
    response_s=API_SERVER_MEASURED_S["response"] * API_SERVER_HOST_SCALE,
)
"""The API server of a GPU host, as the simulated replica applies it."""

NO_API_SERVER = ApiServerTiming(0.0, 0.0, 0.0, 0.0)
"""An API server that takes no time: the engine's view, and the sim's before it priced the server."""


PointKind = Literal["decode", "ttft", "latency", "replay"]
"""What a calibration point measures.

decode: one decode step (TPOT/ITL) at `batch_size` sequences of `context_tokens`;
ttft: one chat prompt of `prefill_tokens` prefilled alone, plus the API server's time (API_SERVER);
latency: `batch_size` prompts of `prefill_tokens` prefilled together, then `output_tokens - 1`
decode steps (vLLM's offline latency benchmark);
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
_VLLM_CI = "vLLM CI performance benchmark, latency_llama8B_tp1 (vLLM version not shown on the page)"
_VLLM_CI_SETUP = (
    "Llama-3.1-8B, TP 1, offline latency benchmark: 8 prompts of 32 tokens, 128 output tokens, "
    "mean end-to-end latency of the batch"
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
        predicted_s=6.595e-3,
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
        predicted_s=6.696e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_INFERENCEBENCH,
        setup=_INFERENCEBENCH_SETUP + ", concurrency 1; prompt ~50 tokens (Llama-3.1 chat "
        "template ~30 + a 10-20 token question); the API server's time (API_SERVER) is scaled "
        "to this point",
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
        predicted_s=13.99e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 55: 20 sequences, mean context 674",
        published="10-token burst of 81.7 ms",
        kind="decode",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=20,
        context_tokens=674,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=8.17e-3,
        predicted_s=7.701e-3,
        tolerance_ratio=0.10,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 42: 50 sequences, mean context 586",
        published="10-token burst of 91.2 ms",
        kind="decode",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=50,
        context_tokens=586,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=9.12e-3,
        predicted_s=9.196e-3,
        tolerance_ratio=0.10,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 30: 104 sequences, mean context 437",
        published="10-token burst of 107.4 ms",
        kind="decode",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=104,
        context_tokens=437,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=10.74e-3,
        predicted_s=11.28e-3,
        tolerance_ratio=0.10,
        fitted=True,
    ),
    CalibrationPoint(
        source=_LAMBDA,
        setup=_LAMBDA_SETUP + "; burst 6: 203 sequences, mean context 192",
        published="10-token burst of 133.1 ms",
        kind="decode",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=203,
        context_tokens=192,
        prefill_tokens=0,
        output_tokens=0,
        measured_s=13.31e-3,
        predicted_s=13.35e-3,
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
        predicted_s=9.192,
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
        predicted_s=13.16e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_WMX,
        setup=_WMX_SETUP + "; concurrency 1, mean context 320",
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
        predicted_s=5.077e-3,
        tolerance_ratio=0.05,
        fitted=True,
    ),
    CalibrationPoint(
        source=_WMX,
        setup=_WMX_SETUP + "; concurrency 32. The model is low here: this run's per-request cost "
        "(~48 us) is twice the H100 sweep's, and the model keeps one constant",
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
        predicted_s=6.331e-3,
        tolerance_ratio=0.15,
        fitted=True,
    ),
    CalibrationPoint(
        source=_VLLM_CI + ", https://buildkite.com/vllm/performance-benchmark/builds/9515",
        setup="1x H200, " + _VLLM_CI_SETUP + ". Cross-check only: see the module docstring",
        published="mean latency 833.421 ms",
        kind="latency",
        gpu="h200",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=8,
        context_tokens=0,
        prefill_tokens=32,
        output_tokens=128,
        measured_s=0.833421,
        predicted_s=0.6528,
        tolerance_ratio=0.25,
        fitted=False,
    ),
    CalibrationPoint(
        source=_VLLM_CI + ", a build run on 8xH100 (read from the stored copy at "
        "https://buildkite.com/elastic/enterprise-search-ruby/builds/571)",
        setup="1 of 8x H100, " + _VLLM_CI_SETUP + ". Cross-check only",
        published="mean latency 997.542 ms",
        kind="latency",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tensor_parallel_size=1,
        batch_size=8,
        context_tokens=0,
        prefill_tokens=32,
        output_tokens=128,
        measured_s=0.997542,
        predicted_s=0.8692,
        tolerance_ratio=0.25,
        fitted=False,
    ),
)
"""Every published figure the constants were fitted to (`fitted`) or checked against, best first."""


class StepTimeModel:
    """Prices a scheduled batch in seconds for one model, GPU, tensor-parallel size and KV dtype."""

    __slots__ = (
        "_attention_flop_rate",
        "_attention_flops_per_pair",
        "_comm_per_step_s",
        "_comm_per_token_s",
        "_fixed_s",
        "_gemm_flop_rate",
        "_kv_bytes_per_token",
        "_lm_head_flops",
        "_matmul_flops_per_token",
        "_memory_rate",
        "_request_s",
        "_weights_s",
    )

    def __init__(self, config: EngineConfig) -> None:
        model = config.model
        gpu = config.gpu
        tp = config.tensor_parallel_size
        embedding_params = model.vocab_size * model.hidden_size
        tables = 1 if model.tie_word_embeddings else 2
        body_params = model.num_params - tables * embedding_params
        self._memory_rate = gpu.hbm_bandwidth_bytes_per_s * MEMORY_EFFICIENCY
        self._gemm_flop_rate = gpu.bf16_dense_flops_per_s * GEMM_EFFICIENCY
        self._attention_flop_rate = gpu.bf16_dense_flops_per_s * ATTENTION_EFFICIENCY
        weight_bytes = (body_params + embedding_params) * 2 / tp
        self._weights_s = weight_bytes / self._memory_rate
        self._matmul_flops_per_token = 2.0 * body_params / tp
        self._lm_head_flops = 2.0 * embedding_params / tp
        heads = max(1, model.num_attention_heads // tp)
        self._attention_flops_per_pair = 4.0 * model.num_layers * heads * model.head_dim
        self._kv_bytes_per_token = kv_bytes_per_token(
            model, tp, kv_dtype_bytes(config.kv_cache_dtype)
        )
        if tp > 1:
            ring = 2.0 * (tp - 1) / tp
            self._comm_per_step_s = 2 * model.num_layers * ALL_REDUCE_LATENCY_S
            self._comm_per_token_s = (
                2 * model.num_layers * ring * model.hidden_size * 2 / gpu.interconnect_bytes_per_s
            )
        else:
            self._comm_per_step_s = 0.0
            self._comm_per_token_s = 0.0
        self._fixed_s = STEP_OVERHEAD_S + LAYER_OVERHEAD_S * model.num_layers
        self._request_s = REQUEST_OVERHEAD_S

    def step_time_s(
        self,
        num_requests: int,
        decode_tokens: int,
        decode_context_tokens: int,
        prefill_tokens: int,
        prefill_context_tokens: int,
        prefill_attention_pairs: int,
    ) -> float:
        """Seconds for one step over the given batch (contexts count the tokens whose KV is read)."""
        if num_requests == 0:
            return 0.0
        tokens = decode_tokens + prefill_tokens
        gemm_s = (
            self._matmul_flops_per_token * tokens + self._lm_head_flops * num_requests
        ) / self._gemm_flop_rate
        linear_s = self._weights_s if self._weights_s > gemm_s else gemm_s
        kv_bytes = (decode_context_tokens + prefill_context_tokens) * self._kv_bytes_per_token
        kv_s = kv_bytes / self._memory_rate
        attention_flops_s = (
            self._attention_flops_per_pair
            * (decode_context_tokens + prefill_attention_pairs)
            / self._attention_flop_rate
        )
        attention_s = kv_s if kv_s > attention_flops_s else attention_flops_s
        comm_s = self._comm_per_step_s + self._comm_per_token_s * tokens
        return linear_s + attention_s + comm_s + self._fixed_s + self._request_s * num_requests

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        """A pure decode step of `batch_size` sequences each holding `context_tokens` of KV."""
        return self.step_time_s(batch_size, batch_size, batch_size * (context_tokens + 1), 0, 0, 0)

    def prefill_step_s(self, prompt_tokens: int) -> float:
        """One whole prompt prefilled alone in one step (no chunking)."""
        pairs = prompt_tokens * (prompt_tokens + 1) // 2
        return self.step_time_s(1, 0, 0, prompt_tokens, prompt_tokens, pairs)

    def first_token_s(self, prompt_tokens: int, kind: RequestKind = "chat") -> float:
        """A client's TTFT for one text prompt on an idle replica: prefill plus the API server."""
        api = API_SERVER
        prefill_s = self.prefill_step_s(prompt_tokens)
        return api.to_engine_s(kind, prompt_tokens) + prefill_s + api.response_s

    def batch_latency_s(self, batch_size: int, prompt_tokens: int, output_tokens: int) -> float:
        """End-to-end time of `batch_size` equal prompts prefilled together, then decoded in step."""
        pairs = batch_size * (prompt_tokens * (prompt_tokens + 1) // 2)
        prompt_total = batch_size * prompt_tokens
        total = self.step_time_s(batch_size, 0, 0, prompt_total, prompt_total, pairs)
        for generated in range(1, output_tokens):
            total += self.decode_step_s(batch_size, prompt_tokens + generated)
        return total
