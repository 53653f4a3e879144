"""SGLang's KV gauges as the snapshot reads them, for tests that need a pool and no server."""

from __future__ import annotations

from slotop.collectors.snapshot import KvCacheState


def sglang_pool(tokens: int, context: int, dtype: str | None = None) -> KvCacheState:
    """An idle pool of `tokens` single-token pages, `context` tokens a sequence at most."""
    return KvCacheState(
        usage_ratio=0.0,
        usage_ratio_by_engine=(),
        block_size_tokens=1,
        blocks_total=tokens,
        blocks_used=0,
        blocks_free=tokens,
        cache_dtype=dtype,
        size_tokens=tokens,
        max_concurrency=tokens / context,
        gpu_memory_utilization=None,
    )
