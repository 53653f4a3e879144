"""A Snapshot as JSON-ready data (unit-named keys, null for missing) and as a plain-text table.

The JSON shape is documented in docs/schemas.md under "slotop snapshot --json"; bump SCHEMA when a key
changes meaning or goes away.
"""

from __future__ import annotations

from typing import Any

from slotop import fmt
from slotop.collectors.engines import engine_label, kv_unit, preemption_words, serves
from slotop.collectors.gpu.reader import GpuSnapshot, format_gpu_text, gpu_snapshot_to_json
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.names import Engine
from slotop.collectors.snapshot import LatencyQuantiles, Snapshot, WindowStats, uptime_s

SCHEMA = "slotop.snapshot/1"
_CELL_CHARS = 10
_LATENCY_ROWS = (
    ("TTFT", "ttft_s"),
    ("ITL", "itl_s"),
    ("e2e", "e2e_s"),
    ("queue", "queue_s"),
    ("prefill", "prefill_s"),
    ("decode", "decode_s"),
)


def percentile_key(percentile: float) -> str:
    """Name a percentile as a JSON key: 99 → "p99", 99.9 → "p99.9"."""
    return f"p{percentile:g}"


def _bucket_json(estimate: QuantileEstimate | None) -> dict[str, Any] | None:
    if estimate is None:
        return None
    return {
        "lower": fmt.finite(estimate.bucket_lower),
        "upper": fmt.finite(estimate.bucket_upper),
        "width": estimate.bucket_width,
        "clamped": estimate.clamped,
    }


BUCKET_VERDICT = {True: "pass", False: "breach", None: "undecided"}
"""What a bucket alone says of a target (`QuantileEstimate.bucket_within`), in the words of
`slotop.actions.slo.Verdict`; "unknown" when there is no estimate."""


def slo_json(quantiles: LatencyQuantiles, target_s: float | None) -> dict[str, Any] | None:
    """Give the server's verdict on a target at the configured percentile, with its bucket.

    The histogram alone decides only when the whole bucket lies on one side of the target; a
    target inside the bucket is "undecided". None without a target or configured percentile.
    """
    percentile = quantiles.configured_percentile
    if target_s is None or percentile is None:
        return None
    estimate = quantiles.at(percentile)
    return {
        "percentile": percentile,
        "target": target_s,
        "verdict": "unknown"
        if estimate is None
        else BUCKET_VERDICT[estimate.bucket_within(target_s)],
        "bucket": _bucket_json(estimate),
    }


def latency_json(quantiles: LatencyQuantiles, target_s: float | None = None) -> dict[str, Any]:
    """Give one latency's quantiles (seconds), count, mean, the buckets they fell in, and the
    server's verdict on its SLO target (null without one)."""
    data: dict[str, Any] = {}
    for percentile, estimate in quantiles.percentiles:
        data[percentile_key(percentile)] = None if estimate is None else fmt.finite(estimate.value)
    data["configured_percentile"] = quantiles.configured_percentile
    data["count"] = quantiles.count
    data["mean"] = fmt.finite(quantiles.mean_s)
    data["buckets"] = {
        percentile_key(percentile): _bucket_json(estimate)
        for percentile, estimate in quantiles.percentiles
    }
    data["slo"] = slo_json(quantiles, target_s)
    return data


def _throughput_json(stats: WindowStats) -> dict[str, Any]:
    return {
        "prompt_tokens_per_s": stats.prompt_tokens_per_s,
        "generation_tokens_per_s": stats.generation_tokens_per_s,
        "requests_per_s": stats.requests_per_s,
        "preemptions_per_s": stats.preemptions_per_s,
    }


def _window_json(stats: WindowStats, targets_s: dict[str, float | None]) -> dict[str, Any]:
    return {
        "window": {
            "requested_s": stats.requested_s,
            "covered_s": stats.covered_s,
            "since_start": stats.covered_s is None,
        },
        **{key: latency_json(getattr(stats, key), targets_s.get(key)) for _, key in _LATENCY_ROWS},
        "throughput": _throughput_json(stats),
        "totals": {"requests_finished": stats.requests_finished, "preemptions": stats.preemptions},
        "prefix_cache": {"hit_ratio": stats.prefix_cache_hit_ratio},
    }


def snapshot_to_json(
    snapshot: Snapshot,
    *,
    source: str,
    gpu: GpuSnapshot | None = None,
    ttft_target_s: float | None = None,
    itl_target_s: float | None = None,
) -> dict[str, Any]:
    """Give a snapshot as JSON-ready data; ``source`` says "live" or "metrics-file", and the
    targets (the SLO's, at each latency's configured percentile) give `ttft_s.slo`, `itl_s.slo`."""
    replica, requests, kv = snapshot.replica, snapshot.requests, snapshot.kv
    short = snapshot.short_window
    targets_s = {"ttft_s": ttft_target_s, "itl_s": itl_target_s}
    return {
        "schema": SCHEMA,
        "source": source,
        "taken_at_s": snapshot.taken_at_s,
        "replica": {
            "url": replica.url,
            "model": replica.model_name,
            "served_models": list(replica.served_models),
            "engine": replica.engine,
            "version": replica.version,
            "vllm_version": replica.version if replica.engine == "vllm" else None,
            "kv_cache_dtype": replica.kv_cache_dtype,
            "healthy": replica.healthy,
            "health_detail": replica.health_detail,
            "engine_generation": replica.engine_generation,
            "engines": replica.engines,
            "started_at_s": replica.started_at_s,
            "uptime_s": uptime_s(replica.started_at_s, snapshot.taken_at_s),
        },
        **_window_json(snapshot.window, targets_s),
        "requests": {
            "running": requests.running,
            "waiting": requests.waiting,
            "waiting_by_reason": dict(requests.waiting_by_reason),
            "swapped": requests.swapped,
        },
        "kv": {
            "usage_ratio": kv.usage_ratio,
            "usage_ratio_by_engine": dict(kv.usage_ratio_by_engine),
            "block_size_tokens": kv.block_size_tokens,
            "blocks_total": kv.blocks_total,
            "blocks_used": kv.blocks_used,
            "blocks_free": kv.blocks_free,
            "cache_dtype": kv.cache_dtype,
            "size_tokens": kv.size_tokens,
            "max_concurrency": kv.max_concurrency,
            "gpu_memory_utilization": kv.gpu_memory_utilization,
        },
        "short_window": None if short is None else _window_json(short, targets_s),
        "gpu": None if gpu is None else gpu_snapshot_to_json(gpu),
        "simulated_gpu": None
        if snapshot.simulated_gpu is None
        else gpu_snapshot_to_json(snapshot.simulated_gpu),
        "missing": list(snapshot.missing),
        "unknown": list(snapshot.unknown),
        "notes": list(snapshot.notes),
    }


def _seconds(estimate: QuantileEstimate | None) -> str:
    if estimate is None:
        return fmt.NA
    text = f"{estimate.value:.4f}"
    return estimate.mark + text


def _latency_lines(stats: WindowStats, engine: Engine) -> list[str]:
    percentiles = [p for p, _ in stats.ttft_s.percentiles]
    for _, key in _LATENCY_ROWS[1:]:
        percentiles += [p for p, _ in getattr(stats, key).percentiles if p not in percentiles]
    percentiles.sort()
    rows: list[LatencyQuantiles] = [getattr(stats, key) for _, key in _LATENCY_ROWS]
    cells = [[_seconds(quantiles.at(p)) for p in percentiles] for quantiles in rows]
    # A column is wide enough for its longest cell plus a space (">2560.0000" is ten characters).
    width = max([_CELL_CHARS, *(len(cell) + 1 for row in cells for cell in row)])
    head = f"{'latency (s)':<12}" + "".join(f"{percentile_key(p):>{width}}" for p in percentiles)
    lines = [head + f"{'count':>10}{'p99 bucket':>18}"]
    for (label, key), quantiles, row in zip(_LATENCY_ROWS, rows, cells, strict=True):
        if not serves(engine, key.removesuffix("_s")):
            lines.append(f"{label:<12}{engine_label(engine)} has no such metric")
            continue
        values = "".join(f"{cell:>{width}}" for cell in row)
        p99 = quantiles.p99
        bucket = fmt.NA
        if p99 is not None:
            upper = "+Inf" if p99.clamped and not p99.at_floor else f"{p99.bucket_upper:g}"
            lower = "-Inf" if p99.at_floor else f"{fmt.finite(p99.bucket_lower) or 0:g}"
            bucket = f"({lower}, {upper}]"
        count = fmt.number(quantiles.count)
        lines.append(f"{label:<12}{values}{count:>10}{bucket:>18}")
    return lines


def _span(seconds: float | None) -> str:
    """Say a span to the minute (to the second under an hour), N/A when unknown."""
    if seconds is None:
        return fmt.NA
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d {whole % 86400 // 3600:02d}h {whole % 3600 // 60:02d}m"


def _window_words(stats: WindowStats) -> str:
    if stats.covered_s is None:
        return "since the replica started (a saved dump: no rates)"
    return f"last {stats.covered_s:.1f} s of a {stats.requested_s or 0:g} s window"


def _engine_words(generation: str | None, engines: int | None) -> str:
    """vLLM's engine generation and cores; SGLang has neither."""
    if generation is None:
        return ""
    return f"   {generation} engine x{engines or '?'}"


def format_snapshot_text(snapshot: Snapshot, *, gpu: GpuSnapshot | None = None) -> str:
    """Render a snapshot as a plain-text table for a terminal or an incident note."""
    replica, requests, kv, stats = snapshot.replica, snapshot.requests, snapshot.kv, snapshot.window
    one, many = kv_unit(replica.engine, kv.block_size_tokens)
    preempted = preemption_words(replica.engine)[1]
    health = {True: "healthy", False: "UNHEALTHY", None: "health unknown"}[replica.healthy]
    if replica.health_detail:
        health += f" ({replica.health_detail})"
    lines = [
        f"replica   {replica.url or fmt.NA}  {health}"
        f"   up {_span(uptime_s(replica.started_at_s, snapshot.taken_at_s))}",
        f"model     {replica.model_name or fmt.NA}   {engine_label(replica.engine)} "
        f"{replica.version or fmt.NA}{_engine_words(replica.engine_generation, replica.engines)}",
        f"window    {_window_words(stats)}",
        "",
        *_latency_lines(stats, replica.engine),
        "",
        f"throughput  prompt {fmt.number(stats.prompt_tokens_per_s, 1)} tok/s   generation "
        f"{fmt.number(stats.generation_tokens_per_s, 1)} tok/s   requests {fmt.number(stats.requests_per_s, 2)}/s"
        f"   {preempted} {fmt.number(stats.preemptions_per_s, 2)}/s",
        f"finished    {fmt.number(stats.requests_finished, 0)} requests, "
        f"{fmt.number(stats.preemptions, 0)} {preempted}   prefix-cache hit ratio "
        f"{fmt.number(None if stats.prefix_cache_hit_ratio is None else stats.prefix_cache_hit_ratio * 100, 1, '%')}",
    ]
    reasons = ", ".join(f"{reason} {value:,.0f}" for reason, value in requests.waiting_by_reason)
    lines.append(
        f"requests    running {fmt.number(requests.running, 0)}   waiting {fmt.number(requests.waiting, 0)}"
        + (f" ({reasons})" if reasons else "")
        + (f"   swapped {fmt.number(requests.swapped, 0)}" if requests.swapped is not None else "")
    )
    usage = None if kv.usage_ratio is None else kv.usage_ratio * 100
    lines.append(
        f"KV cache    usage {fmt.number(usage, 1, '%')}   {many} {fmt.number(kv.blocks_used, 0)} used / "
        f"{fmt.number(kv.blocks_free, 0)} free / {fmt.number(kv.blocks_total, 0)} total"
        + (f"   {one} {fmt.number(kv.block_size_tokens, 0)} tokens" if one != "token" else "")
        + f"   dtype {kv.cache_dtype or fmt.NA}"
    )
    lines.append(
        f"            size {fmt.number(kv.size_tokens, 0)} tokens   max concurrency "
        f"{fmt.number(kv.max_concurrency, 1)}   gpu_memory_utilization "
        f"{fmt.number(kv.gpu_memory_utilization, 2)}"
    )
    if len(kv.usage_ratio_by_engine) > 1:
        per_engine = "   ".join(f"{e}: {r * 100:.1f}%" for e, r in kv.usage_ratio_by_engine)
        lines.append(f"            per engine {per_engine}")
    lines.append("")
    lines.append(format_gpu_text(gpu) if gpu is not None else "GPU: not read")
    if snapshot.missing:
        lines.append("missing: " + ", ".join(snapshot.missing))
    if snapshot.unknown:
        lines.append("unknown metrics: " + ", ".join(snapshot.unknown))
    lines.extend(f"note: {note}" for note in snapshot.notes)
    return "\n".join(lines) + "\n"
