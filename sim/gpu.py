"""The simulated replica's GPUs: how busy they were, the memory they hold, the power they would draw.

The engine records every step's span and work (`GpuActivity.record`); each tensor-parallel rank
does an equal share, so every simulated GPU reads the same. Over the last `UTILIZATION_WINDOW_S`:

    utilisation           = seconds inside steps / window        (NVML's utilization.gpu)
    compute utilisation   = step FLOPs / (window × bf16 dense peak)
    bandwidth utilisation = step HBM bytes / (window × HBM bandwidth)
    power                 = idle + (TDP − idle) × min(1, compute + bandwidth utilisation)

FLOPs and bytes are the step-time roofline's own terms (`slotop.sim.timing`): matmuls over every
scheduled token, the LM head over every scheduled request, attention over its query·key pairs;
weights read once a step, KV read over every context and written for every new token. Power is a
model, not a measurement: tensor cores and HBM each draw in proportion to their use, and a GPU that
used both to the full would sit at TDP. TDP and idle power come from the hardware table.
Memory follows the KV sizing (`slotop.sim.capacity`): weights, activation peak, non-torch memory and
the KV pool, which is how vLLM fills its share of the GPU.

These are the sim's own families (`slotop_sim_gpu_*`, label `gpu`): no real GPU stands behind them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from slotop.sim.capacity import kv_token_bytes
from slotop.sim.types import EngineConfig, KvCapacity

UTILIZATION_WINDOW_S = 1.0
"""The span utilisation is averaged over. NVML's utilization.gpu is the share of "the past sample
period during which one or more kernels was executing", a period of 1/6 s to 1 s by product."""

_WEIGHT_BYTES = 2
"""Weights are bf16, as in the KV sizing."""


@dataclass(frozen=True, slots=True)
class Activity:
    """What the GPUs did over a span: seconds inside steps, and each GPU's FLOPs and HBM bytes."""

    span_s: float
    busy_s: float
    flops: float
    hbm_bytes: float


class GpuActivity:
    """The engine's record of its recent steps in simulated time, with each GPU's share of the work."""

    __slots__ = (
        "_attention_flops_per_pair",
        "_busy_s_total",
        "_horizon_s",
        "_kv_bytes_per_token",
        "_lm_head_flops",
        "_matmul_flops_per_token",
        "_steps",
        "_weight_bytes",
    )

    def __init__(self, config: EngineConfig, horizon_s: float = UTILIZATION_WINDOW_S) -> None:
        model = config.model
        tp = config.tensor_parallel_size
        embedding_params = model.vocab_size * model.hidden_size
        tables = 1 if model.tie_word_embeddings else 2
        body_params = model.num_params - tables * embedding_params
        self._weight_bytes = (body_params + embedding_params) * _WEIGHT_BYTES / tp
        self._matmul_flops_per_token = 2.0 * body_params / tp
        self._lm_head_flops = 2.0 * embedding_params / tp
        heads = max(1, model.num_attention_heads // tp)
        self._attention_flops_per_pair = 4.0 * model.num_layers * heads * model.head_dim
        self._kv_bytes_per_token = kv_token_bytes(config)
        self._horizon_s = horizon_s
        self._steps: deque[tuple[float, float, float, float]] = deque()
        self._busy_s_total = 0.0

    @property
    def busy_s_total(self) -> float:
        """Simulated seconds spent inside steps since the engine started."""
        return self._busy_s_total

    def record(
        self,
        start_s: float,
        end_s: float,
        num_requests: int,
        decode_tokens: int,
        decode_context_tokens: int,
        prefill_tokens: int,
        prefill_context_tokens: int,
        prefill_attention_pairs: int,
    ) -> None:
        """Note one step over [start_s, end_s] and its batch (the arguments `step_time_s` prices)."""
        if end_s <= start_s:
            return
        tokens = decode_tokens + prefill_tokens
        flops = (
            self._matmul_flops_per_token * tokens
            + self._lm_head_flops * num_requests
            + self._attention_flops_per_pair * (decode_context_tokens + prefill_attention_pairs)
        )
        kv_tokens = decode_context_tokens + prefill_context_tokens + tokens
        hbm_bytes = self._weight_bytes + self._kv_bytes_per_token * kv_tokens
        steps = self._steps
        steps.append((start_s, end_s, flops, hbm_bytes))
        self._busy_s_total += end_s - start_s
        forget_before = start_s - self._horizon_s
        while steps[0][1] <= forget_before:
            steps.popleft()

    def over(self, since_s: float, until_s: float) -> Activity:
        """The work inside [since_s, until_s], a step cut by either end counted pro rata."""
        busy = flops = hbm_bytes = 0.0
        for start, end, step_flops, step_bytes in self._steps:
            low = start if start > since_s else since_s
            high = end if end < until_s else until_s
            if high <= low:
                continue
            share = (high - low) / (end - start)
            busy += high - low
            flops += step_flops * share
            hbm_bytes += step_bytes * share
        return Activity(until_s - since_s, busy, flops, hbm_bytes)


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One simulated GPU over the recent window, and the memory it holds now."""

    utilization_ratio: float
    compute_utilization_ratio: float
    bandwidth_utilization_ratio: float
    power_w: float
    memory_used_bytes: int
    memory_weights_bytes: int
    memory_kv_cache_bytes: int


class SimGpus(Collector):
    """The `slotop_sim_gpu_*` families: one series per simulated GPU, read at each scrape.

    The engine counts simulated seconds, which the real-time loop keeps level with the wall clock;
    `sync` is told the simulated time of each step as it ends, so a scrape knows the simulated now.
    """

    def __init__(
        self,
        config: EngineConfig,
        capacity: KvCapacity,
        activity: GpuActivity,
        *,
        window_s: float = UTILIZATION_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.activity = activity
        self.window_s = window_s
        self._clock = clock
        self._offset_s: float | None = None
        gpu = config.gpu
        self._flops_per_window = gpu.bf16_dense_flops_per_s * window_s
        self._bytes_per_window = gpu.hbm_bandwidth_bytes_per_s * window_s
        self._kv_bytes = capacity.num_gpu_blocks * capacity.bytes_per_block
        self._weights_bytes = capacity.weights_bytes
        self._used_bytes = (
            capacity.weights_bytes
            + capacity.activation_peak_bytes
            + capacity.non_torch_bytes
            + self._kv_bytes
        )

    def sync(self, simulated_s: float) -> None:
        """Note that simulated time `simulated_s` is now on the wall clock."""
        self._offset_s = self._clock() - simulated_s

    def reading(self) -> GpuReading:
        """Each simulated GPU's reading now (all ranks alike)."""
        gpu = self.config.gpu
        if self._offset_s is None:
            activity = Activity(self.window_s, 0.0, 0.0, 0.0)
        else:
            now_s = self._clock() - self._offset_s
            activity = self.activity.over(now_s - self.window_s, now_s)
        compute = activity.flops / self._flops_per_window
        bandwidth = activity.hbm_bytes / self._bytes_per_window
        load = min(1.0, compute + bandwidth)
        return GpuReading(
            utilization_ratio=min(1.0, activity.busy_s / activity.span_s),
            compute_utilization_ratio=compute,
            bandwidth_utilization_ratio=bandwidth,
            power_w=gpu.idle_power_w + (gpu.tdp_w - gpu.idle_power_w) * load,
            memory_used_bytes=self._used_bytes,
            memory_weights_bytes=self._weights_bytes,
            memory_kv_cache_bytes=self._kv_bytes,
        )

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Expose every family with one series per tensor-parallel rank."""
        reading = self.reading()
        gpu = self.config.gpu
        ranks = [str(rank) for rank in range(self.config.tensor_parallel_size)]
        window = f"{self.window_s:g} s"

        def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, f"SIMULATED: {doc}", labels=["gpu"])
            for rank in ranks:
                family.add_metric([rank], value)
            return family

        info = GaugeMetricFamily(
            "slotop_sim_gpu_info",
            "SIMULATED: the GPU the simulated replica models (no real GPU stands behind it).",
            labels=["gpu", "name"],
        )
        for rank in ranks:
            info.add_metric([rank, gpu.device_name], 1.0)
        yield info
        yield gauge(
            "slotop_sim_gpu_utilization_ratio",
            f"Share of the last {window} the GPU spent in engine steps (as NVML's utilization.gpu).",
            reading.utilization_ratio,
        )
        yield gauge(
            "slotop_sim_gpu_compute_utilization_ratio",
            f"Step FLOPs over the last {window} as a share of the GPU's dense bf16 peak.",
            reading.compute_utilization_ratio,
        )
        yield gauge(
            "slotop_sim_gpu_memory_bandwidth_utilization_ratio",
            f"Step HBM bytes over the last {window} as a share of the GPU's memory bandwidth.",
            reading.bandwidth_utilization_ratio,
        )
        yield gauge(
            "slotop_sim_gpu_memory_used_bytes",
            "Device memory the replica holds: weights, activation peak, non-torch and KV pool.",
            reading.memory_used_bytes,
        )
        yield gauge(
            "slotop_sim_gpu_memory_total_bytes",
            "Device memory the GPU has (as torch reports it).",
            gpu.memory_bytes,
        )
        yield gauge(
            "slotop_sim_gpu_memory_weights_bytes",
            "Device memory the model's weights hold.",
            reading.memory_weights_bytes,
        )
        yield gauge(
            "slotop_sim_gpu_memory_kv_cache_bytes",
            "Device memory the KV-cache pool holds.",
            reading.memory_kv_cache_bytes,
        )
        yield gauge(
            "slotop_sim_gpu_power_watts",
            f"Board power over the last {window}: idle plus TDP's share by compute and bandwidth use.",
            reading.power_w,
        )
        yield gauge(
            "slotop_sim_gpu_power_limit_watts", "The GPU's board power limit (TDP).", gpu.tdp_w
        )
        busy = CounterMetricFamily(
            "slotop_sim_gpu_busy_seconds",
            "SIMULATED: seconds the GPU spent in engine steps since the replica started.",
            labels=["gpu"],
        )
        for rank in ranks:
            busy.add_metric([rank], self.activity.busy_s_total)
        yield busy
