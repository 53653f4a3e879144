"""What a simulated SGLang replica reports of its start-up: phase times and captured-graph memory.

The sim starts at once; these stand for a GPU server's start-up: weights read at
`WEIGHT_LOAD_BYTES_PER_S`, the KV pool allocated in half a second, 20 ms per captured graph size,
a second and a half of scheduler set-up and three of tokenizer set-up. Graph memory is SGLang's
own reserve estimate: 2 MiB per decode batch size, 8 MiB per prefill token size.
"""

from __future__ import annotations

from slotop.sim.sglang.config import SglangReplica
from slotop.sim.sglang.defaults import prefill_graph_sizes
from slotop.sim.sglang.families import GRAPH_PHASES

WEIGHT_LOAD_BYTES_PER_S = 2.0 * (1 << 30)
GRAPH_CAPTURE_S = 0.02


def graph_memory_gb(replica: SglangReplica) -> dict[str, float]:
    """Captured-graph memory by phase, in GB (only decode and prefill graphs are captured)."""
    decode_mib = replica.decode_graph_max_bs * 2
    prefill_mib = len(prefill_graph_sizes(replica.chunked_prefill_size)) * 8
    return dict.fromkeys(GRAPH_PHASES, 0.0) | {
        "prefill": prefill_mib / 1024,
        "decode": decode_mib / 1024,
    }


def graph_capture_s(replica: SglangReplica) -> dict[str, float]:
    """Seconds spent capturing graphs, by phase."""
    decode = GRAPH_CAPTURE_S * len(prefill_graph_sizes(replica.decode_graph_max_bs))
    prefill = GRAPH_CAPTURE_S * len(prefill_graph_sizes(replica.chunked_prefill_size))
    return dict.fromkeys(GRAPH_PHASES, 0.0) | {"prefill": prefill, "decode": decode}


def startup_times(replica: SglangReplica) -> dict[str, float]:
    """Start-up phases in seconds, as `sglang:startup_time_seconds` labels them."""
    load = replica.pool.weights_bytes / WEIGHT_LOAD_BYTES_PER_S
    allocation = 0.5
    scheduler = load + allocation + sum(graph_capture_s(replica).values()) + 1.5
    return {
        "load_weight": load,
        "kv_cache_allocation": allocation,
        "scheduler_e2e": scheduler,
        "tokenizer_e2e": scheduler + 3.0,
    }
