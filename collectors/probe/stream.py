"""One streamed request: the body it sends, and the chunk timing it measures, error classes included.

The timing follows `vllm bench serve`: the clock starts just before the request is sent; every
server-sent event whose JSON carries a non-empty `choices` list is a token chunk, stamped with the
time its bytes were read; TTFT runs to the first, every later one adds a gap, and e2e runs to the
last. Unlike vLLM's client, the chunk that opens a chat message (its role, no text) is no token
chunk. Usage, wherever it comes, gives exact token counts; a completion count of zero is no count.
A stream is whole only with token chunks, no error event and its `[DONE]` (docs/probe.md: "How
it times a request").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import httpx

from slotop.collectors.probe.loadshape import PlannedRequest
from slotop.collectors.probe.records import Endpoint, ErrorClass

ENDPOINT_PATHS: dict[Endpoint, str] = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
}

_DETAIL_CHARS = 200

# Compact JSON (vLLM's, the sim's) lets a mid-stream token chunk be recognised without parsing it:
# a key followed by an unescaped quote cannot occur inside a JSON string, so these marks only
# match keys. Anything else (final chunk, usage, errors, spaced JSON) is parsed in full.
_TOKEN_MARK = b'"choices":[{'
_OPEN_MARK = b'"finish_reason":null'
_USAGE_MARK = b'"usage":{'
_ROLE_MARK = b'"role":'


@dataclass(frozen=True, slots=True)
class ProbeTarget:
    """Where the probe sends load: the replica's base URL, model, API key and request timeout.

    A model of None is asked of the replica's /v1/models when the probe starts.
    """

    base_url: str
    model: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    request_timeout_s: float = 300.0

    def url(self, endpoint: Endpoint) -> str:
        """The full URL requests to `endpoint` are posted to."""
        return self.base_url.rstrip("/") + ENDPOINT_PATHS[endpoint]

    def headers(self) -> dict[str, str]:
        """Request headers: JSON, and the bearer key where there is one."""
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def request_body(
    endpoint: Endpoint, model: str | None, planned: PlannedRequest, ignore_eos: bool
) -> dict[str, Any]:
    """The JSON body of one streamed request with its output length pinned."""
    body: dict[str, Any] = {} if model is None else {"model": model}
    if endpoint == "chat":
        body["messages"] = list(planned.messages or ())
        body["max_completion_tokens"] = planned.output_tokens
    else:
        body["prompt"] = list(planned.token_ids) if planned.token_ids is not None else planned.text
        body["max_tokens"] = planned.output_tokens
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    if ignore_eos:
        body["ignore_eos"] = True
    return body


class StreamDataError(Exception):
    """A stream carried an error event or data that is not JSON."""


class StreamMeter:
    """Splits a server-sent-event byte stream into events and times its token chunks.

    A read may come with its lag (how long its bytes waited in the socket); the meter keeps it for
    each token chunk, so the error the lag put into TTFT and ITL can be worked out (`lag.py`).
    """

    __slots__ = (
        "_buffer",
        "_lag_s",
        "chunk_count",
        "done",
        "finish_reason",
        "first_at_s",
        "gaps_s",
        "lags_s",
        "last_at_s",
        "output_tokens",
        "prompt_tokens",
        "sent_at_s",
    )

    def __init__(self, sent_at_s: float) -> None:
        self.sent_at_s = sent_at_s
        self._buffer = b""
        self.first_at_s: float | None = None
        self.last_at_s: float | None = None
        self.gaps_s: list[float] = []
        self.chunk_count = 0
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.finish_reason: str | None = None
        self.done = False
        self._lag_s: float | None = None
        self.lags_s: list[float] | None = None

    @property
    def ttft_s(self) -> float | None:
        """Send to first token chunk."""
        return None if self.first_at_s is None else self.first_at_s - self.sent_at_s

    @property
    def e2e_s(self) -> float | None:
        """Send to last token chunk."""
        return None if self.last_at_s is None else self.last_at_s - self.sent_at_s

    def feed(self, data: bytes, at_s: float, lag_s: float | None = None) -> None:
        """Take bytes read at `at_s` (`lag_s` after they arrived, where known); every complete
        event in them is handled at that time."""
        self._lag_s = lag_s
        if (
            not self._buffer
            and data.find(b"\n") == len(data) - 2
            and data.endswith(b"\n\n")
            and data.startswith(b"data: ")
        ):
            self._data(data[6:-2], at_s)  # the usual read: one event of one data line
            return
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        buffer = self._buffer + data if self._buffer else data
        start = 0
        before, previous_at_s = self.chunk_count, self.last_at_s
        while (end := buffer.find(b"\n\n", start)) >= 0:
            event = buffer[start:end]
            start = end + 2
            if event.startswith(b"data: ") and b"\n" not in event:
                self._data(event[6:], at_s)  # the shape every vLLM event has: one data line
            else:
                self._event(event, at_s)
        self._buffer = buffer[start:]
        if lag_s is not None and self.chunk_count - before > 1:
            self._spread(self.chunk_count - before, at_s, lag_s, previous_at_s)

    def _spread(self, count: int, at_s: float, lag_s: float, previous_at_s: float | None) -> None:
        """Several token chunks came in one read, which carries the arrival time of its last only:
        the earlier ones are taken to have come at the stream's steady gap before it, no earlier
        than the chunk before them (a stream without a steady gap yet keeps the lower bound)."""
        lags = self.lags_s
        if lags is None:
            return
        known = len(lags) - count  # chunks read before this read
        arrived_s = at_s - lag_s
        floor_s = previous_at_s - lags[known - 1] if previous_at_s is not None and known else None
        steady = [
            gap - (lags[index + 1] - lags[index])
            for index, gap in enumerate(self.gaps_s[: max(0, known - 1)][-16:], max(0, known - 17))
        ]
        steady = sorted(gap for gap in steady if gap > 0)
        if not steady:
            return
        step = steady[len(steady) // 2]
        if floor_s is not None:
            step = min(step, max(0.0, arrived_s - floor_s) / count)
        for back in range(1, count):
            lags[-1 - back] = lag_s + back * step

    def _event(self, event: bytes, at_s: float) -> None:
        for line in event.split(b"\n"):
            if line.startswith(b"data:"):  # others are comments (": ping"), event names, ids
                self._data(line[5:].strip(), at_s)

    def _token(self, at_s: float) -> None:
        if self.last_at_s is None:
            self.first_at_s = at_s
        else:
            self.gaps_s.append(at_s - self.last_at_s)
        self.last_at_s = at_s
        self.chunk_count += 1
        if self._lag_s is not None:
            if self.lags_s is None:
                self.lags_s = [0.0] * (self.chunk_count - 1)  # chunks read before lag was known
            self.lags_s.append(self._lag_s)

    def _data(self, payload: bytes, at_s: float) -> None:
        if (
            _TOKEN_MARK in payload
            and _OPEN_MARK in payload
            and _USAGE_MARK not in payload
            and _ROLE_MARK not in payload
            and payload.startswith(b"{")
        ):
            self._token(at_s)  # a mid-stream token chunk: nothing in it but its arrival counts
            return
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            data = json.loads(payload)
        except ValueError:
            raise StreamDataError(f"not JSON: {payload[:80]!r}") from None
        if not isinstance(data, dict):
            raise StreamDataError(f"not a JSON object: {payload[:80]!r}")
        choices = data.get("choices")
        if choices:
            choice = choices[0] if isinstance(choices[0], dict) else {}
            if not _closes_chat_message(choice) and (
                self.first_at_s is not None or not _opens_chat_message(choice)
            ):
                self._token(at_s)
            reason = choice.get("finish_reason")
            if reason is not None:
                self.finish_reason = str(reason)
        elif "error" in data:
            raise StreamDataError(_error_text(data["error"]))
        usage = data.get("usage")
        if isinstance(usage, dict):
            completion = usage.get("completion_tokens")
            prompt = usage.get("prompt_tokens")
            if _is_count(completion) and completion > 0:  # zero beside token chunks: no count
                self.output_tokens = completion
            if _is_count(prompt):
                self.prompt_tokens = prompt


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _opens_chat_message(choice: Mapping[str, Any]) -> bool:
    """Whether a chat choice only opens the message: a role, and no text, logprobs or finish."""
    delta = choice.get("delta")
    if not isinstance(delta, Mapping) or "role" not in delta:
        return False
    if choice.get("finish_reason") is not None or choice.get("logprobs"):
        return False
    return not any(value for key, value in delta.items() if key != "role")


def _closes_chat_message(choice: Mapping[str, Any]) -> bool:
    """Whether a chat choice only closes the message: a finish, no content at all (not even the
    empty text of a token that ends mid-character) and no logprobs. SGLang ends a chat stream
    so, after its last token; vLLM sends the last token with the finish."""
    delta = choice.get("delta")
    if not isinstance(delta, Mapping) or choice.get("finish_reason") is None:
        return False
    if delta.get("content") is not None or choice.get("logprobs"):
        return False
    return not any(delta.values())


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        return str(error.get("message") or error)[:_DETAIL_CHARS]
    return str(error)[:_DETAIL_CHARS]


@dataclass(slots=True)
class StreamOutcome:
    """How a request ended: None for a full stream, else the class, a detail and the status."""

    error: ErrorClass | None = None
    detail: str = ""
    http_status: int | None = None


def status_detail(status: int, body: bytes) -> str:
    """What a refusal says: its status, and the error message of its body where it has one."""
    text = body.decode("utf-8", errors="replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "error" in parsed:
        text = _error_text(parsed["error"])
    elif isinstance(parsed, dict) and "detail" in parsed:
        text = str(parsed["detail"])
    return f"HTTP {status}: {text[:_DETAIL_CHARS]}" if text else f"HTTP {status}"


async def stream_request(
    client: httpx.AsyncClient,
    url: str,
    content: bytes,
    headers: Mapping[str, str],
    meter: StreamMeter,
    outcome: StreamOutcome,
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Post one streaming request, feeding every read to `meter` and filling `outcome`.

    Cancellation propagates (the caller decides whether it was a stop or a deadline); every other
    failure is translated here into an error class and never raised.
    """
    responded = False
    try:
        async with client.stream("POST", url, content=content, headers=headers) as response:
            responded = True
            outcome.http_status = response.status_code
            if response.status_code != 200:
                body = await response.aread()
                outcome.error = ErrorClass.HTTP_STATUS
                outcome.detail = status_detail(response.status_code, body)
                return
            async for data in response.aiter_bytes():
                meter.feed(data, clock())
    except StreamDataError as exc:
        outcome.error, outcome.detail = ErrorClass.STREAM_ERROR, str(exc)
        return
    except httpx.TimeoutException as exc:
        outcome.error, outcome.detail = ErrorClass.TIMEOUT, type(exc).__name__
        return
    except httpx.TransportError as exc:
        outcome.error = ErrorClass.STREAM_CUT if responded else ErrorClass.CONNECT
        outcome.detail = f"{type(exc).__name__}: {exc}"[:_DETAIL_CHARS]
        return
    except httpx.HTTPError as exc:
        outcome.error, outcome.detail = ErrorClass.CONNECT, f"{type(exc).__name__}: {exc}"
        return
    finish_outcome(meter, outcome)


def finish_outcome(meter: StreamMeter, outcome: StreamOutcome) -> None:
    """Judge a stream that ended cleanly: it needs token chunks and its `[DONE]`."""
    if meter.chunk_count == 0:
        outcome.error, outcome.detail = ErrorClass.STREAM_ERROR, "the stream held no token chunk"
    elif not meter.done:
        outcome.error, outcome.detail = ErrorClass.STREAM_CUT, "the stream ended without [DONE]"
