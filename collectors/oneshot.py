"""One snapshot, headless: of a live replica (two scrapes an interval apart) or of a saved dump."""

from __future__ import annotations

import time
from collections.abc import Callable

from slotop.collectors.engines import CATALOGUES
from slotop.collectors.errors import MetricsParseError
from slotop.collectors.monitor import ReplicaEndpoints, ReplicaMonitor
from slotop.collectors.names import Engine
from slotop.collectors.reading import Reading, read_metrics_text
from slotop.collectors.snapshot import ReplicaInfo, Snapshot, build_snapshot
from slotop.collectors.window import cumulative_view


def require_engine(reading: Reading, where: str) -> None:
    """Raise MetricsParseError when a body holds no metric of its engine (`vllm:`, `sglang:`)."""
    prefix = CATALOGUES[reading.engine].prefix
    own = [name for name in reading.found_names.values() if name.startswith(prefix)]
    if not own and not reading.unknown:
        raise MetricsParseError(
            f"{where} holds no vllm: or sglang: metric; is it the /metrics of a vLLM server, "
            "or of an SGLang server started with --enable-metrics?"
        )


def snapshot_of_dump(
    text: str,
    *,
    where: str,
    ttft_percentile: float | None = None,
    itl_percentile: float | None = None,
    taken_at_s: float | None = None,
    engine: Engine | None = None,
) -> Snapshot:
    """Build a snapshot of a saved /metrics body: totals since the replica started, no rates;
    `engine` None tells the engine from the body's families."""
    reading = read_metrics_text(text, engine)
    require_engine(reading, where)
    return build_snapshot(
        taken_at_s=time.time() if taken_at_s is None else taken_at_s,
        reading=reading,
        view=cumulative_view(reading),
        replica=ReplicaInfo(url=None, engine=reading.engine),
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
    engine: Engine | None = None,
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
        engine=engine,
    )
    monitor.refresh_info()
    first = monitor.scrape()
    require_engine(first, f"{client.base_url}/metrics")
    sleep(interval_s)
    return monitor.poll()
