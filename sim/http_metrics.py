"""The HTTP families a vLLM API server exposes through prometheus-fastapi-instrumentator's defaults."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, Summary

EXCLUDED_HANDLERS = frozenset({"/metrics", "/health", "/load", "/ping", "/version", "/server_info"})
"""Routes vLLM leaves out of the HTTP metrics."""

HIGHR_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5, 7.5,
    10, 30, 60,
)  # fmt: skip
LOWR_BUCKETS: tuple[float, ...] = (0.1, 0.5, 1)


class HttpMetrics:
    """Request counts, sizes and durations by handler, method and status class."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._total = Counter(
            "http_requests_total",
            "Total number of requests by method, status and handler.",
            ("method", "status", "handler"),
            registry=registry,
        )
        self._in_size = Summary(
            "http_request_size_bytes",
            "Content length of incoming requests by handler. Only value of header is respected. "
            "Otherwise ignored. No percentile calculated. ",
            ("handler",),
            registry=registry,
        )
        self._out_size = Summary(
            "http_response_size_bytes",
            "Content length of outgoing responses by handler. Only value of header is respected. "
            "Otherwise ignored. No percentile calculated. ",
            ("handler",),
            registry=registry,
        )
        self._highr = Histogram(
            "http_request_duration_highr_seconds",
            "Latency with many buckets but no API specific labels. Made for more accurate "
            "percentile calculations. ",
            buckets=HIGHR_BUCKETS,
            registry=registry,
        )
        self._lowr = Histogram(
            "http_request_duration_seconds",
            "Latency with only few buckets by handler. Made to be only used if aggregation by "
            "handler is important. ",
            ("method", "handler"),
            buckets=LOWR_BUCKETS,
            registry=registry,
        )

    def observe(
        self,
        handler: str | None,
        method: str,
        status: int,
        request_bytes: int,
        response_bytes: int,
        duration_s: float,
    ) -> None:
        """Record one finished request; ``handler`` is the route template, None when no route matched."""
        label = handler if handler is not None else "none"
        if label in EXCLUDED_HANDLERS:
            return
        self._total.labels(method, f"{str(status)[0]}xx", label).inc()
        self._in_size.labels(label).observe(request_bytes)
        self._out_size.labels(label).observe(response_bytes)
        self._highr.observe(duration_s)
        self._lowr.labels(method, label).observe(duration_s)
