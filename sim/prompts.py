"""Deterministic prompt token counting for the simulated replica, so no tokenizer is downloaded.

The rule (a stand-in for a BPE tokenizer, close to Llama 3's counts on English prose):

- a run of letters counts one token per started 5 letters ("token" 1, "tokens" 2);
- a run of digits counts one token per started 3 digits (Llama 3 splits numbers that way);
- every other visible character (punctuation, symbols, an emoji) is one token;
- whitespace is free: it rides on the token that follows it.

Letters and digits are Unicode-aware (`str.isalpha`, `str.isdigit` through the regex classes).
A completion prompt given as text gains one BOS token, as vLLM's tokenizer adds special tokens by
default; a prompt given as token ids is taken as it is, one id per token, as vLLM does.

A chat conversation is counted as a Llama-3-style template renders it: one BOS, then for each
message `<|start_header_id|>role<|end_header_id|>\\n\\n content <|eot_id|>` (five template tokens
plus the content), then the generation prompt `<|start_header_id|>assistant<|end_header_id|>\\n\\n`
(four tokens). Only text content is counted; other content parts are refused.

The sim's own output text is made of words that count as exactly one token each under this rule,
so re-counting a generated text gives back its token count.

For the prefix cache a prompt also has token ids: a text token's id is the hash of its piece (the
letters, digits or character it stands for; whitespace dropped), a template token's the hash of its
name, so equal text gives equal ids within one process; token ids given by the client are used as
they are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from slotop.sim.errors import SimError

BOS_TOKENS = 1
"""Tokens a text completion prompt gains from the tokenizer's special tokens (BOS)."""

CHAT_TOKENS_PER_MESSAGE = 5
"""Template tokens around each chat message: header start, role, header end, blank line, end of turn."""

CHAT_GENERATION_PROMPT_TOKENS = 4
"""Template tokens that open the assistant's turn: header start, "assistant", header end, blank line."""

MAX_CHARS_PER_TOKEN = 16
"""The longest vocabulary entry vLLM's length pre-check assumes (it refuses text longer than
max_model_len × this before tokenizing); real tokenizers vary, this stands in for a typical one."""

_LETTERS_PER_TOKEN = 5
_DIGITS_PER_TOKEN = 3

_PIECE = re.compile(r"([^\W\d_]+)|(\d+)|(\S)")

OUTPUT_WORDS: tuple[str, ...] = (
    " the",
    " model",
    " sends",
    " one",
    " word",
    " per",
    " token",
    " at",
    " its",
    " own",
    " pace",
    " and",
    " you",
    " watch",
    " every",
    " step",
)
"""Pieces of generated text, each exactly one token under the counting rule."""


class PromptError(SimError):
    """A prompt or chat message the simulated replica cannot count; the message names the part."""


_BOS_ID = hash("<|begin_of_text|>")
_HEADER_START_ID = hash("<|start_header_id|>")
_HEADER_END_ID = hash("<|end_header_id|>")
_BLANK_LINE_ID = hash("\n\n")
_END_OF_TURN_ID = hash("<|eot_id|>")
_ASSISTANT_ID = hash("assistant")


def text_token_ids(text: str) -> list[int]:
    """The token ids of ``text`` by the documented rule (no special tokens added)."""
    ids: list[int] = []
    for letters, digits, other in _PIECE.findall(text):
        if letters:
            if len(letters) <= _LETTERS_PER_TOKEN:
                ids.append(hash(letters))
            else:
                step = _LETTERS_PER_TOKEN
                ids.extend(hash(letters[i : i + step]) for i in range(0, len(letters), step))
        elif digits:
            if len(digits) <= _DIGITS_PER_TOKEN:
                ids.append(hash(digits))
            else:
                step = _DIGITS_PER_TOKEN
                ids.extend(hash(digits[i : i + step]) for i in range(0, len(digits), step))
        else:
            ids.append(hash(other))
    return ids


def count_text_tokens(text: str) -> int:
    """Count the tokens of ``text`` by the documented rule (no special tokens added)."""
    return len(text_token_ids(text))


def completion_prompt_ids(prompt: str | Sequence[int]) -> tuple[int, ...]:
    """The token ids of one completion prompt: text gains a BOS token, token ids stay as given."""
    if isinstance(prompt, str):
        return (_BOS_ID, *text_token_ids(prompt))
    return tuple(prompt)


def count_completion_prompt(prompt: str | Sequence[int]) -> int:
    """Count one completion prompt: text gains a BOS token, a list of token ids counts one per id."""
    return len(completion_prompt_ids(prompt))


def _message_text(message: object, position: int) -> tuple[str, str]:
    """Return the (role, text) of one chat message, refusing shapes the sim cannot count."""
    if not isinstance(message, dict):
        raise PromptError(f"messages[{position}] must be an object, got {type(message).__name__}")
    role = message.get("role")
    if not isinstance(role, str):
        raise PromptError(f"messages[{position}].role must be a string")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return role, content or ""
    if isinstance(content, list):
        texts: list[str] = []
        for part_index, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise PromptError(
                    f"messages[{position}].content[{part_index}]: the simulated replica only "
                    "counts text parts (type 'text')"
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise PromptError(
                    f"messages[{position}].content[{part_index}].text must be a string"
                )
            texts.append(text)
        return role, "\n".join(texts)
    raise PromptError(f"messages[{position}].content must be a string or a list of parts")


def chat_text_chars(messages: Sequence[object]) -> int:
    """Characters of text across a conversation's messages (for vLLM's length pre-check)."""
    return sum(len(_message_text(message, i)[1]) for i, message in enumerate(messages))


def chat_prompt_ids(messages: Sequence[object]) -> tuple[int, ...]:
    """The token ids of a conversation as a Llama-3-style template renders it, generation prompt included."""
    ids = [_BOS_ID]
    for position, message in enumerate(messages):
        role, text = _message_text(message, position)
        ids += (_HEADER_START_ID, hash(role), _HEADER_END_ID, _BLANK_LINE_ID)
        ids += text_token_ids(text)
        ids.append(_END_OF_TURN_ID)
    ids += (_HEADER_START_ID, _ASSISTANT_ID, _HEADER_END_ID, _BLANK_LINE_ID)
    return tuple(ids)


def count_chat_prompt(messages: Sequence[object]) -> int:
    """Count a chat conversation as a Llama-3-style template renders it, generation prompt included."""
    return len(chat_prompt_ids(messages))


def output_token_text(position: int) -> str:
    """Return the text of the generated token at ``position`` (0-based) of a request."""
    return OUTPUT_WORDS[position % len(OUTPUT_WORDS)]


def output_text(num_tokens: int) -> str:
    """Return the whole generated text of a request that produced ``num_tokens`` tokens."""
    words = OUTPUT_WORDS
    full, rest = divmod(num_tokens, len(words))
    return "".join(words) * full + "".join(words[:rest])
