"""Response bodies and server-sent events in SGLang 0.5.23's exact JSON shapes.

Shapes as a real server sends them (`tests/sim/fixtures/sglang-0.5.23-cpu-api.json`):

- every choice of a call is its own request inside SGLang, with its own 32-hex id, which its
  chunks carry;
- a completion chunk carries one token's text and `"usage":null` (or, with
  `stream_options.continuous_usage_stats`, the usage so far); the last token's chunk carries the
  finish reason; with `include_usage` a usage-only chunk follows all choices (null fields left
  out), then `[DONE]`;
- a chat stream opens each choice with a role chunk, sends one content chunk per token with no
  `usage` key (or the usage so far), and only after every choice has ended one finish chunk per
  choice (empty delta, in the order they ended, under the id of the last choice heard from),
  then the usage chunk (every field) when asked, then `[DONE]`.

A request that stops at end-of-sequence reports the token as `matched_stop`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from slotop.sim.openai import RequestKind
from slotop.sim.prompts import OUTPUT_WORDS, output_text
from slotop.sim.sse import DONE_EVENT, chunk
from slotop.sim.types import ModelSpec

_WORD_JSON: tuple[str, ...] = tuple(json.dumps(word, ensure_ascii=False) for word in OUTPUT_WORDS)


def dumps(obj: object) -> str:
    """Compact JSON as SGLang's responses write it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def new_rid() -> str:
    """A request id as SGLang makes one: 32 hex digits."""
    return uuid.uuid4().hex


def eos_token_id(model: ModelSpec) -> int:
    """The end-of-sequence token a model's chat stops at, by its vocabulary: Qwen's <|im_end|>,
    Llama 3's <|eot_id|>, else the </s> of Llama 2 and Mistral (an approximation by family)."""
    if model.vocab_size >= 150_000:
        return 151645
    if model.vocab_size >= 128_000:
        return 128009
    return 2


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """A UsageInfo with every field, as SGLang dumps it."""
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
        "completion_tokens_details": None,
    }


def _matched(finish_reason: str | None, eos: int) -> int | None:
    return eos if finish_reason == "stop" else None


class StreamState:
    """What the choices of one streamed call share: the id last heard from, the finish order."""

    __slots__ = ("finished", "last_rid")

    def __init__(self) -> None:
        self.last_rid = ""
        self.finished: list[tuple[int, str]] = []


class CompletionChoiceStream:
    """The events of one choice of a streamed `/v1/completions` call."""

    __slots__ = ("_continuous", "_eos", "_head", "_prompt_tokens", "_rid", "_shared", "_tail")

    def __init__(
        self,
        rid: str,
        created: int,
        model: str,
        index: int,
        prompt_tokens: int,
        continuous_usage: bool,
        eos: int,
        shared: StreamState,
    ) -> None:
        self._rid = rid
        self._shared = shared
        self._prompt_tokens = prompt_tokens
        self._continuous = continuous_usage
        self._eos = eos
        self._head = (
            f'data: {{"id":"{rid}","object":"text_completion","created":{created},'
            f'"model":{dumps(model)},"choices":[{{"index":{index},"text":'
        )
        self._tail = ',"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'

    def frame(self, position: int) -> bytes:
        """Generated token `position` with no finish reason, as one HTTP chunk."""
        return chunk(self.token(position, None))

    def token(self, position: int, finish_reason: str | None) -> bytes:
        """The chunk carrying generated token `position`, and its finish reason if it is the last."""
        self._shared.last_rid = self._rid
        word = _WORD_JSON[position % len(_WORD_JSON)]
        if finish_reason is None and not self._continuous:
            return (self._head + word + self._tail).encode()
        reason = "null" if finish_reason is None else f'"{finish_reason}"'
        matched = _matched(finish_reason, self._eos)
        tail = (
            f',"logprobs":null,"finish_reason":{reason},"matched_stop":{dumps(matched)}}}],'
            f'"usage":{dumps(self._usage(position)) if self._continuous else "null"}}}\n\n'
        )
        return (self._head + word + tail).encode()

    def _usage(self, position: int) -> dict[str, Any]:
        return usage(self._prompt_tokens, position + 1)


class ChatChoiceStream:
    """The events of one choice of a streamed `/v1/chat/completions` call."""

    __slots__ = ("_continuous", "_head", "_index", "_prompt_tokens", "_rid", "_role", "_shared")

    def __init__(
        self,
        rid: str,
        created: int,
        model: str,
        index: int,
        prompt_tokens: int,
        continuous_usage: bool,
        shared: StreamState,
    ) -> None:
        self._rid = rid
        self._index = index
        self._shared = shared
        self._prompt_tokens = prompt_tokens
        self._continuous = continuous_usage
        self._head = (
            f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{created},'
            f'"model":{dumps(model)},"choices":[{{"index":{index},"delta":{{"reasoning_content":null,'
        )
        self._role = (
            self._head + '"role":"assistant","content":""},"logprobs":null,'
            '"finish_reason":null,"matched_stop":null}]}\n\n'
        ).encode()

    def frame(self, position: int) -> bytes:
        """Generated token `position` with no finish reason, as one HTTP chunk."""
        return chunk(self.token(position, None))

    def token(self, position: int, finish_reason: str | None) -> bytes:
        """The role chunk (first token only) and the content chunk of token `position`; a finish
        reason is kept for the finish chunks that follow every choice's end."""
        self._shared.last_rid = self._rid
        if finish_reason is not None:
            self._shared.finished.append((self._index, finish_reason))
        word = _WORD_JSON[position % len(_WORD_JSON)]
        extra = (
            f',"usage":{dumps(usage(self._prompt_tokens, position + 1))}'
            if self._continuous
            else ""
        )
        content = (
            f'{self._head}"content":{word}}},"logprobs":null,"finish_reason":null,'
            f'"matched_stop":null}}]{extra}}}\n\n'
        ).encode()
        return self._role + content if position == 0 else content


def completion_closer(
    created: int, model: str, include_usage: bool, shared: StreamState
) -> Callable[[int, int], bytes]:
    """The events after a streamed completion's last token: usage (null fields left out), [DONE]."""

    def close(prompt_tokens: int, completion_tokens: int) -> bytes:
        if not include_usage:
            return DONE_EVENT
        body = {
            "id": shared.last_rid,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens": completion_tokens,
                "reasoning_tokens": 0,
            },
        }
        return f"data: {dumps(body)}\n\n".encode() + DONE_EVENT

    return close


def chat_closer(
    created: int, model: str, include_usage: bool, eos: int, shared: StreamState
) -> Callable[[int, int], bytes]:
    """The events after a streamed chat's last token: finish chunks, usage if asked, [DONE]."""

    def close(prompt_tokens: int, completion_tokens: int) -> bytes:
        head = {"id": shared.last_rid, "object": "chat.completion.chunk", "created": created}
        events = []
        for index, reason in shared.finished:
            choice = {
                "index": index,
                "delta": {"reasoning_content": None},
                "logprobs": None,
                "finish_reason": reason,
                "matched_stop": _matched(reason, eos),
            }
            events.append({**head, "model": model, "choices": [choice]})
        if include_usage:
            events.append(
                {
                    **head,
                    "model": model,
                    "choices": [],
                    "usage": usage(prompt_tokens, completion_tokens),
                }
            )
        return b"".join(f"data: {dumps(event)}\n\n".encode() for event in events) + DONE_EVENT

    return close


def _metadata(completion_tokens: int) -> dict[str, Any]:
    return {
        "weight_version": "default",
        "weight_versions": [{"version": "default", "start": 0, "end": completion_tokens}],
    }


def response_body(
    kind: RequestKind,
    rid: str,
    created: int,
    model: str,
    choices: list[tuple[int, str]],
    prompt_tokens: int,
    eos: int,
) -> dict[str, Any]:
    """A non-streamed answer; `choices` holds (output tokens, finish reason) per choice."""
    completion_tokens = sum(tokens for tokens, _ in choices)
    if kind == "completion":
        listed: list[dict[str, Any]] = [
            {
                "index": index,
                "text": output_text(tokens),
                "logprobs": None,
                "finish_reason": reason,
                "matched_stop": _matched(reason, eos),
            }
            for index, (tokens, reason) in enumerate(choices)
        ]
        obj = "text_completion"
    else:
        listed = [
            {
                "index": index,
                "message": {
                    "role": "assistant",
                    "content": output_text(tokens),
                    "reasoning_content": None,
                },
                "logprobs": None,
                "finish_reason": reason,
                "matched_stop": _matched(reason, eos),
            }
            for index, (tokens, reason) in enumerate(choices)
        ]
        obj = "chat.completion"
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": listed,
        "usage": usage(prompt_tokens, completion_tokens),
        "metadata": _metadata(choices[0][0] if choices else 0),
    }


def models_body(served_model_name: str, context_len: int, created: int) -> dict[str, Any]:
    """The `/v1/models` answer: the one served model, owned by sglang."""
    return {
        "object": "list",
        "data": [
            {
                "id": served_model_name,
                "object": "model",
                "created": created,
                "owned_by": "sglang",
                "root": served_model_name,
                "parent": None,
                "max_model_len": context_len,
            }
        ],
    }
