"""SGLang's HTTP families: requests by endpoint and method, responses by status, requests in flight.

Its middleware counts a request as it comes in and its response once the whole body has gone
(for a stream, after the last event), under the route's path, or the raw path when no route
matches in full (a 404, a 405). Requests its API-key check refuses never reach it.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from slotop.sim.sglang.exposition import value_family


class SglangHttpMetrics:
    """Request and response counts, and requests in flight, in first-seen order."""

    def __init__(self) -> None:
        self._requests: dict[tuple[str, str], int] = {}
        self._active: dict[tuple[str, str], int] = {}
        self._responses: dict[tuple[str, str, str], int] = {}

    def began(self, endpoint: str, method: str) -> None:
        """A request came in."""
        key = (endpoint, method)
        self._requests[key] = self._requests.get(key, 0) + 1
        self._active[key] = self._active.get(key, 0) + 1

    def ended(self, endpoint: str, method: str, status: int | None) -> None:
        """A request's response has gone (status None: the handler failed before answering)."""
        key = (endpoint, method)
        self._active[key] -= 1
        if status is not None:
            counted = (endpoint, method, str(status))
            self._responses[counted] = self._responses.get(counted, 0) + 1

    def served(self, endpoint: str, method: str, status: int) -> None:
        """A request that came and went at once (the server's own start-up requests)."""
        self.began(endpoint, method)
        self.ended(endpoint, method, status)

    def counters(self) -> Iterator[Metric]:
        """The request and response counters (they follow the process CPU counter)."""
        requests = value_family(
            "sglang:http_requests",
            [({"endpoint": e, "method": m}, n) for (e, m), n in self._requests.items()],
        )
        responses = value_family(
            "sglang:http_responses",
            (
                ({"endpoint": e, "method": m, "status_code": s}, n)
                for (e, m, s), n in self._responses.items()
            ),
        )
        for metric in (requests, responses):
            if metric is not None:
                yield metric

    def gauges(self) -> Iterator[Metric]:
        """Requests in flight (the last family on SGLang's page)."""
        active = value_family(
            "sglang:http_requests_active",
            [({"endpoint": e, "method": m}, n) for (e, m), n in self._active.items()],
        )
        if active is not None:
            yield active
