"""The documented token-counting rule for text prompts, chat messages and the sim's own output."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotop.sim.prompts import (
    BOS_TOKENS,
    CHAT_GENERATION_PROMPT_TOKENS,
    CHAT_TOKENS_PER_MESSAGE,
    OUTPUT_WORDS,
    PromptError,
    chat_prompt_ids,
    completion_prompt_ids,
    count_chat_prompt,
    count_completion_prompt,
    count_text_tokens,
    output_text,
    output_token_text,
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("   \n\t", 0),
        ("the", 1),
        ("token", 1),
        ("tokens", 2),
        ("the quick brown fox", 4),
        ("Hello, world!", 4),
        ("12345", 2),
        ("2024-07-26", 6),
        ("a1b2", 4),
        ("naïve café", 2),
        ("snake_case", 3),
        ("🙂🙂", 2),
    ],
)
def test_text_tokens_follow_the_documented_rule(text: str, tokens: int) -> None:
    assert count_text_tokens(text) == tokens


def test_a_text_completion_prompt_gains_bos_and_token_ids_count_one_each() -> None:
    assert count_completion_prompt("the quick brown fox") == BOS_TOKENS + 4
    assert count_completion_prompt([5, 6, 7]) == 3
    assert count_completion_prompt([]) == 0


def test_a_chat_counts_the_template_around_each_message() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [{"type": "text", "text": "the quick"}, {"type": "text", "text": "fox"}],
        },
    ]
    expected = (
        BOS_TOKENS
        + CHAT_GENERATION_PROMPT_TOKENS
        + 2 * CHAT_TOKENS_PER_MESSAGE
        + count_text_tokens("be brief")
        + count_text_tokens("the quick\nfox")
    )
    assert count_chat_prompt(messages) == expected
    assert count_chat_prompt([{"role": "assistant", "content": None}]) == (
        BOS_TOKENS + CHAT_GENERATION_PROMPT_TOKENS + CHAT_TOKENS_PER_MESSAGE
    )


@pytest.mark.parametrize(
    "message",
    [
        "not an object",
        {"content": "no role"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "user", "content": [{"type": "text", "text": 3}]},
        {"role": "user", "content": 42},
    ],
)
def test_a_chat_message_the_sim_cannot_count_is_refused_by_position(message: object) -> None:
    with pytest.raises(PromptError, match=r"messages\[1\]"):
        count_chat_prompt([{"role": "user", "content": "ok"}, message])


def test_every_output_word_is_one_token() -> None:
    assert all(count_text_tokens(word) == 1 for word in OUTPUT_WORDS)


@given(st.integers(min_value=0, max_value=500))
def test_generated_text_recounts_to_its_token_count(num_tokens: int) -> None:
    text = output_text(num_tokens)
    assert count_text_tokens(text) == num_tokens
    assert text == "".join(output_token_text(i) for i in range(num_tokens))


@given(st.text(max_size=200), st.text(max_size=200))
def test_counts_add_up_over_whitespace_joins(left: str, right: str) -> None:
    assert count_text_tokens(left + " " + right) == count_text_tokens(left) + count_text_tokens(
        right
    )


def test_prompts_that_open_alike_open_with_the_same_token_ids() -> None:
    shared = "the quick brown fox jumps over 1234 lazy dogs, twice"
    one = chat_prompt_ids([{"role": "user", "content": f"{shared} and then sleeps"}])
    other = chat_prompt_ids([{"role": "user", "content": f"{shared} but never rests"}])
    # BOS + 4 template tokens + the shared text's 12: one per word of at most 5 letters (9),
    # 2 for "1234" (3 digits a token), 1 for ",".
    opening = 1 + 4 + 12
    assert one[:opening] == other[:opening]
    assert one[opening] != other[opening]
    assert completion_prompt_ids("ab cd") != completion_prompt_ids("abcd")
    assert completion_prompt_ids([5, 6, 7]) == (5, 6, 7)
