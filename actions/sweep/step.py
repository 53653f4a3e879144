"""Measuring one sweep step: the requests sent in its dwell, the tokens inside it, the server's view.

A step's latencies are those of the requests sent after its warm-up, each followed to its end;
its throughput is the tokens that arrived inside its dwell, beside the replica's own counter rate
over the same span; its gauges are sampled once per scrape over the dwell. Each SLO percentile
comes with its 95% interval from the step's own sample (`slo_intervals`): a bootstrap over its
requests for TTFT, over its ITL gaps drawn request by request (a request's gaps rise and fall
together), so the decisions can tell a step that met a target from one that only may have.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from slotop import fmt
from slotop.actions.slo import Verdict, judge_estimate, judge_interval
from slotop.actions.sweep.model import ClientSummary, ServerSummary, StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.probe.lag import client_error
from slotop.collectors.probe.records import ProbeRecord, ProbeStatus
from slotop.collectors.probe.resample import REPLICATES, percentile_replicates, t_975
from slotop.collectors.probe.stats import LatencySummary, measured_window_stats
from slotop.collectors.snapshot import STANDARD_PERCENTILES, Snapshot, latency_quantiles
from slotop.collectors.window import WindowView


@dataclass(slots=True)
class Gauges:
    """The gauges sampled once per scrape over a dwell: KV usage, waiting, running, and the
    simulated replica's GPU utilisation (its least busy GPU, as the GPU litmus reads it)."""

    kv_usage: list[float] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)
    running: list[float] = field(default_factory=list)
    sim_gpu_util: list[float] = field(default_factory=list)

    def add(self, snapshot: Snapshot) -> None:
        if snapshot.kv.usage_ratio is not None:
            self.kv_usage.append(snapshot.kv.usage_ratio)
        if snapshot.requests.waiting is not None:
            self.waiting.append(snapshot.requests.waiting)
        if snapshot.requests.running is not None:
            self.running.append(snapshot.requests.running)
        gpu = snapshot.simulated_gpu
        utils = [d.gpu_util_pct for d in gpu.devices if d.gpu_util_pct is not None] if gpu else []
        if utils:
            self.sim_gpu_util.append(min(utils) / 100)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


MIN_GAUGE_BATCHES = 3
"""A gauge's mean has a noise band from this many batches of its samples at the least."""
MAX_GAUGE_BATCHES = 10


def mean_band(values: Sequence[float], samples_per_batch: int) -> float | None:
    """The ± half-width of the 95% interval of a gauge's mean over a dwell: its samples cut into
    consecutive batches of at least `samples_per_batch` (neighbouring samples move together),
    at most ten, and Student's t for their means; None under three batches."""
    batches = min(MAX_GAUGE_BATCHES, len(values) // max(1, samples_per_batch))
    if batches < MIN_GAUGE_BATCHES:
        return None
    means = [float(np.mean(part)) for part in np.array_split(np.asarray(values, float), batches)]
    se = float(np.std(means, ddof=1)) / math.sqrt(batches)
    return t_975(batches - 1) * se


def _samples_per_batch(records: Sequence[ProbeRecord], tick_s: float) -> int:
    """Gauge samples in two of the loop's cycles (the median request's end-to-end time): what
    one request met, the next few meet too, so samples closer than that are not independent."""
    ends = [r.e2e_s for r in records if r.ok and r.e2e_s is not None]
    if not ends or tick_s <= 0:
        return 1
    return max(1, math.ceil(2.0 * float(np.median(ends)) / tick_s))


def _peak_share(values: Sequence[float]) -> float | None:
    """The share of the samples at their maximum (how long a gauge held its peak)."""
    if not values:
        return None
    peak = max(values)
    return sum(1 for value in values if value == peak) / len(values)


def _value(summary: LatencySummary, percentile: float) -> float | None:
    return summary.at(percentile)


def _server_value(view: WindowView | None, key: str, percentile: float) -> float | None:
    if view is None:
        return None
    estimate = latency_quantiles(view, key, percentile).at(percentile)
    return estimate.value if estimate is not None else None


def _server_verdict(
    view: WindowView | None, key: str, percentile: float, target_s: float
) -> str | None:
    """What the server's bucket alone says of a target: "pass", "breach" or "undecided"."""
    if view is None:
        return None
    estimate = latency_quantiles(view, key, percentile).at(percentile)
    return judge_estimate(estimate, target_s).value if estimate is not None else None


def _batch_tokens_p99(view: WindowView | None) -> QuantileEstimate | None:
    delta = view.histogram("iteration_tokens") if view is not None else None
    return delta.quantile(0.99) if delta is not None else None


@dataclass(frozen=True, slots=True)
class SloIntervals:
    """The 95% intervals of a step's TTFT and ITL at the SLO's percentiles; None: too few samples."""

    ttft: tuple[float, float] | None
    itl: tuple[float, float] | None


def slo_intervals(
    records: Sequence[ProbeRecord],
    ttft_percentile: float,
    itl_percentile: float,
    *,
    replicates: int = REPLICATES,
) -> SloIntervals:
    """Intervals of the requests that ended well: TTFT over requests, ITL over gaps by request."""
    ok = [r for r in records if r.ok]
    with_ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    ttft = percentile_replicates(
        with_ttft, range(len(with_ttft)), (ttft_percentile,), replicates=replicates
    )
    itl = percentile_replicates(
        [gap for r in ok for gap in r.itl_s],
        [index for index, r in enumerate(ok) for _ in r.itl_s],
        (itl_percentile,),
        replicates=replicates,
    )
    return SloIntervals(
        ttft.interval(0) if ttft is not None else None,
        itl.interval(0) if itl is not None else None,
    )


DWELL_CHECK_REPLICATES = 200
"""Replicates of the check made each tick of a dwell (the step's own intervals take the full
count): enough to see an interval clear of a target, cheap enough for once a second."""


def dwell_decided(
    records: Sequence[ProbeRecord], start_s: float, now_s: float, settings: SweepSpec
) -> bool:
    """Whether the requests sent since `start_s` that have ended already decide the step: at
    least the floor of them, and each SLO target's interval wholly on one side of it."""
    slo = settings.slo
    sent = [r for r in records if start_s <= r.sent_at_s <= now_s]
    if sum(1 for r in sent if r.ok) < settings.min_requests:
        return False
    found = slo_intervals(
        sent, slo.ttft_percentile, slo.itl_percentile, replicates=DWELL_CHECK_REPLICATES
    )
    if found.ttft is None or found.itl is None:
        return False
    verdicts = (judge_interval(*found.ttft, slo.ttft_s), judge_interval(*found.itl, slo.itl_s))
    return all(v in (Verdict.PASS, Verdict.BREACH) for v in verdicts)


def measure_step(
    concurrency: int,
    records: Sequence[ProbeRecord],
    start_s: float,
    end_s: float,
    settings: SweepSpec,
    gauges_kv: Sequence[float] = (),
    gauges_waiting: Sequence[float] = (),
    gauges_running: Sequence[float] = (),
    view: WindowView | None = None,
    *,
    followed_s: float | None = None,
    requests_cut: int | None = None,
    gauges_sim_gpu_util: Sequence[float] = (),
) -> StepResult:
    """Summarise one step's dwell (`measured_window_stats`'s counting) and the server's view of
    it; the streams' opening requests take no part (`ProbeRecord.opening`)."""
    slo = settings.slo
    records = [r for r in records if not r.opening]
    percentiles = tuple(sorted({*STANDARD_PERCENTILES, slo.ttft_percentile, slo.itl_percentile}))
    stats = measured_window_stats(
        records, start_s, end_s, percentiles, slo.goodput_targets, requests_cut
    )
    sent = [r for r in records if start_s <= r.sent_at_s <= end_s]
    client = client_error(sent, slo.ttft_percentile, slo.itl_percentile)
    intervals = slo_intervals(sent, slo.ttft_percentile, slo.itl_percentile)
    preemptions = view.increase("preemptions") if view is not None else None
    batch = _batch_tokens_p99(view)
    return StepResult(
        concurrency=concurrency,
        started_at_s=start_s,
        measured_s=end_s - start_s,
        min_requests_met=stats.requests_ok >= settings.min_requests,
        client=ClientSummary(
            requests_ok=stats.requests_ok,
            requests_failed=stats.requests_failed,
            ttft_p50_s=_value(stats.ttft, 50.0),
            ttft_p90_s=_value(stats.ttft, 90.0),
            ttft_p99_s=_value(stats.ttft, 99.0),
            ttft_slo_s=_value(stats.ttft, slo.ttft_percentile),
            itl_p50_s=_value(stats.itl, 50.0),
            itl_p90_s=_value(stats.itl, 90.0),
            itl_p99_s=_value(stats.itl, 99.0),
            itl_slo_s=_value(stats.itl, slo.itl_percentile),
            tpot_p50_s=_value(stats.tpot, 50.0),
            tpot_p90_s=_value(stats.tpot, 90.0),
            tpot_p99_s=_value(stats.tpot, 99.0),
            goodput_ratio=stats.goodput.ratio if stats.goodput is not None else None,
            output_tokens_per_s=stats.output_tokens_per_s,
            requests_per_s=stats.request_rate_rps,
            ttft_slo_low_s=intervals.ttft[0] if intervals.ttft is not None else None,
            ttft_slo_high_s=intervals.ttft[1] if intervals.ttft is not None else None,
            itl_slo_low_s=intervals.itl[0] if intervals.itl is not None else None,
            itl_slo_high_s=intervals.itl[1] if intervals.itl is not None else None,
            ttft_error_s=client.ttft_error_s if client is not None else None,
            itl_error_s=client.itl_error_s if client is not None else None,
            lag_p99_s=client.chunk_lag_p99_s if client is not None else None,
        ),
        server=ServerSummary(
            ttft_p50_s=_server_value(view, "ttft", 50.0),
            ttft_p90_s=_server_value(view, "ttft", 90.0),
            ttft_p99_s=_server_value(view, "ttft", 99.0),
            ttft_slo_s=_server_value(view, "ttft", slo.ttft_percentile),
            itl_p50_s=_server_value(view, "itl", 50.0),
            itl_p90_s=_server_value(view, "itl", 90.0),
            itl_p99_s=_server_value(view, "itl", 99.0),
            itl_slo_s=_server_value(view, "itl", slo.itl_percentile),
            ttft_slo_verdict=_server_verdict(view, "ttft", slo.ttft_percentile, slo.ttft_s),
            itl_slo_verdict=_server_verdict(view, "itl", slo.itl_percentile, slo.itl_s),
            output_tokens_per_s=(
                view.rate_per_s("generation_tokens") if view is not None else None
            ),
            preemptions=preemptions,
            kv_usage_mean_ratio=_mean(gauges_kv),
            kv_usage_max_ratio=max(gauges_kv, default=None),
            waiting_mean=_mean(gauges_waiting),
            waiting_max=max(gauges_waiting, default=None),
            waiting_band=mean_band(gauges_waiting, _samples_per_batch(sent, settings.tick_s)),
            running_mean=_mean(gauges_running),
            running_max=max(gauges_running, default=None),
            running_peak_share=_peak_share(gauges_running),
            batch_tokens_p99=batch.value if batch is not None else None,
            batch_tokens_p99_lower=fmt.finite(batch.bucket_lower) if batch is not None else None,
            batch_tokens_p99_upper=fmt.finite(batch.bucket_upper) if batch is not None else None,
            sim_gpu_util_mean_ratio=_mean(gauges_sim_gpu_util),
            sim_gpu_util_max_ratio=max(gauges_sim_gpu_util, default=None),
        ),
        followed_s=followed_s,
        requests_cut=stats.requests_cut,
    )


def sent_in_dwell(
    records: Sequence[ProbeRecord], status: ProbeStatus | None, start_s: float, now_s: float
) -> int:
    """Requests sent in the dwell so far that ended well or still stream (the latencies to come)."""
    ended = sum(1 for r in records if r.ok and start_s <= r.sent_at_s <= now_s)
    streaming = status.streaming_sent_at_s if status is not None else ()
    return ended + sum(1 for sent_s in streaming if start_s <= sent_s <= now_s)
