"""`slotop report` of a real headless `slotop restart` (auto → fp8) of the simulated replica: two
configurations split where the replica came back, and the before/after table as recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotop.cli import main
from tests.support.png import png_size
from tests.support.vllm_replica import free_port

pytestmark = pytest.mark.slow


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A settings file for a simulated replica on a free port, state kept under tmp_path."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    port = free_port()
    path = tmp_path / "slotop.toml"
    path.write_text(
        f'[replica]\nurl = "http://127.0.0.1:{port}"\n'
        "[load]\nprompt_tokens = 64\noutput_tokens = 16\n"
        "[launch]\nhealth_timeout_s = 30.0\nstop_grace_s = 3.0\nmax_num_seqs = 64\n",
        encoding="utf-8",
    )
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _row(table_text: str, label: str) -> list[str]:
    for line in table_text.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == label:
            return cells
    raise AssertionError(f"no row {label!r} in the report")


def test_a_restart_records_by_default_and_reports_its_before_and_after(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_strays: None
) -> None:
    sessions = tmp_path / "state" / "slotop" / "sessions"
    assert main(["launch", "--config", str(config), "--no-attach"]) == 0
    try:
        restart = ["restart", "--config", str(config), "--yes"]
        code = main([*restart, "--kv-cache-dtype", "fp8", "--concurrency", "2", "--dwell", "2"])
        assert code == 0, capsys.readouterr().out
        made = sorted(sessions.glob("*_restart.jsonl"))
        assert len(made) == 1
        code = main([*restart, "--kv-cache-dtype", "auto", "--no-record", "--no-quality-check"])
        assert code == 0
        assert sorted(sessions.glob("*.jsonl")) == made  # --no-record wrote nothing
    finally:
        assert main(["launch", "--config", str(config), "--stop"]) == 0
    capsys.readouterr()
    recording = made[0]
    lines = _lines(recording)
    start = lines[0]["started_at_s"]
    up = [
        line["t_s"]
        for line in lines
        if line.get("event") == "restart" and str(line.get("text")).startswith("up:")
    ]
    dials = [line for line in lines if line.get("action") == "dials"]
    assert [d["dials"]["kv_cache_dtype"] for d in dials] == ["auto", "fp8"]
    assert dials[1]["since_s"] == up[0]  # serving with fp8 since it came back

    out = tmp_path / "report"
    assert main(["report", str(recording), "--out", str(out)]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "Recorded by `slotop restart`" in text
    assert "### Restart 1: kv_cache_dtype auto → fp8" in text
    assert "outcome: **applied**" in text
    fp8_from = f"+{up[0] - start:.1f} s"
    assert "| #1 kv auto · seqs 64 | +0.0 s |" in text
    assert f"| #2 kv fp8 · seqs 64 | {fp8_from} |" in text
    assert png_size(out / "curve-1.png") == (1500, 440)
    assert png_size(out / "curve-2.png") == (1500, 440)

    restart_line = next(line for line in lines if line.get("action") == "restart")
    rows = {row["key"]: row for row in restart_line["comparison"]["rows"]}
    blocks = _row(text, "KV blocks")
    before, after = rows["kv_blocks_total"]["before"], rows["kv_blocks_total"]["after"]
    assert after == 2 * before  # fp8 holds one byte per value where auto (bf16) holds two
    assert blocks[1:3] == [f"{before:,.0f}", f"{after:,.0f}"]
    assert blocks[-1] == "better"
    ttft = _row(text, "TTFT p99")
    values = rows["ttft_p99_s"]
    assert ttft[1:3] == [f"{values['before'] * 1000:,.1f} ms", f"{values['after'] * 1000:,.1f} ms"]
    assert "Quality check (8 greedy prompts before and after" in text
    for cells in restart_line["table"]["rows"]:  # the words `slotop restart` printed
        assert "| " + " | ".join(cells) + " |" in text
