"""What a fleet source reads of each replica: frozen figures over one window, None where unknown.

A fleet source (a Prometheus server, or direct scrapes) yields one `ReplicaFigures` per replica
per poll. Latencies keep their bucket increases (merged across a replica's engines) beside the
estimate at the SLO's percentile, so a model's row can merge buckets instead of averaging
percentiles. A figure a poll could not read is None and named in `unread` with the reason, so
the fleet view can keep the last good value, marked stale, instead of showing a gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop.collectors.histograms import Bucket, QuantileEstimate, quantile_estimate
from slotop.collectors.snapshot import Snapshot
from slotop.collectors.window import HistogramDelta, WindowView

Labels = tuple[tuple[str, str], ...]

LATENCY_FIELDS = ("ttft", "itl")
GAUGE_FIELDS = ("running", "waiting", "kv_usage_ratio")
RATE_FIELDS = ("generation_tokens_per_s", "preemptions_per_s")
ALL_FIELDS = (*LATENCY_FIELDS, *RATE_FIELDS, *GAUGE_FIELDS, "up")


@dataclass(frozen=True, slots=True)
class ReplicaKey:
    """Who a row is: the labels that tell replicas apart (the model's among them), or the URL.

    `url` is the replica's own base URL when slotop knows it (always in direct mode), which is
    what a drill-in needs before it may probe or restart the replica.
    """

    labels: Labels
    url: str | None = None

    def label(self, name: str) -> str:
        """The value of one of the key's labels, "" when absent."""
        return next((value for key, value in self.labels if key == name), "")


@dataclass(frozen=True, slots=True)
class LatencyFigure:
    """One latency over the window: cumulative bucket increases and the SLO percentile's estimate.

    `buckets` is empty when the replica lacks the histogram; `estimate` is None when the window
    holds no observation.
    """

    percentile: float
    buckets: tuple[Bucket, ...]
    estimate: QuantileEstimate | None

    @property
    def count(self) -> float | None:
        """Observations in the window (the +Inf bucket), None without the histogram."""
        return self.buckets[-1][1] if self.buckets else None


def latency_figure(percentile: float, buckets: tuple[Bucket, ...]) -> LatencyFigure:
    """A figure whose estimate comes from its buckets, with Prometheus's histogram_quantile rules."""
    ordered = tuple(sorted(buckets))
    return LatencyFigure(percentile, ordered, quantile_estimate(percentile / 100.0, ordered))


def merged(figures: list[LatencyFigure]) -> LatencyFigure | None:
    """Merge figures of several replicas by adding their bucket increases, bound by bound.

    Quantiles are never averaged: the merged estimate comes from the merged buckets. None when
    none of the figures holds a histogram, or their percentiles differ.
    """
    present = [figure for figure in figures if figure.buckets]
    if not present or len({figure.percentile for figure in present}) != 1:
        return None
    totals: dict[float, float] = {}
    for figure in present:
        for bound, count in figure.buckets:
            totals[bound] = totals.get(bound, 0.0) + count
    return latency_figure(present[0].percentile, tuple(totals.items()))


@dataclass(frozen=True, slots=True)
class ReplicaFigures:
    """One replica over one window, as a fleet row needs it; None where not known.

    `window_s` is the span the rates and latencies cover. `covered_s` is set when the source
    holds less than that window (a Prometheus started, or first scraping the replica, within
    it): the span its samples cover, over which the rates are taken. `up` is whether the replica
    answered its last scrape (Prometheus's `up`, or a direct scrape). `unread` pairs each figure
    this poll could not read with the reason.
    """

    key: ReplicaKey
    model: str = ""
    window_s: float | None = None
    engine: str | None = None
    """vllm or sglang; None until the replica has answered."""
    ttft: LatencyFigure | None = None
    itl: LatencyFigure | None = None
    generation_tokens_per_s: float | None = None
    preemptions_per_s: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage_ratio: float | None = None
    up: bool | None = None
    unread: tuple[tuple[str, str], ...] = ()
    covered_s: float | None = None


@dataclass(frozen=True, slots=True)
class FleetPoll:
    """One poll of a fleet: every replica's figures, and what the source said about itself.

    `warnings` are the server's own (partial data); `query_s` sums the time its queries took;
    `source` says where the figures came from, for the screen's title.
    """

    taken_at_s: float
    replicas: tuple[ReplicaFigures, ...]
    source: str
    warnings: tuple[str, ...] = ()
    query_s: float = 0.0
    queries: int = 0


def _figure_from(delta: HistogramDelta | None, percentile: float | None) -> LatencyFigure | None:
    if delta is None or percentile is None:
        return None
    return latency_figure(percentile, delta.buckets)


def figures_from_snapshot(
    key: ReplicaKey,
    snapshot: Snapshot,
    view: WindowView | None,
    *,
    up: bool | None = True,
) -> ReplicaFigures:
    """A replica's figures from a direct scrape: its snapshot and the window view it was built on.

    The estimates are recomputed from the view's buckets with the same function the snapshot
    used, so they equal the snapshot's (the fleet row keeps the buckets for merging).
    """
    window = snapshot.window
    return ReplicaFigures(
        key=key,
        model=snapshot.replica.model_name or "",
        window_s=window.covered_s,
        engine=snapshot.replica.engine,
        ttft=_figure_from(
            view.histogram("ttft") if view else None, window.ttft_s.configured_percentile
        ),
        itl=_figure_from(
            view.histogram("itl") if view else None, window.itl_s.configured_percentile
        ),
        generation_tokens_per_s=window.generation_tokens_per_s,
        preemptions_per_s=window.preemptions_per_s,
        running=snapshot.requests.running,
        waiting=snapshot.requests.waiting,
        kv_usage_ratio=snapshot.kv.usage_ratio,
        up=up,
    )


def unread_figures(
    key: ReplicaKey,
    reason: str,
    *,
    model: str = "",
    up: bool | None = None,
    engine: str | None = None,
) -> ReplicaFigures:
    """A replica this poll could not read at all: every figure unread, for the same reason."""
    return ReplicaFigures(
        key=key,
        model=model,
        engine=engine,
        up=up,
        unread=tuple((name, reason) for name in ALL_FIELDS if name != "up" or up is None),
    )
