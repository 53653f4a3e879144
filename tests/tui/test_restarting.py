"""Dial changes typed by the operator become dials, and plans say what they change."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slotop.actions.errors import ActionError
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.restart.apply import RestartRefusedError
from slotop.tui.restarting import RestartAccess, plan_dial_change, with_dial
from tests.support.tui_fakes import capture_snapshot


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("kv_cache_dtype", "fp8", Dials("fp8", 8, None)),
        ("max_num_seqs", "32", Dials("auto", 32, None)),
        ("max_num_seqs", "0", Dials("auto", None, None)),
        ("max_num_batched_tokens", "2048", Dials("auto", 8, 2048)),
    ],
)
def test_with_dial_turns_one_dial(name: str, text: str, expected: Dials) -> None:
    assert with_dial(Dials("auto", 8, None), name, text) == expected


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("kv_cache_dtype", "int4", "choose one of"),
        ("max_num_seqs", "many", "expected a whole number"),
        ("max_num_seqs", "-3", "0 (the default) or more"),
        ("block_size", "32", "not a dial"),
    ],
)
def test_with_dial_refuses_what_it_cannot_use(name: str, text: str, words: str) -> None:
    with pytest.raises(ActionError, match=re.escape(words)):
        with_dial(Dials(), name, text)


class _Target:
    url = "http://127.0.0.1:8000"
    dials = Dials("auto", 16, None)
    last_downtime_s = 2.5


def _access() -> RestartAccess:
    spec = LaunchSpec(url="http://127.0.0.1:8000", command=("true",), state_path=Path("s.json"))
    return RestartAccess(_Target(), spec, "managed")  # type: ignore[arg-type]


def test_a_kv_dtype_plan_names_the_change_its_capacity_and_the_last_downtime() -> None:
    plan = plan_dial_change(_access(), "kv_cache_dtype", "fp8", capture_snapshot().kv, None)
    words = "\n".join(plan.lines())
    assert "kv_cache_dtype: auto → fp8" in words
    assert "×2 capacity" in words
    assert "about 2.5 s" in words


def test_a_plan_that_changes_nothing_is_refused() -> None:
    with pytest.raises(RestartRefusedError, match="nothing to restart"):
        plan_dial_change(_access(), "max_num_seqs", "16", None, None)
