"""Quality check: prompts files, answer parsing, hand-computed token shares and drift, live servers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from slotop.actions.restart.prompts import (
    DEFAULT_PROMPTS,
    QualityError,
    QualityPrompt,
    load_prompts,
    prompts_or_default,
)
from slotop.actions.restart.quality import (
    GreedyOutput,
    GreedyRun,
    TokenKind,
    common_prefix_length,
    compare_greedy_runs,
    compare_outputs,
    completion_request,
    greedy_run_of_replica,
    parse_completion,
    run_greedy,
)
from slotop.actions.restart.quality_report import format_quality_text, quality_to_json
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.server import ServerThread
from slotop.sim.tables import gpu_by_name, model_by_name_or_path
from slotop.sim.types import ServeOptions


def _output(name: str, ids: list[int], logprobs: list[float | None] | None) -> GreedyOutput:
    return GreedyOutput(
        name=name,
        text=" ".join(f"w{i}" for i in ids),
        token_ids=tuple(ids),
        token_strings=tuple(f"w{i}" for i in ids),
        logprobs=tuple(logprobs) if logprobs is not None else None,
        finish_reason="length",
    )


def test_default_prompts_are_varied_and_named_once() -> None:
    names = [p.name for p in DEFAULT_PROMPTS]
    assert len(names) == len(set(names)) >= 6
    assert any(isinstance(p.prompt, tuple) for p in DEFAULT_PROMPTS)
    longest = max(len(p.prompt) for p in DEFAULT_PROMPTS if isinstance(p.prompt, str))
    assert longest > 1000  # the long-context prompt: a few hundred tokens


def test_prompts_file(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        '{"name": "a", "prompt": "hello", "max_tokens": 4}\n\n"plain text"\n{"prompt": [5, 6], "output_tokens": 7}\n'
    )
    prompts = load_prompts(path)
    assert prompts == (
        QualityPrompt("a", "hello", 4),
        QualityPrompt("line-3", "plain text"),
        QualityPrompt("line-4", (5, 6), 7),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"prompt": "ok"}\n{"prompt": "x"', r"p\.jsonl:2: not JSON"),
        ('{"prompt": ""}', r"p\.jsonl:1: \"prompt\" must be"),
        ('{"prompt": [1, -2]}', r"p\.jsonl:1: \"prompt\" must be"),
        ('{"prompt": "x", "max_tokens": 0}', r"p\.jsonl:1: \"max_tokens\""),
        ('{"prompt": "x", "temperature": 1}', r"p\.jsonl:1: unknown keys \['temperature'\]"),
        ("[1, 2]", r"p\.jsonl:1: expected an object"),
        ('{"name": "a", "prompt": "x"}\n{"name": "a", "prompt": "y"}', "used twice"),
        ("\n\n", "holds no prompts"),
    ],
)
def test_prompts_file_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(text)
    with pytest.raises(QualityError, match=message):
        load_prompts(path)


def test_missing_prompts_file(tmp_path: Path) -> None:
    with pytest.raises(QualityError, match="cannot read prompts file"):
        load_prompts(tmp_path / "absent.jsonl")


def test_request_is_greedy_with_logprobs() -> None:
    body = completion_request(QualityPrompt("t", (1, 2), 5), "m", ignore_eos=True)
    assert body["temperature"] == 0 and body["logprobs"] == 1 and body["return_token_ids"]
    assert body["prompt"] == [1, 2] and body["max_tokens"] == 5 and body["ignore_eos"] is True


VLLM_ANSWER = {
    "choices": [
        {
            "index": 0,
            "text": " the cache",
            "logprobs": {
                "text_offset": [0, 4],
                "token_logprobs": [-0.5, -1.25],
                "tokens": [" the", " cache"],
                "top_logprobs": [{" the": -0.5}, {" cache": -1.25}],
            },
            "finish_reason": "length",
            "token_ids": [278, 7090],
        }
    ]
}


def test_parse_a_vllm_answer() -> None:
    output = parse_completion(VLLM_ANSWER, "p")
    assert output.token_ids == (278, 7090)
    assert output.token_strings == (" the", " cache")
    assert output.logprobs == (-0.5, -1.25)
    assert output.finish_reason == "length"


def test_parse_an_answer_without_logprobs() -> None:
    output = parse_completion(
        {"choices": [{"text": " a b", "logprobs": None, "token_ids": None}]}, "p"
    )
    assert (output.token_ids, output.token_strings, output.logprobs) == (None, None, None)
    with pytest.raises(QualityError, match="no choice with text"):
        parse_completion({"error": "x"}, "p")


@pytest.mark.parametrize(
    ("a", "b", "expected"), [([1, 2, 3], [1, 2, 4], 2), ([], [1], 0), ([1, 2], [1, 2, 3], 2)]
)
def test_common_prefix_length(a: list[int], b: list[int], expected: int) -> None:
    assert common_prefix_length(a, b) == expected


def test_one_prompt_by_hand() -> None:
    before = _output("p", [1, 2, 3, 4, 5], [-0.1, -0.2, -0.3, -0.4, -0.5])
    after = _output("p", [1, 2, 9, 4, 5], [-0.2, -0.1, -2.0, -0.4, -0.5])
    result = compare_outputs(before, after, TokenKind.IDS)
    assert (result.prefix_match_tokens, result.matching_positions) == (2, 4)
    assert result.first_divergence == 2 and not result.identical
    # drift only over the identical prefix: (-0.2 - -0.1) + (-0.1 - -0.2) = 0, |..| = 0.2
    assert result.drift_tokens == 2
    assert result.logprob_drift_sum == pytest.approx(0.0)
    assert result.logprob_abs_drift_sum == pytest.approx(0.2)


def test_whole_report_by_hand() -> None:
    before = GreedyRun(
        "m",
        (
            _output("a", [1, 2, 3, 4], [-1.0, -1.0, -1.0, -1.0]),
            _output("b", [5, 6, 7, 8], [-2.0, -2.0, -2.0, -2.0]),
        ),
    )
    after = GreedyRun(
        "m",
        (
            _output("a", [1, 2, 3, 4], [-1.1, -1.1, -1.1, -1.1]),
            _output("b", [5, 0, 7, 8, 9, 9], [-2.0, -3.0, -2.0, -2.0, -1.0, -1.0]),
        ),
    )
    report = compare_greedy_runs(before, after)
    assert report.token_kind is TokenKind.IDS
    assert report.prompts_identical == 1
    assert report.prefix_match_ratio == pytest.approx((4 + 1) / 8)
    assert report.position_match_ratio == pytest.approx((4 + 3) / (4 + 6))
    # drift over a's 4 tokens (−0.1 each) and b's first token (0): −0.4 / 5
    assert report.drift_tokens == 5
    assert report.logprob_drift_mean == pytest.approx(-0.08)
    assert report.logprob_abs_drift_mean == pytest.approx(0.08)
    text = format_quality_text(report)
    assert "identical outputs                      1 of 2" in text
    assert "diverges at token 1" in text
    data = json.loads(json.dumps(quality_to_json(report), allow_nan=False))
    assert data["prompts"][1]["first_divergence"] == 1


def test_without_logprobs_the_drift_is_unavailable_not_zero() -> None:
    before = GreedyRun("m", (_output("a", [1, 2], None),))
    after = GreedyRun("m", (_output("a", [1, 2], None),))
    report = compare_greedy_runs(before, after)
    assert report.logprob_drift_mean is None and report.logprob_abs_drift_mean is None
    assert any("drift unavailable (not 0)" in note for note in report.notes)
    assert "N/A (no log-probs)" in format_quality_text(report)
    assert quality_to_json(report)["logprob_drift_mean"] is None


def test_runs_of_different_prompts_are_refused() -> None:
    with pytest.raises(QualityError, match="different prompts"):
        compare_greedy_runs(
            GreedyRun("m", (_output("a", [1], None),)), GreedyRun("m", (_output("b", [1], None),))
        )


def _mock_client(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.Client:
    return httpx.Client(base_url="http://replica.test", transport=httpx.MockTransport(handler))


def test_run_greedy_through_a_mock_transport() -> None:
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny"}]})
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=VLLM_ANSWER)

    prompts = (QualityPrompt("x", "hi", 2), QualityPrompt("y", (3, 4), 2))
    with _mock_client(handler) as client:
        run = run_greedy(client, prompts)
    assert run.model == "tiny" and [o.name for o in run.outputs] == ["x", "y"]
    assert [body["prompt"] for body in seen] == ["hi", [3, 4]]
    assert all(body["model"] == "tiny" and body["temperature"] == 0 for body in seen)


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (
            httpx.Response(400, json={"message": "logprobs too large"}),
            "HTTP 400.*logprobs too large",
        ),
        (httpx.Response(200, text="<html>"), "did not answer JSON"),
    ],
)
def test_run_greedy_errors_say_what_failed(response: httpx.Response, message: str) -> None:
    with (
        _mock_client(lambda request: response) as client,
        pytest.raises(QualityError, match=message),
    ):
        run_greedy(client, (QualityPrompt("x", "hi"),), model="m")


def test_run_greedy_connection_failure() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with _mock_client(refuse) as client, pytest.raises(QualityError, match="ConnectError"):
        run_greedy(client, (QualityPrompt("x", "hi"),), model="m")


def _sim(api_key: str | None = None) -> ServerThread:
    config = resolve_engine_config(
        model_by_name_or_path("qwen2.5-0.5b"), gpu_by_name("h100-sxm"), max_model_len=4096, seed=3
    )
    return ServerThread(config, ServeOptions("127.0.0.1", 0, ("sim",), api_key, 0.0))


@pytest.fixture
def sim_url() -> Iterator[str]:
    with _sim() as running:
        yield running.url


def test_the_api_key_reaches_the_replica() -> None:
    prompts = (QualityPrompt("x", "hi", 3),)
    with _sim(api_key="sesame") as running:
        with pytest.raises(QualityError, match="HTTP 401"):
            greedy_run_of_replica(running.url, prompts, model="sim")
        run = greedy_run_of_replica(running.url, prompts, api_key="sesame", model="sim")
    assert len(run.outputs[0].text.split()) == 3


def test_against_the_simulated_replica(sim_url: str) -> None:
    """The sim returns no log-probs or token ids: words are compared, drift is unavailable."""
    before = greedy_run_of_replica(sim_url, DEFAULT_PROMPTS[:3])
    after = greedy_run_of_replica(sim_url.removeprefix("http://") + "/v1", DEFAULT_PROMPTS[:3])
    assert before.model == "sim"
    assert all(o.logprobs is None and o.token_ids is None for o in before.outputs)
    report = compare_greedy_runs(before, after)
    assert report.token_kind is TokenKind.WORDS
    assert report.prompts_identical == 3 and report.position_match_ratio == 1.0
    assert report.logprob_drift_mean is None
    assert [p.tokens_before for p in report.prompts] == [p.max_tokens for p in DEFAULT_PROMPTS[:3]]


@pytest.mark.vllm
def test_against_the_real_vllm_replica(vllm_replica: object) -> None:
    """Dummy weights decode greedily the same way twice: ids, log-probs, zero drift."""
    url = vllm_replica.url  # type: ignore[attr-defined]
    with httpx.Client(base_url=url, timeout=120.0) as client:
        before = run_greedy(client, DEFAULT_PROMPTS, ignore_eos=True)
        after = run_greedy(client, DEFAULT_PROMPTS, ignore_eos=True)
    assert all(o.token_ids is not None and o.logprobs is not None for o in before.outputs)
    report = compare_greedy_runs(before, after)
    assert report.token_kind is TokenKind.IDS
    assert report.prompts_identical == len(DEFAULT_PROMPTS)
    # every token has a log-prob; vLLM shortens a prompt's max_tokens to fit max_model_len
    assert report.drift_tokens == sum(len(o.token_ids or ()) for o in before.outputs) > 0
    assert report.logprob_abs_drift_mean == pytest.approx(0.0, abs=1e-4)


def test_prompts_or_default(tmp_path: Path) -> None:
    assert prompts_or_default(None) == DEFAULT_PROMPTS
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "x"}\n')
    assert prompts_or_default(path) == (QualityPrompt("line-1", "x"),)


def test_run_greedy_ignores_eos_by_default_and_refuses_bad_urls() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=VLLM_ANSWER)

    with _mock_client(handler) as client:
        run_greedy(client, (QualityPrompt("x", "hi"),), model="m")
    assert json.loads(seen[0].content)["ignore_eos"] is True
    with pytest.raises(QualityError, match="not an http"):
        greedy_run_of_replica("ftp://replica", (QualityPrompt("x", "hi"),))
