"""Before/after table: hand-computed rows from probe records and real replica snapshots."""

from __future__ import annotations

import json

import pytest

from slotop.actions.restart.compare import (
    Better,
    Change,
    RunSide,
    compare_runs,
    comparison_to_json,
    format_comparison_text,
    format_value,
    judge_change,
    make_row,
)
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.collectors.probe.stats import GoodputTargets, probe_stats
from slotop.collectors.snapshot import Snapshot
from tests.support.paths import CAPTURES

TARGETS = GoodputTargets(ttft_s=0.5, tpot_s=0.05)


def _record(
    request_id: int, ttft_s: float, gap_s: float, tokens: int, error: ErrorClass | None = None
) -> ProbeRecord:
    gaps = tuple(gap_s for _ in range(tokens - 1))
    e2e = ttft_s + sum(gaps)
    return ProbeRecord(
        request_id=request_id,
        step=0,
        sent_at_s=float(request_id),
        done_at_s=request_id + e2e,
        in_flight_at_send=1,
        planned_prompt_tokens=64,
        planned_output_tokens=tokens,
        ttft_s=None if error else ttft_s,
        itl_s=() if error else gaps,
        e2e_s=None if error else e2e,
        chunk_count=0 if error else tokens,
        prompt_tokens=64,
        output_tokens=None if error else tokens,
        finish_reason=None if error else "length",
        error=error,
    )


def _snapshot(name: str) -> Snapshot:
    text = (CAPTURES / name).read_text(encoding="utf-8")
    return snapshot_of_dump(text, where=name, taken_at_s=0.0)


# before: TTFTs 0.1..0.4 s, every gap 0.04 s; after: TTFTs halved, gaps 0.06 s (TPOT over target)
BEFORE_RECORDS = [_record(i, 0.1 * (i + 1), 0.04, 11) for i in range(4)]
AFTER_RECORDS = [_record(i, 0.05 * (i + 1), 0.06, 11) for i in range(4)] + [
    _record(4, 0.0, 0.0, 1, error=ErrorClass.HTTP_STATUS)
]


@pytest.fixture
def comparison_sides() -> tuple[RunSide, RunSide]:
    before = RunSide(
        "before",
        (("kv_cache_dtype", "auto"),),
        probe_stats(BEFORE_RECORDS, 0.0, 10.0, (50.0, 99.0), TARGETS),
        _snapshot("vllm-0.32-cpu-idle.txt"),
    )
    after = RunSide(
        "after",
        (("kv_cache_dtype", "fp8"),),
        probe_stats(AFTER_RECORDS, 0.0, 10.0, (50.0, 99.0), TARGETS),
        _snapshot("vllm-0.32-cpu-fp8-idle.txt"),
    )
    return before, after


@pytest.mark.parametrize(
    ("before", "after", "better", "expected"),
    [
        (1.0, 0.5, Better.LOWER, Change.BETTER),
        (1.0, 0.5, Better.HIGHER, Change.WORSE),
        (1.0, 1.01, Better.LOWER, Change.SAME),
        (1.0, 1.03, Better.LOWER, Change.WORSE),
        (0.0, 0.0, Better.LOWER, Change.SAME),
        (0.0, 3.0, Better.LOWER, Change.WORSE),
        (None, 1.0, Better.LOWER, None),
    ],
)
def test_judge(
    before: float | None, after: float | None, better: Better, expected: Change | None
) -> None:
    assert judge_change(before, after, better) is expected


def test_row_delta_and_ratio() -> None:
    row = make_row("x", "x", "s", Better.LOWER, 0.2, 0.1)
    assert (row.delta, row.ratio) == (pytest.approx(-0.1), pytest.approx(0.5))
    zero = make_row("x", "x", "count", Better.LOWER, 0.0, 4.0)
    assert (zero.delta, zero.ratio) == (4.0, None)
    missing = make_row("x", "x", "count", Better.LOWER, None, 4.0)
    assert (missing.delta, missing.ratio, missing.verdict) == (None, None, None)


def test_client_rows_by_hand(comparison_sides: tuple[RunSide, RunSide]) -> None:
    table = compare_runs(*comparison_sides)
    ttft50 = table.row("ttft_p50_s")
    assert ttft50 is not None
    # numpy linear percentile of 0.1, 0.2, 0.3, 0.4 is 0.25; halved after
    assert (ttft50.before, ttft50.after) == (pytest.approx(0.25), pytest.approx(0.125))
    assert ttft50.verdict is Change.BETTER
    itl99 = table.row("itl_p99_s")
    assert itl99 is not None and itl99.verdict is Change.WORSE
    assert itl99.ratio == pytest.approx(1.5)
    good = table.row("goodput_ratio")
    # before: all 4 within TTFT 0.5 s and TPOT 0.05 s; after: TPOT 0.06 s fails all, 1 error
    assert good is not None and (good.before, good.after) == (1.0, 0.0)
    tokens = table.row("output_tokens_per_s")
    assert tokens is not None and tokens.before == pytest.approx(44 / 10)
    failed = table.row("requests_failed")
    assert failed is not None and (failed.before, failed.after, failed.verdict) == (
        0.0,
        1.0,
        Change.WORSE,
    )


def test_kv_rows_from_real_snapshots(comparison_sides: tuple[RunSide, RunSide]) -> None:
    table = compare_runs(*comparison_sides)
    blocks = table.row("kv_blocks_total")
    assert blocks is not None
    assert (blocks.before, blocks.after, blocks.ratio) == (256.0, 1024.0, 4.0)
    assert blocks.verdict is Change.BETTER
    seqs = table.row("kv_max_concurrency")
    assert seqs is not None and (seqs.before, seqs.after) == (32.0, 128.0)


def test_preemptions_from_a_real_capture() -> None:
    quiet = RunSide("before", snapshot=_snapshot("vllm-0.32-cpu-load.txt"))
    busy = RunSide("after", snapshot=_snapshot("vllm-0.32-cpu-preempt.txt"))
    row = compare_runs(quiet, busy).row("preemptions")
    assert row is not None and row.before == 0.0
    assert row.after is not None and row.after > 0
    assert row.verdict is Change.WORSE


def test_missing_sides_are_none_and_noted() -> None:
    table = compare_runs(RunSide("before"), RunSide("after"))
    assert all(row.before is None and row.verdict is None for row in table.rows)
    assert any("client-side rows are N/A" in note for note in table.notes)
    assert "N/A" in format_comparison_text(table)


def test_few_requests_are_noted(comparison_sides: tuple[RunSide, RunSide]) -> None:
    table = compare_runs(*comparison_sides)
    assert any("few requests (4 and 4)" in note for note in table.notes)


def test_text_rendering(comparison_sides: tuple[RunSide, RunSide]) -> None:
    text = format_comparison_text(compare_runs(*comparison_sides))
    assert "before: before kv_cache_dtype=auto" in text
    line = next(line for line in text.splitlines() if line.strip().startswith("TTFT p50 "))
    assert "250.0 ms" in line and "125.0 ms" in line and "−125.0 ms" in line
    assert "×0.50" in line and line.endswith("better")
    blocks = next(line for line in text.splitlines() if "KV blocks" in line)
    assert "1,024" in blocks and "×4.00" in blocks


def test_json_rendering(comparison_sides: tuple[RunSide, RunSide]) -> None:
    data = comparison_to_json(compare_runs(*comparison_sides))
    again = json.loads(json.dumps(data, allow_nan=False))
    assert again["after"]["flags"] == {"kv_cache_dtype": "fp8"}
    rows = {row["key"]: row for row in again["rows"]}
    assert rows["kv_blocks_total"]["verdict"] == "better"
    assert rows["ttft_p50_s"]["better"] == "lower"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.1234, "s", "123.4 ms"),
        (0.5, "ratio", "50.0%"),
        (1024.0, "blocks", "1,024"),
        (3.14159, "req/s", "3.14 req/s"),
        (812.3, "tok/s", "812.3 tok/s"),
        (None, "s", "N/A"),
    ],
)
def test_format_value(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


def test_text_signs_and_units_read_alike(comparison_sides: tuple[RunSide, RunSide]) -> None:
    text = format_comparison_text(compare_runs(*comparison_sides))
    share = next(line for line in text.splitlines() if "goodput (share)" in line)
    assert "−100.0 pt" in share
    seqs = next(line for line in text.splitlines() if "seqs at max context" in line)
    assert "32.0" in seqs and "seqs " not in seqs.split("context", 1)[1]
    labels = [row.label for row in compare_runs(*comparison_sides).rows]
    assert len(labels) == len(set(labels))
