"""Probe records whose chunks arrived at known times and were stamped a known lag later."""

from __future__ import annotations

import itertools

from slotop.collectors.probe.records import ProbeRecord


def stamped(
    request_id: int, sent_s: float, arrivals_s: list[float], lags_s: list[float]
) -> ProbeRecord:
    """A request whose chunks arrived at `arrivals_s` and were stamped `lags_s` later."""
    stamps = [at + lag for at, lag in zip(arrivals_s, lags_s, strict=True)]
    return ProbeRecord(
        request_id=request_id,
        step=0,
        sent_at_s=sent_s,
        done_at_s=stamps[-1],
        in_flight_at_send=1,
        planned_prompt_tokens=4,
        planned_output_tokens=len(stamps),
        ttft_s=stamps[0] - sent_s,
        itl_s=tuple(b - a for a, b in itertools.pairwise(stamps)),
        e2e_s=stamps[-1] - sent_s,
        chunk_count=len(stamps),
        prompt_tokens=4,
        output_tokens=len(stamps),
        finish_reason="length",
        error=None,
        lag_s=tuple(lags_s),
    )
