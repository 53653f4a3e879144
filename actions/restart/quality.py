"""The quality check for KV quantisation: greedy outputs of fixed prompts before and after a change.

Each prompt goes to `/v1/completions` with `temperature=0`, `logprobs=1` and `return_token_ids`,
so the same replica and weights give the same tokens; a KV dtype that loses precision shows as
outputs that diverge and as a drift of the chosen tokens' log-probabilities. Tokens are compared
as ids where the server returns them, else as the log-prob token strings, else as the words of
the text (the simulator returns neither). Drift is only measured where both contexts are still
identical (before the first divergence), and is None, never 0, when the server sent no log-probs.
The HTTP part is thin (an injected httpx client); the maths are pure functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import httpx

from slotop.actions.restart.prompts import DEFAULT_PROMPTS, QualityError, QualityPrompt
from slotop.collectors.errors import CollectorError
from slotop.collectors.replica import normalize_base_url
from slotop.redact import shown_text, shown_url

_SHOWN_CHARS = 200


class TokenKind(Enum):
    """What output tokens were compared as, strongest first."""

    IDS = "token ids"
    STRINGS = "token strings"
    WORDS = "words of the text"


@dataclass(frozen=True, slots=True)
class GreedyOutput:
    """One prompt's greedy output: text, token ids and strings and log-probs where returned."""

    name: str
    text: str
    token_ids: tuple[int, ...] | None
    token_strings: tuple[str, ...] | None
    logprobs: tuple[float | None, ...] | None
    finish_reason: str | None


@dataclass(frozen=True, slots=True)
class GreedyRun:
    """The greedy outputs of every prompt, from one replica at one setting."""

    model: str
    outputs: tuple[GreedyOutput, ...]


def completion_request(prompt: QualityPrompt, model: str, *, ignore_eos: bool) -> dict[str, object]:
    """The body of one greedy `/v1/completions` request."""
    return {
        "model": model,
        "prompt": list(prompt.prompt) if isinstance(prompt.prompt, tuple) else prompt.prompt,
        "max_tokens": prompt.max_tokens,
        "temperature": 0,
        "top_p": 1,
        "seed": 0,
        "logprobs": 1,
        "return_token_ids": True,
        "ignore_eos": ignore_eos,
        "stream": False,
    }


def _logprob(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def parse_completion(body: object, name: str) -> GreedyOutput:
    """Read one completion answer; QualityError when it has no choice with text."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, Mapping) or not isinstance(choice.get("text"), str):
        raise QualityError(f"prompt {name!r}: the answer has no choice with text: {body!r:.200}")
    ids = choice.get("token_ids")
    token_ids = (
        tuple(ids)
        if isinstance(ids, list)
        and all(isinstance(t, int) and not isinstance(t, bool) for t in ids)
        else None
    )
    logprobs = choice.get("logprobs")
    strings: tuple[str, ...] | None = None
    values: tuple[float | None, ...] | None = None
    if isinstance(logprobs, Mapping):
        tokens = logprobs.get("tokens")
        if isinstance(tokens, list) and all(isinstance(t, str) for t in tokens):
            strings = tuple(tokens)
        raw = logprobs.get("token_logprobs")
        if isinstance(raw, list):
            values = tuple(_logprob(v) for v in raw)
    reason = choice.get("finish_reason")
    return GreedyOutput(
        name=name,
        text=choice["text"],
        token_ids=token_ids,
        token_strings=strings,
        logprobs=values,
        finish_reason=reason if isinstance(reason, str) else None,
    )


def _shorten(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _SHOWN_CHARS else line[: _SHOWN_CHARS - 1] + "…"


def _post(client: httpx.Client, path: str, body: Mapping[str, object] | None) -> object:
    """POST (or GET without a body) and return the JSON answer; QualityError for any failure."""
    where = f"{shown_url(str(client.base_url)).rstrip('/')}{path}"
    try:
        response = client.get(path) if body is None else client.post(path, json=body)
    except httpx.TimeoutException as exc:
        raise QualityError(f"{where} did not answer in time ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise QualityError(f"{where} failed: {type(exc).__name__}: {shown_text(str(exc))}") from exc
    if not response.is_success:
        raise QualityError(
            f"{where} answered HTTP {response.status_code}: {_shorten(response.text)!r}"
        )
    try:
        return response.json()
    except ValueError as exc:
        raise QualityError(f"{where} did not answer JSON: {_shorten(response.text)!r}") from exc


def first_model(client: httpx.Client) -> str:
    """The first model `/v1/models` lists; QualityError when it lists none."""
    payload = _post(client, "/v1/models", None)
    data = payload.get("data") if isinstance(payload, Mapping) else None
    ids = [e.get("id") for e in data if isinstance(e, Mapping)] if isinstance(data, list) else []
    model = next((m for m in ids if isinstance(m, str)), None)
    if model is None:
        raise QualityError(
            f"{shown_url(str(client.base_url)).rstrip('/')}/v1/models lists no model"
        )
    return model


def run_greedy(
    client: httpx.Client,
    prompts: Sequence[QualityPrompt] = DEFAULT_PROMPTS,
    *,
    model: str | None = None,
    ignore_eos: bool = True,
) -> GreedyRun:
    """Send every prompt once, greedily, one at a time; the client's base URL is the replica.

    `ignore_eos` (vLLM's extra parameter) makes every output run to its max_tokens, so both
    sides compare the same number of positions and a sampled stop cannot pass for a change.
    """
    name = model or first_model(client)
    outputs = []
    for prompt in prompts:
        body = _post(
            client, "/v1/completions", completion_request(prompt, name, ignore_eos=ignore_eos)
        )
        outputs.append(parse_completion(body, prompt.name))
    return GreedyRun(name, tuple(outputs))


def greedy_run_of_replica(
    url: str,
    prompts: Sequence[QualityPrompt] = DEFAULT_PROMPTS,
    *,
    api_key: str | None = None,
    timeout_s: float = 120.0,
    model: str | None = None,
) -> GreedyRun:
    """Run the prompts greedily against a replica's base URL, with its API key if it needs one."""
    try:
        base = normalize_base_url(url)
    except CollectorError as exc:
        raise QualityError(str(exc)) from exc
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    if api_key:  # the key is the credential; httpx would replace it with the URL's user info
        base = shown_url(base)
    with httpx.Client(base_url=base, headers=headers, timeout=timeout_s) as client:
        return run_greedy(client, prompts, model=model)


@dataclass(frozen=True, slots=True)
class PromptComparison:
    """One prompt before and after: tokens equal up to the first divergence, overall, and drift."""

    name: str
    tokens_before: int
    tokens_after: int
    prefix_match_tokens: int
    matching_positions: int
    first_divergence: int | None
    logprob_drift_sum: float
    logprob_abs_drift_sum: float
    drift_tokens: int

    @property
    def identical(self) -> bool:
        """Whether both outputs are the same tokens."""
        return self.first_divergence is None


@dataclass(frozen=True, slots=True)
class QualityReport:
    """The whole check: identical outputs, shares of identical tokens, mean log-prob drift."""

    model_before: str
    model_after: str
    token_kind: TokenKind
    prompts: tuple[PromptComparison, ...]
    prompts_identical: int
    prefix_match_ratio: float | None
    position_match_ratio: float | None
    logprob_drift_mean: float | None
    logprob_abs_drift_mean: float | None
    drift_tokens: int
    notes: tuple[str, ...] = ()


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def token_kind_of(before: Sequence[GreedyOutput], after: Sequence[GreedyOutput]) -> TokenKind:
    """The strongest token form every output of both runs carries."""
    outputs = [*before, *after]
    if all(o.token_ids is not None for o in outputs):
        return TokenKind.IDS
    if all(o.token_strings is not None for o in outputs):
        return TokenKind.STRINGS
    return TokenKind.WORDS


def _tokens(output: GreedyOutput, kind: TokenKind) -> tuple[object, ...]:
    if kind is TokenKind.IDS and output.token_ids is not None:
        return output.token_ids
    if kind is TokenKind.STRINGS and output.token_strings is not None:
        return output.token_strings
    return _words(output.text)


def common_prefix_length(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items two sequences share."""
    count = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        count += 1
    return count


def compare_outputs(before: GreedyOutput, after: GreedyOutput, kind: TokenKind) -> PromptComparison:
    """Compare one prompt's outputs as `kind` tokens; drift over the identical prefix only."""
    a, b = _tokens(before, kind), _tokens(after, kind)
    prefix = common_prefix_length(a, b)
    matching = sum(1 for left, right in zip(a, b, strict=False) if left == right)
    diverged = None if a == b else prefix
    drift = absolute = 0.0
    counted = 0
    if kind is not TokenKind.WORDS and before.logprobs is not None and after.logprobs is not None:
        for index in range(min(prefix, len(before.logprobs), len(after.logprobs))):
            old, new = before.logprobs[index], after.logprobs[index]
            if old is None or new is None:
                continue
            drift += new - old
            absolute += abs(new - old)
            counted += 1
    return PromptComparison(
        name=before.name,
        tokens_before=len(a),
        tokens_after=len(b),
        prefix_match_tokens=prefix,
        matching_positions=matching,
        first_divergence=diverged,
        logprob_drift_sum=drift,
        logprob_abs_drift_sum=absolute,
        drift_tokens=counted,
    )


def compare_greedy_runs(before: GreedyRun, after: GreedyRun) -> QualityReport:
    """Compare two runs of the same prompts; QualityError when the prompt sets differ."""
    names_before = [o.name for o in before.outputs]
    names_after = [o.name for o in after.outputs]
    if names_before != names_after:
        raise QualityError(
            f"the runs used different prompts ({names_before} vs {names_after}); "
            "run the same set before and after"
        )
    kind = token_kind_of(before.outputs, after.outputs)
    prompts = tuple(
        compare_outputs(old, new, kind)
        for old, new in zip(before.outputs, after.outputs, strict=True)
    )
    reference = sum(p.tokens_before for p in prompts)
    longest = sum(max(p.tokens_before, p.tokens_after) for p in prompts)
    counted = sum(p.drift_tokens for p in prompts)
    notes = []
    if kind is TokenKind.WORDS:
        notes.append(
            "the server returned neither token ids nor log-prob tokens: outputs compared as words"
        )
    if counted == 0:
        notes.append(
            "the server returned no log-probs for identical tokens: drift unavailable (not 0)"
        )
    if before.model != after.model:
        notes.append(f"the model name changed: {before.model!r} → {after.model!r}")
    return QualityReport(
        model_before=before.model,
        model_after=after.model,
        token_kind=kind,
        prompts=prompts,
        prompts_identical=sum(1 for p in prompts if p.identical),
        prefix_match_ratio=sum(p.prefix_match_tokens for p in prompts) / reference
        if reference
        else None,
        position_match_ratio=sum(p.matching_positions for p in prompts) / longest
        if longest
        else None,
        logprob_drift_mean=sum(p.logprob_drift_sum for p in prompts) / counted if counted else None,
        logprob_abs_drift_mean=(
            sum(p.logprob_abs_drift_sum for p in prompts) / counted if counted else None
        ),
        drift_tokens=counted,
        notes=tuple(notes),
    )
