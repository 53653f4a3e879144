"""SGLang 0.5.23's OpenAI request checks and error bodies, as its server words them.

Errors are `{"object": "error", "message", "type", "param": null, "code"}`. A body its pydantic
models refuse is a 400 typed "Bad Request" whose message lists the errors and where they were
raised; a length its tokenizer manager refuses is a "BadRequestError". SGLang accepts any model
name (it answers under the name asked for), `stream_options` without `stream`, and counts the
context as `input + max_tokens <= context length`, refusing an input as long as the context.
The API-key check answers a bare `{"error": "Unauthorized"}`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from slotop.sim.errors import SimError
from slotop.sim.openai import GenerationRequest, RequestKind
from slotop.sim.prompts import PromptError, chat_prompt_ids, completion_prompt_ids

COMPLETION_DEFAULT_MAX_TOKENS = 16
DEFAULT_MODEL_NAME = "default"
HTTP_SERVER_SOURCE = "/usr/local/lib/python3.11/site-packages/sglang/srt/entrypoints/http_server.py"
"""Where SGLang's validation messages say they were raised (its install path, on a typical box)."""

_ROUTE_LINES: dict[str, tuple[int, str]] = {
    "/v1/completions": (1860, "openai_v1_completions"),
    "/v1/chat/completions": (1870, "openai_v1_chat_completions"),
}

UNAUTHORIZED_BODY: dict[str, Any] = {"error": "Unauthorized"}
NOT_FOUND_BODY: dict[str, Any] = {"detail": "Not Found"}
METHOD_NOT_ALLOWED_BODY: dict[str, Any] = {"detail": "Method Not Allowed"}


class SglangApiError(SimError):
    """A request refused with an HTTP status and SGLang's error body."""

    def __init__(self, status: int, err_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.err_type = err_type
        self.message = message

    def body(self) -> dict[str, Any]:
        """The JSON body SGLang sends for this error."""
        return {
            "object": "error",
            "message": self.message,
            "type": self.err_type,
            "param": None,
            "code": self.status,
        }


def bad_request(message: str) -> SglangApiError:
    """A 400 from SGLang's serving code (a ValueError it turned into an error response)."""
    return SglangApiError(400, "BadRequestError", message)


def _validation(errors: Sequence[dict[str, Any]], method: str, path: str) -> SglangApiError:
    """A 400 for a body the request model refused, worded as SGLang's handler words it."""
    label = "error" if len(errors) == 1 else "errors"
    lines = "".join(f"  {error!r}\n" for error in errors)
    line, function = _ROUTE_LINES.get(path, (0, "handler"))
    message = (
        f"{len(errors)} validation {label}:\n{lines}\n"
        f'  File "{HTTP_SERVER_SOURCE}", line {line}, in {function}\n'
        f"    {method} {path} {list(errors)!r}"
    )
    return SglangApiError(400, "Bad Request", message)


def _field(kind: str, field: str, msg: str, value: Any, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "loc": ("body", field), "msg": msg, "input": value, **extra}


def unsupported_media_type() -> SglangApiError:
    """SGLang's answer to a POST whose content type is not JSON."""
    error = {
        "loc": ["header", "content-type"],
        "msg": "Unsupported Media Type: Only 'application/json' is allowed",
        "type": "value_error",
    }
    return SglangApiError(400, "Bad Request", f"1 validation error:\n  {error!r} [{error!r}]")


def parse_json_body(raw: bytes, content_type: str, method: str, path: str) -> dict[str, Any]:
    """Decode a POST body, refusing a non-JSON media type or malformed JSON as SGLang does."""
    media_type = content_type.split(";", maxsplit=1)[0].strip().lower()
    if media_type != "application/json":
        raise unsupported_media_type()
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        pos = exc.pos if isinstance(exc, json.JSONDecodeError) else exc.start
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else exc.reason
        error = {
            "type": "json_invalid",
            "loc": ("body", pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": reason},
        }
        raise _validation([error], method, path) from exc
    if not isinstance(body, dict):
        error = {
            "type": "model_attributes_type",
            "loc": ("body",),
            "msg": "Input should be a valid dictionary or object to extract fields from",
            "input": body,
        }
        raise _validation([error], method, path)
    return body


def _int(body: dict[str, Any], field: str, default: int | None) -> tuple[int | None, list[Any]]:
    """An optional integer field, coerced as pydantic's lax mode coerces; errors as a list."""
    value = body.get(field, default)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value, []
    if isinstance(value, bool):
        return int(value), []
    if isinstance(value, float):
        if value.is_integer():
            return int(value), []
        msg = "Input should be a valid integer, got a number with a fractional part"
        return None, [_field("int_from_float", field, msg, value)]
    if isinstance(value, str):
        try:
            return int(value.strip()), []
        except ValueError:
            msg = "Input should be a valid integer, unable to parse string as an integer"
            return None, [_field("int_parsing", field, msg, value)]
    return None, [_field("int_type", field, "Input should be a valid integer", value)]


_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def _bool(body: dict[str, Any], field: str) -> tuple[bool, list[Any]]:
    """An optional boolean field (absent or null is false), coerced as pydantic's lax mode."""
    value = body.get(field)
    if value is None or isinstance(value, bool):
        return bool(value), []
    if isinstance(value, int) and value in (0, 1):
        return bool(value), []
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE, []
    kind = "bool_parsing" if isinstance(value, str) else "bool_type"
    return False, [_field(kind, field, "Input should be a valid boolean", value)]


def _stream_flags(body: dict[str, Any]) -> tuple[bool, bool, bool, list[Any]]:
    """(stream, include_usage, continuous_usage, errors); options count even without stream."""
    stream, errors = _bool(body, "stream")
    options = body.get("stream_options")
    if options is None:
        return stream, False, False, errors
    if not isinstance(options, dict):
        errors.append(
            _field(
                "model_type",
                "stream_options",
                "Input should be a valid dictionary or instance of StreamOptions",
                options,
                ctx={"class_name": "StreamOptions"},
            )
        )
        return stream, False, False, errors
    include, more = _bool(options, "include_usage")
    continuous, even_more = _bool(options, "continuous_usage_stats")
    return stream, include, continuous, errors + more + even_more


def _prompts(body: dict[str, Any]) -> tuple[list[str | list[int]], list[Any]]:
    """A completion's prompts (text, token ids, or a batch of either), or the errors."""
    if "prompt" not in body:
        return [], [
            {"type": "missing", "loc": ("body", "prompt"), "msg": "Field required", "input": body}
        ]
    prompt = body["prompt"]
    if isinstance(prompt, str):
        return [prompt], []
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
            return [list(prompt)], []
        if all(isinstance(p, str) for p in prompt):
            return list(prompt), []
        if all(isinstance(p, list) and all(isinstance(t, int) for t in p) for p in prompt):
            return [list(p) for p in prompt], []
    msg = "Input should be a valid string"
    return [], [_field("string_type", "prompt", msg, prompt)]


def _check_length(prompt_tokens: int, max_tokens: int | None, context_len: int) -> None:
    """Refuse what SGLang's tokenizer manager refuses: an input as long as the context, or an
    input and output budget longer than it."""
    if prompt_tokens >= context_len:
        raise bad_request(
            f"The input ({prompt_tokens} tokens) is longer than the model's context length "
            f"({context_len} tokens)."
        )
    if max_tokens is not None and max_tokens + prompt_tokens > context_len:
        raise bad_request(
            "Requested token count exceeds the model's maximum context length of "
            f"{context_len} tokens. You requested a total of {max_tokens + prompt_tokens} "
            f"tokens: {prompt_tokens} tokens from the input messages and {max_tokens} tokens "
            "for the completion. Please reduce the number of tokens in the input messages or "
            "the completion to fit within the limit."
        )


def _n(body: dict[str, Any]) -> tuple[int, list[Any]]:
    n, errors = _int(body, "n", 1)
    return (1 if n is None else n), errors


def _model(body: dict[str, Any]) -> tuple[str, list[Any]]:
    model = body.get("model", DEFAULT_MODEL_NAME)
    if isinstance(model, str):
        return model, []
    return DEFAULT_MODEL_NAME, [
        _field("string_type", "model", "Input should be a valid string", model)
    ]


def _budget(requested: int | None, prompt_tokens: int, engine_max_len: int) -> int:
    """The tokens the engine may generate: what was asked, within the room the engine has."""
    room = engine_max_len - prompt_tokens
    return room if requested is None else max(1, min(requested, room))


def parse_completion(
    body: dict[str, Any], context_len: int, engine_max_len: int, method: str = "POST"
) -> GenerationRequest:
    """Validate a `/v1/completions` body into a GenerationRequest, or raise SglangApiError."""
    model, errors = _model(body)
    prompts, more = _prompts(body)
    errors += more
    max_tokens, more = _int(body, "max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
    errors += more
    n, more = _n(body)
    errors += more
    stream, include_usage, continuous, more = _stream_flags(body)
    errors += more
    ignore_eos, more = _bool(body, "ignore_eos")
    errors += more
    if not more and max_tokens is not None and max_tokens <= 0:
        errors.append(
            _field(
                "value_error",
                "max_tokens",
                "Value error, max_tokens must be positive",
                max_tokens,
                ctx={"error": ValueError("max_tokens must be positive")},
            )
        )
    if errors:
        raise _validation(errors, method, "/v1/completions")
    return _request("completion", model, prompts, max_tokens, n, ignore_eos, stream,
                    include_usage, continuous, context_len, engine_max_len)  # fmt: skip


def parse_chat(
    body: dict[str, Any], context_len: int, engine_max_len: int, method: str = "POST"
) -> GenerationRequest:
    """Validate a `/v1/chat/completions` body into a GenerationRequest, or raise SglangApiError."""
    if body.get("tool_choice") is None:
        body = {**body, "tool_choice": "none" if body.get("tools") is None else "auto"}
    errors: list[Any] = []
    messages = body.get("messages")
    if "messages" not in body:
        errors.append(
            {"type": "missing", "loc": ("body", "messages"), "msg": "Field required", "input": body}
        )
    elif not isinstance(messages, list):
        errors.append(_field("list_type", "messages", "Input should be a valid list", messages))
    model, more = _model(body)
    errors += more
    field = (
        "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    )
    max_tokens, more = _int(body, field, None)
    errors += more
    n, more = _n(body)
    errors += more
    stream, include_usage, continuous, more = _stream_flags(body)
    errors += more
    ignore_eos, more = _bool(body, "ignore_eos")
    errors += more
    if errors:
        raise _validation(errors, method, "/v1/chat/completions")
    try:
        ids = list(chat_prompt_ids(messages or []))
    except PromptError as exc:
        raise bad_request(str(exc)) from exc
    return _request("chat", model, [ids], max_tokens, n, ignore_eos, stream,
                    include_usage, continuous, context_len, engine_max_len)  # fmt: skip


def _request(
    kind: RequestKind,
    model: str,
    prompts: list[str | list[int]],
    max_tokens: int | None,
    n: int,
    ignore_eos: bool,
    stream: bool,
    include_usage: bool,
    continuous: bool,
    context_len: int,
    engine_max_len: int,
) -> GenerationRequest:
    """Check lengths as SGLang does and build the engine's request."""
    if n < 1:
        # SGLang runs the request, then fails to lay out zero choices per prompt.
        raise SglangApiError(400, "BadRequest", "range() arg 3 must not be zero")
    counts: list[int] = []
    token_ids: list[tuple[int, ...]] = []
    texts: list[bool] = []
    budgets: list[int] = []
    for prompt in prompts:
        ids = completion_prompt_ids(prompt)
        _check_length(len(ids), max_tokens, context_len)
        if len(ids) >= engine_max_len:
            raise bad_request(
                f"Input length ({len(ids)} tokens) exceeds the maximum allowed length "
                f"({engine_max_len - 1} tokens). Use a shorter input or enable "
                "--allow-auto-truncate."
            )
        counts.append(len(ids))
        token_ids.append(ids)
        texts.append(isinstance(prompt, str))
        budgets.append(_budget(max_tokens, len(ids), engine_max_len))
    return GenerationRequest(
        kind=kind,
        model_name=model,
        prompt_tokens=tuple(counts),
        max_tokens=tuple(budgets),
        n=n,
        ignore_eos=ignore_eos,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
        base_id=None,
        prompt_token_ids=tuple(token_ids),
        text_prompts=tuple(texts),
    )
