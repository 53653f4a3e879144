"""How long one scheduler step takes: the GPU's kernels by a roofline, the host's CPU work beside
them, and the two overlapped the way vLLM's async scheduling overlaps them.

The GPU runs every scheduled token through the model once. Per GPU (tensor parallel splits work):

    linear      = max((weight bytes + matmul activation bytes) / (HBM × MEMORY_EFFICIENCY),
                      2 × matmul params × tokens / (bf16 peak × GEMM_EFFICIENCY))
    attention   = max(KV bytes read / (HBM × MEMORY_EFFICIENCY),
                      4 × layers × heads × head_dim × query·key pairs / (bf16 peak × ATTENTION_EFFICIENCY))
    elementwise = tokens × elementwise bytes per token / (HBM × MEMORY_EFFICIENCY)
    comm        = 2 all-reduces per layer when tensor parallel: latency + ring bytes / link bandwidth
    gpu         = linear + attention + elementwise + comm
                  + GPU_STEP_S + GPU_LAYER_S × layers + GPU_REQUEST_S × scheduled requests

Decode is bound by bandwidth (weights once per step, plus every running sequence's KV), prefill by
tensor throughput, and the kernels between the matmuls (norms, rotary, the gated activation,
residual adds) by bandwidth on every token: `activation_bytes_per_token` counts them from the
model's shapes. They matter where bandwidth is scarce and the model small (a 2,048-token prefill
of Qwen2.5-0.5B on an L4 moves 2.5 GB through them: 11 ms beside its matmuls' 19 ms).

Beside the GPU, the engine core's CPU schedules the step, prepares its inputs and takes its
outputs: `cpu = host.cpu_scale × (CPU_STEP_S + CPU_REQUEST_S × scheduled requests)`. With async
scheduling (vLLM's default on GPUs) the next step is scheduled while this one runs, so a step takes
`max(gpu, cpu)`; without it, `gpu + cpu`. A large model's step is the GPU's (Llama-3.1-8B on an
H100: 6.6 ms of kernels against 2.3 ms of CPU); a small model's is the CPU's (Qwen2.5-0.5B on the
L4 VM: 5.09 ms of kernels, 5.10 ms of CPU), which is why its step grows with every request.

Every published figure the constants were fitted to, and the ones they are checked against, are in
`slotop.sim.calibration` with their setups; `bench/bench_sim_published.py` replays whole published
benchmark runs through the engine and the API server (`slotop.sim.apiserver`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop.sim.capacity import kv_token_bytes
from slotop.sim.types import EngineConfig, ModelSpec

MEMORY_EFFICIENCY = 0.78
"""Fraction of datasheet HBM bandwidth that decode matmuls, paged attention and the elementwise
kernels reach. Fitted with GPU_STEP_S to the batch-1 decode steps of current vLLM on an H100
(6.48 ms) and an A100 40GB (13.3 ms); see `calibration.CALIBRATION_POINTS`."""

GEMM_EFFICIENCY = 0.65
"""Fraction of dense bf16 peak that prefill matmuls reach: a kernel-level estimate, not fitted.

cuBLAS bf16 GEMMs of a few thousand rows reach 60-70 % of an H100's 989 TFLOPS.
"""

ATTENTION_EFFICIENCY = 0.50
"""Fraction of bf16 peak that FlashAttention-style prefill kernels reach (causal masks waste some)."""

GPU_STEP_S = 650e-6
"""GPU time every step costs beyond its roofline: launch gaps between CUDA graphs, the sampler's
kernels, the copies of inputs in and tokens out. Fitted with MEMORY_EFFICIENCY (see there)."""

GPU_LAYER_S = 5e-6
"""Per-layer launch and synchronisation cost left after CUDA graphs (attention runs outside them)."""

GPU_REQUEST_S = 18e-6
"""GPU time per scheduled request: sampling over the vocabulary, per-sequence attention metadata.

Fitted to the slope of the Lambda H100 sweep (8.2 ms per step at 20 sequences to 13.3 ms at 203,
after its KV reads and elementwise traffic are taken out); that run used vLLM's multi-step
scheduling, which spreads the host's work over ten steps, so its steps show the GPU alone.
"""

CPU_STEP_S = 2.23e-3
"""The engine core's CPU time per step on a datacenter host: scheduling, building the input
batch, launching the graphs, turning sampled ids into outputs.

Fitted with CPU_REQUEST_S and the small VM's `cpu_scale` to the three steps a host's CPU sets:
Qwen2.5-0.5B on the L4 VM at 1 and 32 streams (5.1 and 7.1 ms) and Qwen3-0.6B on an H100 host at
16 requests a second (2.39 ms TPOT, about 5 requests in a step). See `calibration`.
"""

CPU_REQUEST_S = 28.5e-6
"""The engine core's CPU time per scheduled request on a datacenter host (its row in the input
batch, its sampling parameters, its output). Fitted with CPU_STEP_S."""

ALL_REDUCE_LATENCY_S = 12e-6
"""Latency of one small all-reduce over NVLink with vLLM's custom all-reduce kernel (a datasheet-level
estimate, not fitted: it gives Llama-3.1-70B 16 ms per token at TP 4 and 9.7 ms at TP 8)."""

_ACTIVATION_BYTES = 2
"""Activations are bf16."""


@dataclass(frozen=True, slots=True)
class ActivationTraffic:
    """Elements one token moves through HBM per layer outside the weights and the KV cache.

    `matmul` are the four matmuls' inputs and outputs (QKV, output projection, gate/up, down),
    which their kernels overlap with the arithmetic; `elementwise` the kernels between them,
    which do nothing but move it: two fused add-RMSNorms (read hidden and residual, write both),
    rotary on q and k (read and write), attention's q in and output out, the gated activation
    (read gate and up, write their product).
    """

    matmul: int
    elementwise: int


def activation_traffic(model: ModelSpec, tensor_parallel_size: int) -> ActivationTraffic:
    """Per-GPU activation elements per token per layer, from the model's shapes (hidden is whole
    on every rank; heads and the MLP are split)."""
    tp = tensor_parallel_size
    hidden = model.hidden_size
    q = model.num_attention_heads * model.head_dim // tp
    kv = max(1, model.num_kv_heads // tp) * model.head_dim
    inter = model.intermediate_size // tp
    matmul = (hidden + q + 2 * kv) + (q + hidden) + (hidden + 2 * inter) + (inter + hidden)
    elementwise = 8 * hidden + 2 * (q + kv) + 2 * q + 3 * inter
    return ActivationTraffic(matmul=matmul, elementwise=elementwise)


@dataclass(frozen=True, slots=True)
class StepTime:
    """One step priced: the GPU's kernels, the host's CPU work, and the step they make together."""

    gpu_s: float
    cpu_s: float
    step_s: float


class StepTimeModel:
    """Prices a scheduled batch in seconds for one model, GPU, host, tensor-parallel size and KV dtype."""

    __slots__ = (
        "_async",
        "_attention_flop_rate",
        "_attention_flops_per_pair",
        "_comm_per_step_s",
        "_comm_per_token_s",
        "_cpu_request_s",
        "_cpu_step_s",
        "_elementwise_s_per_token",
        "_gemm_flop_rate",
        "_gpu_fixed_s",
        "_gpu_request_s",
        "_kv_bytes_per_token",
        "_lm_head_flops",
        "_matmul_bytes_per_token",
        "_matmul_flops_per_token",
        "_memory_rate",
        "_weight_bytes",
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
        self._weight_bytes = (body_params + embedding_params) * 2 / tp
        self._matmul_flops_per_token = 2.0 * body_params / tp
        self._lm_head_flops = 2.0 * embedding_params / tp
        traffic = activation_traffic(model, tp)
        per_layer = _ACTIVATION_BYTES * model.num_layers
        self._matmul_bytes_per_token = traffic.matmul * per_layer
        self._elementwise_s_per_token = traffic.elementwise * per_layer / self._memory_rate
        heads = max(1, model.num_attention_heads // tp)
        self._attention_flops_per_pair = 4.0 * model.num_layers * heads * model.head_dim
        self._kv_bytes_per_token = kv_token_bytes(config)
        if tp > 1:
            ring = 2.0 * (tp - 1) / tp
            self._comm_per_step_s = 2 * model.num_layers * ALL_REDUCE_LATENCY_S
            self._comm_per_token_s = (
                2 * model.num_layers * ring * model.hidden_size * 2 / gpu.interconnect_bytes_per_s
            )
        else:
            self._comm_per_step_s = 0.0
            self._comm_per_token_s = 0.0
        self._gpu_fixed_s = GPU_STEP_S + GPU_LAYER_S * model.num_layers
        self._gpu_request_s = GPU_REQUEST_S
        self._cpu_step_s = CPU_STEP_S * config.host.cpu_scale
        self._cpu_request_s = CPU_REQUEST_S * config.host.cpu_scale
        self._async = config.async_scheduling

    def price(
        self,
        num_requests: int,
        decode_tokens: int,
        decode_context_tokens: int,
        prefill_tokens: int,
        prefill_context_tokens: int,
        prefill_attention_pairs: int,
    ) -> StepTime:
        """One step over the given batch (contexts count the tokens whose KV is read)."""
        if num_requests == 0:
            return StepTime(0.0, 0.0, 0.0)
        tokens = decode_tokens + prefill_tokens
        gemm_s = (
            self._matmul_flops_per_token * tokens + self._lm_head_flops * num_requests
        ) / self._gemm_flop_rate
        linear_bytes_s = (
            self._weight_bytes + self._matmul_bytes_per_token * tokens
        ) / self._memory_rate
        linear_s = linear_bytes_s if linear_bytes_s > gemm_s else gemm_s
        kv_bytes = (decode_context_tokens + prefill_context_tokens) * self._kv_bytes_per_token
        kv_s = kv_bytes / self._memory_rate
        attention_flops_s = (
            self._attention_flops_per_pair
            * (decode_context_tokens + prefill_attention_pairs)
            / self._attention_flop_rate
        )
        attention_s = kv_s if kv_s > attention_flops_s else attention_flops_s
        comm_s = self._comm_per_step_s + self._comm_per_token_s * tokens
        gpu_s = (
            linear_s
            + attention_s
            + self._elementwise_s_per_token * tokens
            + comm_s
            + self._gpu_fixed_s
            + self._gpu_request_s * num_requests
        )
        cpu_s = self._cpu_step_s + self._cpu_request_s * num_requests
        # Overlapped under async scheduling (the longer sets the pace), one after the other without.
        overlapped_s = gpu_s if gpu_s > cpu_s else cpu_s
        return StepTime(gpu_s, cpu_s, overlapped_s if self._async else gpu_s + cpu_s)

    def step_time_s(
        self,
        num_requests: int,
        decode_tokens: int,
        decode_context_tokens: int,
        prefill_tokens: int,
        prefill_context_tokens: int,
        prefill_attention_pairs: int,
    ) -> float:
        """Seconds for one step over the given batch (see `price`)."""
        return self.price(
            num_requests,
            decode_tokens,
            decode_context_tokens,
            prefill_tokens,
            prefill_context_tokens,
            prefill_attention_pairs,
        ).step_s

    def decode_price(self, batch_size: int, context_tokens: int) -> StepTime:
        """A pure decode step of `batch_size` sequences each holding `context_tokens` of KV."""
        return self.price(batch_size, batch_size, batch_size * (context_tokens + 1), 0, 0, 0)

    def decode_step_s(self, batch_size: int, context_tokens: int) -> float:
        """Seconds of a pure decode step (see `decode_price`)."""
        return self.decode_price(batch_size, context_tokens).step_s

    def prefill_step_s(self, prompt_tokens: int) -> float:
        """One whole prompt prefilled alone in one step (no chunking)."""
        pairs = prompt_tokens * (prompt_tokens + 1) // 2
        return self.step_time_s(1, 0, 0, prompt_tokens, prompt_tokens, pairs)
