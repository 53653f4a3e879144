"""The quality check's prompts: the default set, and a JSONL file that replaces it.

A prompt is text or token ids with how many tokens to generate; a bad file is refused with the
file, the line and what is expected.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from slotop.actions.errors import ActionError

DEFAULT_MAX_TOKENS = 32


class QualityError(ActionError):
    """The quality check cannot run: a bad prompts file, a refused request, mismatched runs."""


@dataclass(frozen=True, slots=True)
class QualityPrompt:
    """One prompt of the check: text or token ids, and how many tokens to generate."""

    name: str
    prompt: str | tuple[int, ...]
    max_tokens: int = DEFAULT_MAX_TOKENS


def _long_context_prompt() -> str:
    """A few hundred tokens of numbered facts and a question about one: precision loss in the
    KV cache grows with the context a token attends over."""
    colours = ("red", "green", "blue", "amber", "violet", "grey", "white")
    items = [
        f"Crate {n} is {colours[n * 5 % len(colours)]} and weighs {(n * 37) % 90 + 10} kg."
        for n in range(1, 41)
    ]
    return " ".join(items) + "\nQuestion: what colour is crate 23, and what does it weigh?\nAnswer:"


DEFAULT_PROMPTS: tuple[QualityPrompt, ...] = (
    QualityPrompt(
        "prose",
        "Write two sentences about a lighthouse keeper who counts the ships passing at night.",
    ),
    QualityPrompt(
        "facts", "List the planets of the solar system in order from the sun, separated by commas:"
    ),
    QualityPrompt(
        "arithmetic",
        "Q: A train leaves at 14:05 and arrives at 17:50. How many minutes is the trip?\nA:",
    ),
    QualityPrompt(
        "code",
        'def fibonacci(n: int) -> int:\n    """Return the n-th Fibonacci number, iteratively."""\n',
    ),
    QualityPrompt(
        "json",
        'Give a JSON object with the keys "city", "country" and "river" for Lisbon:\n',
    ),
    QualityPrompt(
        "translation",
        "Translate to German: The cache keeps every token the model has already read.\nGerman:",
    ),
    QualityPrompt("long-context", _long_context_prompt(), max_tokens=48),
    QualityPrompt("token-ids", tuple(range(100, 164))),
)
"""The default set: short and long, prose, code, numbers, structure, and one prompt as token ids."""


def _prompt_from_line(data: object, where: str, number: int) -> QualityPrompt:
    if isinstance(data, str):
        data = {"prompt": data}
    if not isinstance(data, dict):
        raise QualityError(f"{where}:{number}: expected an object or a string, got {data!r}")
    prompt = data.get("prompt")
    if (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in prompt)
    ):
        value: str | tuple[int, ...] = tuple(prompt)
    elif isinstance(prompt, str) and prompt:
        value = prompt
    else:
        raise QualityError(
            f'{where}:{number}: "prompt" must be non-empty text or a list of token ids, '
            f"got {prompt!r}"
        )
    max_tokens = data.get("max_tokens", data.get("output_tokens", DEFAULT_MAX_TOKENS))
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise QualityError(f'{where}:{number}: "max_tokens" must be a positive integer')
    name = data.get("name", f"line-{number}")
    if not isinstance(name, str) or not name:
        raise QualityError(f'{where}:{number}: "name" must be non-empty text')
    unknown = sorted(set(data) - {"prompt", "max_tokens", "output_tokens", "name"})
    if unknown:
        raise QualityError(
            f"{where}:{number}: unknown keys {unknown}; a line takes prompt, max_tokens "
            "(or output_tokens, as the probe's prompts file) and name"
        )
    return QualityPrompt(name, value, max_tokens)


def parse_prompts(text: str, where: str = "prompts") -> tuple[QualityPrompt, ...]:
    """Read JSONL prompts (one object or string a line, blank lines skipped); errors name the line.

    A line is `{"prompt": text or token ids, "max_tokens": N, "name": "..."}`, only the prompt
    required, so a completions prompts file of the probe's serves here too.
    """
    prompts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise QualityError(f"{where}:{number}: not JSON ({exc})") from exc
        prompts.append(_prompt_from_line(data, where, number))
    if not prompts:
        raise QualityError(f"{where}: holds no prompts; give one JSON object a line")
    names = [p.name for p in prompts]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate is not None:
        raise QualityError(f"{where}: the name {duplicate!r} is used twice; names must differ")
    return tuple(prompts)


def load_prompts(path: Path) -> tuple[QualityPrompt, ...]:
    """Read a JSONL prompts file that replaces the default set; QualityError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise QualityError(f"cannot read prompts file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise QualityError(f"prompts file {path} is not UTF-8 text ({exc.reason})") from exc
    return parse_prompts(text, str(path))


def prompts_or_default(path: Path | None) -> tuple[QualityPrompt, ...]:
    """The configured prompts file's prompts, or the default set when none is configured."""
    return DEFAULT_PROMPTS if path is None else load_prompts(path)
