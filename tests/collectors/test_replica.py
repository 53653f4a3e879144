"""The replica HTTP client against httpx.MockTransport: answers, failures, redirects, API key."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import httpx
import pytest

from slotop.collectors.errors import ReplicaUrlError, ScrapeError
from slotop.collectors.replica import MAX_BODY_BYTES, ReplicaClient, normalize_base_url
from tests.support.paths import CAPTURES

Handler = Callable[[httpx.Request], httpx.Response]


def _client(handler: Handler, **kwargs: object) -> ReplicaClient:
    return ReplicaClient(
        "http://replica:8000",
        transport=httpx.MockTransport(handler),
        **kwargs,  # type: ignore[arg-type]
    )


def _captured(request: httpx.Request) -> httpx.Response:
    files = {
        "/metrics": "vllm-0.32-cpu-load.txt",
        "/version": "vllm-0.32-cpu-version.json",
        "/v1/models": "vllm-0.32-cpu-models.json",
    }
    if request.url.path == "/health":
        return httpx.Response(200)
    name = files.get(request.url.path)
    if name is None:
        return httpx.Response(404, text="Not Found")
    return httpx.Response(200, content=(CAPTURES / name).read_bytes())


def test_reads_every_endpoint_from_captures() -> None:
    with _client(_captured) as client:
        assert client.metrics_text().startswith("# HELP")
        assert client.version() == "0.32.0"
        assert client.served_models() == ("tiny-llama",)
        assert client.health().healthy


def test_api_key_is_sent_as_bearer_and_only_when_given() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, text="")

    _client(handler, api_key="sk-test").metrics_text()
    _client(handler).metrics_text()
    assert seen == ["Bearer sk-test", None]


def _raises(exc: Exception) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return handler


FAILURES = [
    pytest.param(_raises(httpx.ConnectError("refused")), "cannot connect", id="connect"),
    pytest.param(_raises(httpx.ReadTimeout("slow")), "did not answer within 5 s", id="timeout"),
    pytest.param(
        _raises(httpx.RemoteProtocolError("peer closed")), "closed the connection", id="cut off"
    ),
    pytest.param(lambda r: httpx.Response(500, text="boom\nstack"), "HTTP 500: 'boom'", id="500"),
    pytest.param(lambda r: httpx.Response(401), "API key", id="401"),
    pytest.param(lambda r: httpx.Response(404), "is this a vLLM server", id="404"),
    pytest.param(
        lambda r: httpx.Response(307, headers={"location": "https://elsewhere/metrics"}),
        "redirecting to https://elsewhere/metrics",
        id="redirect not followed",
    ),
]


@pytest.mark.parametrize(("handler", "words"), FAILURES)
def test_failures_become_scrape_errors_naming_the_url(handler: Handler, words: str) -> None:
    with pytest.raises(ScrapeError, match=words) as caught:
        _client(handler).metrics_text()
    assert "http://replica:8000/metrics" in str(caught.value)


class _Truncated(httpx.SyncByteStream):
    """A body that breaks off after its first chunk, as when a replica dies mid-answer."""

    def __iter__(self) -> Iterator[bytes]:
        yield b'# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0'
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


def test_truncated_body_is_a_scrape_error() -> None:
    handler: Handler = lambda r: httpx.Response(200, stream=_Truncated())  # noqa: E731
    with pytest.raises(ScrapeError, match="closed the connection"):
        _client(handler).metrics_text()


class _Endless(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        chunk = b"x" * (1024 * 1024)
        for _ in range(MAX_BODY_BYTES // len(chunk) + 2):
            yield chunk


def test_oversized_body_is_refused() -> None:
    handler: Handler = lambda r: httpx.Response(200, stream=_Endless())  # noqa: E731
    with pytest.raises(ScrapeError, match="MiB"):
        _client(handler).metrics_text()


def test_health_reports_instead_of_raising() -> None:
    unhealthy = _client(lambda r: httpx.Response(503, text="engine dead")).health()
    unreachable = _client(_raises(httpx.ConnectError("refused"))).health()
    assert (unhealthy.healthy, unhealthy.detail) == (False, "HTTP 503: engine dead")
    assert not unreachable.healthy and "cannot connect" in (unreachable.detail or "")


def test_json_endpoints_tolerate_odd_shapes_and_refuse_non_json() -> None:
    odd = _client(lambda r: httpx.Response(200, json={"data": [{"id": 3}, "x", {"id": "a"}]}))
    assert odd.served_models() == ("a",)
    assert _client(lambda r: httpx.Response(200, json=[1])).version() is None
    with pytest.raises(ScrapeError, match="did not answer JSON"):
        _client(lambda r: httpx.Response(200, text="<html>")).version()


URLS = [
    pytest.param("http://127.0.0.1:8000", "http://127.0.0.1:8000", id="plain"),
    pytest.param("127.0.0.1:8000", "http://127.0.0.1:8000", id="no scheme"),
    pytest.param("http://host:8000/metrics", "http://host:8000", id="metrics path"),
    pytest.param("https://host/vllm/v1/", "https://host/vllm", id="prefix kept, /v1 dropped"),
    pytest.param(" http://host:8000/ ", "http://host:8000", id="spaces and slash"),
]


@pytest.mark.parametrize(("given", "expected"), URLS)
def test_normalize_base_url(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected


@pytest.mark.parametrize("bad", ["ftp://host/metrics", "http://", "http:///metrics"])
def test_unusable_urls_are_refused(bad: str) -> None:
    with pytest.raises(ReplicaUrlError):
        normalize_base_url(bad)
