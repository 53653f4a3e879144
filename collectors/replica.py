"""A thin HTTP client for one vLLM replica: /metrics, /version, /v1/models, /health.

httpx errors are translated here, once, into ScrapeError messages that name the URL and say what
to do. Redirects are not followed: a replica that answers 3xx is reported with where it points.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import urlsplit

import httpx

from slotop.collectors.errors import ReplicaUrlError, ScrapeError

MAX_BODY_BYTES = 64 * 1024 * 1024
_SHOWN_CHARS = 200
_STRIPPED_PATHS = ("/metrics", "/v1", "/health", "/version")


def normalize_base_url(url: str) -> str:
    """Return the replica's base URL: scheme added when absent, endpoint paths and `/` dropped."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReplicaUrlError(
            f"{url!r} is not an http:// or https:// URL of a replica; "
            "give one like http://127.0.0.1:8000"
        )
    path = parts.path.rstrip("/")
    for suffix in _STRIPPED_PATHS:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True, slots=True)
class Health:
    """What /health said: healthy only on a 2xx answer; otherwise why not."""

    healthy: bool
    detail: str | None = None


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= _SHOWN_CHARS else line[: _SHOWN_CHARS - 1] + "…"


class ReplicaClient:
    """Reads one replica over HTTP with a timeout, an optional API key and no redirects."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = normalize_base_url(url)
        self.timeout_s = timeout_s
        headers = {"Accept": "text/plain, application/json;q=0.9, */*;q=0.1"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout_s,
            follow_redirects=False,
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> ReplicaClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _get(self, path: str) -> tuple[int, str]:
        """GET a path; return (status, body); raise ScrapeError for transport failures and 3xx."""
        url = self.base_url + path
        try:
            with self._client.stream("GET", path) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > MAX_BODY_BYTES:
                        raise ScrapeError(
                            f"{url} sent more than {MAX_BODY_BYTES // (1024 * 1024)} MiB; "
                            "that is no /metrics body: check the URL"
                        )
                    chunks.append(chunk)
                body = b"".join(chunks).decode(response.encoding or "utf-8", errors="replace")
                status = response.status_code
                location = response.headers.get("location")
        except httpx.TimeoutException as exc:
            raise ScrapeError(
                f"{url} did not answer within {self.timeout_s:g} s ({type(exc).__name__}); "
                "the replica may be overloaded or hung: raise the timeout or check it"
            ) from exc
        except httpx.ConnectError as exc:
            raise ScrapeError(
                f"cannot connect to {url} ({exc}); is the replica running, and on this "
                "host and port?"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise ScrapeError(
                f"{url} closed the connection before the whole answer came ({exc}); "
                "the replica may be restarting: try again"
            ) from exc
        except httpx.HTTPError as exc:
            raise ScrapeError(f"GET {url} failed: {type(exc).__name__}: {exc}") from exc
        if 300 <= status < 400:
            raise ScrapeError(
                f"{url} answered HTTP {status}, redirecting to {location or 'nowhere'}; "
                "slotop does not follow redirects: give the replica's own URL"
            )
        return status, body

    def _require_ok(self, path: str, status: int, body: str) -> str:
        url = self.base_url + path
        if status in (401, 403):
            raise ScrapeError(
                f"{url} refused slotop (HTTP {status}): check the API key it sends "
                "(the replica's --api-key)"
            )
        if status == 404:
            raise ScrapeError(f"{url} does not exist (HTTP 404): is this a vLLM server?")
        if not 200 <= status < 300:
            raise ScrapeError(f"{url} answered HTTP {status}: {_first_line(body)!r}")
        return body

    def metrics_text(self) -> str:
        """Return the /metrics body."""
        status, body = self._get("/metrics")
        return self._require_ok("/metrics", status, body)

    def _json(self, path: str) -> object:
        status, body = self._get(path)
        text = self._require_ok(path, status, body)
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ScrapeError(
                f"{self.base_url + path} did not answer JSON: {_first_line(text)!r}"
            ) from exc

    def version(self) -> str | None:
        """Return the vLLM version from /version, None when it does not say."""
        payload = self._json("/version")
        version = payload.get("version") if isinstance(payload, dict) else None
        return version if isinstance(version, str) else None

    def served_models(self) -> tuple[str, ...]:
        """Return the model names /v1/models lists."""
        payload = self._json("/v1/models")
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            return ()
        ids = (entry.get("id") for entry in data if isinstance(entry, dict))
        return tuple(model for model in ids if isinstance(model, str))

    def health(self) -> Health:
        """Ask /health; a non-2xx answer is unhealthy, and so is no answer (with the reason)."""
        try:
            status, body = self._get("/health")
        except ScrapeError as exc:
            return Health(False, str(exc))
        if 200 <= status < 300:
            return Health(True, None)
        detail = _first_line(body)
        return Health(False, f"HTTP {status}" + (f": {detail}" if detail else ""))
