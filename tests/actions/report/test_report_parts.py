"""Report sections for what a session may leave half done: a sweep killed before its result, a
restart planned but never run, and a before/after recorded as numbers only (an older slotop)."""

from __future__ import annotations

from pathlib import Path

from slotop.actions.report.build import build_report
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import start_recording
from slotop.config import Settings

DIALS_AUTO = {"kv_cache_dtype": "auto", "max_num_seqs": 64, "max_num_batched_tokens": None}
DIALS_FP8 = {**DIALS_AUTO, "kv_cache_dtype": "fp8"}


def _recording(tmp_path: Path, *actions: tuple[str, dict[str, object]]) -> Path:
    path = tmp_path / "session.jsonl"
    recorder = start_recording(
        command="restart", settings=Settings(), path=path, clock=iter(range(100, 200)).__next__
    )
    for action, data in actions:
        recorder.action(action, data)
    recorder.close()
    return path


def _markdown(path: Path) -> str:
    return build_report(read_recording(path), str(path)).markdown


def test_a_sweep_killed_before_its_result_keeps_its_steps(tmp_path: Path) -> None:
    step = {
        "concurrency": 2,
        "requests_ok": 40,
        "requests_failed": 1,
        "min_requests_met": True,
        "ttft_p50_s": 0.0123,
        "ttft_slo_s": 0.0456,
        "itl_p50_s": 0.0031,
        "itl_slo_s": 0.0072,
        "output_tokens_per_s": 1234.5,
        "slo_met": True,
        "flags": [],
    }
    text = _markdown(_recording(tmp_path, ("sweep_step", {"step": step})))
    assert "### Sweep 1" in text
    assert "| 2 | 40 | 1 | 12.3 | 45.6 | 3.1 | 7.2 |" in text
    assert "| 1,234.5 |" in text
    assert "The sweep was cut short" in text and "no operating point was decided" in text
    assert "sweep-1.png" not in text  # no result, so no plot of one


def test_a_restart_planned_and_never_run_says_so(tmp_path: Path) -> None:
    planned = {"dials_before": DIALS_AUTO, "dials_after": DIALS_FP8, "how": "managed", "plan": []}
    text = _markdown(_recording(tmp_path, ("restart_planned", planned)))
    assert "### Restart planned at +1.0 s, not done: kv_cache_dtype auto → fp8" in text


def test_a_before_after_recorded_as_numbers_only_shows_each_in_its_unit(tmp_path: Path) -> None:
    comparison = {
        "before": {"label": "as it ran", "flags": {"kv_cache_dtype": "auto"}},
        "after": {"label": "restarted", "flags": {"kv_cache_dtype": "fp8"}},
        "rows": [
            {"key": "ttft_p99_s", "label": "TTFT p99", "unit": "s", "before": 0.0123,
             "after": 0.0456, "ratio": 0.0456 / 0.0123, "verdict": "worse"},
            {"key": "kv_blocks_total", "label": "KV blocks", "unit": "blocks", "before": 27981,
             "after": 55962, "ratio": 2.0, "verdict": "better"},
        ],
        "notes": ["few requests (54 and 54): p99 rests on a handful of samples"],
    }  # fmt: skip
    restart = {
        "dials_before": DIALS_AUTO,
        "dials_after": DIALS_FP8,
        "dials_now": DIALS_FP8,
        "how": "managed",
        "outcome": "applied",
        "downtime_s": 0.43,
        "failure": None,
        "lines": ["Restarted with the new dials, verified; downtime 0.4 s."],
        "comparison": comparison,
        "quality": None,
    }
    text = _markdown(_recording(tmp_path, ("restart", restart)))
    assert "### Restart 1: kv_cache_dtype auto → fp8" in text
    assert "outcome: **applied**; downtime 0.4 s" in text
    assert "- before: as it ran (kv_cache_dtype=auto)" in text
    assert "| TTFT p99 | 12.3 ms | 45.6 ms | ×3.71 | worse |" in text
    assert "| KV blocks | 27,981 | 55,962 | ×2.00 | better |" in text
    assert "- note: few requests (54 and 54)" in text


PANEL_TABLE = {
    "header": ["metric", "before", "after", "delta", "noise", "ratio", "verdict"],
    "sides": ["before: as it ran kv_cache_dtype=auto", "after:  restarted kv_cache_dtype=fp8"],
    "rows": [
        ["TTFT p99", "125.0 ms", "62.5 ms", "−62.5 ms", "±0.0", "×0.50", "better"],
        ["KV blocks", "256", "1,024", "+768", "exact", "×4.00", "better"],
    ],
    "footer": ["note: few requests (4 and 4): p99 rests on a handful of samples"],
}


def _panel(state: str, requests: int, **more: object) -> tuple[str, dict[str, object]]:
    data = {
        "state": state,
        "changes": "kv_cache_dtype auto → fp8",
        "load": "2 in flight",
        "mode": "closed",
        "concurrency": 2,
        "rate_rps": None,
        "requests": requests,
        "wanted": 4,
        "stopped": "",
        "dials_before": DIALS_AUTO,
        "dials_after": DIALS_FP8,
        "before_span_s": None,
        "after_span_s": None,
        "comparison": None,
        "table": None,
        "text": None,
        **more,
    }
    return "before_after", data


def test_a_dashboard_restart_shows_the_table_its_panel_showed(tmp_path: Path) -> None:
    planned = {"dials_before": DIALS_AUTO, "dials_after": DIALS_FP8, "how": "managed", "plan": []}
    restart = {
        **planned,
        "dials_now": DIALS_FP8,
        "outcome": "applied",
        "downtime_s": 0.51,
        "failure": None,
        "lines": ["Restarted with the new dials, verified; downtime 0.5 s."],
        "comparison": None,
        "table": None,
        "quality": None,
    }
    spans = {"before_span_s": [96.0, 100.5], "after_span_s": [104.0, 107.0]}
    path = _recording(
        tmp_path,
        ("restart_planned", planned),
        ("restart", restart),
        _panel("measuring", 0),
        _panel("progress", 2),
        _panel("progress", 4, **spans),
        _panel("measured", 4, **spans, table=PANEL_TABLE, text="the table as printed\n"),
        ("before_after", {"state": "hidden"}),
    )
    text = _markdown(path)
    assert "### Restart 1: kv_cache_dtype auto → fp8" in text
    assert "outcome: **applied**; downtime 0.5 s" in text
    # the clock gives 100 to the header, then 101, 102, ... to each line: the measured one is 6th
    assert "Before/after at 2 in flight (the dashboard's panel, +6.0 s):" in text
    assert "- before: as it ran kv_cache_dtype=auto" in text
    assert "| TTFT p99 | 125.0 ms | 62.5 ms | −62.5 ms | ±0.0 | ×0.50 | better |" in text
    assert "| KV blocks | 256 | 1,024 | +768 | exact | ×4.00 | better |" in text
    assert "- note: few requests (4 and 4)" in text
    assert "No before/after table" not in text
    events = text[text.index("## Events") :]
    assert "before/after measuring at 2 in flight: kv_cache_dtype auto → fp8" in events
    assert "before/after measured at 2 in flight" in events
    assert "of 4 requests" not in events  # the panel's count is no event


def test_a_table_note_wrapped_over_indented_lines_is_one_item(tmp_path: Path) -> None:
    footer = [
        "better / worse: beyond the noise:",
        "  a bootstrap for percentiles;",
        "  p: the exact Poisson test of counts",
        "note: few requests (4 and 4)",
    ]
    spans = {"before_span_s": [96.0, 100.5], "after_span_s": [104.0, 107.0]}
    table = {**PANEL_TABLE, "footer": footer}
    text = _markdown(_recording(tmp_path, _panel("measured", 4, **spans, table=table, text="")))
    assert (
        "- better / worse: beyond the noise: a bootstrap for percentiles; "
        "p: the exact Poisson test of counts\n- note: few requests (4 and 4)\n"
    ) in text
    assert "-   a bootstrap" not in text


def test_a_dashboard_restart_hidden_while_measuring_says_how_far_it_got(tmp_path: Path) -> None:
    restart = {
        "dials_before": DIALS_AUTO,
        "dials_after": DIALS_FP8,
        "dials_now": DIALS_FP8,
        "how": "managed",
        "outcome": "applied",
        "downtime_s": 0.51,
        "lines": [],
        "table": None,
    }
    path = _recording(
        tmp_path,
        ("restart", restart),
        _panel("measuring", 0),
        _panel("progress", 3),
        ("before_after", {"state": "hidden"}),
    )
    text = _markdown(path)
    assert "the dashboard's panel had 3 of 4 requests with the new dials when it was hidden" in text


def test_a_before_after_with_no_restart_before_it_has_a_section_of_its_own(
    tmp_path: Path,
) -> None:
    text = _markdown(_recording(tmp_path, _panel("measured", 4, table=PANEL_TABLE)))
    assert "### Before/after: kv_cache_dtype auto → fp8" in text
    assert "| KV blocks | 256 | 1,024 | +768 | exact | ×4.00 | better |" in text


def test_a_dashboard_restarts_quality_check_follows_it_and_is_shown_as_headless_ones(
    tmp_path: Path,
) -> None:
    restart = {
        "dials_before": DIALS_AUTO,
        "dials_after": DIALS_FP8,
        "dials_now": DIALS_FP8,
        "how": "managed",
        "outcome": "applied",
        "downtime_s": 0.5,
        "failure": None,
        "lines": ["Restarted with the new dials, verified; downtime 0.5 s."],
        "comparison": None,
        "table": None,
        "quality": None,  # the dashboard's check ends after the restart is recorded
    }
    quality = {
        "not_run": None,
        "token_kind": "ids",
        "prompts_identical": 3,
        "prompts_total": 4,
        "prefix_match_ratio": 0.875,
        "position_match_ratio": 0.9,
        "logprob_drift_mean": -0.0123,
    }
    not_run = {"not_run": "the restart rolled back, so the replica runs its previous KV dtype"}
    path = _recording(
        tmp_path,
        ("restart", restart),
        ("restart_quality", {"quality": quality}),
        ("restart", {**restart, "outcome": "rolled_back"}),
        ("restart_quality", {"quality": not_run}),
        ("restart", restart),  # a recording from before checks were kept: none shown
    )
    text = _markdown(path)
    first, second, third = text.split("### Restart ")[1:4]
    assert "Quality check (4 greedy prompts before and after; tokens as ids):" in first
    assert "| identical outputs | 3 of 4 |" in first
    assert "| tokens identical to the first divergence | 87.5% |" in first
    assert "| mean log-prob drift | -0.0123 |" in first
    assert "Quality check: not run: the restart rolled back, so the replica runs" in second
    assert "Quality check" not in third.split("## ")[0]
    assert "quality check: 3 of 4 outputs identical" in text  # the events table's words
