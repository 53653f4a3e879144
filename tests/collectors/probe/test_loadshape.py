"""Load shapes: length distributions, gamma arrivals, prompt sources and JSONL prompt files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from slotop.collectors.errors import ProbeError, PromptFileError
from slotop.collectors.probe.loadshape import (
    TOKEN_ID_HIGH,
    TOKEN_ID_LOW,
    LengthDistribution,
    LoadShape,
    PromptItem,
    PromptSource,
    gamma_gaps_s,
    load_prompt_file,
)


def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_fixed_lengths_are_exact() -> None:
    lengths = LengthDistribution("fixed", 300, spread_tokens=50).sample(rng(), 100)
    assert lengths.dtype == np.int64
    assert set(lengths.tolist()) == {300}


def test_uniform_lengths_cover_mean_plus_minus_spread_inclusive() -> None:
    lengths = LengthDistribution("uniform", 10, spread_tokens=2).sample(rng(), 2000)
    assert set(lengths.tolist()) == {8, 9, 10, 11, 12}


def test_uniform_lengths_never_go_below_one_token() -> None:
    lengths = LengthDistribution("uniform", 3, spread_tokens=10).sample(rng(), 2000)
    assert lengths.min() == 1
    assert lengths.max() == 13


@pytest.mark.parametrize("kind", ["normal", "lognormal"])
def test_normal_and_lognormal_match_the_asked_mean_and_spread(kind: str) -> None:
    lengths = LengthDistribution(kind, 400, spread_tokens=100).sample(rng(), 40_000)  # type: ignore[arg-type]
    assert abs(lengths.mean() - 400) < 4
    assert abs(lengths.std() - 100) < 4
    assert lengths.min() >= 1


def test_lognormal_is_skewed_right_and_normal_is_not() -> None:
    normal = LengthDistribution("normal", 400, 200).sample(rng(), 40_000)
    lognormal = LengthDistribution("lognormal", 400, 200).sample(rng(), 40_000)
    assert np.median(lognormal) < 380  # median below the mean: a right tail
    assert abs(np.median(normal) - 400) < 8


@pytest.mark.parametrize(
    ("kind", "mean", "spread", "words"),
    [
        ("zipf", 10, 0, "length distribution 'zipf' is unknown"),
        ("fixed", 0, 0, "mean length 0 tokens; it must be at least 1"),
        ("normal", 10, -1, "length spread -1 tokens"),
    ],
)
def test_bad_length_distributions_are_refused(
    kind: str, mean: int, spread: int, words: str
) -> None:
    with pytest.raises(ProbeError, match=words):
        LengthDistribution(kind, mean, spread)  # type: ignore[arg-type]


@pytest.mark.parametrize("burstiness", [0.5, 1.0, 4.0])
def test_gamma_gaps_have_mean_one_over_rate_and_cv_one_over_sqrt_burstiness(
    burstiness: float,
) -> None:
    gaps = gamma_gaps_s(rng(), 20.0, burstiness, 100_000)
    assert gaps.mean() == pytest.approx(1 / 20, rel=0.02)
    cv = gaps.std() / gaps.mean()
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.03)


def test_infinite_burstiness_gives_even_gaps() -> None:
    assert gamma_gaps_s(rng(), 4.0, math.inf, 3).tolist() == [0.25, 0.25, 0.25]


@pytest.mark.parametrize(
    ("rate", "burstiness", "words"),
    [(0.0, 1.0, "request rate 0.0"), (math.inf, 1.0, "finite"), (1.0, 0.0, "burstiness 0.0")],
)
def test_bad_arrival_parameters_are_refused(rate: float, burstiness: float, words: str) -> None:
    with pytest.raises(ProbeError, match=words):
        gamma_gaps_s(rng(), rate, burstiness, 1)


def test_completions_prompts_are_token_ids_of_the_drawn_length() -> None:
    shape = LoadShape(
        prompt_lengths=LengthDistribution("uniform", 50, 10),
        output_lengths=LengthDistribution("fixed", 7),
    )
    source = PromptSource(shape, rng())
    planned = [source.next_request() for _ in range(300)]
    for request in planned:
        assert request.token_ids is not None
        assert request.text is None and request.messages is None
        assert len(request.token_ids) == request.prompt_tokens
        assert 40 <= len(request.token_ids) <= 60
        assert all(TOKEN_ID_LOW <= i < TOKEN_ID_HIGH for i in request.token_ids)
        assert request.output_tokens == 7
    assert len({r.token_ids for r in planned}) == 300  # no two alike: no prefix-cache hits


def test_chat_prompts_are_one_user_message_of_about_the_drawn_words() -> None:
    shape = LoadShape(endpoint="chat", prompt_lengths=LengthDistribution("fixed", 30))
    request = PromptSource(shape, rng()).next_request()
    assert request.messages is not None
    (message,) = request.messages
    assert message["role"] == "user"
    assert len(message["content"].split()) == 30


def test_text_form_on_completions_sends_text() -> None:
    shape = LoadShape(prompt_form="text", prompt_lengths=LengthDistribution("fixed", 12))
    request = PromptSource(shape, rng()).next_request()
    assert request.text is not None and len(request.text.split()) == 12
    assert request.token_ids is None


def test_a_shared_prefix_opens_every_prompt_with_the_same_ids_then_random_ones() -> None:
    shape = LoadShape(prompt_lengths=LengthDistribution("uniform", 50, 10), shared_prefix_tokens=64)
    one, other = PromptSource(shape, rng()), PromptSource(shape, np.random.default_rng(99))
    planned = [one.next_request() for _ in range(100)] + [other.next_request()]
    prefixes = {r.token_ids[:64] for r in planned if r.token_ids is not None}
    assert len(prefixes) == 1  # the same for every request and every source with this seed
    for request in planned:
        assert request.token_ids is not None
        assert len(request.token_ids) == request.prompt_tokens
        assert 64 + 40 <= len(request.token_ids) <= 64 + 60
        assert all(TOKEN_ID_LOW <= i < TOKEN_ID_HIGH for i in request.token_ids)
    assert len({r.token_ids[64:] for r in planned if r.token_ids is not None}) == 101


def test_the_share_ratio_sets_how_many_prompts_open_with_the_prefix() -> None:
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 16),
        shared_prefix_tokens=32,
        shared_prefix_ratio=0.25,
    )
    source = PromptSource(shape, rng())
    planned = [source.next_request() for _ in range(2000)]
    prefix = PromptSource(LoadShape(shared_prefix_tokens=32), rng()).next_request().token_ids
    assert prefix is not None
    shared = sum(r.token_ids is not None and r.token_ids[:32] == prefix[:32] for r in planned)
    # Binomial(2000, 0.25): mean 500, standard deviation √(2000 · 0.25 · 0.75) ≈ 19.4.
    assert 500 - 4 * 19.4 < shared < 500 + 4 * 19.4
    assert {r.prompt_tokens for r in planned} == {48}  # the others are as long


def test_a_shared_prefix_of_text_is_the_same_words_then_random_words() -> None:
    shape = LoadShape(
        endpoint="chat", prompt_lengths=LengthDistribution("fixed", 20), shared_prefix_tokens=30
    )
    source = PromptSource(shape, rng())
    contents = []
    for _ in range(5):
        request = source.next_request()
        assert request.messages is not None
        contents.append(request.messages[0]["content"].split())
    assert all(len(words) == 50 for words in contents)
    assert len({tuple(words[:30]) for words in contents}) == 1
    assert len({tuple(words[30:]) for words in contents}) == 5


def test_without_a_prefix_the_draws_are_as_before() -> None:
    plain = PromptSource(LoadShape(), rng()).next_request()
    off = PromptSource(LoadShape(shared_prefix_tokens=0, shared_prefix_ratio=0.3), rng())
    assert off.next_request() == plain


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"shared_prefix_tokens": -1}, "shared prefix -1 tokens; it must not be negative"),
        ({"shared_prefix_ratio": 1.5}, "shared prefix ratio 1.5; it must be from 0 to 1"),
        ({"shared_prefix_ratio": math.nan}, "shared prefix ratio nan"),
        (
            {"shared_prefix_tokens": 8, "prompt_items": (PromptItem(text="hi"),)},
            "a shared prefix goes on synthetic prompts only",
        ),
    ],
)
def test_a_bad_shared_prefix_is_refused(fields: dict[str, object], words: str) -> None:
    with pytest.raises(ProbeError, match=words):
        LoadShape(**fields)  # type: ignore[arg-type]


def test_token_ids_on_the_chat_endpoint_are_refused() -> None:
    with pytest.raises(ProbeError, match="needs endpoint = 'completions'"):
        LoadShape(endpoint="chat", prompt_form="token_ids")


def test_file_prompts_cycle_in_order_with_their_own_output_lengths() -> None:
    items = (PromptItem(text="a b", output_tokens=3), PromptItem(token_ids=(20, 21, 22)))
    shape = LoadShape(prompt_items=items, output_lengths=LengthDistribution("fixed", 9))
    source = PromptSource(shape, rng())
    first, second, third = (source.next_request() for _ in range(3))
    assert (first.text, first.output_tokens, first.prompt_tokens) == ("a b", 3, None)
    assert (second.token_ids, second.output_tokens, second.prompt_tokens) == ((20, 21, 22), 9, 3)
    assert third.text == "a b"


def test_file_text_prompts_become_user_messages_on_chat() -> None:
    shape = LoadShape(endpoint="chat", prompt_items=(PromptItem(text="hello there"),))
    request = PromptSource(shape, rng()).next_request()
    assert request.messages == ({"role": "user", "content": "hello there"},)


def write_lines(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_prompt_file_reads_text_token_ids_and_messages(tmp_path: Path) -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    path = write_lines(
        tmp_path,
        json.dumps({"prompt": "tell me", "output_tokens": 5}),
        "",
        json.dumps({"prompt": [1, 2, 3], "max_tokens": 4}),
    )
    items = load_prompt_file(path, "completions")
    assert items == (
        PromptItem(text="tell me", output_tokens=5),
        PromptItem(token_ids=(1, 2, 3), output_tokens=4),
    )
    chat = load_prompt_file(write_lines(tmp_path, json.dumps({"messages": messages})), "chat")
    assert chat[0].messages == tuple(messages)


@pytest.mark.parametrize(
    ("line", "endpoint", "words"),
    [
        ("{not json", "completions", "prompts.jsonl:2: not JSON"),
        ("[1, 2]", "completions", "prompts.jsonl:2: expected a JSON object, found list"),
        ('{"text": "x"}', "completions", 'needs exactly one of "prompt"'),
        ('{"prompt": "x", "messages": []}', "chat", 'needs exactly one of "prompt"'),
        ('{"prompt": ""}', "completions", '"prompt" must be non-empty text or a list of token'),
        ('{"prompt": [1, -2]}', "completions", "list of token ids"),
        ('{"prompt": [1, 2]}', "chat", "a token-id prompt needs endpoint = 'completions'"),
        ('{"messages": [{"role": "user"}]}', "chat", '"messages" must be a non-empty list'),
        (
            '{"messages": [{"role": "user", "content": "x"}]}',
            "completions",
            "set endpoint = 'chat'",
        ),
        ('{"prompt": "x", "output_tokens": 0}', "completions", "output_tokens = 0; expected"),
        ('{"prompt": "x", "output_tokens": true}', "completions", "output_tokens = True"),
    ],
)
def test_bad_prompt_lines_name_the_file_and_line(
    tmp_path: Path, line: str, endpoint: str, words: str
) -> None:
    path = write_lines(tmp_path, '{"prompt": "fine"}', line)
    with pytest.raises(PromptFileError) as caught:
        load_prompt_file(path, endpoint)  # type: ignore[arg-type]
    assert f"{path}:2:" in str(caught.value)
    assert words in str(caught.value)


def test_missing_and_empty_prompt_files_say_so(tmp_path: Path) -> None:
    with pytest.raises(PromptFileError, match="no such prompts file"):
        load_prompt_file(tmp_path / "absent.jsonl", "completions")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(PromptFileError, match="holds no prompts"):
        load_prompt_file(empty, "completions")
