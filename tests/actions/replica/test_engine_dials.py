"""The dials in each engine's words: flags, KV dtypes, the engine a launch command starts, and
the engine kept in the state file."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.actions.replica.engine_dials import engine_of_command
from slotop.actions.replica.spec import (
    Dials,
    ManagedState,
    launch_spec_from_settings,
    read_state,
    restart_command_argv,
    write_state,
)
from slotop.actions.restart.apply import RestartPlan, RestartRefusedError, plan_restart
from slotop.config import settings_from_mapping
from slotop.errors import ConfigError


@pytest.mark.parametrize(
    ("dials", "flags"),
    [
        (Dials(), ("--kv-cache-dtype=auto",)),
        (
            Dials("fp8", 64, 2048),
            ("--kv-cache-dtype=fp8", "--max-num-seqs=64", "--max-num-batched-tokens=2048"),
        ),
        (Dials(engine="sglang"), ("--kv-cache-dtype=auto",)),
        (
            Dials("fp8_e4m3", 64, 2048, engine="sglang"),
            (
                "--kv-cache-dtype=fp8_e4m3",
                "--max-running-requests=64",
                "--chunked-prefill-size=2048",
            ),
        ),
        (
            Dials("bf16", None, 512, engine="sglang"),
            ("--kv-cache-dtype=bf16", "--chunked-prefill-size=512"),
        ),
    ],
)
def test_each_engine_renders_its_own_flags(dials: Dials, flags: tuple[str, ...]) -> None:
    assert dials.flag_args() == flags


def test_a_restart_template_gets_the_engines_flags() -> None:
    template = ("restart-sglang", "{dial_args}", "--seqs={max_num_seqs}")
    assert restart_command_argv(template, Dials("auto", 2, engine="sglang")) == [
        "restart-sglang",
        "--kv-cache-dtype=auto",
        "--max-running-requests=2",
        "--seqs=2",
    ]


@pytest.mark.parametrize(
    ("command", "engine"),
    [
        (["python", "-m", "sglang.launch_server", "--model-path", "m"], "sglang"),
        (["/opt/sg/bin/python3", "-m", "sglang.launch_server"], "sglang"),
        (["python", "/src/sglang/python/sglang/launch_server.py", "--port", "30000"], "sglang"),
        (["sglang", "serve", "--model-path", "m"], "sglang"),
        (["/opt/sg/bin/sglang", "serve", "m"], "sglang"),
        (["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct"], "vllm"),
        (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vllm"),
        (["/usr/local/bin/start-replica", "--port", "8000"], None),
        # a model named like the engine is not the engine
        (["vllm", "serve", "org/sglang-tuned"], "vllm"),
        (["python", "-m", "slotop.sim"], None),
        ([], None),
    ],
)
def test_the_engine_is_told_from_the_launch_command(command: list[str], engine: str | None) -> None:
    assert engine_of_command(command) == engine


SGLANG_COMMAND = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--port", "30000"]


def _spec_dials(tmp_path: Path, replica: dict[str, object], launch: dict[str, object]) -> Dials:
    settings = settings_from_mapping({"replica": replica, "launch": launch}, "test")
    return launch_spec_from_settings(settings, state_folder=tmp_path).dials


def test_the_managed_replicas_engine_comes_from_the_command_or_replica_engine(
    tmp_path: Path,
) -> None:
    url = {"url": "http://127.0.0.1:30000"}
    launch = {"command": SGLANG_COMMAND, "max_num_seqs": 8}
    assert _spec_dials(tmp_path, url, launch) == Dials("auto", 8, engine="sglang")
    wrapper = {"command": ["/usr/local/bin/start-replica"]}
    assert _spec_dials(tmp_path, url, wrapper).engine == "vllm"  # neither named: vLLM, as before
    named = {**url, "engine": "sglang"}
    assert _spec_dials(tmp_path, named, wrapper).engine == "sglang"  # [replica] engine wins
    assert _spec_dials(tmp_path, {**url, "engine": "vllm"}, {"command": SGLANG_COMMAND}).engine == (
        "vllm"
    )
    assert _spec_dials(tmp_path, url, {}).engine == "vllm"  # the simulated replica


@pytest.mark.parametrize("flag", ["--max-running-requests=8", "--chunked-prefill-size"])
def test_a_launch_command_may_not_hold_sglangs_dial_flags(tmp_path: Path, flag: str) -> None:
    with pytest.raises(ConfigError, match=f"holds {flag.partition('=')[0]}; slotop sets"):
        settings_from_mapping({"launch": {"command": [*SGLANG_COMMAND, flag, "8"]}}, "test")


def test_the_state_file_keeps_the_engine(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    dials = Dials("bf16", 2, None, engine="sglang")
    state = ManagedState(1, None, ("python",), dials, "http://h:1", "log", 0, 0.0)
    write_state(path, state, None)
    read, _ = read_state(path)
    assert read is not None and read.dials == dials
    assert dials.to_json()["engine"] == "sglang"
    # vLLM's dials are written as before engines were kept, and such a file reads as vLLM
    assert "engine" not in Dials("fp8").to_json()
    assert Dials.from_json({"kv_cache_dtype": "fp8", "max_num_seqs": 4}) == Dials("fp8", 4)
    assert Dials.from_json({"engine": "tgi"}).engine == "vllm"


def _plan(before: Dials, after: Dials) -> RestartPlan:
    return plan_restart(
        before,
        after,
        url="http://127.0.0.1:30000",
        how="managed",
        kv=None,
        last_downtime_s=None,
        probe_status=None,
        drain_timeout_s=5.0,
        health_timeout_s=60.0,
    )


def test_a_kv_dtype_of_the_other_engine_is_refused_naming_this_ones_choices() -> None:
    sglang = Dials(engine="sglang")
    with pytest.raises(RestartRefusedError) as refused:
        _plan(sglang, Dials("fp8", engine="sglang"))
    assert str(refused.value) == (
        "SGLang takes no --kv-cache-dtype 'fp8' (only vLLM names it); SGLang's choices: auto, "
        "fp8_e5m2, fp8_e4m3, mxfp8, bf16, bfloat16, nvfp4, fp4_mx_block16"
    )
    with pytest.raises(RestartRefusedError, match="SGLang takes no --kv-cache-dtype 'fp9'"):
        _plan(sglang, Dials("fp9", engine="sglang"))  # SGLang's parser would refuse it too
    with pytest.raises(RestartRefusedError) as refused:
        _plan(Dials(), Dials("bf16"))
    assert str(refused.value).startswith(
        "vLLM takes no --kv-cache-dtype 'bf16' (only SGLang names it); vLLM's choices: auto, "
        "float16, bfloat16, fp8,"
    )
    # both engines name these; a value neither names is left for vLLM itself to judge
    assert _plan(sglang, Dials("fp8_e5m2", engine="sglang")).changes == (
        ("kv_cache_dtype", "auto", "fp8_e5m2"),
    )
    assert _plan(Dials(), Dials("bad")).changes == (("kv_cache_dtype", "auto", "bad"),)


def test_the_plan_of_an_sglang_dtype_change_without_its_pool_predicts_nothing() -> None:
    plan = _plan(Dials(engine="sglang"), Dials("bf16", engine="sglang"))
    assert plan.capacity is None
    assert plan.capacity_words.startswith(
        "KV capacity change unknown: the replica's max_total_num_tokens was not read"
    )
