"""OpenAI-style request validation and error bodies, shaped as vLLM 0.32 shapes them.

Validation errors come in two flavours in vLLM: request-model (pydantic) errors, typed
"Bad Request" with a "N validation error(s)" message, and serving-time errors, typed
"BadRequestError"/"NotFoundError". Both use `{"error": {"message", "type", "param", "code"}}`.
The API-key check is the exception: vLLM answers it with a bare `{"error": "Unauthorized"}`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from slotop.sim.errors import SimError
from slotop.sim.prompts import (
    MAX_CHARS_PER_TOKEN,
    PromptError,
    chat_prompt_ids,
    chat_text_chars,
    completion_prompt_ids,
)

RequestKind = Literal["completion", "chat"]

COMPLETION_DEFAULT_MAX_TOKENS = 16
"""vLLM's `CompletionRequest.max_tokens` default; chat requests default to the room left."""


class ApiError(SimError):
    """A request refused with an HTTP status and vLLM's OpenAI-style error body."""

    def __init__(self, status: int, err_type: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.err_type = err_type
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        """Return the JSON body vLLM sends for this error."""
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


def bad_request(message: str) -> ApiError:
    """A serving-time 400 from a plain ValueError: no param, message as is."""
    return ApiError(400, "BadRequestError", message, None)


def invalid_parameter(message: str, parameter: str, value: object = None) -> ApiError:
    """A serving-time 400 from vLLM's VLLMValidationError, whose message ends with its parameter."""
    extras = [f"parameter={parameter}"]
    if value is not None:
        extras.append(f"value={value}")
    return ApiError(400, "BadRequestError", f"{message} ({', '.join(extras)})", parameter)


def validation_error(errors: Sequence[str], param: str | None) -> ApiError:
    """A request-model 400, as vLLM's `validation_exception_handler` builds it."""
    label = "error" if len(errors) == 1 else "errors"
    lines = "".join(f"  {error}\n" for error in errors)
    return ApiError(
        400, "Bad Request", f"{len(errors)} validation {label}:\n{lines}".rstrip(), param
    )


def _summarize_input(value: object) -> str:
    """How vLLM echoes a rejected input: containers by size, anything else as a quoted string."""
    if isinstance(value, (list, tuple, dict, set)):
        return repr(f"<{type(value).__name__} of {len(value)} items>")
    return repr(value if isinstance(value, str) else str(value))


def _field_error(kind: str, field: str, msg: str, value: object) -> ApiError:
    """One pydantic-style field error under `body.<field>`."""
    error = (
        f"{{'type': '{kind}', 'loc': 'body.{field}', 'msg': '{msg}', "
        f"'input': {_summarize_input(value)}}}"
    )
    return validation_error([error], f"body.{field}")


UNAUTHORIZED_BODY: dict[str, Any] = {"error": "Unauthorized"}
"""What vLLM's AuthenticationMiddleware answers (401) when the bearer token is missing or wrong."""

NOT_FOUND_BODY: dict[str, Any] = {"detail": "Not Found"}
METHOD_NOT_ALLOWED_BODY: dict[str, Any] = {"detail": "Method Not Allowed"}


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A validated completion or chat request, reduced to what the engine and the stream need.

    `prompt_token_ids` holds each prompt's token ids (what the prefix cache hashes), or nothing
    when only the counts in `prompt_tokens` are known; `text_prompts` says which completion
    prompts came as text, which the API server tokenises (a chat's messages always are).
    """

    kind: RequestKind
    model_name: str
    prompt_tokens: tuple[int, ...]
    max_tokens: tuple[int, ...]
    n: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool
    base_id: str | None
    prompt_token_ids: tuple[tuple[int, ...], ...] = ()
    text_prompts: tuple[bool, ...] = ()

    @property
    def num_choices(self) -> int:
        """Choices in the answer: n per prompt."""
        return self.n * len(self.prompt_tokens)

    def prompt_is_text(self, index: int) -> bool:
        """Whether prompt ``index`` reached the server as text, to be tokenised there."""
        if self.kind == "chat":
            return True
        return index < len(self.text_prompts) and self.text_prompts[index]


def parse_json_body(raw: bytes, content_type: str) -> dict[str, Any]:
    """Decode a POST body, refusing a non-JSON media type or malformed JSON as vLLM does."""
    media_type = content_type.split(";", maxsplit=1)[0].strip().lower()
    if media_type != "application/json":
        raise validation_error(["Unsupported Media Type: Only 'application/json' is allowed"], None)
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        pos = exc.pos if isinstance(exc, json.JSONDecodeError) else exc.start
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else exc.reason
        error = (
            f"{{'type': 'json_invalid', 'loc': 'body.{pos}', 'msg': 'JSON decode error', "
            f"'input': '<dict of 0 items>', 'ctx': {{'error': '{reason}'}}}}"
        )
        raise validation_error([error], f"body.{pos}") from exc
    if not isinstance(body, dict):
        raise validation_error(
            [
                "{'type': 'model_attributes_type', 'loc': 'body', "
                "'msg': 'Input should be a valid dictionary or object to extract fields from'}"
            ],
            "body",
        )
    return body


def _optional_int(body: dict[str, Any], field: str, default: int | None) -> int | None:
    """Read an optional integer field, coercing and refusing as pydantic's lax mode does."""
    value = body.get(field, default)
    if value is None or isinstance(value, int):
        return None if value is None else int(value)
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise _field_error(
            "int_from_float",
            field,
            "Input should be a valid integer, got a number with a fractional part",
            value,
        )
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise _field_error(
                "int_parsing",
                field,
                "Input should be a valid integer, unable to parse string as an integer",
                value,
            ) from None
    raise _field_error("int_type", field, "Input should be a valid integer", value)


_TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_WORDS = frozenset({"0", "off", "f", "false", "n", "no"})


def _bool(body: dict[str, Any], field: str) -> bool:
    """Read an optional boolean field (absent or null is false), coercing as pydantic's lax mode."""
    value = body.get(field)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    raise _field_error(
        "bool_parsing" if isinstance(value, str) else "bool_type",
        field,
        "Input should be a valid boolean",
        value,
    )


def check_model(body: dict[str, Any], served_names: Sequence[str]) -> str:
    """Return the served name to answer with, or refuse an unknown model with vLLM's 404."""
    model = body.get("model")
    if model is None or model == "":
        return served_names[0]
    if not isinstance(model, str):
        raise _field_error("string_type", "model", "Input should be a valid string", model)
    if model not in served_names:
        raise ApiError(
            404,
            "NotFoundError",
            f"The model `{model}` does not exist. Valid aliases: {', '.join(served_names)}.",
            "model",
        )
    return model


def _completion_prompts(body: dict[str, Any]) -> list[str | list[int]]:
    """Split a completion `prompt` into single prompts (text, token ids, or a batch of either)."""
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in prompt):
            return [prompt]
        if all(isinstance(p, str) for p in prompt):
            return list(prompt)
        if all(
            isinstance(p, list)
            and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in p)
            for p in prompt
        ):
            return list(prompt)
    if prompt is None or prompt == [] or prompt == "":
        raise invalid_parameter(
            "Either prompt or prompt_embeds must be provided and non-empty.", "prompt"
        )
    raise _field_error(
        "union_type", "prompt", "Input should be text, token ids, or a list of either", prompt
    )


def _check_length(prompt_tokens: int, text_chars: int | None, max_model_len: int) -> None:
    """Refuse a prompt that alone exceeds max_model_len, with vLLM's two-stage messages.

    Text is first bounded by characters (max_model_len × the longest vocabulary entry), then
    by tokens, where vLLM's tokenizer stops at max_model_len + 1 and says "at least".
    """
    max_chars = max_model_len * MAX_CHARS_PER_TOKEN
    if text_chars is not None and text_chars > max_chars:
        raise invalid_parameter(
            f"This model's maximum context length is {max_model_len} tokens. However, your prompt "
            f"contains {text_chars} characters (more than {max_chars} characters, which is the "
            f"upper bound for {max_model_len} input tokens). Please reduce the length of the "
            "input prompt.",
            "input_text",
            text_chars,
        )
    if prompt_tokens <= max_model_len:
        return
    from_text = text_chars is not None
    shown = min(prompt_tokens, max_model_len + 1) if from_text else prompt_tokens
    qualifier = "at least " if from_text and shown == max_model_len + 1 else ""
    raise invalid_parameter(
        f"This model's maximum context length is {max_model_len} tokens. However, your prompt "
        f"contains {qualifier}{shown} input tokens, which exceeds this limit even without any "
        "output tokens. Please reduce the length of the input prompt.",
        "input_tokens",
        shown,
    )


def _resolve_max_tokens(
    requested: int | None, param: str, prompt_tokens: int, max_model_len: int
) -> int:
    """Clamp the output budget to the context left, as vLLM's `get_max_tokens` does."""
    if requested is not None and requested > max_model_len:
        raise invalid_parameter(
            f"{param}={requested} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens.",
            param,
            requested,
        )
    room = max_model_len - prompt_tokens
    max_tokens = room if requested is None else min(room, requested)
    if max_tokens < 1:
        raise invalid_parameter(
            f"max_tokens must be at least 1, got {max_tokens}.", "max_tokens", max_tokens
        )
    return max_tokens


def _stream_flags(body: dict[str, Any]) -> tuple[bool, bool, bool]:
    """Return (stream, include_usage, continuous_usage), refusing stream_options without stream."""
    stream = _bool(body, "stream")
    options = body.get("stream_options")
    if options and not stream:
        raise invalid_parameter(
            "Stream options can only be defined when `stream=True`.", "stream_options"
        )
    if options is None:
        return stream, False, False
    if not isinstance(options, dict):
        raise _field_error("model_type", "stream_options", "Input should be an object", options)
    include_usage = _bool(options, "include_usage")
    return stream, include_usage, include_usage and _bool(options, "continuous_usage_stats")


def _n(body: dict[str, Any]) -> int:
    """Read `n`, the number of choices per prompt (at least 1)."""
    n = _optional_int(body, "n", 1)
    n = 1 if n is None else n
    if n < 1:
        raise bad_request(f"n must be at least 1, got {n}.")
    return n


def _base_id(body: dict[str, Any]) -> str | None:
    """The client's `request_id` field, which vLLM uses for the response id when given."""
    value = body.get("request_id")
    return value if isinstance(value, str) and value else None


def parse_completion(
    body: dict[str, Any], served_names: Sequence[str], max_model_len: int
) -> GenerationRequest:
    """Validate a `/v1/completions` body into a GenerationRequest, or raise ApiError."""
    model_name = check_model(body, served_names)
    stream, include_usage, continuous_usage = _stream_flags(body)
    requested = _optional_int(body, "max_tokens", COMPLETION_DEFAULT_MAX_TOKENS)
    n = _n(body)
    counts: list[int] = []
    token_ids: list[tuple[int, ...]] = []
    text: list[bool] = []
    budgets: list[int] = []
    for prompt in _completion_prompts(body):
        ids = completion_prompt_ids(prompt)
        tokens = len(ids)
        _check_length(tokens, len(prompt) if isinstance(prompt, str) else None, max_model_len)
        counts.append(tokens)
        token_ids.append(ids)
        text.append(isinstance(prompt, str))
        budgets.append(_resolve_max_tokens(requested, "max_tokens", tokens, max_model_len))
    return GenerationRequest(
        kind="completion",
        model_name=model_name,
        prompt_tokens=tuple(counts),
        max_tokens=tuple(budgets),
        n=n,
        ignore_eos=_bool(body, "ignore_eos"),
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        base_id=_base_id(body),
        prompt_token_ids=tuple(token_ids),
        text_prompts=tuple(text),
    )


def parse_chat(
    body: dict[str, Any], served_names: Sequence[str], max_model_len: int
) -> GenerationRequest:
    """Validate a `/v1/chat/completions` body into a GenerationRequest, or raise ApiError."""
    messages = body.get("messages")
    if messages is None:
        raise validation_error(
            [
                "{'type': 'missing', 'loc': 'body.messages', 'msg': 'Field required', "
                f"'input': {_summarize_input(body)}}}"
            ],
            "body.messages",
        )
    if not isinstance(messages, list):
        raise _field_error("list_type", "messages", "Input should be a valid list", messages)
    model_name = check_model(body, served_names)
    stream, include_usage, continuous_usage = _stream_flags(body)
    if body.get("max_completion_tokens") is not None:
        requested = _optional_int(body, "max_completion_tokens", None)
        param = "max_completion_tokens"
    else:
        requested = _optional_int(body, "max_tokens", None)
        param = "max_tokens"
    try:
        ids = chat_prompt_ids(messages)
    except PromptError as exc:
        raise bad_request(str(exc)) from exc
    tokens = len(ids)
    _check_length(tokens, chat_text_chars(messages), max_model_len)
    return GenerationRequest(
        kind="chat",
        model_name=model_name,
        prompt_tokens=(tokens,),
        max_tokens=(_resolve_max_tokens(requested, param, tokens, max_model_len),),
        n=_n(body),
        ignore_eos=_bool(body, "ignore_eos"),
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        base_id=_base_id(body),
        prompt_token_ids=(ids,),
    )
