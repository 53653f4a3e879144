"""The SLO pane's view: each target at its percentile, judged from the server's buckets and the probe.

A server estimate whose bucket straddles the target is undecided unless the probe's exact value
decides it; failed requests count against a target; stale data gives no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop import fmt
from slotop.actions.slo import (
    Verdict,
    counting_failures,
    failures_allow,
    judge_estimate,
    overall,
)
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.probe.stats import ProbeStats
from slotop.tui.views.inputs import (
    Inputs,
    chosen_probe_stats,
    chosen_window,
    stale_reason,
)
from slotop.tui.views.verdict import gap_unexplained


@dataclass(frozen=True, slots=True)
class SloRow:
    """One target: server and client values at its percentile, and the verdict."""

    name: str
    target: str
    server: str
    bucket: str
    client: str
    verdict: Verdict
    gap: bool


@dataclass(frozen=True, slots=True)
class SloView:
    """The SLO at a glance; stale data gives no verdict (UNKNOWN, `stale`), and `note` says why
    a verdict is not what the latencies alone would give."""

    verdict: Verdict
    window: str
    rows: tuple[SloRow, ...]
    samples: str
    goodput: str
    stale: bool = False
    note: str = ""


def _bucket(estimate: QuantileEstimate | None, target_s: float) -> str:
    if estimate is None:
        return ""
    if estimate.at_floor:
        bucket = f"bucket ≤{fmt.ms(estimate.bucket_upper)}"
    elif estimate.clamped:
        bucket = f"bucket >{fmt.ms(estimate.bucket_lower)}"
    else:
        bucket = f"bucket {fmt.ms(estimate.bucket_lower)}–{fmt.ms(estimate.bucket_upper)}"
    return bucket + (" holds the target" if estimate.bucket_within(target_s) is None else "")


def _server_value(estimate: QuantileEstimate | None) -> str:
    if estimate is None:
        return fmt.NA
    return estimate.mark + fmt.ms(estimate.value)


def slo_view(inputs: Inputs) -> SloView:
    """Server and client pXX against the targets over the chosen window."""
    slo = inputs.settings.slo
    stats = chosen_window(inputs)
    client = chosen_probe_stats(inputs)
    rows: list[SloRow] = []
    for name, key, percentile, target_s in (
        ("TTFT", "ttft", slo.ttft_percentile, slo.ttft_s),
        ("ITL", "itl", slo.itl_percentile, slo.itl_s),
    ):
        server = getattr(stats, f"{key}_s").at(percentile) if stats is not None else None
        summary = getattr(client, key) if client is not None else None
        client_s = summary.at(percentile) if summary is not None else None
        verdict = judge_estimate(server, target_s, client_s)
        if client is not None:
            verdict = counting_failures(
                verdict, percentile, client.requests_ok, client.requests_failed
            )
        rows.append(
            SloRow(
                name=f"{name} {fmt.percentile_name(percentile)}",
                target=f"< {fmt.ms(target_s)}",
                server=_server_value(server),
                bucket=_bucket(server, target_s),
                client=fmt.ms(client_s) if inputs.probe.running or client_s else "probe off",
                verdict=verdict,
                gap=gap_unexplained(
                    client_s, server, summary.interval(percentile) if summary else None
                ),
            )
        )
    if stats is None:
        window = "no window yet"
    elif stats.covered_s is None:
        window = "totals since the replica started"
    else:
        name = "short" if inputs.short_window else "long"
        requested = stats.requested_s or 0.0
        if stats.covered_s >= requested:
            window = f"{name} window {fmt.number(requested)} s"
        else:
            window = f"{name} window {fmt.number(stats.covered_s)} of {fmt.number(requested)} s"
    server_count = stats.ttft_s.count if stats is not None else None
    client_count = client.requests_ok if client is not None else None
    samples = f"n server {fmt.number(server_count)}  client {fmt.number(client_count)}"
    good = client.goodput if client is not None else None
    goodput = (
        f"goodput {fmt.percent(good.ratio)} ({fmt.number(good.rate_rps, 2)} req/s)"
        if good is not None
        else "goodput N/A (probe off)"
    )
    reason = stale_reason(inputs)
    if reason is not None:
        return SloView(
            Verdict.UNKNOWN,
            window,
            tuple(rows),
            samples,
            goodput,
            stale=True,
            note="stale data: no verdict until a scrape succeeds",
        )
    return SloView(
        overall(tuple(r.verdict for r in rows)),
        window,
        tuple(rows),
        samples,
        goodput,
        note=_failures_note(client, (slo.ttft_percentile, slo.itl_percentile)),
    )


def _failures_note(client: ProbeStats | None, percentiles: tuple[float, ...]) -> str:
    """Say when failed requests alone break a target, as they count against it."""
    if client is None or not client.requests_failed:
        return ""
    ended = client.requests_ok + client.requests_failed
    strictest = max(percentiles)
    if failures_allow(strictest, client.requests_ok, client.requests_failed):
        return ""
    return (
        f"failed {client.requests_failed:,} of {ended:,}: "
        f"{fmt.percentile_name(strictest)} allows {100 - strictest:g}%"
    )
