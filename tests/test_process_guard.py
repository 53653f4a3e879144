"""The guard that keeps the quick loop free of processes: starts are noted against the test
running, and an unmarked test that starts one is told which mark to add."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import process_guard


def test_a_start_is_noted_against_the_test_running_then() -> None:
    process_guard.begin("inner")
    try:
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    finally:
        started = process_guard.end("inner")
    assert started == [Path(sys.executable).name]


def test_a_multiprocessing_start_is_noted_too() -> None:
    process_guard.begin("inner")
    try:
        child = multiprocessing.get_context("fork").Process(target=int, name="worker")
        child.start()
        child.join(10)
    finally:
        started = process_guard.end("inner")
    assert started == ["multiprocessing (worker)"]


def test_python_dash_m_is_named_by_its_module() -> None:
    assert process_guard._program([sys.executable, "-m", "slotop.sim", "--port", "1"]) == (
        f"{Path(sys.executable).name} -m slotop.sim"
    )
    assert process_guard._program("tmux -L x") == "tmux"


def test_an_unmarked_test_that_started_one_fails_with_the_mark_to_add(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(process_guard.AUDIT_ENV, raising=False)
    reason = process_guard.verdict("t", {"anyio"}, ["tmux"])
    assert reason is not None and "tmux" in reason and "@pytest.mark.slow" in reason
    assert process_guard.verdict("t", {"slow"}, ["tmux"]) is None
    assert process_guard.verdict("t", {"vllm"}, ["tmux"]) is None
    assert process_guard.verdict("t", set(), []) is None


def test_an_audit_writes_each_test_and_fails_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit = tmp_path / "audit.tsv"
    monkeypatch.setenv(process_guard.AUDIT_ENV, str(audit))
    assert process_guard.verdict("a::t", set(), ["tmux", "tmux"]) is None
    assert process_guard.verdict("a::u", {"slow"}, ["git"]) is None
    assert audit.read_text().splitlines() == ["a::t\t0\ttmux", "a::u\t1\tgit"]


def test_matplotlibs_one_font_listing_a_machine_is_no_tests_start() -> None:
    process_guard.begin("inner")
    try:
        process_guard._note("fc-list")  # matplotlib building its font cache on a fresh machine
        process_guard._note("tmux")
    finally:
        started = process_guard.end("inner")
    assert started == ["tmux"]
