"""`slotop launch` / `slotop restart` through the command line, on the simulated replica."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotop.actions.replica.process import HealthProgress
from slotop.actions.replica.spec import Dials, launch_spec_from_settings
from slotop.actions.restart.apply import RestartRefusedError
from slotop.actions.restart.command import DialOverrides, progress_printer
from slotop.actions.wiring.restart import restart_target
from slotop.cli import main
from slotop.config import load_settings
from tests.support.vllm_replica import free_port

LOAD = ("--concurrency", "2", "--dwell", "2")


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


def test_overrides_change_only_what_is_given() -> None:
    assert DialOverrides("fp8").applied_to(Dials("auto", 8, 512)) == Dials("fp8", 8, 512)
    assert DialOverrides(max_num_seqs=0).applied_to(Dials("auto", 8)) == Dials("auto", None)


@pytest.mark.slow
def test_launch_restart_rollback_and_stop_from_the_command_line(
    config: Path, capsys: pytest.CaptureFixture[str], no_strays: None
) -> None:
    spec = launch_spec_from_settings(load_settings(config))
    with pytest.raises(RestartRefusedError, match="start one with `slotop launch`"):
        restart_target(spec)
    assert main(["launch", "--config", str(config), "--no-attach"]) == 0
    try:
        out = capsys.readouterr().out
        assert f"replica up on {spec.url}" in out
        assert "--kv-cache-dtype=auto --max-num-seqs=64" in out
        assert main(["launch", "--config", str(config), "--no-attach"]) == 1
        assert "already running" in capsys.readouterr().err

        code = main(["restart", "--config", str(config), "--kv-cache-dtype", "fp8", "--yes"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "kv_cache_dtype: auto → fp8" in out
        assert "Restarted with the new dials, verified" in out

        code = main(["restart", "--config", str(config), "--kv-cache-dtype", "fp4", "--yes"])
        out = capsys.readouterr().out
        assert code == 1
        assert "ROLLED BACK" in out and "invalid choice: 'fp4'" in out
        target, dials, how = restart_target(spec)
        assert (dials, how) == (Dials("fp8", 64), "managed")
        assert target.last_downtime_s is not None  # measured, for the next plan

        code = main(
            [
                "restart",
                "--config",
                str(config),
                "--max-num-seqs",
                "32",
                "--yes",
                "--concurrency",
                "2",
                "--dwell",
                "2",
                "--json",
            ]
        )
        captured = capsys.readouterr()
        assert code == 0, captured.err
        table = json.loads(captured.out)
        assert "rows" in table
        assert "max_num_seqs: 64 → 32" in captured.err
        rows = {row["key"]: row for row in table["rows"]}
        assert rows["ttft_p99_s"]["noise"]["method"] == "bootstrap over batches"
        assert rows["kv_blocks_total"]["verdict"] == "same"  # the sequence cap leaves the cache

        code = main(
            [
                "restart",
                "--config",
                str(config),
                "--max-num-seqs",
                "16",
                "--yes",
                "--concurrency",
                "2",
                "--dwell",
                "2",
            ]
        )
        out = capsys.readouterr().out
        assert code == 0, out
        lines = out.splitlines()
        header = next(line.split() for line in lines if line.strip().startswith("metric"))
        assert header == ["metric", "before", "after", "delta", "noise", "ratio", "verdict"]
        ttft = next(line for line in lines if line.strip().startswith("TTFT p50 "))
        assert "±" in ttft and ttft.endswith(("better", "worse", "within noise"))
        # a 2 s dwell of short requests holds far fewer than the 200 a p99 is judged from
        tail = next(line for line in lines if line.strip().startswith("TTFT p99 "))
        assert tail.endswith("noise unknown")
        assert any("p99 needs about 200 requests a side" in line for line in lines)
        assert sum(" s into its load" in line for line in lines) >= 2  # each side's span
        blocks = next(line for line in lines if line.strip().startswith("KV blocks "))
        assert "exact" in blocks and blocks.endswith("same")
        assert any("beyond the run-to-run noise" in line for line in lines)

        # the replica's start-to-start spread: the running start and two more of the same dials
        code = main(["restart", "--config", str(config), "--starts", "2", "--yes", *LOAD, "--json"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        assert "on the same dials" in captured.err and "start 3: TTFT p50 " in captured.err
        spread = json.loads(captured.out)
        assert spread["starts"] == 3 and len(spread["levels"]) == 3
        assert spread["flags"] == ["--kv-cache-dtype=fp8", "--max-num-seqs=16"]
        assert set(spread["relative"]) >= {"ttft_p50_s", "itl_p50_s", "output_tokens_per_s"}
        assert restart_target(spec)[1] == Dials("fp8", 16)  # the dials it ran, still
        code = main(
            ["restart", "--config", str(config), "--max-num-seqs", "32", "--yes", *LOAD, "--json"]
        )
        captured = capsys.readouterr()
        assert code == 0, captured.err
        table = json.loads(captured.out)
        rows = {row["key"]: row for row in table["rows"]}
        assert rows["ttft_p50_s"]["noise"]["between_starts"] is not None
        assert any("start-to-start spread" in note for note in table["notes"])
    finally:
        assert main(["launch", "--config", str(config), "--stop"]) == 0
    assert "stopped the replica" in capsys.readouterr().out
    assert main(["launch", "--config", str(config), "--stop"]) == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--starts", "1", "--concurrency", "2"], "--starts must be 2 or more"),
        (["--starts", "3"], "give --concurrency N"),
        (["--starts", "3", "--concurrency", "2", "--max-num-seqs", "8"], "drop the dial flags"),
    ],
)
def test_a_start_spread_asked_for_wrongly_says_how_to_ask(
    config: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    assert main(["restart", "--config", str(config), *args, "--yes"]) == 2
    assert says in capsys.readouterr().err


def test_progress_lines_come_every_few_seconds_or_when_the_log_moves() -> None:
    now = [0.0]
    lines: list[str] = []
    show = progress_printer(lines.append, clock=lambda: now[0])
    for at, log_line in [(0, "a"), (1, "a"), (2, "b"), (3, "b"), (8, "b"), (9, None)]:
        now[0] = at
        show(HealthProgress(float(at), 60.0, "refused", log_line))
    assert lines == [
        "  waiting for /health: 0/60 s | a",
        "  waiting for /health: 2/60 s | b",
        "  waiting for /health: 8/60 s | b",
    ]
