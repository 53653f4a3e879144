"""Measured sweep steps built by hand, for the sweep's and the tune's pure decisions."""

from __future__ import annotations

from slotop.actions.sweep.codec import STEP_LAYOUT
from slotop.actions.sweep.model import ClientSummary, ServerSummary, StepResult
from slotop.slo import Slo

SLO = Slo(ttft_s=0.5, itl_s=0.04)
"""TTFT p99 ≤ 500 ms and ITL p99 ≤ 40 ms."""


def step(
    concurrency: int,
    *,
    ttft_s: float | None = 0.1,
    itl_s: float | None = 0.02,
    tokens_per_s: float | None = None,  # None: 100 tokens/s per request in flight
    ok: int = 100,
    failed: int = 0,
    kv: float | None = 0.3,
    preemptions: float | None = 0.0,
    waiting: float | None = 0.0,
    running: float | None = None,
    held: float | None = None,
    waiting_max: float | None = None,
    batch_tokens: float | None = None,
    batch_bucket: tuple[float, float | None] | None = None,
    sampled: bool = True,
    ttft_interval: tuple[float, float] | None = None,
    itl_interval: tuple[float, float] | None = None,
) -> StepResult:
    """A measured step; throughput defaults to 100 tokens/s per request in flight.

    `held` is the share of the dwell's samples running stood at its peak (None: not measured, as
    in a file from before it was); `waiting_max` the most that waited in one sample (None: the
    mean). `batch_bucket` is the (lower, upper] bucket of `batch_tokens`; `sampled` False: too
    few requests ended. `ttft_interval` and `itl_interval` are the 95% intervals of the values at
    the SLO's percentiles (both None: a step from a file older than them, judged on its values).
    """
    return StepResult(
        concurrency=concurrency,
        started_at_s=0.0,
        measured_s=10.0,
        min_requests_met=sampled,
        client=ClientSummary(
            requests_ok=ok,
            requests_failed=failed,
            ttft_p50_s=ttft_s,
            ttft_p90_s=ttft_s,
            ttft_p99_s=ttft_s,
            ttft_slo_s=ttft_s,
            itl_p50_s=itl_s,
            itl_p90_s=itl_s,
            itl_p99_s=itl_s,
            itl_slo_s=itl_s,
            tpot_p50_s=itl_s,
            tpot_p90_s=itl_s,
            tpot_p99_s=itl_s,
            goodput_ratio=1.0,
            output_tokens_per_s=100.0 * concurrency if tokens_per_s is None else tokens_per_s,
            requests_per_s=1.0,
            ttft_slo_low_s=ttft_interval[0] if ttft_interval is not None else None,
            ttft_slo_high_s=ttft_interval[1] if ttft_interval is not None else None,
            itl_slo_low_s=itl_interval[0] if itl_interval is not None else None,
            itl_slo_high_s=itl_interval[1] if itl_interval is not None else None,
        ),
        server=ServerSummary(
            kv_usage_mean_ratio=kv,
            kv_usage_max_ratio=kv,
            preemptions=preemptions,
            waiting_mean=waiting,
            waiting_max=waiting if waiting_max is None else waiting_max,
            running_mean=float(concurrency) if running is None else running,
            running_max=float(concurrency) if running is None else running,
            batch_tokens_p99=batch_tokens,
            batch_tokens_p99_lower=batch_bucket[0] if batch_bucket is not None else None,
            batch_tokens_p99_upper=batch_bucket[1] if batch_bucket is not None else None,
            running_peak_share=held,
        ),
    )


def flat_step(**values: object) -> StepResult:
    """A step from its keys as a sweep file holds them (`requests_ok`, `server_ttft_slo_s`), each
    key not given None; unchecked, so a test can hold values no file would."""
    fields: dict[str, dict[str, object]] = {"": {}, "client": {}, "server": {}}
    for key, place in STEP_LAYOUT:
        section, _, name = place.rpartition(".")
        fields[section][name] = values.pop(key, None)
    if values:
        raise TypeError(f"not keys of a step: {sorted(values)}")
    return StepResult(
        **fields[""],  # type: ignore[arg-type]
        client=ClientSummary(**fields["client"]),  # type: ignore[arg-type]
        server=ServerSummary(**fields["server"]),  # type: ignore[arg-type]
    )
