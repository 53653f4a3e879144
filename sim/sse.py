"""Response bodies and server-sent-event chunks in vLLM 0.32's exact JSON shapes.

Streamed chunks are pydantic dumps with `exclude_unset=True` in vLLM, so fields set explicitly to
None appear as null and others are absent; key order follows the protocol models. Per-token
chunks are assembled from pre-encoded pieces, since the server writes thousands per second.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any

from slotop.sim.openai import RequestKind
from slotop.sim.prompts import OUTPUT_WORDS, output_text

DONE_EVENT = b"data: [DONE]\n\n"
"""The event that ends every vLLM stream."""

_WORD_JSON: tuple[bytes, ...] = tuple(json.dumps(word).encode() for word in OUTPUT_WORDS)
_NUM_WORDS = len(_WORD_JSON)


class _ChunkSizes(dict[int, bytes]):
    """HTTP chunk-size lines (hex length and CRLF) made once per length."""

    def __missing__(self, size: int) -> bytes:
        line = b"%x\r\n" % size
        self[size] = line
        return line


_CHUNK_SIZE = _ChunkSizes()


def chunk(payload: bytes) -> bytes:
    """``payload`` as one HTTP/1.1 chunk of a chunked body."""
    return b"".join((_CHUNK_SIZE[len(payload)], payload, b"\r\n"))


def _dumps(obj: object) -> str:
    """Compact JSON as Starlette's JSONResponse and pydantic's dump write it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def random_uuid() -> str:
    """Sixteen hex digits, as vLLM's `random_uuid` makes them."""
    return f"{uuid.uuid4().int & 0xFFFF_FFFF_FFFF_FFFF:016x}"


def new_request_id(kind: RequestKind, base: str | None) -> str:
    """Return an id shaped like vLLM's, `cmpl-<base>` or `chatcmpl-<base>` (base random if None)."""
    prefix = "cmpl" if kind == "completion" else "chatcmpl"
    return f"{prefix}-{random_uuid() if base is None else base}"


def created_now() -> int:
    """Return the `created` field: whole seconds of the wall clock."""
    return int(time.time())


def _head(kind: RequestKind, request_id: str, created: int, model_name: str) -> str:
    """The leading keys every chunk of one request shares, up to `"choices":[`."""
    obj = "text_completion" if kind == "completion" else "chat.completion.chunk"
    return (
        f'{{"id":{_dumps(request_id)},"object":"{obj}","created":{created},'
        f'"model":{_dumps(model_name)},"choices":['
    )


def _usage(prompt_tokens: int, completion_tokens: int, with_details: bool) -> str:
    """A UsageInfo object in field order; chat's continuous usage also sets the details to null."""
    details = ',"completion_tokens_details":null' if with_details else ""
    return (
        f'{{"prompt_tokens":{prompt_tokens},"total_tokens":{prompt_tokens + completion_tokens},'
        f'"completion_tokens":{completion_tokens}{details}}}'
    )


class ChoiceStream:
    """Renders the SSE events of one choice of one streamed request."""

    __slots__ = (
        "_continuous",
        "_head",
        "_index_open",
        "_kind",
        "_plain_size",
        "_prompt_tokens",
        "_role_event",
        "_terminal_fingerprint",
        "_token_close",
        "_token_close_frame",
    )

    def __init__(
        self,
        kind: RequestKind,
        request_id: str,
        created: int,
        model_name: str,
        index: int,
        prompt_tokens: int,
        continuous_usage: bool,
        terminal_fingerprint: str | None,
    ) -> None:
        self._kind = kind
        self._terminal_fingerprint = (
            ""
            if terminal_fingerprint is None
            else f',"system_fingerprint":{_dumps(terminal_fingerprint)}'
        )
        self._continuous = continuous_usage
        self._prompt_tokens = prompt_tokens
        head = _head(kind, request_id, created, model_name)
        self._head = head
        if kind == "completion":
            self._index_open = f'data: {head}{{"index":{index},"text":'.encode()
            self._token_close = (
                b',"logprobs":null,"finish_reason":null,"stop_reason":null,'
                b'"prompt_token_ids":null,"token_ids":null}]'
            )
            self._role_event = b""
        else:
            self._index_open = f'data: {head}{{"index":{index},"delta":{{"content":'.encode()
            self._token_close = b'},"logprobs":null,"finish_reason":null,"token_ids":null}]'
            usage = (
                ',"usage":' + _usage(prompt_tokens, 0, with_details=True)
                if continuous_usage
                else ""
            )
            self._role_event = (
                f'data: {head}{{"index":{index},"delta":{{"role":"assistant","content":""}},'
                f'"logprobs":null,"finish_reason":null}}]{usage},'
                '"prompt_token_ids":null,"prompt_text":null}\n\n'
            ).encode()
        self._token_close_frame = self._token_close + b"}\n\n\r\n"
        self._plain_size = len(self._index_open) + len(self._token_close) + 3

    def frame(self, position: int) -> bytes:
        """Generated token ``position`` with no finish reason, as one HTTP chunk (the common case).

        Built from pieces encoded once per stream, since the server writes thousands per second.
        """
        if self._continuous or (position == 0 and self._role_event):
            return chunk(self.token(position, None))
        word = _WORD_JSON[position % _NUM_WORDS]
        return b"".join(
            (
                _CHUNK_SIZE[self._plain_size + len(word)],
                self._index_open,
                word,
                self._token_close_frame,
            )
        )

    def token(self, position: int, finish_reason: str | None) -> bytes:
        """The event(s) carrying generated token ``position`` (0-based); the first also opens a chat."""
        word = _WORD_JSON[position % _NUM_WORDS]
        if finish_reason is None and not self._continuous:
            event = b"".join((self._index_open, word, self._token_close, b"}\n\n"))
        else:
            event = self._token_with_extras(word, position, finish_reason)
        if position == 0 and self._role_event:
            return self._role_event + event
        return event

    def _token_with_extras(self, word: bytes, position: int, finish_reason: str | None) -> bytes:
        """A token event carrying a finish reason and/or continuous usage (the slower path)."""
        reason = "null" if finish_reason is None else f'"{finish_reason}"'
        if self._kind == "completion":
            close = (
                f',"logprobs":null,"finish_reason":{reason},"stop_reason":null,'
                '"prompt_token_ids":null,"token_ids":null}]'
            )
        else:
            stop = ',"stop_reason":null' if finish_reason is not None else ""
            close = f'}},"logprobs":null,"finish_reason":{reason}{stop},"token_ids":null}}]'
        tail = ""
        if self._continuous:
            with_details = self._kind == "chat"
            tail = ',"usage":' + _usage(self._prompt_tokens, position + 1, with_details)
        if finish_reason is not None:
            tail += self._terminal_fingerprint
        return b"".join((self._index_open, word, close.encode(), tail.encode(), b"}\n\n"))


def usage_event(
    kind: RequestKind,
    request_id: str,
    created: int,
    model_name: str,
    prompt_tokens: int,
    completion_tokens: int,
    fingerprint: str | None,
) -> bytes:
    """The final usage-only event sent when `stream_options.include_usage` is true."""
    head = _head(kind, request_id, created, model_name)
    usage = _usage(prompt_tokens, completion_tokens, with_details=False)
    stamp = "" if fingerprint is None else f',"system_fingerprint":{_dumps(fingerprint)}'
    return f'data: {head}],"usage":{usage}{stamp}}}\n\n'.encode()


def _full_usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """A UsageInfo as `model_dump()` writes it, every field present."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def completion_body(
    request_id: str,
    created: int,
    model_name: str,
    choices: list[tuple[int, str]],
    prompt_tokens: int,
    fingerprint: str | None,
) -> dict[str, Any]:
    """A non-streamed `/v1/completions` answer; ``choices`` holds (output tokens, finish reason)."""
    return {
        "id": request_id,
        "object": "text_completion",
        "created": created,
        "model": model_name,
        "choices": [
            {
                "index": index,
                "text": output_text(tokens),
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
                "token_ids": None,
                "prompt_logprobs": None,
                "prompt_token_ids": None,
                "routed_experts": None,
            }
            for index, (tokens, reason) in enumerate(choices)
        ],
        "service_tier": None,
        "system_fingerprint": fingerprint,
        "usage": _full_usage(prompt_tokens, sum(tokens for tokens, _ in choices)),
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }


def chat_body(
    request_id: str,
    created: int,
    model_name: str,
    choices: list[tuple[int, str]],
    prompt_tokens: int,
    fingerprint: str | None,
) -> dict[str, Any]:
    """A non-streamed `/v1/chat/completions` answer; ``choices`` holds (output tokens, finish reason)."""
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model_name,
        "choices": [
            {
                "index": index,
                "message": {
                    "role": "assistant",
                    "content": output_text(tokens),
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "reasoning": None,
                },
                "logprobs": None,
                "finish_reason": reason,
                "stop_reason": None,
                "token_ids": None,
                "routed_experts": None,
            }
            for index, (tokens, reason) in enumerate(choices)
        ],
        "service_tier": None,
        "system_fingerprint": fingerprint,
        "usage": _full_usage(prompt_tokens, sum(tokens for tokens, _ in choices)),
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
        "ec_transfer_params": None,
        "metrics": None,
    }


def models_body(served_names: list[str], root: str, max_model_len: int) -> dict[str, Any]:
    """The `/v1/models` answer: one card per served name, as vLLM lists base models."""
    created = created_now()
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": root,
                "parent": None,
                "max_model_len": max_model_len,
                "permission": [
                    {
                        "id": f"modelperm-{random_uuid()}",
                        "object": "model_permission",
                        "created": created,
                        "allow_create_engine": False,
                        "allow_sampling": True,
                        "allow_logprobs": True,
                        "allow_search_indices": False,
                        "allow_view": True,
                        "allow_fine_tuning": False,
                        "organization": "*",
                        "group": None,
                        "is_blocking": False,
                    }
                ],
            }
            for name in served_names
        ],
    }


def system_fingerprint(version: str, tensor_parallel_size: int, config_repr: str) -> str:
    """`vllm-<version>[-tpN]-<hash8>`, as vLLM's default fingerprint mode spells it."""
    parts = [f"vllm-{version}"]
    if tensor_parallel_size > 1:
        parts.append(f"tp{tensor_parallel_size}")
    parts.append(hashlib.sha256(config_repr.encode()).hexdigest()[:8])
    return "-".join(parts)


def dumps_body(obj: object) -> bytes:
    """Encode a JSON body compactly, as Starlette's JSONResponse does."""
    return _dumps(obj).encode()
