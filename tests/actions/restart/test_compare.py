"""Before/after table: hand-computed rows from probe records and real replica snapshots, each
delta judged against a noise worked by hand."""

from __future__ import annotations

import dataclasses
import json

import pytest

from slotop.actions.restart.compare import (
    Better,
    Change,
    RunSide,
    compare_runs,
    judge_change,
)
from slotop.actions.restart.noise import Noise, NoiseMethod, SideSpread
from slotop.actions.restart.table import (
    comparison_to_json,
    format_comparison_text,
    format_value,
)
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.collectors.probe.stats import ProbeStats, probe_stats
from slotop.collectors.snapshot import Snapshot
from slotop.slo import GoodputTargets
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


def _snapshot(name: str, span_s: float | None = None) -> Snapshot:
    text = (CAPTURES / name).read_text(encoding="utf-8")
    snapshot = snapshot_of_dump(text, where=name, taken_at_s=0.0)
    if span_s is None:
        return snapshot
    return dataclasses.replace(
        snapshot, window=dataclasses.replace(snapshot.window, covered_s=span_s)
    )


# before: TTFTs 0.1..0.4 s, every gap 0.04 s; after: TTFTs halved, gaps 0.06 s (TPOT over target)
BEFORE_RECORDS = [_record(i, 0.1 * (i + 1), 0.04, 11) for i in range(4)]
AFTER_RECORDS = [_record(i, 0.05 * (i + 1), 0.06, 11) for i in range(4)] + [
    _record(4, 0.0, 0.0, 1, error=ErrorClass.HTTP_STATUS)
]

# Standard errors set by hand, from ten batches a side (t for 9 degrees of freedom: 2.262): TTFT
# 10 ms a side (noise 2.262·√2·10 ms = 32.0 ms); ITL 30 ms a side (noise 96.0 ms, wider than the
# 20 ms ITL moved); tokens/s 0.5 a side (noise 1.60).
TIGHT = SideSpread(
    ttft_s=((50.0, 0.01), (99.0, 0.01)),
    itl_s=((50.0, 0.03), (99.0, 0.03)),
    goodput_ratio=0.1,
    output_tokens_per_s=0.5,
    request_rate_rps=0.05,
    goodput_rps=0.05,
    batches=10,
    batch_s=1.0,
)


@pytest.fixture
def comparison_sides() -> tuple[RunSide, RunSide]:
    before = RunSide(
        "before",
        (("kv_cache_dtype", "auto"),),
        probe_stats(BEFORE_RECORDS, 0.0, 10.0, (50.0, 99.0), TARGETS),
        _snapshot("vllm-0.32-cpu-idle.txt"),
        TIGHT,
    )
    after = RunSide(
        "after",
        (("kv_cache_dtype", "fp8"),),
        probe_stats(AFTER_RECORDS, 0.0, 10.0, (50.0, 99.0), TARGETS),
        _snapshot("vllm-0.32-cpu-fp8-idle.txt"),
        TIGHT,
    )
    return before, after


BOOT = NoiseMethod.BOOTSTRAP


@pytest.mark.parametrize(
    ("before", "after", "better", "noise", "expected"),
    [
        (1.0, 0.5, Better.LOWER, Noise(BOOT, 0.2), Change.BETTER),
        (1.0, 0.5, Better.HIGHER, Noise(BOOT, 0.2), Change.WORSE),
        (1.0, 0.5, Better.LOWER, Noise(BOOT, 0.6), Change.WITHIN_NOISE),
        (1.0, 1.5, Better.LOWER, Noise(BOOT, 0.5), Change.WITHIN_NOISE),  # not strictly beyond
        (1.0, 1.5, Better.LOWER, Noise(BOOT), Change.NOISE_UNKNOWN),
        (256.0, 256.0, Better.HIGHER, Noise(NoiseMethod.EXACT), Change.SAME),
        (256.0, 255.0, Better.HIGHER, Noise(NoiseMethod.EXACT), Change.WORSE),
        (0.0, 6.0, Better.LOWER, Noise(NoiseMethod.COUNTS, p_value=0.03), Change.WORSE),
        (0.0, 5.0, Better.LOWER, Noise(NoiseMethod.COUNTS, p_value=0.06), Change.WITHIN_NOISE),
        (None, 1.0, Better.LOWER, Noise(BOOT, 0.1), None),
    ],
)
def test_judge(
    before: float | None, after: float | None, better: Better, noise: Noise, expected: Change
) -> None:
    assert judge_change(before, after, better, noise) is expected


def test_a_count_goes_the_way_its_rate_went() -> None:
    # 10 in 100 s, then 10 in 10 s: the count stayed, the rate rose tenfold
    noise = Noise(NoiseMethod.COUNTS, p_value=1e-6)
    assert judge_change(10.0, 10.0, Better.LOWER, noise, direction=0.9) is Change.WORSE


def test_client_rows_by_hand(comparison_sides: tuple[RunSide, RunSide]) -> None:
    table = compare_runs(*comparison_sides)
    ttft50 = table.row("ttft_p50_s")
    assert ttft50 is not None
    # numpy linear percentile of 0.1, 0.2, 0.3, 0.4 is 0.25; halved after: −125 ms, noise 32.0 ms
    assert (ttft50.before, ttft50.after) == (pytest.approx(0.25), pytest.approx(0.125))
    assert ttft50.noise.half_width == pytest.approx(2.262 * 2**0.5 * 0.01)
    assert ttft50.verdict is Change.BETTER
    itl99 = table.row("itl_p99_s")
    assert itl99 is not None and itl99.ratio == pytest.approx(1.5)
    assert itl99.verdict is Change.WITHIN_NOISE  # +20 ms against ±96.0 ms
    good = table.row("goodput_ratio")
    # before: all 4 within TTFT 0.5 s and TPOT 0.05 s; after: TPOT 0.06 s fails all, 1 error;
    # −100 pt against ±2.262·√2·10 pt
    assert good is not None and (good.before, good.after) == (1.0, 0.0)
    assert good.verdict is Change.WORSE
    tokens = table.row("output_tokens_per_s")
    assert tokens is not None and tokens.before == pytest.approx(44 / 10)
    assert tokens.verdict is Change.WITHIN_NOISE  # 4.4 → 4.0 against ±1.60
    failed = table.row("requests_failed")
    # 0 then 1 in equal spans: p = 2·(1/2)¹ = 1
    assert failed is not None and (failed.before, failed.after) == (0.0, 1.0)
    assert failed.noise.p_value == pytest.approx(1.0)
    assert failed.verdict is Change.WITHIN_NOISE


def test_a_side_without_a_spread_has_no_noise(comparison_sides: tuple[RunSide, RunSide]) -> None:
    before, after = comparison_sides
    table = compare_runs(before, dataclasses.replace(after, spread=None))
    row = table.row("ttft_p99_s")
    assert row is not None and row.verdict is Change.NOISE_UNKNOWN
    assert "noise unknown" in format_comparison_text(table)
    assert "a side has no requests to estimate it from" in format_comparison_text(table)


def test_a_side_too_short_to_cut_or_too_thin_for_a_percentile_says_why(
    comparison_sides: tuple[RunSide, RunSide],
) -> None:
    before, after = comparison_sides
    short = dataclasses.replace(after, spread=SideSpread())
    table = compare_runs(before, short)
    assert "shorter than 3 batches" in format_comparison_text(table)
    thin = dataclasses.replace(after, spread=dataclasses.replace(TIGHT, thin=("ttft p99",)))
    table = compare_runs(before, thin)
    row = table.row("ttft_p99_s")
    assert row is not None and row.verdict is Change.NOISE_UNKNOWN
    assert row.noise.unknown == "p99 needs about 200 requests a side"
    other = table.row("ttft_p50_s")
    assert other is not None and other.verdict is Change.BETTER


def test_rows_at_the_slo_percentiles() -> None:
    stats = probe_stats(BEFORE_RECORDS, 0.0, 10.0, (50.0, 90.0, 95.0), TARGETS)
    side = RunSide("x", stats=stats)
    keys = [row.key for row in compare_runs(side, side, slo_percentiles=(95.0, 90.0)).rows]
    assert keys[:4] == ["ttft_p50_s", "ttft_p95_s", "itl_p50_s", "itl_p90_s"]
    keys = [row.key for row in compare_runs(side, side, slo_percentiles=(50.0, 50.0)).rows]
    assert keys[:2] == ["ttft_p50_s", "itl_p50_s"]


def test_kv_rows_from_real_snapshots_are_exact(comparison_sides: tuple[RunSide, RunSide]) -> None:
    table = compare_runs(*comparison_sides)
    blocks = table.row("kv_blocks_total")
    assert blocks is not None
    assert (blocks.before, blocks.after, blocks.ratio) == (256.0, 1024.0, 4.0)
    assert blocks.noise.method is NoiseMethod.EXACT and blocks.verdict is Change.BETTER
    seqs = table.row("kv_max_concurrency")
    assert seqs is not None and (seqs.before, seqs.after) == (32.0, 128.0)
    same = compare_runs(comparison_sides[0], comparison_sides[0]).row("kv_blocks_total")
    assert same is not None and same.verdict is Change.SAME


def test_preemptions_from_a_real_capture_are_counts() -> None:
    # the capture holds 5 preemptions; none before. In equal spans p = 2·(1/2)⁵ = 0.0625: within
    # noise. Before over three times the span: the after share is 1/4, P(5 of 5) = 0.25⁵ alone.
    quiet = RunSide("before", snapshot=_snapshot("vllm-0.32-cpu-load.txt", 30.0))
    busy = RunSide("after", snapshot=_snapshot("vllm-0.32-cpu-preempt.txt", 30.0))
    row = compare_runs(quiet, busy).row("preemptions")
    assert row is not None and (row.before, row.after) == (0.0, 5.0)
    assert row.noise.p_value == pytest.approx(0.0625)
    assert row.verdict is Change.WITHIN_NOISE
    longer = RunSide("before", snapshot=_snapshot("vllm-0.32-cpu-load.txt", 90.0))
    row = compare_runs(longer, busy).row("preemptions")
    assert row is not None and row.noise.p_value == pytest.approx(0.25**5)
    assert row.verdict is Change.WORSE


def test_an_sglang_replica_s_rows_say_its_words() -> None:
    # SGLang's cache is 4,096 pages of one token (the KV tokens row's count, said as token
    # slots), and it retracts where vLLM preempts; the rows keep their keys.
    before = RunSide("before", snapshot=_snapshot("sglang-0.5.23-cpu-idle.txt", 30.0))
    after = RunSide("after", snapshot=_snapshot("sglang-0.5.23-cpu-load.txt", 30.0))
    table = compare_runs(before, after)
    shown = {row.key: (row.label, row.unit, row.before) for row in table.rows}
    assert shown["kv_blocks_total"] == ("KV token slots", "tokens", 4096.0)
    assert shown["kv_size_tokens"] == ("KV tokens", "tokens", 4096.0)
    assert shown["preemptions"] == ("retractions", "count", 0.0)
    assert shown["preemptions_per_s"][:2] == ("retraction rate", "/s")
    text = format_comparison_text(table)
    assert "KV blocks" not in text and "preempt" not in text
    lacking = compare_runs(before, dataclasses.replace(after, snapshot=None))
    assert "no replica snapshot after: KV and retraction rows are N/A" in lacking.notes


def test_missing_sides_are_none_and_noted() -> None:
    table = compare_runs(RunSide("before"), RunSide("after"))
    assert all(row.before is None and row.verdict is None for row in table.rows)
    assert any("client-side rows are N/A" in note for note in table.notes)
    assert "N/A" in format_comparison_text(table)
    assert "no probe statistics on either side: client-side rows are N/A" in table.notes
    assert "no replica snapshot on either side: KV and preemption rows are N/A" in table.notes


def test_a_note_names_the_side_that_lacks_what_it_says(
    comparison_sides: tuple[RunSide, RunSide],
) -> None:
    before, after = comparison_sides
    table = compare_runs(dataclasses.replace(before, stats=None), after)
    assert "no probe statistics before: client-side rows are N/A" in table.notes
    table = compare_runs(before, dataclasses.replace(after, snapshot=None))
    assert "no replica snapshot after: KV and preemption rows are N/A" in table.notes


def test_few_requests_are_noted(comparison_sides: tuple[RunSide, RunSide]) -> None:
    table = compare_runs(*comparison_sides, min_requests=4)
    assert not any("few requests" in note for note in table.notes)
    table = compare_runs(*comparison_sides, min_requests=5)
    assert any("few requests (4 and 4, under 5)" in note for note in table.notes)


def test_text_rendering(comparison_sides: tuple[RunSide, RunSide]) -> None:
    text = format_comparison_text(compare_runs(*comparison_sides))
    assert "before: before kv_cache_dtype=auto" in text
    line = next(line for line in text.splitlines() if line.strip().startswith("TTFT p50 "))
    assert "250.0 ms" in line and "125.0 ms" in line and "−125.0 ms" in line
    assert "±32.0 " in line and "×0.50" in line and line.endswith("better")
    itl = next(line for line in text.splitlines() if line.strip().startswith("ITL p99 "))
    assert "±96.0 " in itl and itl.endswith("within noise")
    blocks = next(line for line in text.splitlines() if "KV blocks" in line)
    assert "1,024" in blocks and "×4.00" in blocks and "exact" in blocks
    failed = next(line for line in text.splitlines() if "failed requests" in line)
    assert "p 1.00" in failed
    assert "beyond the run-to-run noise" in text


def test_json_rendering(comparison_sides: tuple[RunSide, RunSide]) -> None:
    data = comparison_to_json(compare_runs(*comparison_sides))
    again = json.loads(json.dumps(data, allow_nan=False))
    assert again["after"]["flags"] == {"kv_cache_dtype": "fp8"}
    rows = {row["key"]: row for row in again["rows"]}
    assert rows["kv_blocks_total"]["verdict"] == "better"
    assert rows["kv_blocks_total"]["noise"]["method"] == "exact"
    assert rows["itl_p99_s"]["verdict"] == "within noise"
    assert rows["ttft_p50_s"]["noise"]["half_width"] == pytest.approx(0.0320, abs=1e-4)
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
    assert "−100.0 pt" in share and "±32.0 " in share
    seqs = next(line for line in text.splitlines() if "seqs at max context" in line)
    assert "32.0" in seqs and "seqs " not in seqs.split("context", 1)[1]
    labels = [row.label for row in compare_runs(*comparison_sides).rows]
    assert len(labels) == len(set(labels))


def test_replica_numbers_over_a_longer_span_say_so_and_are_not_held_to_the_probes() -> None:
    # the probe saw 4.4 tok/s over 10 s; the snapshot's window covers 30 s (the dashboard's
    # short window reaching past a short side): noted, and its token rate not compared
    side = RunSide(
        "restarted",
        stats=probe_stats(BEFORE_RECORDS, 0.0, 10.0, (50.0, 99.0), TARGETS),
        snapshot=_snapshot("vllm-0.32-cpu-load.txt", 30.0),
    )
    notes = compare_runs(side, side).notes
    assert (
        "restarted: the replica's rates and counts cover its last 30 s, more than the side's 10 s"
        in notes
    )
    assert not any("tok/s" in note for note in notes)


def test_a_delta_that_rounds_to_zero_has_no_minus() -> None:
    before = RunSide("a", stats=probe_stats(BEFORE_RECORDS, 0.0, 10.0, (50.0, 99.0), TARGETS))
    nudged = [dataclasses.replace(r, ttft_s=(r.ttft_s or 0) - 1e-6) for r in BEFORE_RECORDS]
    after = RunSide("b", stats=probe_stats(nudged, 0.0, 10.0, (50.0, 99.0), TARGETS))
    line = next(
        line
        for line in format_comparison_text(compare_runs(before, after)).splitlines()
        if line.strip().startswith("TTFT p50")
    )
    assert "+0.0 ms" in line and "−" not in line


def test_a_change_under_one_percent_is_within_noise_however_steady_the_sides() -> None:
    # ITL p50 6.8066 ms before, 6.8193 ms after (two processes of the simulated replica on the
    # same dials), errors of 3 µs a side from ten batches: the band 2.262·√2·3 µs = 9.6 µs would
    # call +12.7 µs worse; the floor, 1% of 6.8066 ms = 68.1 µs, calls it within noise.
    quiet = SideSpread(itl_s=((50.0, 3e-6),), batches=10, batch_s=1.0)
    before, after = (
        RunSide(label, stats=_with_itl_p50(stats_value), spread=quiet)
        for label, stats_value in (("before", 0.0068066), ("after", 0.0068193))
    )
    row = compare_runs(before, after, slo_percentiles=(50.0, 50.0)).row("itl_p50_s")
    assert row is not None and row.noise.half_width == pytest.approx(0.01 * 0.0068066)
    assert row.verdict is Change.WITHIN_NOISE
    wider = compare_runs(
        before,
        dataclasses.replace(after, stats=_with_itl_p50(0.0070)),
        slo_percentiles=(50.0, 50.0),
    ).row("itl_p50_s")
    assert wider is not None and wider.verdict is Change.WORSE  # +193 µs: beyond the floor


def _with_itl_p50(value_s: float) -> ProbeStats:
    records = [_record(i, 0.1, value_s, 11) for i in range(4)]
    return probe_stats(records, 0.0, 10.0, (50.0,), TARGETS)
