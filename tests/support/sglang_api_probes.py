"""Requests that tell an SGLang 0.5.23 server's API by its answers, and what of an answer must match.

`tests/sim/fixtures/sglang-0.5.23-cpu-api.json` holds a real server's answers to PROBES, sent in
order (`tests/sim/fixtures/capture_sglang_api.py` remakes it); `tests/sim/test_sglang_vs_real.py`
asks the simulated replica in SGLang mode the same and compares what `comparable` keeps.
The real server serves the tiny Llama as `tiny-llama` with `--api-key sekret`, a one-line
`--chat-template`, `--max-total-tokens 4096` and `--enable-metrics`; its context length is the
model's 2,048 tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

MODEL = "tiny-llama"
API_KEY = "sekret"
CONTEXT_LENGTH = 2048
MAX_TOTAL_TOKENS = 4096
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
_IDS = list(range(3, 11))
_CHAT = [{"role": "user", "content": "hi there"}]


@dataclass(frozen=True, slots=True)
class Probe:
    """One request: JSON body, raw bytes (sent as JSON), or (content type, bytes)."""

    name: str
    method: str
    path: str
    body: dict[str, Any] | bytes | tuple[str, bytes] | None = None
    authorized: bool = True


def _completion(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": _IDS, **fields}


def _chat(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": _CHAT, **fields}


PROBES: tuple[Probe, ...] = (
    Probe("completion", "POST", "/v1/completions", _completion(max_tokens=3, ignore_eos=True)),
    Probe(
        "completion_stream",
        "POST",
        "/v1/completions",
        _completion(
            max_tokens=3, ignore_eos=True, stream=True, stream_options={"include_usage": True}
        ),
    ),
    Probe(
        "completion_stream_plain",
        "POST",
        "/v1/completions",
        _completion(max_tokens=2, ignore_eos=True, stream=True),
    ),
    Probe(
        "completion_stream_cont",
        "POST",
        "/v1/completions",
        _completion(
            max_tokens=2,
            ignore_eos=True,
            stream=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
        ),
    ),
    Probe(
        "completion_n2",
        "POST",
        "/v1/completions",
        _completion(max_tokens=2, ignore_eos=True, n=2, stream=True),
    ),
    Probe(
        "completion_batch",
        "POST",
        "/v1/completions",
        {"model": MODEL, "prompt": [_IDS, _IDS[:4]], "max_tokens": 2, "ignore_eos": True},
    ),
    Probe("completion_text", "POST", "/v1/completions", _completion(prompt="hello", max_tokens=2)),
    Probe("chat", "POST", "/v1/chat/completions", _chat(max_tokens=3, ignore_eos=True)),
    Probe(
        "chat_stream",
        "POST",
        "/v1/chat/completions",
        _chat(max_tokens=3, ignore_eos=True, stream=True, stream_options={"include_usage": True}),
    ),
    Probe(
        "chat_stream_plain",
        "POST",
        "/v1/chat/completions",
        _chat(max_tokens=2, ignore_eos=True, stream=True),
    ),
    Probe(
        "chat_stream_cont",
        "POST",
        "/v1/chat/completions",
        _chat(
            max_tokens=2,
            ignore_eos=True,
            stream=True,
            stream_options={"include_usage": True, "continuous_usage_stats": True},
        ),
    ),
    Probe(
        "unknown_model", "POST", "/v1/completions", {**_completion(max_tokens=3), "model": "nope"}
    ),
    Probe("bad_json", "POST", "/v1/completions", b"{bad"),
    Probe("wrong_ctype", "POST", "/v1/completions", ("text/plain", b'{"prompt": "x"}')),
    Probe(
        "too_long_ids",
        "POST",
        "/v1/completions",
        {"model": MODEL, "prompt": [5] * 3000, "max_tokens": 3},
    ),
    Probe(
        "exact_len_ids",
        "POST",
        "/v1/completions",
        {"model": MODEL, "prompt": [5] * CONTEXT_LENGTH, "max_tokens": 3},
    ),
    Probe(
        "over_len_total",
        "POST",
        "/v1/completions",
        {"model": MODEL, "prompt": [5] * 2000, "max_tokens": 100},
    ),
    Probe("max_tokens_huge", "POST", "/v1/completions", _completion(max_tokens=5000)),
    Probe("max_tokens_zero", "POST", "/v1/completions", _completion(max_tokens=0)),
    Probe("max_tokens_str", "POST", "/v1/completions", _completion(max_tokens="x")),
    Probe("no_prompt", "POST", "/v1/completions", {"model": MODEL, "max_tokens": 3}),
    Probe("chat_no_messages", "POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 3}),
    Probe(
        "stream_opts_no_stream",
        "POST",
        "/v1/completions",
        _completion(max_tokens=3, stream_options={"include_usage": True}),
    ),
    Probe("n_zero", "POST", "/v1/completions", _completion(max_tokens=3, n=0)),
    Probe("no_key", "POST", "/v1/completions", _completion(max_tokens=3), authorized=False),
    Probe("wrong_key_models", "GET", "/v1/models", authorized=False),
    Probe("no_key_health", "GET", "/health", authorized=False),
    Probe("no_key_unknown_path", "GET", "/nope", authorized=False),
    Probe("unknown_path", "GET", "/nope"),
    Probe("wrong_method", "GET", "/v1/completions"),
    Probe("version", "GET", "/version"),
    Probe("models", "GET", "/v1/models"),
    Probe("get_model_info", "GET", "/get_model_info"),
    Probe("health", "GET", "/health"),
    Probe("health_generate", "GET", "/health_generate"),
    Probe("metrics_before_long", "GET", "/metrics", authorized=False),
    Probe(
        "long_plain",
        "POST",
        "/v1/completions",
        _completion(max_tokens=60, ignore_eos=True),
    ),
    Probe("metrics", "GET", "/metrics", authorized=False),
)

_BY_TYPE_ONLY = frozenset(
    {"id", "created", "text", "content", "root", "model_path", "tokenizer_path", "load_format"}
)
"""Values that depend on the model, the tokenizer or the clock: compared by type only."""
_CHAT_PROMPT_SIZED = frozenset({"prompt_tokens", "total_tokens"})
_TOKENIZER_WORDED = frozenset({"too_long_ids"})


def ask(client: httpx.Client, probe: Probe) -> dict[str, Any]:
    """Send one probe and record what came back, as the fixture stores it."""
    headers = {"Authorization": f"Bearer {API_KEY}"} if probe.authorized else {}
    body = probe.body
    if isinstance(body, dict):
        response = client.request(probe.method, probe.path, headers=headers, json=body)
    elif isinstance(body, bytes):
        headers["content-type"] = "application/json"
        response = client.request(probe.method, probe.path, headers=headers, content=body)
    elif isinstance(body, tuple):
        headers["content-type"] = body[0]
        response = client.request(probe.method, probe.path, headers=headers, content=body[1])
    else:
        response = client.request(probe.method, probe.path, headers=headers)
    return {
        "status": response.status_code,
        "content_type": response.headers.get("content-type"),
        "body": response.text,
    }


def _shape(value: Any, key: str | None, probe: Probe) -> Any:
    """Keep what must match exactly; reduce tokenizer- and clock-dependent values to their type."""
    if isinstance(value, dict):
        return [(k, _shape(v, k, probe)) for k, v in value.items()]
    if isinstance(value, list):
        return [_shape(item, key, probe) for item in value]
    prompt_sized = key in _CHAT_PROMPT_SIZED and (
        "chat" in probe.path or probe.name == "completion_text"
    )
    if key in _BY_TYPE_ONLY or prompt_sized:
        return type(value).__name__
    if key == "id" or (key == "message" and probe.name in _TOKENIZER_WORDED):
        return re.sub(r"\d+", "N", str(value))
    if key == "message" and isinstance(value, str):
        # Where SGLang is installed, and how its JSON decoder words a complaint, vary.
        value = re.sub(r'File "[^"]*/(sglang/srt/[^"]*)"', r'File ".../\1"', value)
        return re.sub(r"'ctx': \{'error': '[^']*'\}", "'ctx': {'error': ...}", value)
    return value


def events(body: str) -> Iterator[str]:
    """The data payloads of a server-sent-event body, [DONE] included."""
    for line in body.splitlines():
        if line.startswith("data: "):
            yield line[len("data: ") :]


def _choice_index(event: Any) -> int:
    """The choice a streamed chunk belongs to; 99 (last) for usage and [DONE]."""
    if isinstance(event, dict) and event.get("choices"):
        return int(event["choices"][0]["index"])
    return 99


def _mid_stream(event: Any) -> bool:
    """A streamed chunk that carries tokens but does not end its choice."""
    if not isinstance(event, dict) or not event.get("choices"):
        return False
    return all(choice.get("finish_reason") is None for choice in event["choices"])


def comparable(answer: dict[str, Any], probe: Probe) -> Any:
    """Reduce a recorded answer to what the sim must reproduce (None: nothing, e.g. /metrics)."""
    if probe.path == "/metrics":
        return None
    content_type = answer["content_type"]
    body = answer["body"]
    if content_type and content_type.startswith("text/event-stream"):
        parsed = [e if e == "[DONE]" else json.loads(e) for e in events(body)]
        shaped = [e if isinstance(e, str) else _shape(e, None, probe) for e in parsed]
        # n > 1 interleaves choices in arrival order: compare them choice by choice.
        pairs = sorted(zip(parsed, shaped, strict=True), key=lambda pair: _choice_index(pair[0]))
        middle = [s for e, s in pairs if _mid_stream(e)]
        ending = [s for e, s in pairs if not _mid_stream(e)]
        return {
            "status": answer["status"],
            "content_type": content_type,
            "body": ending,
            "mid_stream": sorted({repr(shape) for shape in middle}),
        }
    if content_type == "application/json":
        body_shape = _shape(json.loads(body), None, probe)
    else:
        body_shape = body
    return {"status": answer["status"], "content_type": content_type, "body": body_shape}
