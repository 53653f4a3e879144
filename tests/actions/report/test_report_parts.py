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
