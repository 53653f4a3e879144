"""One measured sweep step: its dwell, what the probe measured, and what the replica reported.

The two sides are kept apart because they are read differently: the step is judged on the
client's exact values (`ClientSummary`), while the replica's histograms are bucket-coarse and its
gauges sampled once per scrape (`ServerSummary`); the table, the plot and what binds set them side
by side. How a step is laid out on disk is `slotop.actions.sweep.codec`'s concern.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slotop.collectors.probe.lag import past_bound
from slotop.collectors.probe.stats import throughput_gap_ratio


@dataclass(frozen=True, slots=True)
class ClientSummary:
    """What the probe measured of the requests it sent in the dwell.

    `*_slo_s` is the value at the SLO's percentile, and `*_slo_low_s`, `*_slo_high_s` bound its
    95% interval (None: too few samples, or a file from before the intervals). `ttft_error_s` and
    `itl_error_s` are how far the probe's own lag moved TTFT and ITL at the SLO's percentiles, and
    `lag_p99_s` that lag (`slotop.collectors.probe.lag`; None where it was not observable).
    """

    requests_ok: int
    requests_failed: int
    ttft_p50_s: float | None
    ttft_p90_s: float | None
    ttft_p99_s: float | None
    ttft_slo_s: float | None
    itl_p50_s: float | None
    itl_p90_s: float | None
    itl_p99_s: float | None
    itl_slo_s: float | None
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    tpot_p99_s: float | None
    goodput_ratio: float | None
    output_tokens_per_s: float | None
    requests_per_s: float | None
    ttft_slo_low_s: float | None = None
    ttft_slo_high_s: float | None = None
    itl_slo_low_s: float | None = None
    itl_slo_high_s: float | None = None
    ttft_error_s: float | None = None
    itl_error_s: float | None = None
    lag_p99_s: float | None = None

    @property
    def has_intervals(self) -> bool:
        """Whether the SLO intervals were measured (a file older than them holds none)."""
        return self.ttft_slo_high_s is not None or self.itl_slo_high_s is not None

    @property
    def error_ratio(self) -> float | None:
        """Failed requests as a share of all that ended, None when none ended."""
        ended = self.requests_ok + self.requests_failed
        return self.requests_failed / ended if ended else None

    @property
    def bent_by_lag(self) -> bool:
        """Whether the probe's own lag moved TTFT or ITL past the bound (its numbers read high)."""
        return past_bound(self.ttft_error_s) or past_bound(self.itl_error_s)


@dataclass(frozen=True, slots=True)
class ServerSummary:
    """What the replica's /metrics said over the same span; None where it was not read.

    Latencies come from its histograms (bucket-coarse), and `*_slo_verdict` is what that bucket
    alone says of the target (`slotop.actions.slo.judge_estimate`'s "pass", "breach" or
    "undecided"). `output_tokens_per_s` is its counter rate and `preemptions` its counter's rise.
    Gauges are sampled once per scrape: `running_peak_share` is the share of those samples at
    which running stood at `running_max` (None: not measured, as in older files), and
    `waiting_band` the ± half-width of the 95% interval of `waiting_mean`
    (`slotop.actions.sweep.step.mean_band`; None: too few samples). `batch_tokens_p99` is
    interpolated in an `iteration_tokens` bucket, which `batch_tokens_p99_lower` and `_upper`
    bound (upper None: above the last finite bound; both None: the bucket was not kept, so the
    value cannot be judged). `sim_gpu_util_*` is the simulated replica's modelled GPU utilisation
    (None on a real replica, whose /metrics has no GPU; the sweep does not read NVML).
    """

    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = None
    ttft_slo_s: float | None = None
    itl_p50_s: float | None = None
    itl_p90_s: float | None = None
    itl_p99_s: float | None = None
    itl_slo_s: float | None = None
    ttft_slo_verdict: str | None = None
    itl_slo_verdict: str | None = None
    output_tokens_per_s: float | None = None
    preemptions: float | None = None
    kv_usage_mean_ratio: float | None = None
    kv_usage_max_ratio: float | None = None
    waiting_mean: float | None = None
    waiting_max: float | None = None
    waiting_band: float | None = None
    running_mean: float | None = None
    running_max: float | None = None
    running_peak_share: float | None = None
    batch_tokens_p99: float | None = None
    batch_tokens_p99_lower: float | None = None
    batch_tokens_p99_upper: float | None = None
    sim_gpu_util_mean_ratio: float | None = None
    sim_gpu_util_max_ratio: float | None = None


@dataclass(frozen=True, slots=True)
class StepResult:
    """One measured concurrency step: its dwell, the client's side and the replica's side.

    `followed_s` is how long the step waited past the dwell for requests still streaming;
    `requests_cut` how many sent before the dwell's end were still streaming when that wait ran
    out (left out of the latencies, their later tokens out of the throughput); None: not known.
    `min_requests_met` is False for a step that ended fewer requests than the sweep's floor.
    """

    concurrency: int
    started_at_s: float
    measured_s: float
    min_requests_met: bool
    client: ClientSummary
    server: ServerSummary = field(default_factory=ServerSummary)
    followed_s: float | None = None
    requests_cut: int | None = None

    @property
    def judged_on_intervals(self) -> bool:
        """Whether the step is judged on its SLO intervals (a file older than them holds none)."""
        return self.client.has_intervals

    @property
    def goodput_rps(self) -> float | None:
        """Requests per second that met both targets over the dwell: the goodput share of every
        request that ended (failed ones included), over the dwell's length."""
        if self.client.goodput_ratio is None or self.measured_s <= 0:
            return None
        return (
            self.client.goodput_ratio
            * (self.client.requests_ok + self.client.requests_failed)
            / self.measured_s
        )

    @property
    def throughput_gap_ratio(self) -> float | None:
        """How far the probe's token rate sits from the replica's counter rate (`throughput_gap_ratio`)."""
        return throughput_gap_ratio(
            self.client.output_tokens_per_s, self.server.output_tokens_per_s
        )
