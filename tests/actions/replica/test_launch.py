"""The managed replica: its recipe, state file and health wait (pure), then real process groups."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slotop.actions.replica.process import (
    HealthProgress,
    ManagedReplica,
    process_start_ticks,
    wait_for_health,
)
from slotop.actions.replica.spec import (
    Dials,
    HealthTimeoutError,
    LaunchError,
    LaunchSpec,
    ManagedState,
    ReplicaExitedError,
    demo_launch_spec,
    launch_spec_from_settings,
    read_state,
    restart_command_argv,
    restart_lock,
    sim_command,
    split_dial_args,
    write_state,
)
from slotop.collectors.replica import Health
from slotop.config import settings_from_mapping
from tests.support.paths import STUB_REPLICA
from tests.support.replica_procs import live_descendants
from tests.support.vllm_replica import free_port


def test_dials_become_flags_and_say_what_changes() -> None:
    assert Dials().flag_args() == ("--kv-cache-dtype=auto",)
    dials = Dials("fp8", 64, 4096)
    assert dials.flag_args() == (
        "--kv-cache-dtype=fp8",
        "--max-num-seqs=64",
        "--max-num-batched-tokens=4096",
    )
    assert Dials().changes(Dials("fp8", 64)) == (
        ("kv_cache_dtype", "auto", "fp8"),
        ("max_num_seqs", "default", "64"),
    )
    assert Dials.from_json(dials.to_json()) == dials


@pytest.mark.parametrize(
    ("template", "dials", "argv"),
    [
        (
            ("restart", "{dial_args}"),
            Dials("fp8", 8),
            ["restart", "--kv-cache-dtype=fp8", "--max-num-seqs=8"],
        ),
        (
            ("ctl", "--dtype", "{kv_cache_dtype}", "--seqs={max_num_seqs}"),
            Dials("auto", None, 2048),
            ["ctl", "--dtype", "auto", "--seqs=default"],
        ),
        (("ctl", "{{literal}}", "a b; rm -rf /"), Dials(), ["ctl", "{literal}", "a b; rm -rf /"]),
    ],
)
def test_restart_template_fills_each_argument_without_a_shell(
    template: tuple[str, ...], dials: Dials, argv: list[str]
) -> None:
    assert restart_command_argv(template, dials) == argv


def test_spec_from_settings_defaults_to_the_simulated_replica(tmp_path: Path) -> None:
    settings = settings_from_mapping(
        {"replica": {"url": "http://127.0.0.1:8123"}, "launch": {"max_num_seqs": 32}}, "t"
    )
    spec = launch_spec_from_settings(settings, state_folder=tmp_path)
    assert spec.command == sim_command("http://127.0.0.1:8123")
    assert spec.command[:3] == (sys.executable, "-m", "slotop.sim")
    assert spec.command[3:] == ("--host", "127.0.0.1", "--port", "8123")
    assert spec.argv(spec.dials)[-2:] == ["--kv-cache-dtype=auto", "--max-num-seqs=32"]
    assert spec.log_path == tmp_path / "replica-8123.log"
    assert spec.state_path == tmp_path / "managed-127.0.0.1-8123.json"


def test_spec_keeps_a_configured_command_and_relative_log(tmp_path: Path) -> None:
    settings = settings_from_mapping(
        {
            "launch": {
                "command": ["vllm", "serve", "m"],
                "working_dir": str(tmp_path),
                "log_file": "logs/r.log",
                "env": {"A": "1"},
            }
        },
        "t",
    )
    spec = launch_spec_from_settings(settings, state_folder=tmp_path)
    assert spec.command == ("vllm", "serve", "m")
    assert spec.log_path == tmp_path / "logs" / "r.log"
    assert spec.env == (("A", "1"),)


def test_state_file_round_trips_and_keeps_the_downtime(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    assert read_state(path) == (None, None)
    state = ManagedState(4321, 99, ("a", "b"), Dials("fp8", 4), "http://h:1", "/l", 10, 5.0)
    write_state(path, state, 12.5)
    assert read_state(path) == (state, 12.5)
    write_state(path, None, 3.0)
    assert read_state(path) == (None, 3.0)
    path.write_text(json.dumps({"replica": {"pid": "x"}}), encoding="utf-8")
    with pytest.raises(LaunchError, match="is damaged"):
        read_state(path)


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_health_wait_returns_the_time_it_took_and_reports_progress() -> None:
    clock = _Clock()
    answers = iter([Health(False, "connect refused")] * 4 + [Health(True)])
    seen: list[HealthProgress] = []
    took = wait_for_health(
        lambda: next(answers),
        timeout_s=10,
        exit_code=lambda: None,
        log_line=lambda: "loading weights",
        on_progress=seen.append,
        clock=clock,
        sleep=clock.sleep,
    )
    assert took == pytest.approx(1.0)
    assert len(seen) == 4
    assert seen[-1].detail == "connect refused"
    assert seen[-1].log_line == "loading weights"
    assert seen[-1].timeout_s == 10


def test_health_wait_stops_when_the_process_exits_or_time_runs_out() -> None:
    clock = _Clock()
    codes = iter([None, None, 2])
    with pytest.raises(ReplicaExitedError, match=r"exit code 2\) 0\.5 s after its start"):
        wait_for_health(
            lambda: Health(False, "no"),
            timeout_s=10,
            exit_code=lambda: next(codes),
            log_line=lambda: None,
            clock=clock,
            sleep=clock.sleep,
        )
    clock = _Clock()
    with pytest.raises(HealthTimeoutError, match=r"within 3 s \(last answer: HTTP 503"):
        wait_for_health(
            lambda: Health(False, "HTTP 503"),
            timeout_s=3,
            exit_code=lambda: None,
            log_line=lambda: None,
            clock=clock,
            sleep=clock.sleep,
        )


def _spec(tmp_path: Path, *, extra: tuple[str, ...] = (), **changes: object) -> LaunchSpec:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    values: dict[str, object] = {
        "url": url,
        "command": (
            sys.executable,
            str(STUB_REPLICA),
            *extra,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ),
        "log_path": tmp_path / "replica.log",
        "state_path": tmp_path / "state.json",
        "health_timeout_s": 30.0,
        "stop_grace_s": 5.0,
    }
    values.update(changes)
    return LaunchSpec(**values)  # type: ignore[arg-type]


@pytest.mark.slow
def test_start_stop_the_simulated_replica_and_adopt_it_from_the_state_file(
    tmp_path: Path, no_strays: None
) -> None:
    spec = _spec(tmp_path)
    replica = ManagedReplica(spec)
    progress: list[HealthProgress] = []
    replica.start(Dials("fp8", 16), progress.append)
    try:
        pid = replica.pid
        assert pid is not None and replica.running
        assert os.getpgid(pid) == pid  # a process group of its own
        assert "Application startup complete" in replica.log_since_start()
        state, _ = read_state(spec.state_path)
        assert state is not None and state.pid == pid and state.dials == Dials("fp8", 16)
        assert state.argv[-2:] == ("--kv-cache-dtype=fp8", "--max-num-seqs=16")
        adopted = ManagedReplica.adopt(spec)  # what a later `slotop restart` does
        assert adopted.pid == pid and adopted.running and adopted.dials == Dials("fp8", 16)
        adopted.stop()
        assert live_descendants(pid) == []  # the leader is a zombie until we reap it
        assert read_state(spec.state_path) == (None, None)
    finally:
        replica.stop()


@pytest.mark.slow
def test_a_reused_pid_in_the_state_file_is_never_signalled(tmp_path: Path, no_strays: None) -> None:
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        ticks = process_start_ticks(stranger.pid)
        assert ticks is not None
        spec = _spec(tmp_path)
        state = ManagedState(stranger.pid, ticks + 1, ("x",), Dials(), spec.url, "/l", 0, 0.0)
        write_state(spec.state_path, state, 7.0)
        adopted = ManagedReplica.adopt(spec)
        assert adopted.pid is None and not adopted.running
        assert adopted.last_downtime_s == 7.0
        adopted.stop()
        assert stranger.poll() is None  # still alive: not ours to signal
        assert read_state(spec.state_path) == (None, 7.0)
    finally:
        stranger.kill()
        stranger.wait()


@pytest.mark.slow
def test_a_start_that_exits_says_why_with_the_log_tail(tmp_path: Path, no_strays: None) -> None:
    replica = ManagedReplica(_spec(tmp_path))
    with pytest.raises(ReplicaExitedError) as caught:
        replica.start(Dials("fp4"))
    words = str(caught.value)
    assert "exit code 2" in words
    assert "argument --kv-cache-dtype: invalid choice: 'fp4'" in words
    assert not replica.running


@pytest.mark.slow
def test_a_hung_start_that_ignores_sigterm_is_killed_with_its_children(
    tmp_path: Path, no_strays: None
) -> None:
    spec = _spec(
        tmp_path,
        extra=("--hang-on", "fp8", "--ignore-sigterm"),
        health_timeout_s=2.0,
        stop_grace_s=1.0,
    )
    replica = ManagedReplica(spec)
    started = time.monotonic()
    with pytest.raises(HealthTimeoutError, match="hanging on --kv-cache-dtype=fp8"):
        replica.start(Dials("fp8"))
    assert time.monotonic() - started < 60  # bounded, not a timing check of the limit itself
    state, _ = read_state(spec.state_path)
    assert state is None
    assert not replica.running


@pytest.mark.slow
def test_stop_takes_the_whole_group_with_sigkill_after_the_grace(
    tmp_path: Path, no_strays: None
) -> None:
    spec = _spec(tmp_path, extra=("--hang-on", "auto", "--ignore-sigterm"), stop_grace_s=0.5)
    replica = ManagedReplica(spec)
    replica.spawn(Dials())
    pid = replica.pid
    assert pid is not None
    deadline = time.monotonic() + 20
    while len(live_descendants(pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(live_descendants(pid)) == 2  # the stub and its sleeping child
    os.kill(pid, signal.SIGTERM)  # ignored
    time.sleep(0.2)
    assert replica.running
    replica.stop()
    assert live_descendants(pid) == []


def test_one_slotop_at_a_time_changes_a_replica(tmp_path: Path) -> None:
    state = tmp_path / "managed.json"
    held = restart_lock(state)
    held.__enter__()
    with pytest.raises(LaunchError, match="another slotop is starting or restarting"):  # noqa: SIM117
        with restart_lock(state):
            pass
    held.__exit__(None, None, None)
    with restart_lock(state):  # released
        pass


def test_demo_spec_takes_the_dial_flags_out_of_the_sim_arguments(tmp_path: Path) -> None:
    spec, dials = demo_launch_spec(
        "http://127.0.0.1:8123",
        [
            "--gpu",
            "l4",
            "--kv-cache-dtype",
            "fp8",
            "--max-num-seqs=32",
            "--max-num-batched-tokens",
            "0",
        ],
        tmp_path,
    )
    assert dials == Dials("fp8", 32, None)
    assert spec.dials == dials
    assert spec.command[-2:] == ("--gpu", "l4")
    assert spec.argv(dials)[-2:] == ["--kv-cache-dtype=fp8", "--max-num-seqs=32"]
    with pytest.raises(LaunchError, match="--max-num-seqs 'many': expected a whole number"):
        split_dial_args(["--max-num-seqs", "many"])
    with pytest.raises(LaunchError, match="--kv-cache-dtype needs a value"):
        split_dial_args(["--kv-cache-dtype"])
