"""A thin HTTP client for one vLLM replica: /metrics, /version, /v1/models, /health.

It speaks HTTP/1.1 through the standard library's http.client over one kept-alive connection:
the dashboard asks every second, and a general-purpose client's machinery (request and response
models, auth and redirect flows, a connection pool) cost three times the CPU of the exchange
itself (`python -m bench.bench_collectors` prints both). Transport errors are translated here,
once, into ScrapeError messages that name the URL and say what to do. Redirects are not
followed: a replica that answers 3xx is reported with where it points. Proxy variables are not
read: the replica is asked directly. https verifies the certificate against the system's
authorities (SSL_CERT_FILE / SSL_CERT_DIR select others).

A replica that is slow, hung, endless or huge costs at most `timeout_s` and `max_body_bytes` per
request: the whole exchange runs against one deadline (a read still waiting when it passes is
woken by shutting the socket), and no answer is read past the size cap. The URL a client shows
(`base_url`, every message) never carries the user info it authenticates with.
"""

from __future__ import annotations

import base64
import contextlib
import heapq
import http.client
import itertools
import json
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.message import Message
from types import TracebackType
from urllib.parse import urlsplit

from slotop.collectors.errors import EndpointMissingError, ReplicaUrlError, ScrapeError
from slotop.collectors.names import Engine
from slotop.fmt import printable
from slotop.redact import Scrubber, shown_url, url_user_info

MAX_BODY_BYTES = 32 * 1024 * 1024
"""The most of one answer read by default ([replica] max_scrape_mb): a vLLM /metrics page is tens
to hundreds of KB; one of many MB holds tens of thousands of series."""
_CHUNK_BYTES = 256 * 1024
_SHOWN_CHARS = 200
_STRIPPED_PATHS = ("/metrics", "/v1", "/health", "/version")
_ACCEPT = "text/plain, application/json;q=0.9, */*;q=0.1"
# A kept-alive connection the replica closed while idle fails on its next request with one of
# these before any answer came; that request is sent once more on a fresh connection.
_STALE_CONNECTION = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ConnectionAbortedError,
)


def normalize_base_url(url: str) -> str:
    """Return the replica's base URL: scheme added when absent, endpoint paths and `/` dropped."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReplicaUrlError(
            f"{shown_url(url)!r} is not an http:// or https:// URL of a replica; "
            "give one like http://127.0.0.1:8000"
        )
    try:
        parts.port  # noqa: B018 (raises on a port that is no number)
    except ValueError as exc:
        raise ReplicaUrlError(f"{shown_url(url)!r} has a port that is no number ({exc})") from exc
    path = parts.path.rstrip("/")
    for suffix in _STRIPPED_PATHS:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True, slots=True)
class Identity:
    """Who answers: the engine, its version and (where the server says it of itself, as SGLang
    does) its KV cache dtype, model dtype (`--dtype`, as given) and the cap on its KV pool in
    tokens (`--max-total-tokens`); None where it does not say."""

    engine: Engine | None
    version: str | None
    kv_cache_dtype: str | None = None
    model_dtype: str | None = None
    kv_tokens_cap: int | None = None


@dataclass(frozen=True, slots=True)
class Loads:
    """What an SGLang scheduler holds when asked (`/v1/loads`): requests and KV tokens."""

    running: float
    waiting: float
    used_tokens: float
    total_tokens: float


_LOAD_KEYS = ("num_running_reqs", "num_waiting_reqs", "num_used_tokens", "max_total_num_tokens")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True, slots=True)
class Health:
    """What /health said: healthy only on a 2xx answer; otherwise why not."""

    healthy: bool
    detail: str | None = None


def _first_line(text: str) -> str:
    head = text[: _SHOWN_CHARS * 4].strip()
    line = head.splitlines()[0] if head else ""
    return line if len(line) <= _SHOWN_CHARS else line[: _SHOWN_CHARS - 1] + "…"


class _Watchdog:
    """One thread for every client's deadlines: it calls a deadline's callback when it passes,
    unless the exchange ended first. Arming costs a heap push, not a thread of its own."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._live: set[int] = set()
        self._count = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, expire: Callable[[], None]) -> int:
        """Call `expire` in `seconds` unless disarmed; the token that disarms it."""
        at = time.monotonic() + seconds
        with self._lock:
            token = next(self._count)
            self._live.add(token)
            soonest = self._heap[0][0] if self._heap else math.inf
            heapq.heappush(self._heap, (at, token, expire))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="slotop-replica-deadlines", daemon=True
                )
                self._thread.start()
            elif at < soonest:
                self._lock.notify()
        return token

    def disarm(self, token: int) -> None:
        """The exchange ended: its deadline calls nothing (it leaves the heap when it comes)."""
        with self._lock:
            self._live.discard(token)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._heap or self._heap[0][0] > time.monotonic():
                    wait = self._heap[0][0] - time.monotonic() if self._heap else None
                    self._lock.wait(wait)
                _, token, expire = heapq.heappop(self._heap)
                due = token in self._live
                self._live.discard(token)
            if due:
                expire()


_WATCHDOG = _Watchdog()


class _Deadline:
    """One exchange's deadline: when it passes, the connection's socket is shut down, which wakes
    a read blocked on a replica that went quiet or drips (a socket timeout alone bounds each read,
    not the exchange)."""

    def __init__(self, seconds: float, connection: Callable[[], http.client.HTTPConnection | None]):
        self._seconds = seconds
        self._connection = connection
        self._lock = threading.Lock()
        self._over = False
        self._token = -1
        self.expired = False

    def __enter__(self) -> _Deadline:
        self._token = _WATCHDOG.arm(self._seconds, self._expire)
        return self

    def __exit__(self, *exc: object) -> None:
        _WATCHDOG.disarm(self._token)
        with self._lock:
            self._over = True

    def _expire(self) -> None:
        with self._lock:
            if self._over:
                return
            self.expired = True
            connection = self._connection()
            sock = connection.sock if connection is not None else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def _charset(content_type: str | None) -> str:
    if not content_type:
        return "utf-8"
    message = Message()
    message["content-type"] = content_type
    return message.get_content_charset() or "utf-8"


class ReplicaClient:
    """Reads one replica over HTTP with a timeout, an optional API key and no redirects.

    Safe to share between threads: requests take turns on the one connection.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 5.0,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        full_url = normalize_base_url(url)
        self.base_url = shown_url(full_url)
        self.timeout_s = timeout_s
        self.max_body_bytes = max_body_bytes
        parts = urlsplit(full_url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._prefix = parts.path
        self._headers = {"Accept": _ACCEPT, "Accept-Encoding": "identity"}
        pair = url_user_info(full_url)
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        elif pair is not None:  # https://user:password@host: basic auth, as curl does
            self._headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        self._scrub = Scrubber([api_key, pair, pair.partition(":")[2] if pair else None])
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection (a later request opens a new one)."""
        with self._lock:
            self._drop()

    def __enter__(self) -> ReplicaClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self) -> http.client.HTTPConnection:
        """The kept-alive connection, opened now when there is none."""
        if self._connection is None:
            if self._https:
                connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                    self._host,
                    self._port,
                    timeout=self.timeout_s,
                    context=ssl.create_default_context(),
                )
            else:
                connection = http.client.HTTPConnection(
                    self._host, self._port, timeout=self.timeout_s
                )
            try:
                connection.connect()
            except (TimeoutError, ssl.SSLError):
                raise
            except OSError as exc:
                raise _Unreachable(exc) from exc
            self._connection = connection
        return self._connection

    def _ask(self, path: str, deadline: _Deadline) -> http.client.HTTPResponse:
        """Send one GET; a kept-alive connection found closed is replaced once (unless it was
        the deadline that closed it)."""
        reused = self._connection is not None
        connection = self._connect()
        try:
            connection.request("GET", self._prefix + path, headers=self._headers)
            return connection.getresponse()
        except _STALE_CONNECTION:
            self._drop()
            if not reused or deadline.expired:
                raise
        connection = self._connect()
        connection.request("GET", self._prefix + path, headers=self._headers)
        return connection.getresponse()

    def _exchange(self, path: str) -> tuple[int, str, str | None]:
        """One request and its whole answer (status, decoded body, Location), within the
        deadline and the size cap."""
        with _Deadline(self.timeout_s, lambda: self._connection) as deadline:
            try:
                status, raw, response = self._answer(path, deadline)
            except Exception as exc:
                if deadline.expired:
                    raise _Overran() from exc
                raise
            if deadline.expired:
                raise _Overran()
        body = raw.decode(_charset(response.getheader("content-type")), errors="replace")
        if response.will_close:
            self._drop()
        return status, body, response.getheader("location")

    def _answer(
        self, path: str, deadline: _Deadline
    ) -> tuple[int, bytes, http.client.HTTPResponse]:
        """Send one GET and read its answer to the end, one read at a time, up to the cap."""
        response = self._ask(path, deadline)
        declared = response.length
        if declared is not None and declared > self.max_body_bytes:
            raise _TooLarge(declared)
        chunks: list[bytes] = []
        size = 0
        while chunk := response.read1(_CHUNK_BYTES):
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge(None)
            chunks.append(chunk)
        if declared is not None and size < declared:
            raise http.client.IncompleteRead(b"", declared - size)
        response.close()  # read to its end: the connection is free for the next request
        return response.status, b"".join(chunks), response

    def _get(self, path: str) -> tuple[int, str]:
        """GET a path; return (status, body); raise ScrapeError for transport failures and 3xx."""
        url = self.base_url + path
        with self._lock:
            try:
                status, body, location = self._exchange(path)
            except BaseException as exc:
                self._drop()  # whatever broke, the next request starts on a clean connection
                if isinstance(exc, Exception):
                    raise self._failure(url, exc) from exc
                raise
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
                "(the replica's --api-key; slotop sends the variable [replica] api_key_env names)"
            )
        if status == 404:
            raise EndpointMissingError(
                f"{url} does not exist (HTTP 404): is this a vLLM or SGLang server?"
            )
        if not 200 <= status < 300:
            raise ScrapeError(f"{url} answered HTTP {status}: {self._shown(body)!r}")
        return body

    def _shown(self, body: str) -> str:
        """An answer's first line as a message quotes it: any credential it echoes hidden, its
        control characters escaped."""
        return printable(self._scrub(_first_line(body)))

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
                f"{self.base_url + path} did not answer JSON: {self._shown(text)!r}"
            ) from exc

    def identity(self) -> Identity:
        """Which engine answers, and its version: vLLM says it at /version; SGLang has none there
        and says it, with its KV cache dtype, at /get_server_info. Raises the /version error
        when neither answers."""
        try:
            payload = self._json("/version")
        except ScrapeError as asked_vllm:
            try:
                payload = self._json("/get_server_info")
            except ScrapeError:
                raise asked_vllm from None
            if not isinstance(payload, dict) or "version" not in payload:
                raise asked_vllm from None
            cap = payload.get("max_total_tokens")
            return Identity(
                "sglang",
                _text(payload.get("version")),
                _text(payload.get("kv_cache_dtype")),
                _text(payload.get("dtype")),
                cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None,
            )
        return Identity(
            "vllm", _text(payload.get("version")) if isinstance(payload, dict) else None
        )

    def loads(self) -> Loads:
        """SGLang's `/v1/loads`, summed over its data-parallel ranks: what its scheduler holds
        now, counted when asked (its /metrics gauges are set only now and then)."""
        payload = self._json("/v1/loads")
        ranks = payload.get("loads") if isinstance(payload, dict) else None
        if not isinstance(ranks, list) or not ranks:
            raise ScrapeError(f"{self.base_url}/v1/loads lists no loads")
        totals = dict.fromkeys(_LOAD_KEYS, 0.0)
        for rank in ranks:
            for key in _LOAD_KEYS:
                value = rank.get(key) if isinstance(rank, dict) else None
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ScrapeError(f"{self.base_url}/v1/loads: {key} is {value!r}, not a number")
                totals[key] += value
        return Loads(*(totals[key] for key in _LOAD_KEYS))

    def server_settings(self, keys: Iterable[str]) -> dict[str, object]:
        """The named keys of SGLang's /get_server_info (its arguments and what it chose at
        start); only those are kept, since the rest holds its API key. Absent keys are left out."""
        payload = self._json("/get_server_info")
        if not isinstance(payload, dict):
            raise ScrapeError(
                f"{self.base_url}/get_server_info answered {type(payload).__name__}, not an object"
            )
        return {key: payload[key] for key in keys if key in payload}

    def served_models(self) -> tuple[str, ...]:
        """Return the model names /v1/models lists."""
        return tuple(name for name, _length in self.served_model_lengths())

    def served_model_lengths(self) -> tuple[tuple[str, int | None], ...]:
        """Each model /v1/models lists, with the `max_model_len` it gives (vLLM's max model
        length, SGLang's context length); None where an entry gives none."""
        payload = self._json("/v1/models")
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            return ()
        models = []
        for entry in data:
            name = entry.get("id") if isinstance(entry, dict) else None
            if not isinstance(name, str):
                continue
            length = entry.get("max_model_len")
            valid = isinstance(length, int) and not isinstance(length, bool) and length > 0
            models.append((name, length if valid else None))
        return tuple(models)

    def health(self) -> Health:
        """Ask /health; a non-2xx answer is unhealthy, and so is no answer (with the reason)."""
        try:
            status, body = self._get("/health")
        except ScrapeError as exc:
            return Health(False, str(exc))
        if 200 <= status < 300:
            return Health(True, None)
        detail = self._shown(body)
        return Health(False, f"HTTP {status}" + (f": {detail}" if detail else ""))

    def _failure(self, url: str, exc: Exception) -> ScrapeError:
        """The ScrapeError a failed exchange becomes: what happened, and what to do."""
        if isinstance(exc, _TooLarge):
            cap = f"{self.max_body_bytes / (1024 * 1024):g} MiB"
            said = f" (it announced {exc.declared / (1024 * 1024):.1f} MiB)" if exc.declared else ""
            return ScrapeError(
                f"{url} sent more than {cap}{said}, the most slotop reads of one answer "
                "([replica] max_scrape_mb); a /metrics page that large holds tens of thousands "
                "of series (per LoRA adapter or label value?): raise max_scrape_mb if it is "
                "right, else check the URL"
            )
        if isinstance(exc, _Overran | TimeoutError):
            return ScrapeError(
                f"{url} did not answer within {self.timeout_s:g} s (the whole answer, "
                f"[replica] timeout_s); the replica may be overloaded, hung or sending without "
                "end: raise the timeout if it is only slow, or check it"
            )
        if isinstance(exc, _Unreachable):
            return ScrapeError(
                f"cannot connect to {url} ({exc.__cause__}); is the replica running, and on "
                "this host and port?"
            )
        if isinstance(exc, ssl.SSLError):
            return ScrapeError(f"GET {url} failed: TLS: {exc}; check the scheme and certificate")
        if isinstance(exc, http.client.HTTPException | ConnectionError):
            detail = str(exc) or type(exc).__name__
            return ScrapeError(
                f"{url} closed the connection before the whole answer came ({detail}); "
                "the replica may be restarting: try again"
            )
        return ScrapeError(f"GET {url} failed: {type(exc).__name__}: {self._scrub(str(exc))}")


class _TooLarge(Exception):
    """The answer outgrew the client's size cap (`declared`: the length it announced, if any)."""

    def __init__(self, declared: int | None) -> None:
        super().__init__(declared)
        self.declared = declared


class _Overran(Exception):
    """The exchange outlasted its deadline."""


class _Unreachable(Exception):
    """No connection could be opened (its cause says why)."""
