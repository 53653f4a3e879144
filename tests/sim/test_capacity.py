"""KV-cache sizing against vLLM's formula, worked by hand for several model/GPU/dtype combinations."""

from __future__ import annotations

import math

import pytest

from slotop.sim.capacity import (
    activation_peak_bytes,
    fit_max_model_len,
    kv_bytes_per_token,
    kv_capacity,
    kv_dtype_bytes,
    weights_bytes,
)
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.errors import KvCapacityError, SimConfigError
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.types import EngineConfig

GIB = 1 << 30


def config(
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    dtype: str = "auto",
    tp: int = 1,
    max_model_len: int | None = None,
    utilization: float = 0.9,
    override: int | None = None,
) -> EngineConfig:
    return resolve_engine_config(
        MODELS[model],
        GPUS[gpu],
        kv_cache_dtype=dtype,
        tensor_parallel_size=tp,
        max_model_len=max_model_len,
        gpu_memory_utilization=utilization,
        num_gpu_blocks_override=override,
    )


# 2 (K and V) × layers × kv heads per GPU × head_dim × bytes, worked by hand.
BYTES_PER_TOKEN = [
    ("llama-3.1-8b", 1, "auto", 2 * 32 * 8 * 128 * 2),  # 131,072: the famous 128 KiB/token
    ("llama-3.1-8b", 1, "fp8", 2 * 32 * 8 * 128 * 1),
    ("llama-3.1-70b", 4, "bfloat16", 2 * 80 * 2 * 128 * 2),  # 8 KV heads over 4 GPUs
    ("llama-3.1-70b", 8, "fp8_e5m2", 2 * 80 * 1 * 128 * 1),
    ("qwen2.5-7b", 1, "float16", 2 * 28 * 4 * 128 * 2),
    ("qwen2.5-0.5b", 2, "fp8_e4m3", 2 * 24 * 1 * 64 * 1),
    ("mistral-7b", 1, "auto", 2 * 32 * 8 * 128 * 2),
]


@pytest.mark.parametrize(("model", "tp", "dtype", "expected"), BYTES_PER_TOKEN)
def test_bytes_per_token_follow_the_formula(model: str, tp: int, dtype: str, expected: int) -> None:
    assert kv_bytes_per_token(MODELS[model], tp, kv_dtype_bytes(dtype)) == expected


def test_kv_heads_are_replicated_when_ranks_outnumber_them() -> None:
    # Qwen2.5-0.5B has 2 KV heads; at TP 4 each rank still holds one head.
    assert kv_bytes_per_token(MODELS["qwen2.5-0.5b"], 4, 2) == 2 * 24 * 1 * 64 * 2


def test_llama_8b_on_h100_worked_by_hand() -> None:
    capacity = kv_capacity(config(max_model_len=131072))
    total = round(79.19 * GIB)
    requested = math.ceil(total * 0.9)
    weights = 8_030_261_248 * 2 + 131072 * 128 * 2  # bf16 weights + rotary cos/sin cache
    activations = 8192 * (3 * 14336 + 6 * 4096) * 2 + int(0.30 * GIB)  # forward peak + graphs
    non_torch = int(0.30 * GIB)
    available = requested - weights - activations - non_torch
    blocks = available // (16 * 131072)
    assert (capacity.requested_memory_bytes, capacity.weights_bytes) == (requested, weights)
    assert capacity.activation_peak_bytes == activations
    assert capacity.available_kv_cache_bytes == available
    assert capacity.num_gpu_blocks == blocks == 27_981
    assert capacity.max_concurrency == blocks / (131072 // 16)
    assert capacity.kv_cache_size_tokens == int(blocks / 8192 * 131072) == 447_696
    # vLLM's own log for this pair at 0.9 reads 14.99 GiB of weights and ~447k tokens.
    assert round(capacity.weights_bytes / GIB, 2) == 14.99


COMBINATIONS = [
    ("llama-3.1-8b", "h100-sxm", "auto", 1, 8192),
    ("llama-3.1-8b", "h200", "fp8", 1, 131072),
    ("llama-3.1-8b", "l40s", "auto", 1, 16384),
    ("llama-3.1-70b", "h100-sxm", "auto", 4, 32768),
    ("llama-3.1-70b", "a100-80gb", "fp8", 8, 131072),
    ("qwen2.5-7b", "l4", "fp8_e4m3", 1, 8192),
    ("mistral-7b", "h100-pcie", "bfloat16", 1, 32768),
]


@pytest.mark.parametrize(("model", "gpu", "dtype", "tp", "max_len"), COMBINATIONS)
def test_capacity_follows_vllm_s_formula(
    model: str, gpu: str, dtype: str, tp: int, max_len: int
) -> None:
    cfg = config(model, gpu, dtype, tp, max_len)
    capacity = kv_capacity(cfg)
    requested = math.ceil(GPUS[gpu].memory_bytes * 0.9)
    available = (
        requested
        - weights_bytes(MODELS[model], tp)
        - capacity.activation_peak_bytes
        - capacity.non_torch_bytes
    )
    per_block = kv_bytes_per_token(MODELS[model], tp, kv_dtype_bytes(dtype)) * 16
    blocks = available // per_block
    assert capacity.num_gpu_blocks == blocks
    assert capacity.bytes_per_block == per_block
    assert capacity.max_concurrency == pytest.approx(blocks / math.ceil(max_len / 16))
    # vLLM 0.32 reports tokens as concurrency × max_model_len, which is blocks × block_size
    # whenever max_model_len is a multiple of the block size.
    assert capacity.kv_cache_size_tokens == blocks * 16
    assert capacity.kv_cache_size_tokens / max_len == pytest.approx(capacity.max_concurrency)


@pytest.mark.parametrize(("model", "gpu", "tp"), [("llama-3.1-8b", "h100-sxm", 1), ("llama-3.1-70b", "h200", 2), ("qwen2.5-7b", "l4", 1)])  # fmt: skip
def test_fp8_doubles_the_tokens(model: str, gpu: str, tp: int) -> None:
    bf16 = kv_capacity(config(model, gpu, "auto", tp, 8192))
    fp8 = kv_capacity(config(model, gpu, "fp8", tp, 8192))
    assert fp8.bytes_per_token * 2 == bf16.bytes_per_token
    assert fp8.num_gpu_blocks in (2 * bf16.num_gpu_blocks, 2 * bf16.num_gpu_blocks + 1)
    assert fp8.max_concurrency == pytest.approx(2 * bf16.max_concurrency, rel=1e-3)


def test_a_smaller_max_num_batched_tokens_leaves_more_kv() -> None:
    model = MODELS["llama-3.1-8b"]
    assert activation_peak_bytes(model, 1, 2048, 256) < activation_peak_bytes(model, 1, 8192, 256)
    small = resolve_engine_config(
        model, GPUS["h100-sxm"], max_num_batched_tokens=2048, max_num_seqs=256
    )
    assert kv_capacity(small).num_gpu_blocks > kv_capacity(config()).num_gpu_blocks


def test_the_profile_runs_activations_for_max_num_batched_tokens_come_out_of_the_kv_cache() -> None:
    # Llama-3.1-8B, fp8 on an H100 at utilisation 0.25, 64 sequences: the profile run's forward
    # pass at 16,384 tokens holds (3 × 14,336 + 6 × 4,096) × 2 = 135,168 bytes a token; at 2,048
    # tokens the difference, 14,336 × 135,168 = 1,937,768,448 bytes, goes to the cache: 1,848
    # blocks of 16 fp8 tokens (1 MiB each), 29,568 tokens (the sampler's 64 rows, 66 MB, are
    # under both)
    def sized(tokens: int) -> int:
        engine = resolve_engine_config(
            MODELS["llama-3.1-8b"],
            GPUS["h100-sxm"],
            kv_cache_dtype="fp8",
            max_num_seqs=64,
            max_num_batched_tokens=tokens,
            gpu_memory_utilization=0.25,
            max_model_len=4096,
        )
        return kv_capacity(engine).num_gpu_blocks

    assert sized(2048) - sized(16384) in (1848, 1849)


def test_more_utilisation_means_more_blocks() -> None:
    low = kv_capacity(config(utilization=0.5, max_model_len=8192))
    high = kv_capacity(config(utilization=0.95, max_model_len=8192))
    assert high.num_gpu_blocks > low.num_gpu_blocks
    # The extra 45% of memory all goes to the KV cache.
    extra = math.ceil(GPUS["h100-sxm"].memory_bytes * 0.95) - math.ceil(
        GPUS["h100-sxm"].memory_bytes * 0.5
    )
    assert high.available_kv_cache_bytes - low.available_kv_cache_bytes == extra


def test_weights_that_do_not_fit_are_refused_with_a_way_out() -> None:
    with pytest.raises(KvCapacityError, match="tensor-parallel-size"):
        kv_capacity(config("llama-3.1-70b", "h100-sxm", tp=1, max_model_len=8192))


def test_a_max_model_len_the_cache_cannot_hold_is_refused_like_vllm() -> None:
    with pytest.raises(KvCapacityError) as caught:
        kv_capacity(config("llama-3.1-8b", "l4", max_model_len=131072))
    message = str(caught.value)
    assert "To serve at least one request with the model's max seq len (131072)" in message
    assert "16.00 GiB KV cache is needed" in message
    assert "estimated maximum model length is" in message


def test_the_estimated_maximum_model_length_really_fits() -> None:
    with pytest.raises(KvCapacityError) as caught:
        kv_capacity(config("llama-3.1-8b", "l4", max_model_len=131072))
    estimate = int(str(caught.value).split("estimated maximum model length is ")[1].split(".")[0])
    assert kv_capacity(config("llama-3.1-8b", "l4", max_model_len=estimate)).max_concurrency >= 1
    with pytest.raises(KvCapacityError):
        kv_capacity(config("llama-3.1-8b", "l4", max_model_len=estimate + 16))


def test_the_block_override_sets_the_block_count() -> None:
    capacity = kv_capacity(config(max_model_len=256, override=40))
    assert capacity.num_gpu_blocks == 40
    assert capacity.kv_cache_size_tokens == 640
    with pytest.raises(KvCapacityError):
        kv_capacity(config(max_model_len=1024, override=40))
    with pytest.raises(SimConfigError):
        kv_capacity(config(max_model_len=16, override=1))


@pytest.mark.parametrize("bad", ["int3", "fp4", "FP8", ""])
def test_unknown_kv_dtypes_are_refused_with_the_choices(bad: str) -> None:
    with pytest.raises(SimConfigError, match="fp8_e4m3"):
        kv_dtype_bytes(bad)


def test_auto_fit_picks_the_longest_length_one_request_can_hold() -> None:
    fitted = config("llama-3.1-8b", "l4", max_model_len=-1)
    assert fitted.max_model_len == fit_max_model_len(config("llama-3.1-8b", "l4", max_model_len=8))
    capacity = kv_capacity(fitted)
    # All usable blocks (every block but the null one) make one request's worth.
    assert fitted.max_model_len == (capacity.num_gpu_blocks - 1) * 16
    assert capacity.max_concurrency == pytest.approx(1.0, rel=1e-3)
    with pytest.raises(KvCapacityError):
        kv_capacity(config("llama-3.1-8b", "l4", max_model_len=fitted.max_model_len + 16))


def test_auto_fit_never_exceeds_the_model_s_own_limit() -> None:
    assert config("llama-3.1-8b", "h200", max_model_len=-1).max_model_len == 131072
