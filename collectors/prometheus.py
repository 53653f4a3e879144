"""A thin client of a Prometheus server's HTTP API: instant and range queries, nothing cached.

Every failure is translated here, once, into the PrometheusError tree (unreachable, refused,
a query Prometheus would not run), with the server, the query and what to do. Credentials (a
bearer token or basic auth) come from a file or an environment variable, never from the command
line; they travel in one header and are never part of a message, a repr or a log line.
"""

from __future__ import annotations

import base64
import math
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx

from slotop.collectors.errors import CollectorError

MAX_BODY_BYTES = 64 * 1024 * 1024
_SHOWN_CHARS = 160


class PrometheusError(CollectorError):
    """Asking the Prometheus server failed; the message names the server and what to do."""


class PrometheusUnavailable(PrometheusError):
    """The server did not answer in time, could not be reached, or answered 5xx or garbage."""


class PrometheusRefused(PrometheusError):
    """The server refused slotop's credentials (401/403), or they could not be read."""


class PrometheusQueryError(PrometheusError):
    """The server would not run a query (bad_data, execution error): the query is named."""


@dataclass(frozen=True, slots=True)
class PrometheusAuth:
    """Credentials for the server: a bearer token or basic auth, and where they were read from.

    The secrets are kept out of repr; `source` (a file path or a variable name) is safe to show.
    """

    source: str
    bearer_token: str | None = field(default=None, repr=False)
    basic_user: str | None = field(default=None, repr=False)
    basic_password: str | None = field(default=None, repr=False)

    def header(self) -> str:
        """The Authorization header's value."""
        if self.bearer_token is not None:
            return f"Bearer {self.bearer_token}"
        pair = f"{self.basic_user or ''}:{self.basic_password or ''}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")


def _read_secret(file: str, env: str, what: str, environ: Mapping[str, str]) -> tuple[str, str]:
    """Read one secret from a file (first line) or an environment variable; (secret, source)."""
    if file:
        try:
            text = Path(file).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise PrometheusRefused(
                f"cannot read the {what} file {file} ({exc.strerror or exc}); fix [fleet] "
                "or the file's permissions"
            ) from None
        secret = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not secret:
            raise PrometheusRefused(f"the {what} file {file} is empty; put the {what} in it")
        return secret, f"file {file}"
    secret = environ.get(env, "").strip()
    if not secret:
        raise PrometheusRefused(
            f"the environment variable {env} (named in [fleet] for the {what}) is unset or "
            "empty; export it, or clear the setting"
        )
    return secret, f"environment variable {env}"


def read_auth(
    *,
    bearer_token_file: str = "",
    bearer_token_env: str = "",
    basic_auth_file: str = "",
    basic_auth_env: str = "",
    environ: Mapping[str, str] | None = None,
) -> PrometheusAuth | None:
    """Read the credentials the settings name; None when they name none.

    Basic auth is one line `user:password`. Raises PrometheusRefused for an unreadable or empty
    file, an unset variable, or basic auth without a colon.
    """
    env = os.environ if environ is None else environ
    if bearer_token_file or bearer_token_env:
        token, source = _read_secret(bearer_token_file, bearer_token_env, "bearer token", env)
        return PrometheusAuth(source, bearer_token=token)
    if basic_auth_file or basic_auth_env:
        pair, source = _read_secret(basic_auth_file, basic_auth_env, "basic auth", env)
        user, colon, password = pair.partition(":")
        if not colon or not user:
            raise PrometheusRefused(
                f"the basic auth in {source} is not `user:password` on one line; fix it"
            )
        return PrometheusAuth(source, basic_user=user, basic_password=password)
    return None


def normalize_prometheus_url(url: str) -> str:
    """The server's base URL (scheme added when absent, trailing `/` dropped); no credentials.

    Raises PrometheusError for a URL that is not http(s) or that carries a user or password,
    which belong in a file or the environment (see [fleet]).
    """
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PrometheusError(
            f"{url!r} is not an http:// or https:// URL of a Prometheus server; give one like "
            "http://127.0.0.1:9090"
        )
    if parts.username is not None or parts.password is not None:
        raise PrometheusError(
            "the Prometheus URL carries credentials; remove them and name a file or an "
            "environment variable in [fleet] (basic_auth_file, basic_auth_env) instead"
        )
    path = parts.path.rstrip("/")
    for suffix in ("/api/v1/query", "/api/v1", "/graph"):
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    return f"{parts.scheme}://{parts.netloc}{path}"


Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class VectorSample:
    """One element of an instant vector: its labels (sorted, `__name__` included) and value."""

    labels: Labels
    value: float

    def label(self, name: str) -> str:
        """The value of a label, "" when absent (as PromQL treats a missing label)."""
        for key, value in self.labels:
            if key == name:
                return value
        return ""


@dataclass(frozen=True, slots=True)
class RangeSeries:
    """One series of a range query: its labels and (Unix time, value) points, oldest first."""

    labels: Labels
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True, slots=True)
class QueryAnswer:
    """What a query returned, the server's warnings (partial data), and how long it took."""

    query: str
    samples: tuple[VectorSample, ...] = ()
    series: tuple[RangeSeries, ...] = ()
    warnings: tuple[str, ...] = ()
    elapsed_s: float = 0.0


def _number(text: Any) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def _labels(metric: Any) -> Labels:
    if not isinstance(metric, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in metric.items()))


def _shorten(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _SHOWN_CHARS else line[: _SHOWN_CHARS - 1] + "…"


def _tls(verify: bool, ca_file: str) -> bool | ssl.SSLContext:
    if not verify:
        return False
    if ca_file:
        try:
            return ssl.create_default_context(cafile=str(Path(ca_file).expanduser()))
        except (OSError, ssl.SSLError) as exc:
            raise PrometheusError(
                f"cannot load the CA file {ca_file} ({exc}); fix [fleet] ca_file"
            ) from None
    return True


class PrometheusClient:
    """Runs PromQL on one server over its HTTP API, with a timeout, TLS checks and credentials."""

    def __init__(
        self,
        url: str,
        *,
        auth: PrometheusAuth | None = None,
        timeout_s: float = 10.0,
        tls_verify: bool = True,
        ca_file: str = "",
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = normalize_prometheus_url(url)
        self.timeout_s = timeout_s
        self.auth_source = auth.source if auth is not None else None
        self._clock = clock
        headers = {"Accept": "application/json"}
        if auth is not None:
            headers["Authorization"] = auth.header()
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            # A little past the server's own query timeout, so its error answers first.
            timeout=timeout_s + 1.0,
            verify=_tls(tls_verify, ca_file),
            follow_redirects=False,
            transport=transport,
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def instant(self, query: str, at_s: float | None = None) -> QueryAnswer:
        """Evaluate a query at one moment (now, or Unix time `at_s`): a vector or a scalar."""
        form = {"query": query, "timeout": f"{self.timeout_s:g}s"}
        if at_s is not None:
            form["time"] = f"{at_s:.3f}"
        started = self._clock()
        data, warnings = self._post("/api/v1/query", form, query)
        kind, result = data.get("resultType"), data.get("result")
        samples: list[VectorSample] = []
        if kind == "vector" and isinstance(result, list):
            for item in result:
                value = item.get("value") if isinstance(item, dict) else None
                if isinstance(value, list) and len(value) == 2:
                    samples.append(VectorSample(_labels(item.get("metric")), _number(value[1])))
        elif kind == "scalar" and isinstance(result, list) and len(result) == 2:
            samples.append(VectorSample((), _number(result[1])))
        else:
            raise PrometheusQueryError(
                f"{self.base_url} answered {query!r} with a {kind!r} result, not an instant "
                "vector; ask for a vector"
            )
        return QueryAnswer(query, tuple(samples), (), warnings, self._clock() - started)

    def range(self, query: str, start_s: float, end_s: float, step_s: float) -> QueryAnswer:
        """Evaluate a query every `step_s` from `start_s` to `end_s` (Unix times): a matrix."""
        form = {
            "query": query,
            "start": f"{start_s:.3f}",
            "end": f"{end_s:.3f}",
            "step": f"{step_s:g}",
            "timeout": f"{self.timeout_s:g}s",
        }
        started = self._clock()
        data, warnings = self._post("/api/v1/query_range", form, query)
        result = data.get("result")
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise PrometheusQueryError(
                f"{self.base_url} answered the range query {query!r} without a matrix"
            )
        series = []
        for item in result:
            if not isinstance(item, dict):
                continue
            points = tuple(
                (_number(point[0]), _number(point[1]))
                for point in item.get("values") or ()
                if isinstance(point, list) and len(point) == 2
            )
            series.append(RangeSeries(_labels(item.get("metric")), points))
        return QueryAnswer(query, (), tuple(series), warnings, self._clock() - started)

    def _not_the_api(self, path: str, status: int, body: str) -> PrometheusUnavailable:
        """The error for a URL whose server answers, but not with the Prometheus HTTP API."""
        return PrometheusUnavailable(
            f"{self.base_url} does not answer the Prometheus HTTP API: POST {path} got HTTP "
            f"{status} ({_shorten(body)!r}) where Prometheus answers with a JSON status. "
            "Check that the URL is the Prometheus server's own base URL (such as "
            "http://prometheus:9090, with no path like /graph or /api/v1) and not a replica's: "
            "replicas are read without --prometheus (slotop fleet URL URL ...)"
        )

    def _post(
        self, path: str, form: dict[str, str], query: str
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """POST a query; return its `data` and warnings, or raise the error that fits."""
        url = self.base_url + path
        try:
            response = self._client.post(path, data=form)
            body = response.content
        except httpx.TimeoutException as exc:
            raise PrometheusUnavailable(
                f"{url} did not answer within {self.timeout_s + 1:g} s ({type(exc).__name__}); "
                "the server may be overloaded: raise [fleet] query_timeout_s or check it"
            ) from exc
        except httpx.ConnectError as exc:
            raise PrometheusUnavailable(
                f"cannot connect to {url} ({exc}); is Prometheus running there, and reachable?"
            ) from exc
        except httpx.HTTPError as exc:
            raise PrometheusUnavailable(
                f"POST {url} failed: {type(exc).__name__}: {_shorten(str(exc))}"
            ) from exc
        status = response.status_code
        if len(body) > MAX_BODY_BYTES:
            raise PrometheusUnavailable(f"{url} sent more than 64 MiB for {query!r}; narrow it")
        if status in (401, 403):
            how = (
                f"the credentials from {self.auth_source}" if self.auth_source else "no credentials"
            )
            raise PrometheusRefused(
                f"{url} refused slotop (HTTP {status}) with {how}; set [fleet] "
                "bearer_token_file/_env or basic_auth_file/_env"
            )
        if 300 <= status < 400:
            where = response.headers.get("location") or "nowhere"
            raise PrometheusUnavailable(
                f"{url} answered HTTP {status}, redirecting to {where}; give the server's own URL"
            )
        try:
            payload = response.json()
        except ValueError:
            if status == 404:
                raise self._not_the_api(path, status, response.text) from None
            raise PrometheusUnavailable(
                f"{url} answered HTTP {status} without JSON: {_shorten(response.text)!r}; is "
                "this a Prometheus server?"
            ) from None
        if status == 404 or not isinstance(payload, dict) or "status" not in payload:
            # Prometheus always answers its API with a `status`; a replica's 404 has none.
            raise self._not_the_api(path, status, response.text)
        if payload.get("status") != "success":
            kind = payload.get("errorType") or f"HTTP {status}"
            error = _shorten(str(payload.get("error") or "no reason given"))
            if kind in ("timeout", "canceled", "unavailable", "internal") or status >= 500:
                raise PrometheusUnavailable(f"{url} could not run {query!r} ({kind}: {error})")
            raise PrometheusQueryError(f"{url} refused the query {query!r} ({kind}: {error})")
        data = payload.get("data")
        if not isinstance(data, dict):
            raise PrometheusUnavailable(f"{url} answered {query!r} without data")
        warnings = payload.get("warnings") or ()
        return data, tuple(_shorten(str(w)) for w in warnings if w)
