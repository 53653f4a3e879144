"""The two spellings Prometheus may hold an engine's names under, worked by hand."""

from __future__ import annotations

import pytest

from slotop.collectors.prometheus_names import (
    each_spelling,
    names_regex,
    served_name,
    spellings,
)


@pytest.mark.parametrize(
    ("stored", "served"),
    [
        ("sglang_time_to_first_token_seconds_bucket", "sglang:time_to_first_token_seconds_bucket"),
        ("sglang:num_running_reqs", "sglang:num_running_reqs"),
        ("vllm_num_preemptions_total", "vllm:num_preemptions_total"),
        ("vllm:cache_config_info", "vllm:cache_config_info"),
        ("process_start_time_seconds", "process_start_time_seconds"),
        ("slotop_sim_gpu_info", "slotop_sim_gpu_info"),
        ("sglangx_other", "sglangx_other"),
        ("", ""),
    ],
)
def test_a_stored_name_is_read_as_served(stored: str, served: str) -> None:
    assert served_name(stored) == served


def test_a_name_with_a_colon_has_two_spellings_and_one_without_has_one() -> None:
    assert spellings("sglang:token_usage") == ("sglang:token_usage", "sglang_token_usage")
    assert spellings("process_start_time_seconds") == ("process_start_time_seconds",)


def test_each_spelling_is_queried_apart_served_first() -> None:
    assert each_spelling("vllm:x_total", lambda n: f"rate({n}[1m])") == (
        "rate(vllm:x_total[1m]) or rate(vllm_x_total[1m])"
    )


def test_the_regex_matches_both_spellings_once_each() -> None:
    assert names_regex(["sglang:a", "vllm:b", "sglang:a", "up"]) == "sglang[:_]a|vllm[:_]b|up"
