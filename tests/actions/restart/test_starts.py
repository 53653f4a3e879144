"""The replica's start-to-start spread: its estimate worked by hand, how it widens a band, and
where it is kept."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from slotop.actions.replica.spec import (
    Dials,
    LaunchError,
    ManagedState,
    read_restart,
    write_restart,
    write_state,
)
from slotop.actions.restart.compare import Change, RunSide, compare_runs, measured_levels
from slotop.actions.restart.noise import SideSpread
from slotop.actions.restart.starts import (
    StartSpread,
    between_starts,
    estimate_start_spread,
    keep_start_spread,
    kept_start_spread,
)
from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.stats import ProbeStats, probe_stats
from slotop.slo import GoodputTargets

TARGETS = GoodputTargets(ttft_s=0.5, tpot_s=0.05)


def test_the_spread_between_starts_is_what_their_levels_vary_beyond_their_sampling() -> None:
    # 10, 12, 14: variance 4; each start's own error 1 (variance 1): 4 − 1 = 3 between starts
    assert between_starts([10.0, 12.0, 14.0], [1.0, 1.0, 1.0]) == pytest.approx(math.sqrt(3))
    # levels that vary less than their sampling says they would: no spread between starts
    assert between_starts([10.0, 10.5, 11.0], [1.0, 1.0, 1.0]) == 0.0
    with pytest.raises(ValueError, match="two starts"):
        between_starts([10.0], [1.0])


def test_an_estimate_keeps_each_row_relative_and_drops_rows_a_start_cannot_say() -> None:
    starts = [
        {"ttft_p50_s": (0.10, 0.01), "itl_p99_s": (0.5, None)},
        {"ttft_p50_s": (0.12, 0.01), "itl_p99_s": (0.6, 0.1)},
        {"ttft_p50_s": (0.14, 0.01), "itl_p99_s": (0.4, 0.1)},
    ]
    spread = estimate_start_spread(starts, concurrency=4, flags=("--max-num-seqs=8",), at_unix_s=1)
    # √(0.02² − 0.01²) over the mean 0.12
    assert spread.relative == {"ttft_p50_s": pytest.approx(math.sqrt(3e-4) / 0.12)}
    assert spread.starts == 3 and spread.levels[1] == {"ttft_p50_s": 0.12, "itl_p99_s": 0.6}
    # its part of a band: t(2) = 4.303 times the spread of each side's level, in quadrature
    expected = 4.303 * spread.relative["ttft_p50_s"] * math.hypot(0.1, 0.2)
    assert spread.half_width("ttft_p50_s", 0.1, 0.2) == pytest.approx(expected, rel=1e-3)
    assert spread.half_width("itl_p99_s", 0.5, 0.5) is None
    with pytest.raises(ValueError, match="3 starts or more"):
        estimate_start_spread(starts[:2])


def _record(request_id: int, ttft_s: float) -> ProbeRecord:
    gaps = tuple(0.01 for _ in range(9))
    return ProbeRecord(
        request_id=request_id,
        step=0,
        sent_at_s=float(request_id),
        done_at_s=request_id + ttft_s + sum(gaps),
        in_flight_at_send=1,
        planned_prompt_tokens=64,
        planned_output_tokens=10,
        ttft_s=ttft_s,
        itl_s=gaps,
        e2e_s=ttft_s + sum(gaps),
        chunk_count=10,
        prompt_tokens=64,
        output_tokens=10,
        finish_reason="length",
        error=None,
    )


def _stats(ttft_s: float) -> ProbeStats:
    return probe_stats([_record(i, ttft_s) for i in range(4)], 0.0, 10.0, (50.0,), TARGETS)


def test_a_band_holds_the_start_spread_and_a_restart_that_moved_by_itself_reads_within_it() -> None:
    # TTFT p50 100 ms before, 125 ms after, each from ten batches with a 2 ms error: the sampling
    # band 2.262·√2·2 ms = 6.4 ms calls +25 ms worse; a measured spread of 10% between starts
    # over five starts adds t(4) = 2.776 × 0.1 × √(100² + 125²) ms = 44.4 ms in quadrature
    quiet = SideSpread(ttft_s=((50.0, 0.002),), batches=10, batch_s=1.0)
    before = RunSide("before", stats=_stats(0.100), spread=quiet)
    after = RunSide("after", stats=_stats(0.125), spread=quiet)
    alone = compare_runs(before, after, slo_percentiles=(50.0, 50.0))
    row = alone.row("ttft_p50_s")
    assert row is not None and row.verdict is Change.WORSE and row.noise.between_starts is None
    assert any("spread unmeasured" in note and "--starts 4" in note for note in alone.notes)

    spread = StartSpread({"ttft_p50_s": 0.1}, starts=5, concurrency=4, measured_at_unix_s=0.0)
    held = compare_runs(before, after, slo_percentiles=(50.0, 50.0), start_spread=spread)
    row = held.row("ttft_p50_s")
    term = 2.776 * 0.1 * math.hypot(0.100, 0.125)
    assert row is not None and row.noise.between_starts == pytest.approx(term, rel=1e-3)
    sampling = 2.262 * math.sqrt(2) * 0.002
    assert row.noise.half_width == pytest.approx(math.hypot(sampling, term), rel=1e-3)
    assert row.verdict is Change.WITHIN_NOISE
    assert any("start-to-start spread: TTFT p50 10%" in note for note in held.notes)
    # a row the spread says nothing of keeps its own band
    itl = held.row("itl_p50_s")
    assert itl is not None and itl.noise.between_starts is None


def test_no_verdict_beyond_noise_needs_no_word_on_the_start_spread() -> None:
    quiet = SideSpread(ttft_s=((50.0, 0.002),), batches=10, batch_s=1.0)
    sides = (RunSide(label, stats=_stats(0.1), spread=quiet) for label in ("before", "after"))
    assert not any("start" in note for note in compare_runs(*sides).notes)


def test_a_side_gives_its_measured_rows_with_their_errors() -> None:
    quiet = SideSpread(ttft_s=((50.0, 0.002),), batches=10, batch_s=1.0)
    levels = measured_levels(RunSide("s", stats=_stats(0.1), spread=quiet), (50.0, 50.0))
    assert levels["ttft_p50_s"] == (pytest.approx(0.1), 0.002)
    assert levels["output_tokens_per_s"][1] is None  # a spread without rates has no error there
    assert "kv_blocks_total" not in levels  # configuration, not a sample


def test_the_state_file_keeps_the_spread_beside_the_replica_and_a_restart_under_way(
    tmp_path: Path,
) -> None:
    path = tmp_path / "replica.json"
    assert kept_start_spread(path) is None
    spread = StartSpread({"ttft_p50_s": 0.12}, starts=4, concurrency=2, flags=("--x=1",))
    keep_start_spread(path, spread)
    write_restart(path, {"phase": "stop"})
    state = ManagedState(1, None, ("vllm",), Dials(), "http://h:1", "log", 0, 0.0)
    write_state(path, state, 3.5)  # the replica's record rewritten keeps both
    assert kept_start_spread(path) == spread
    assert read_restart(path) == {"phase": "stop"}
    write_state(path, None, 3.5)  # the replica stopped: what it measured of its starts stays
    assert kept_start_spread(path) == spread
    keep_start_spread(path, None)
    assert kept_start_spread(path) is None


def test_a_damaged_spread_names_the_file_and_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "replica.json"
    path.write_text(json.dumps({"version": 1, "start_spread": {"starts": "many"}}))
    with pytest.raises(LaunchError, match=r"replica\.json holds a start spread that cannot be"):
        kept_start_spread(path)
