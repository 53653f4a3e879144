"""The sim answers the same requests with the same statuses, shapes and error bodies as real vLLM 0.32.

`fixtures/vllm-0.32-cpu-api.json` holds a real replica's answers to PROBES (the tiny Llama of
tests/support/tiny_model.py served as `tiny-llama` with `--max-model-len 1024 --api-key sekret`
and a one-line `--chat-template`); the `vllm`-marked test asks a live replica again. Values that depend
on the tokenizer or the clock (ids, times, generated text, chat prompt lengths) are compared by
type only; statuses, content types, keys and their order, finish reasons and error texts exactly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.server import ServerThread
from slotop.sim.tables import gpu_by_name, model_by_name_or_path
from slotop.sim.types import ServeOptions

FIXTURE = Path(__file__).parent / "fixtures" / "vllm-0.32-cpu-api.json"
MODEL = "tiny-llama"
API_KEY = "sekret"
MAX_MODEL_LEN = 1024
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
    Probe(
        "chat",
        "POST",
        "/v1/chat/completions",
        {"model": MODEL, "messages": _CHAT, "max_tokens": 3, "ignore_eos": True},
    ),
    Probe(
        "chat_stream",
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": _CHAT,
            "max_tokens": 3,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    ),
    Probe(
        "chat_stream_cont",
        "POST",
        "/v1/chat/completions",
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 2,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        },
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
        {"model": MODEL, "prompt": [5] * 2000, "max_tokens": 3},
    ),
    Probe(
        "too_long_text",
        "POST",
        "/v1/completions",
        {"model": MODEL, "prompt": "hello " * 3000, "max_tokens": 3},
    ),
    Probe(
        "exact_len_ids",
        "POST",
        "/v1/completions",
        {"model": MODEL, "prompt": [5] * MAX_MODEL_LEN, "max_tokens": 3},
    ),
    Probe("max_tokens_huge", "POST", "/v1/completions", _completion(max_tokens=5000)),
    Probe("max_tokens_zero", "POST", "/v1/completions", _completion(max_tokens=0)),
    Probe("max_tokens_str", "POST", "/v1/completions", _completion(max_tokens="x")),
    Probe("no_prompt", "POST", "/v1/completions", {"model": MODEL, "max_tokens": 3}),
    Probe("chat_no_messages", "POST", "/v1/chat/completions", {"model": MODEL, "max_tokens": 3}),
    Probe(
        "chat_too_long",
        "POST",
        "/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "user", "content": "hello " * 3000}]},
    ),
    Probe(
        "stream_opts_no_stream",
        "POST",
        "/v1/completions",
        _completion(max_tokens=3, stream_options={"include_usage": True}),
    ),
    Probe("n_zero", "POST", "/v1/completions", _completion(max_tokens=3, n=0)),
    Probe("no_key", "POST", "/v1/completions", _completion(max_tokens=3), authorized=False),
    Probe("no_key_health", "GET", "/health", authorized=False),
    Probe("unknown_path", "GET", "/nope"),
    Probe("wrong_method", "GET", "/v1/completions"),
    Probe("version", "GET", "/version"),
    Probe("models", "GET", "/v1/models"),
)

_BY_TYPE_ONLY = frozenset({"id", "created", "text", "content", "root"})
_CHAT_PROMPT_SIZED = frozenset({"prompt_tokens", "total_tokens"})
_TOKENIZER_WORDED = frozenset({"too_long_text", "chat_too_long"})
_FINGERPRINT = re.compile(r"vllm-0\.32\.0-[0-9a-f]{8}")


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
    if key in _BY_TYPE_ONLY or (key in _CHAT_PROMPT_SIZED and "chat" in probe.path):
        return type(value).__name__
    if key == "system_fingerprint" and isinstance(value, str):
        return bool(_FINGERPRINT.fullmatch(value))
    if key == "id" or (key == "message" and probe.name in _TOKENIZER_WORDED):
        return re.sub(r"\d+", "N", str(value))
    return value


def _events(body: str) -> Iterator[str]:
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
    """Reduce a recorded answer to what the sim must reproduce."""
    content_type = answer["content_type"]
    body = answer["body"]
    if content_type and content_type.startswith("text/event-stream"):
        events = [e if e == "[DONE]" else json.loads(e) for e in _events(body)]
        shaped = [e if isinstance(e, str) else _shape(e, None, probe) for e in events]
        # n > 1 interleaves choices in arrival order: compare them choice by choice.
        pairs = sorted(zip(events, shaped, strict=True), key=lambda pair: _choice_index(pair[0]))
        # vLLM sends no chunk for a token whose text is still empty (a partial UTF-8 sequence
        # from the byte-level tokenizer) and carries it in the next one, so how many mid-stream
        # chunks arrive (none, even) depends on the random text. Their shapes are compared as a
        # set (the live test allows vLLM fewer kinds); the ending (final chunk, usage, [DONE]) in order.
        middle = [s for e, s in pairs if _mid_stream(e)]
        ending = [s for e, s in pairs if not _mid_stream(e)]
        return {
            "status": answer["status"],
            "content_type": content_type,
            "body": ending,
            "mid_stream": sorted({repr(shape) for shape in middle}),
        }
    elif content_type == "application/json":
        body_shape = _shape(json.loads(body), None, probe)
    else:
        body_shape = body
    return {"status": answer["status"], "content_type": content_type, "body": body_shape}


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    """A simulated replica set up like the captured real one."""
    config = resolve_engine_config(
        model_by_name_or_path("llama-3.1-8b"), gpu_by_name("h100-sxm"), max_model_len=MAX_MODEL_LEN
    )
    options = ServeOptions("127.0.0.1", 0, (MODEL,), API_KEY, 0.002)
    with ServerThread(config, options) as server:
        yield server.url


@pytest.fixture(scope="module")
def sim_answers(sim_url: str) -> dict[str, dict[str, Any]]:
    with httpx.Client(base_url=sim_url, timeout=30.0) as client:
        return {probe.name: ask(client, probe) for probe in PROBES}


def test_the_fixture_answers_every_probe() -> None:
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert set(recorded) == {probe.name for probe in PROBES}


@pytest.mark.parametrize("probe", PROBES, ids=lambda probe: probe.name)
def test_the_sim_answers_like_the_captured_replica(
    probe: Probe, sim_answers: dict[str, dict[str, Any]]
) -> None:
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))[probe.name]
    assert comparable(sim_answers[probe.name], probe) == comparable(recorded, probe)


@pytest.mark.vllm
def test_the_sim_answers_like_a_live_replica(tmp_path: Path, sim_answers: dict[str, Any]) -> None:
    """Start the real CPU replica with the captured flags and compare every probe live."""
    from tests.support import vllm_replica as helpers

    if helpers.vllm_python() is None:
        pytest.skip("no vLLM virtual environment (.venv-vllm or SLOTOP_VLLM_PYTHON)")
    template = tmp_path / "chat.jinja"
    template.write_text(
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}",
        encoding="utf-8",
    )
    model_dir = helpers.build_tiny_model(tmp_path / "tiny")
    flags = helpers.ReplicaFlags(
        max_model_len=MAX_MODEL_LEN,
        extra_args=(f"--api-key={API_KEY}", f"--chat-template={template}"),
    )
    replica = helpers.VllmReplica(model_dir, tmp_path / "replica.log", flags)
    with replica, httpx.Client(base_url=replica.url, timeout=60.0) as client:
        live = {probe.name: ask(client, probe) for probe in PROBES}
    mismatched = {}
    for probe in PROBES:
        expected, got = (
            comparable(live[probe.name], probe),
            comparable(sim_answers[probe.name], probe),
        )
        if isinstance(expected, dict) and "mid_stream" in expected:
            # Live vLLM may have merged some or all token chunks into the final one, so it may
            # show fewer kinds of mid-stream chunk than the sim; never a kind the sim lacks.
            live_kinds, sim_kinds = set(expected.pop("mid_stream")), set(got.pop("mid_stream"))
            if not live_kinds <= sim_kinds:
                mismatched[probe.name] = (live[probe.name], sim_answers[probe.name])
                continue
        if got != expected:
            mismatched[probe.name] = (live[probe.name], sim_answers[probe.name])
    assert mismatched == {}
