"""One snapshot, headless: of a live replica (two scrapes an interval apart) or of a saved dump."""

from __future__ import annotations

import time
from collections.abc import Callable

from slotop.collectors.errors import MetricsParseError
from slotop.collectors.monitor import ReplicaEndpoints, ReplicaMonitor
from slotop.collectors.names import PREFIX
from slotop.collectors.reading import Reading, read_metrics_text
from slotop.collectors.snapshot import ReplicaInfo, Snapshot, build_snapshot
from slotop.collectors.window import cumulative_view


def require_vllm(reading: Reading, where: str) -> None:
    """Raise MetricsParseError when a body holds no `vllm:` metric at all."""
    vllm_names = [name for name in reading.found_names.values() if name.startswith(PREFIX)]
    if not vllm_names and not reading.unknown:
        raise MetricsParseError(
            f"{where} holds no vllm: metric; is it the /metrics of a vLLM server?"
        )


def snapshot_of_dump(
    text: str,
    *,
    where: str,
    ttft_percentile: float | None = None,
    itl_percentile: float | None = None,
    taken_at_s: float | None = None,
) -> Snapshot:
    """Build a snapshot of a saved /metrics body: totals since the replica started, no rates."""
    reading = read_metrics_text(text)
    require_vllm(reading, where)
    return build_snapshot(
        taken_at_s=time.time() if taken_at_s is None else taken_at_s,
        reading=reading,
        view=cumulative_view(reading),
        replica=ReplicaInfo(url=None),
        ttft_percentile=ttft_percentile,
        itl_percentile=itl_percentile,
        notes=(f"read from {where}: quantiles and totals since the replica started",),
    )


def snapshot_of_replica(
    client: ReplicaEndpoints,
    *,
    interval_s: float,
    long_window_s: float,
    short_window_s: float,
    ttft_percentile: float | None = None,
    itl_percentile: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Snapshot:
    """Scrape a replica twice, ``interval_s`` apart, and build one snapshot over that span."""
    monitor = ReplicaMonitor(
        client,
        long_window_s=long_window_s,
        short_window_s=short_window_s,
        interval_s=interval_s,
        ttft_percentile=ttft_percentile,
        itl_percentile=itl_percentile,
        history_size=2,
        clock=clock,
    )
    monitor.refresh_info()
    first = monitor.scrape()
    require_vllm(first, f"{client.base_url}/metrics")
    sleep(interval_s)
    return monitor.poll()
