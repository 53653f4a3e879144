"""Verifying SGLang's dials from what it says of itself at /get_server_info, on a recorded answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.verify import (
    SGLANG_SERVER_KEYS,
    read_verification,
    verify_dials,
)
from tests.support.http_answers import Answer, Request, http_answers
from tests.support.paths import CAPTURES

SERVER_INFO = json.loads((CAPTURES / "sglang-0.5.23-cpu-server-info.json").read_text("utf-8"))
"""A real SGLang 0.5.23 CPU server's answer, started with --max-running-requests 4,
--max-total-tokens 4096 and SGLang's own --chunked-prefill-size (4096 on it)."""

RECORDED = {key: SERVER_INFO[key] for key in SGLANG_SERVER_KEYS}


def _sglang(
    kv_cache_dtype: str = "auto", seqs: int | None = None, tokens: int | None = None
) -> Dials:
    return Dials(kv_cache_dtype, seqs, tokens, engine="sglang")


def _verify(expected: Dials, info: dict[str, Any] | None = None) -> Any:
    return verify_dials(
        expected, None, ("tiny-llama",), "", generated=True, server_info=RECORDED | (info or {})
    )


def test_the_recorded_server_verifies_the_dials_it_was_started_with() -> None:
    verification = _verify(_sglang("auto", 4))
    assert verification.ok, verification.lines()
    said = {c.name: (c.expected, c.reported, c.source) for c in verification.checks}
    assert said == {
        "kv_cache_dtype": ("auto", "auto", "/get_server_info"),
        "max_num_seqs": ("4", "4", "/get_server_info"),
        # left to SGLang: it matches, and the source says what SGLang chose
        "max_num_batched_tokens": (
            "default",
            "default",
            "/get_server_info (chunked_prefill_size 4096, SGLang's own choice)",
        ),
    }
    assert verification.kv_tokens == 4096
    assert "KV cache: 4,096 tokens (/get_server_info's max_total_num_tokens, dtype auto)" in (
        verification.lines()
    )


@pytest.mark.parametrize(
    ("expected", "problem"),
    [
        (_sglang("auto", 2), "max_num_seqs: started with 2, but /get_server_info says 4"),
        (
            _sglang("bf16", 4),
            "kv_cache_dtype: started with bf16, but /get_server_info says auto",
        ),
        (
            _sglang("auto", 4, 512),
            "max_num_batched_tokens: started with 512, but /get_server_info says 4096",
        ),
    ],
)
def test_a_dial_the_server_reports_otherwise_fails_the_restart(
    expected: Dials, problem: str
) -> None:
    verification = _verify(expected)
    assert verification.problems == (problem,)
    assert not verification.ok


def test_a_dial_the_server_leaves_unset_reads_as_its_default() -> None:
    verification = _verify(_sglang("auto", None), {"max_running_requests": None})
    check = next(c for c in verification.checks if c.name == "max_num_seqs")
    assert (check.reported, check.source, check.ok) == ("default", "/get_server_info", True)
    asked = _verify(_sglang("auto", 8), {"max_running_requests": None})
    assert asked.problems == ("max_num_seqs: started with 8, but /get_server_info says default",)


def test_a_key_the_server_does_not_say_is_unverified_not_wrong() -> None:
    verification = verify_dials(
        _sglang("auto", 2), None, ("tiny-llama",), "", server_info={"kv_cache_dtype": "auto"}
    )
    assert verification.ok and verification.unverified == (
        "max_num_seqs",
        "max_num_batched_tokens",
    )
    assert verification.kv_tokens is None


def test_vllms_start_up_log_is_not_read_for_sglang() -> None:
    log = "INFO non-default args: {'max_num_seqs': 2}"
    verification = verify_dials(_sglang("auto", 4), None, ("m",), log, server_info=RECORDED)
    assert verification.ok  # the server's 4, not the log's 2


def _captured_sglang(request: Request) -> Answer:
    if request.path == "/metrics":
        return Answer(200, (CAPTURES / "sglang-0.5.23-cpu-idle.txt").read_bytes())
    if request.path == "/get_server_info":
        return Answer(200, (CAPTURES / "sglang-0.5.23-cpu-server-info.json").read_bytes())
    if request.path == "/v1/models":
        return Answer(200, (CAPTURES / "sglang-0.5.23-cpu-models.json").read_bytes())
    if request.path == "/v1/completions":
        return Answer(200, b'{"choices": [{"index": 0, "text": "a"}]}')
    return Answer(404, b'{"detail":"Not Found"}')


def test_read_verification_asks_sglang_at_get_server_info() -> None:
    with http_answers(_captured_sglang) as server:
        verification = read_verification(server.url, _sglang("auto", 4), "", api_key=None)
        asked = [r.path for r in server.requests]
    assert verification.ok, verification.lines()
    assert verification.served_models == ("tiny-llama",) and verification.generated
    assert "/get_server_info" in asked
    with http_answers(_captured_sglang) as server:
        vllm = read_verification(server.url, Dials("auto", 4), "", api_key=None)
        assert "/get_server_info" not in [r.path for r in server.requests]
    assert vllm.unverified == ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens")


def test_read_verification_says_when_get_server_info_does_not_answer() -> None:
    def without_info(request: Request) -> Answer:
        if request.path == "/get_server_info":
            return Answer(500, b"boom")
        return _captured_sglang(request)

    with http_answers(without_info) as server:
        verification = read_verification(server.url, _sglang("auto", 4), "", api_key=None)
    assert not verification.ok
    assert any(p.startswith("cannot read /get_server_info") for p in verification.problems)
