"""The quality check around a KV-dtype restart: when it runs, what it says, on the simulated replica."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.prompts import DEFAULT_PROMPTS, QualityPrompt
from slotop.actions.restart.quality_check import (
    QualityBaseline,
    configured_prompts,
    quality_applies,
    quality_baseline,
    quality_check,
)
from slotop.cli import main
from tests.support.vllm_replica import free_port

UNREACHABLE = "http://127.0.0.1:9"


def _config(tmp_path: Path, name: str, port: int, launch_extra: str = "") -> Path:
    path = tmp_path / name
    path.write_text(
        f'[replica]\nurl = "http://127.0.0.1:{port}"\n'
        "[launch]\nhealth_timeout_s = 30.0\nstop_grace_s = 3.0\nmax_num_seqs = 64\n" + launch_extra,
        encoding="utf-8",
    )
    return path


@pytest.fixture
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """Two settings files for one simulated replica: built-in prompts, and a 2-prompt file."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    port = free_port()
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        '{"name": "hi", "prompt": "hello there", "max_tokens": 4}\n{"prompt": [7, 8, 9]}\n',
        encoding="utf-8",
    )
    own = f'quality_prompts_file = "{prompts.as_posix()}"\n'
    return _config(tmp_path, "default.toml", port), _config(tmp_path, "own.toml", port, own)


def test_only_a_kv_dtype_change_gets_the_check() -> None:
    assert quality_applies(Dials("auto", 8), Dials("fp8", 8))
    assert not quality_applies(Dials("auto", 8), Dials("auto", 16, 512))


def test_empty_setting_is_the_built_in_set(tmp_path: Path) -> None:
    assert configured_prompts("") == DEFAULT_PROMPTS
    path = tmp_path / "p.jsonl"
    path.write_text('"one"\n', encoding="utf-8")
    assert [p.prompt for p in configured_prompts(str(path))] == ["one"]


def test_a_refused_baseline_or_a_rollback_is_a_reason_not_an_error() -> None:
    prompts = (QualityPrompt("a", "x", 2),)
    baseline = quality_baseline(UNREACHABLE, None, prompts, timeout_s=2.0)
    assert baseline.run is None and baseline.failure is not None
    assert baseline.failure.startswith("the run before the restart failed: ")
    check = quality_check(UNREACHABLE, None, baseline, "applied")
    assert check.report is None and check.not_run == baseline.failure
    assert check.text() == f"quality check: not run: {baseline.failure}\n"
    # a rollback is said as such, whatever the baseline, and asks the replica nothing
    rolled = quality_check(UNREACHABLE, None, QualityBaseline(prompts, None, None), "rolled_back")
    assert rolled.not_run is not None and "rolled back" in rolled.not_run
    assert rolled.to_json() == {"not_run": rolled.not_run}
    down = quality_check(UNREACHABLE, None, baseline, "down")
    assert down.not_run is not None and "down" in down.not_run


def _restart(capsys: pytest.CaptureFixture[str], config: Path, *flags: str) -> tuple[int, str, str]:
    code = main(["restart", "--config", str(config), "--yes", *flags])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_restarts_of_the_simulated_replica_say_what_the_quality_check_found(
    configs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], no_strays: None
) -> None:
    default, own = configs
    assert main(["launch", "--config", str(default), "--no-attach"]) == 0
    capsys.readouterr()
    try:
        code, out, _ = _restart(capsys, default, "--kv-cache-dtype", "fp8")
        assert code == 0, out
        assert "Quality check: 8 prompts, greedy, before and after" in out  # in the plan
        section = out[out.index("quality check: 8 prompts, greedy") :]
        assert "identical outputs                      8 of 8" in section
        assert "drift                    N/A (no log-probs)" in section  # the sim sends none
        assert out.index("Restarted with the new dials") < out.index(section)

        code, out, _ = _restart(capsys, default, "--max-num-seqs", "32")
        assert code == 0, out
        assert "quality check" not in out.lower()

        code, out, _ = _restart(capsys, default, "--kv-cache-dtype", "fp4")
        assert code == 1
        assert "ROLLED BACK" in out
        assert out.endswith(
            "quality check: not run: the restart rolled back, so the replica runs its previous "
            "KV dtype again and there is no changed replica to compare\n"
        )

        code, out, _ = _restart(capsys, default, "--kv-cache-dtype", "auto", "--no-quality-check")
        assert code == 0, out
        assert "quality check" not in out.lower()

        code, out, err = _restart(capsys, own, "--kv-cache-dtype", "fp8", "--json")
        assert code == 0, err
        quality = json.loads(out)["quality"]
        assert quality["not_run"] is None
        assert quality["prompts_total"] == quality["prompts_identical"] == 2
        assert [p["name"] for p in quality["prompts"]] == ["hi", "line-2"]
        assert quality["logprob_drift_mean"] is None
        assert "quality check: 2 greedy prompts before the restart" in err
    finally:
        assert main(["launch", "--config", str(default), "--stop"]) == 0
