"""`slotop tune` end to end on the simulated replica: a KV pool that fills first, a low sequence cap.

The replica (tests/support/tune_sim.py) holds 4 of the load's sequences at 16 bits and 8 at fp8,
with max_num_seqs 6. Worked by hand: at 16 bits the cache fills before the cap (KV capacity
binds: fp8), and at fp8 more requests run at once, so goodput rises. The tune here tries that
one candidate: what it takes end to end (restarts verified, the quality check, the dials put
back, the report) is the same for each. The next decision on the same replica (at fp8 the cap
binds: max_num_seqs 8, what the cache holds) is checked in virtual time
(test_tune_virtual.py), where a tune's minutes of load take seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotop.actions.replica.spec import Dials, launch_spec_from_settings
from slotop.actions.session.reader import read_recording
from slotop.actions.wiring.restart import restart_target
from slotop.cli import main
from slotop.config import load_settings
from tests.support.tune_sim import ORIGINAL, launched, tune_sim_config

pytestmark = pytest.mark.slow


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Settings for the managed simulated replica on a free port, started, and stopped after."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with launched(tune_sim_config(tmp_path)) as path:
        yield path


def _replica_dials(config: Path) -> Dials:
    _, dials, how = restart_target(launch_spec_from_settings(load_settings(config)))
    assert how == "managed"
    return dials


def test_tune_raises_goodput_by_the_dials_the_diagnosis_names(
    no_strays: None, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(["tune", "--config", str(config), "--yes", "--json", "--max-candidates", "1"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    trials, decisions, choice = data["trials"], data["decisions"], data["choice"]
    # the cache fills first: fp8 (its quality check passed: the simulator's text does not change)
    assert decisions[0]["binding"] == "kv_capacity"
    assert trials[1]["dials"] == Dials("fp8", 6).to_json()
    assert trials[1]["quality"]["position_match_ratio"] == 1.0
    assert len(trials) == 2 and "1 candidate tried" in data["stop"]
    # the candidate carries more concurrency than the baseline
    assert trials[0]["concurrency"] < trials[1]["concurrency"]
    # goodput rose: the chosen configuration is the candidate, its margin over the baseline
    # said against the noise of the two (short dwells: a wide band)
    assert choice["trial"] == 1
    assert choice["goodput_rps"] > trials[0]["goodput_rps"] == choice["baseline_goodput_rps"]
    assert choice["gain_rps"] > 0 and choice["noise_rps"] > 0
    assert choice["beyond_noise"] is (choice["gain_rps"] > choice["noise_rps"])
    assert data["paste"] == " ".join(
        a.replace("=", " ") for a in Dials.from_json(choice["dials"]).flag_args()
    )
    # the replica is back on its own dials, verified
    assert (data["ended_dials"], data["verified"]) == (ORIGINAL.to_json(), True)
    assert _replica_dials(config) == ORIGINAL
    # the report holds the same evidence: every sweep, the tune's table, the chosen row
    report = Path(data["report"]).read_text(encoding="utf-8")
    assert report.count("### Sweep ") == len(trials)
    section = report[report.index("## Tune decisions") : report.index("## Configurations")]
    chosen_row = next(line for line in section.splitlines() if "◀" in line)
    assert chosen_row.startswith(f"| #{choice['trial']} ◀")
    assert f"{choice['goodput_rps']:.2f}" in chosen_row
    assert f"Flags to paste into `vllm serve`: `{data['paste']}`" in section
    assert "KV usage peaked at" in section and "running held at 6" in section


def test_an_interrupt_puts_the_original_dials_back_and_leaves_a_partial_report(
    no_strays: None, config: Path, tmp_path: Path
) -> None:
    record = tmp_path / "tune.jsonl"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    process = subprocess.Popen(
        [sys.executable, "-m", "slotop", "tune", "--config", str(config), "--yes",
         "--record", str(record)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # until the first candidate's sweep is under way
            text = record.read_text(encoding="utf-8") if record.exists() else ""
            lines = text.splitlines()
            restarted = [i for i, line in enumerate(lines) if '"action":"restart"' in line]
            if restarted and any('"sweep_step"' in line for line in lines[restarted[0] :]):
                break
            assert process.poll() is None, process.communicate()[0]
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, out
    assert "stopping: the load ends" in out
    assert f"resume with: slotop tune --resume {record}" in out
    assert _replica_dials(config) == ORIGINAL
    recording = read_recording(record)
    restored = [
        (line.data["dials"], line.data["verified"])
        for line in recording.of_kind("action")
        if line.data.get("action") == "tune_restored"
    ]
    assert restored == [(ORIGINAL.to_json(), True)]
    report = (tmp_path / "tune-report" / "report.md").read_text(encoding="utf-8")
    assert "## Tune decisions" in report and "cut short" in report
    assert "Stopped: interrupted: resume with --resume." in report
