"""The shape of the probe's load: length distributions, gamma arrivals and prompt sources.

A synthetic prompt may open with a shared prefix, as `vllm bench serve --random-prefix-len` does:
`shared_prefix_tokens` tokens the same for every request that shares it (a share of
`shared_prefix_ratio`), so a replica's prefix cache finds them; the others open with as many random
tokens, so the lengths, and the work without a cache, do not depend on the ratio.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from slotop.collectors.errors import ProbeError, PromptFileError
from slotop.collectors.probe.records import Endpoint

LengthKind = Literal["fixed", "uniform", "normal", "lognormal"]
PromptForm = Literal["auto", "token_ids", "text"]

LENGTH_KINDS: tuple[LengthKind, ...] = ("fixed", "uniform", "normal", "lognormal")
PROMPT_FORMS: tuple[PromptForm, ...] = ("auto", "token_ids", "text")

TOKEN_ID_LOW = 16
"""Synthetic token-id prompts draw ids in [TOKEN_ID_LOW, TOKEN_ID_HIGH): clear of the special
ids at the bottom of most vocabularies, and inside even a tiny test tokenizer's (vLLM refuses an
id past the tokenizer's vocabulary inside the stream)."""
TOKEN_ID_HIGH = 512

OUTPUT_DITHER_RATIO = 0.125
"""How far a closed loop's output lengths are dithered by default: ±1/8 of each (±16 of 128)."""
MAX_OUTPUT_DITHER_RATIO = 0.5

MAX_WORKERS = 64
"""The most probe worker processes a load may ask for."""

_PREFIX_STREAM = 0x5EED
"""Seeds the shared prefix's own generator with (seed, this), so every probe with one seed sends
the same prefix, however many requests it has drawn."""

_WORD_TEXT = (
    "the of and to in is was for on are with as his they be at one have this from by hot word "
    "but what some we can out other were all there when up use your how said an each she "
    "which do their time if will way about many then them write would like so these her long "
    "make thing see him two has look more day could go come did number sound no most people "
    "my over know water than call first who may down side been now find any new work part "
    "take get place made"
)
_WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())
"""Common English words that byte-pair tokenizers keep as one token each after a space."""


@dataclass(frozen=True, slots=True)
class LengthDistribution:
    """Token lengths drawn per request: fixed, uniform on mean ± spread, normal or lognormal.

    For normal and lognormal, `spread_tokens` is the standard deviation of the lengths themselves.
    Draws are rounded to whole tokens and never fall below one.
    """

    kind: LengthKind
    mean_tokens: int
    spread_tokens: int = 0

    def __post_init__(self) -> None:
        if self.kind not in LENGTH_KINDS:
            raise ProbeError(
                f"length distribution {self.kind!r} is unknown; use one of {', '.join(LENGTH_KINDS)}"
            )
        if self.mean_tokens < 1:
            raise ProbeError(f"mean length {self.mean_tokens} tokens; it must be at least 1")
        if self.spread_tokens < 0:
            raise ProbeError(f"length spread {self.spread_tokens} tokens; it must not be negative")

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Draw `count` lengths in tokens, as int64."""
        mean, spread = self.mean_tokens, self.spread_tokens
        if self.kind == "fixed" or spread == 0:
            drawn = np.full(count, float(mean))
        elif self.kind == "uniform":
            low = max(1, mean - spread)
            drawn = rng.integers(low, mean + spread, size=count, endpoint=True).astype(float)
        elif self.kind == "normal":
            drawn = rng.normal(mean, spread, size=count)
        else:
            sigma_sq = math.log1p((spread / mean) ** 2)
            drawn = rng.lognormal(math.log(mean) - sigma_sq / 2, math.sqrt(sigma_sq), size=count)
        lengths: np.ndarray = np.maximum(np.rint(drawn), 1).astype(np.int64)
        return lengths


def gamma_gaps_s(
    rng: np.random.Generator, rate_rps: float, burstiness: float, count: int
) -> np.ndarray:
    """Gaps between arrivals, as `vllm bench serve` draws them: gamma, shape = burstiness.

    The mean gap is 1 / rate; burstiness 1 is a Poisson process, below 1 burstier, above 1 more
    even, and infinity a fixed gap.
    """
    if not (rate_rps > 0 and math.isfinite(rate_rps)):
        raise ProbeError(f"request rate {rate_rps!r} req/s; it must be a finite number above 0")
    if not burstiness > 0:
        raise ProbeError(f"burstiness {burstiness!r}; it must be above 0 (1 is Poisson)")
    if math.isinf(burstiness):
        return np.full(count, 1.0 / rate_rps)
    gaps: np.ndarray = rng.gamma(shape=burstiness, scale=1.0 / (rate_rps * burstiness), size=count)
    return gaps


def dithered_output_tokens(rng: np.random.Generator, output_tokens: int, ratio: float) -> int:
    """An output length moved by a whole number of tokens drawn uniformly from ±`ratio` of it.

    In a closed loop a stream's phase (which engine step its request prefills in) is set by how
    many decode steps its requests take. With every request alike, phases never move: streams
    that happen to prefill in the same step, or that a long step gathers into one, stay together
    from then on, and over minutes the load drifts into clumps that prefill together. Moving each
    length by a few tokens, evenly either way, keeps the mean and the mix of work while the phases
    wander, so the load forgets where it started (a dither of ±1/8 keeps TTFT at its phase-free
    value for as long as the load runs, as `tests/collectors/probe/test_phase_free.py` shows).
    """
    spread = round(output_tokens * ratio)
    if spread < 1:
        return output_tokens
    return max(1, output_tokens + int(rng.integers(-spread, spread, endpoint=True)))


def opening_output_tokens(rng: np.random.Generator, output_tokens: int) -> int:
    """The output length of a new stream's first request: uniform on 1..`output_tokens`.

    In a closed loop every stream sends its next request when its last one ends. Streams started
    together would therefore prefill together, cycle after cycle, whenever the requests are alike
    (fixed lengths, end of sequence ignored): each step that prefills, prefills for all of them,
    and the first-token times a measurement reads depend on how the streams were started rather
    than on the replica. Cutting each new stream's first request to a uniform share of its length
    ends those first requests at times spread evenly over one request's span, so the streams run
    out of step from their second request on, however and whenever they were started.
    """
    if output_tokens <= 1:
        return output_tokens
    return int(rng.integers(1, output_tokens, endpoint=True))


@dataclass(frozen=True, slots=True)
class PromptItem:
    """One prompt from a file: text, token ids or chat messages, with its own output length."""

    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    messages: tuple[Mapping[str, Any], ...] | None = field(default=None, hash=False)
    output_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """What the next request sends: exactly one of prompt text, token ids or chat messages."""

    text: str | None
    token_ids: tuple[int, ...] | None
    messages: tuple[Mapping[str, Any], ...] | None
    prompt_tokens: int | None
    output_tokens: int


@dataclass(frozen=True, slots=True)
class LoadShape:
    """Everything about the load but its level: endpoint, lengths, prompts, caps and seed."""

    endpoint: Endpoint = "completions"
    prompt_form: PromptForm = "auto"
    prompt_lengths: LengthDistribution = LengthDistribution("fixed", 512)
    output_lengths: LengthDistribution = LengthDistribution("fixed", 128)
    prompt_items: tuple[PromptItem, ...] = ()
    ignore_eos: bool = True
    burstiness: float = 1.0
    max_concurrency: int = 64
    max_rate_rps: float = 50.0
    seed: int | None = None
    """Seeds the prompts, lengths and arrivals; None: a fresh one each time the probe starts
    (`with_seed`), so a replica's prefix cache never serves one run the prompts of the last."""
    shared_prefix_tokens: int = 0
    shared_prefix_ratio: float = 1.0
    workers: int | None = None
    """Probe worker processes, each with a share of the streams; None: as many as the load needs
    (`slotop.collectors.probe.handle.auto_workers`)."""
    output_dither_ratio: float = OUTPUT_DITHER_RATIO
    """In a closed loop, each request's output length moves by a random whole number of tokens
    within this share of it, the mean unchanged (`dithered_output_tokens`); 0 sends the drawn
    lengths exactly, and streams of alike requests may then fall into step."""

    def __post_init__(self) -> None:
        if self.endpoint not in ("completions", "chat"):
            raise ProbeError(f"endpoint {self.endpoint!r} is unknown; use 'completions' or 'chat'")
        if self.prompt_form not in PROMPT_FORMS:
            raise ProbeError(
                f"prompt form {self.prompt_form!r} is unknown; use one of {', '.join(PROMPT_FORMS)}"
            )
        if self.max_concurrency < 1:
            raise ProbeError(f"max concurrency {self.max_concurrency}; it must be at least 1")
        if not (self.max_rate_rps > 0 and math.isfinite(self.max_rate_rps)):
            raise ProbeError(f"max rate {self.max_rate_rps!r} req/s; it must be finite and above 0")
        if not self.burstiness > 0:
            raise ProbeError(f"burstiness {self.burstiness!r}; it must be above 0 (1 is Poisson)")
        if self.shared_prefix_tokens < 0:
            raise ProbeError(
                f"shared prefix {self.shared_prefix_tokens} tokens; it must not be negative "
                "(0 is none)"
            )
        if not 0.0 <= self.shared_prefix_ratio <= 1.0:
            raise ProbeError(
                f"shared prefix ratio {self.shared_prefix_ratio!r}; it must be from 0 to 1"
            )
        most = min(MAX_WORKERS, self.max_concurrency)
        if self.workers is not None and not 1 <= self.workers <= most:
            raise ProbeError(
                f"{self.workers!r} probe workers; give 1 to {most} (no more than the streams, "
                f"at most {MAX_WORKERS}), or None for as many as the load needs"
            )
        if not 0.0 <= self.output_dither_ratio <= MAX_OUTPUT_DITHER_RATIO:
            raise ProbeError(
                f"output dither {self.output_dither_ratio!r}; it must be from 0 to "
                f"{MAX_OUTPUT_DITHER_RATIO:g} (0 sends the output lengths exactly)"
            )
        if self.shared_prefix_tokens and self.prompt_items:
            raise ProbeError(
                "a shared prefix goes on synthetic prompts only; a prompts file brings its own"
            )
        self.resolved_form()

    def with_seed(self) -> LoadShape:
        """This shape with its seed drawn now where none was given (every worker of one probe
        must draw alike: the shared prefix and the open loop's arrivals depend on it)."""
        if self.seed is not None:
            return self
        return replace(self, seed=secrets.randbits(63))

    def resolved_form(self) -> Literal["token_ids", "text"]:
        """Token ids where the endpoint takes them (completions), text otherwise."""
        if self.prompt_form == "auto":
            return "token_ids" if self.endpoint == "completions" else "text"
        if self.prompt_form == "token_ids" and self.endpoint == "chat":
            raise ProbeError(
                "prompt_form = 'token_ids' needs endpoint = 'completions'; "
                "the chat endpoint takes text messages only"
            )
        return self.prompt_form


def synthetic_text(rng: np.random.Generator, tokens: int) -> str:
    """Text of about `tokens` tokens: random common words, different for every request."""
    picks = rng.integers(0, len(_WORDS), size=tokens)
    return " ".join(_WORDS[i] for i in picks)


class PromptSource:
    """Hands out the next request: synthetic prompts of drawn lengths, or a file's, in a cycle.

    The `index`-th of `count` sources (one per probe worker) takes every `count`-th line of a
    prompts file from its `index`-th, so together they replay the file once per cycle.
    """

    _BATCH = 256

    def __init__(
        self, shape: LoadShape, rng: np.random.Generator, index: int = 0, count: int = 1
    ) -> None:
        self._shape = shape
        self._form = shape.resolved_form()
        self._rng = rng
        self._next_item = index
        self._item_stride = count
        self._prompt_lengths: list[int] = []
        self._output_lengths: list[int] = []
        self._prefix_ids: tuple[int, ...] = ()
        self._prefix_text = ""
        if shape.shared_prefix_tokens:
            prefix_rng = np.random.default_rng([shape.seed or 0, _PREFIX_STREAM])
            if self._form == "token_ids":
                size = shape.shared_prefix_tokens
                drawn = prefix_rng.integers(TOKEN_ID_LOW, TOKEN_ID_HIGH, size=size)
                self._prefix_ids = tuple(drawn.tolist())
            else:
                self._prefix_text = synthetic_text(prefix_rng, shape.shared_prefix_tokens)

    def _draw(self) -> tuple[int, int]:
        if not self._output_lengths:
            self._prompt_lengths = self._shape.prompt_lengths.sample(
                self._rng, self._BATCH
            ).tolist()
            self._output_lengths = self._shape.output_lengths.sample(
                self._rng, self._BATCH
            ).tolist()
        return self._prompt_lengths.pop(), self._output_lengths.pop()

    def next_request(self) -> PlannedRequest:
        """The request to send next."""
        prompt_tokens, output_tokens = self._draw()
        items = self._shape.prompt_items
        if items:
            item = items[self._next_item % len(items)]
            self._next_item += self._item_stride
            return self._from_item(item, output_tokens)
        prefix_tokens = self._shape.shared_prefix_tokens
        shared = prefix_tokens > 0 and self._rng.random() < self._shape.shared_prefix_ratio
        own_tokens = prompt_tokens if shared else prefix_tokens + prompt_tokens
        prompt_tokens += prefix_tokens
        if self._form == "token_ids":
            drawn = self._rng.integers(TOKEN_ID_LOW, TOKEN_ID_HIGH, size=own_tokens).tolist()
            ids = (*self._prefix_ids, *drawn) if shared else tuple(drawn)
            return PlannedRequest(None, ids, None, prompt_tokens, output_tokens)
        text = synthetic_text(self._rng, own_tokens)
        if shared:
            text = f"{self._prefix_text} {text}"
        if self._shape.endpoint == "chat":
            messages = ({"role": "user", "content": text},)
            return PlannedRequest(None, None, messages, prompt_tokens, output_tokens)
        return PlannedRequest(text, None, None, prompt_tokens, output_tokens)

    def _from_item(self, item: PromptItem, drawn_output_tokens: int) -> PlannedRequest:
        output_tokens = item.output_tokens or drawn_output_tokens
        prompt_tokens = len(item.token_ids) if item.token_ids is not None else None
        if self._shape.endpoint == "chat" and item.messages is None:
            messages = ({"role": "user", "content": item.text or ""},)
            return PlannedRequest(None, None, messages, prompt_tokens, output_tokens)
        return PlannedRequest(
            item.text, item.token_ids, item.messages, prompt_tokens, output_tokens
        )


def _is_token_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value)
    )


def _is_message_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content"), str | list)
            for m in value
        )
    )


def prompt_item_from_line(line: str, where: str, endpoint: Endpoint) -> PromptItem:
    """Parse one JSONL line: {"prompt": text or token ids} or {"messages": [...]}, + output_tokens."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PromptFileError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise PromptFileError(f"{where}: expected a JSON object, found {type(data).__name__}")
    has_prompt, has_messages = "prompt" in data, "messages" in data
    if has_prompt == has_messages:
        raise PromptFileError(
            f'{where}: needs exactly one of "prompt" (text or a list of token ids) '
            'or "messages" (a list of {"role", "content"})'
        )
    output = data.get("output_tokens", data.get("max_tokens"))
    if output is not None and not (
        isinstance(output, int) and not isinstance(output, bool) and output >= 1
    ):
        raise PromptFileError(f"{where}: output_tokens = {output!r}; expected an integer ≥ 1")
    if has_messages:
        messages = data["messages"]
        if not _is_message_list(messages):
            raise PromptFileError(
                f'{where}: "messages" must be a non-empty list of {{"role": str, "content": ...}}'
            )
        if endpoint != "chat":
            raise PromptFileError(
                f"{where}: holds chat messages but the endpoint is /v1/completions; "
                "set endpoint = 'chat' to replay chat traffic"
            )
        return PromptItem(messages=tuple(messages), output_tokens=output)
    prompt = data["prompt"]
    if isinstance(prompt, str) and prompt:
        return PromptItem(text=prompt, output_tokens=output)
    if _is_token_list(prompt):
        if endpoint != "completions":
            raise PromptFileError(
                f"{where}: a token-id prompt needs endpoint = 'completions'; chat takes text"
            )
        return PromptItem(token_ids=tuple(prompt), output_tokens=output)
    raise PromptFileError(
        f'{where}: "prompt" must be non-empty text or a list of token ids (integers ≥ 0)'
    )


def load_prompt_file(path: Path, endpoint: Endpoint) -> tuple[PromptItem, ...]:
    """Read a JSONL prompts file, naming the file and line of the first bad entry."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptFileError(f"{path}: no such prompts file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptFileError(f"{path}: cannot read the prompts file ({exc})") from None
    items = [
        prompt_item_from_line(line, f"{path}:{number}", endpoint)
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not items:
        raise PromptFileError(f"{path}: holds no prompts; write one JSON object per line")
    return tuple(items)
