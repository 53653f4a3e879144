"""`slotop tune` end to end on the real vLLM CPU replica: one candidate, then the original dials.

The tiny dummy-weight Llama starts with max_num_seqs 1, so a second request in flight waits:
the sequence cap binds, and the 64 MiB cache holds thousands of the load's 48-token sequences,
so the first candidate doubles the cap (1 → 2). Each start takes some 20-30 s on two cores, so
the tune stops after that one candidate (--max-candidates 1) and its sweeps are short. What
only the real replica shows is asserted: restarts applied and verified, the dials put back, the
report; which candidates a measure leads to is asserted on virtual time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotop.actions.replica.spec import Dials, launch_spec_from_settings
from slotop.actions.wiring.restart import restart_target
from slotop.cli import main
from slotop.config import LAUNCH_DIAL_FLAGS, load_settings
from tests.support.vllm_replica import REPLICA_ENV, ReplicaFlags, VllmReplica, free_port

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


@pytest.fixture
def config(
    tiny_model_dir: Path,
    replica_log_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Path]:
    """A [launch] of the tiny replica (the test helper's command without the dial flags) with
    max_num_seqs 1, started by `slotop launch`, stopped after."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    port = free_port()
    helper = VllmReplica(
        tiny_model_dir, replica_log_dir / "tune-vllm.log", ReplicaFlags(), port=port
    )
    command = [a for a in helper.argv() if not a.startswith(LAUNCH_DIAL_FLAGS)]
    env = "".join(f"{name} = {json.dumps(value)}\n" for name, value in REPLICA_ENV.items())
    path = tmp_path / "slotop.toml"
    path.write_text(
        f'[replica]\nurl = "{helper.url}"\nscrape_interval_s = 0.5\n'
        "[slo]\nttft_ms = 20000\nitl_ms = 5000\n"
        "[load]\nprompt_tokens = 32\noutput_tokens = 16\nmax_concurrency = 4\n"
        "[sweep]\nconcurrency = [1, 2, 4]\nwarmup_s = 1.0\ndwell_s = 3.0\nmin_requests = 3\n"
        "max_dwell_s = 6.0\n"
        f"[launch]\ncommand = {json.dumps(command)}\nmax_num_seqs = 1\n"
        f'log_file = "{replica_log_dir / "tune-vllm.log"}"\n'
        "health_timeout_s = 300.0\nstop_grace_s = 15.0\n"
        f"[launch.env]\n{env}"
        f'[session]\nfolder = "{tmp_path / "sessions"}"\n',
        encoding="utf-8",
    )
    assert main(["launch", "--config", str(path), "--no-attach"]) == 0
    try:
        yield path
    finally:
        main(["launch", "--config", str(path), "--stop"])


def test_tune_tries_a_candidate_on_vllm_and_restores_the_original_dials(
    no_strays: None, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(
        [
            "tune",
            "--config",
            str(config),
            "--yes",
            "--json",
            "--dials",
            "seqs",
            "--max-candidates",
            "1",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)
    trials = data["trials"]
    # The cap binds at 1 (a second request waits), so the candidate is 2; which candidates a
    # measure leads to beyond it is tested on virtual time (test_tune_virtual.py).
    seqs = [t["dials"]["max_num_seqs"] for t in trials]
    assert seqs == [1, 2], seqs
    assert [t["restart"] for t in trials] == ["none", "applied"]
    assert data["decisions"][0]["binding"] == "seq_cap"
    # then it stops, and says why. Which reason comes first is a measure on busy cores (a second
    # candidate over --max-candidates; a cap of 2 that never queues below the load cap; #1 not
    # beating #0 beyond the noise, so #0's diagnosis names 2 again, already tried); each reason is
    # asserted where it is certain: in test_tune_diagnose.py and test_tune_runner.py, and the
    # candidate limit on the simulated replica (test_tune_sim.py)
    assert [d["move"] for d in data["decisions"]] == ["more_seqs", "stop"], data["decisions"]
    assert data["stop"] == data["decisions"][-1]["words"], data["stop"]
    # every configuration met the SLO somewhere
    assert all(t["concurrency"] is not None and t["goodput_rps"] > 0 for t in trials)
    assert data["choice"]["trial"] is not None
    assert (data["ended_dials"], data["verified"]) == (Dials("auto", 1).to_json(), True)
    _, dials, how = restart_target(launch_spec_from_settings(load_settings(config)))
    assert (dials, how) == (Dials("auto", 1), "managed")
    report = Path(data["report"]).read_text(encoding="utf-8")
    assert "## Tune decisions" in report and report.count("### Sweep ") == len(trials)
