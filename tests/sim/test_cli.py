"""`slotop sim`'s command line: vLLM's flags and refusals, --dry-run sizing, handing off to the server."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from typing import Any

import pytest

from slotop.sim import cli
from slotop.sim.capacity import kv_capacity
from slotop.sim.tables import MODELS
from slotop.sim.types import EngineConfig, ServeOptions


def dry_run_json(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert cli.main(["--dry-run", "--json", *flags]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


def test_dry_run_prints_vllm_s_start_up_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--dry-run", "--max-model-len", "32768"]) == 0
    out = capsys.readouterr().out
    report = dry_run_json(capsys, "--max-model-len", "32768")
    assert f"GPU KV cache size: {report['kv_cache_size_tokens']:,} tokens" in out
    assert f"({report['num_gpu_blocks']:,} blocks)" in out
    assert (
        f"Maximum concurrency for 32,768 tokens per request: {report['max_concurrency']:.2f}x"
        in out
    )
    assert "gpu_memory_utilization (0.90)" in out


def test_dry_run_json_carries_the_sizing_and_the_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = dry_run_json(capsys)
    assert report["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert report["device_name"] == "NVIDIA H100 80GB HBM3"
    assert report["max_model_len"] == 131072
    assert report["bytes_per_token"] == 131072
    assert report["kv_cache_size_tokens"] == report["num_gpu_blocks"] * 16
    assert report["max_concurrency"] == pytest.approx(report["kv_cache_size_tokens"] / 131072)


def test_fp8_doubles_the_tokens_the_dry_run_reports(capsys: pytest.CaptureFixture[str]) -> None:
    bf16 = dry_run_json(capsys, "--max-model-len", "8192")
    fp8 = dry_run_json(capsys, "--max-model-len", "8192", "--kv-cache-dtype", "fp8")
    assert fp8["kv_cache_size_tokens"] in (
        2 * bf16["kv_cache_size_tokens"],
        2 * bf16["kv_cache_size_tokens"] + 16,
    )


@pytest.mark.parametrize(
    ("gpu", "seqs", "tokens"),
    [
        ("h100-sxm", 1024, 8192),
        ("h100-pcie", 1024, 8192),
        ("h200", 1024, 8192),
        ("a100-80gb", 256, 2048),
        ("l40s", 256, 2048),
        ("l4", 256, 2048),
    ],
)
def test_batch_defaults_are_vllm_s_for_each_gpu(
    capsys: pytest.CaptureFixture[str], gpu: str, seqs: int, tokens: int
) -> None:
    report = dry_run_json(capsys, "--gpu", gpu, "--max-model-len", "4096")
    assert (report["max_num_seqs"], report["max_num_batched_tokens"]) == (seqs, tokens)


def test_explicit_batch_limits_override_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    report = dry_run_json(
        capsys, "--max-num-seqs", "64", "--max-num-batched-tokens", "4k", "--max-model-len", "16K"
    )
    assert (report["max_num_seqs"], report["max_num_batched_tokens"]) == (64, 4000)
    assert report["max_model_len"] == 16384


@pytest.mark.parametrize("auto", ["auto", "-1"])
def test_max_model_len_auto_fits_the_kv_cache(
    capsys: pytest.CaptureFixture[str], auto: str
) -> None:
    report = dry_run_json(capsys, "--gpu", "l4", "--max-model-len", auto)
    assert report["max_model_len"] == (report["num_gpu_blocks"] - 1) * 16
    assert report["max_model_len"] < 131072


def test_the_model_may_be_given_positionally_as_vllm_serve_takes_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = dry_run_json(capsys, "mistral-7b")
    assert report["model"] == "mistralai/Mistral-7B-Instruct-v0.3"
    assert report["max_model_len"] == 32768


def test_a_bad_kv_cache_dtype_is_refused_like_vllm_serve(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["--kv-cache-dtype", "fp4", "--dry-run"])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    # vLLM 0.32 prints "argument --kv-cache-dtype: invalid choice: 'fp4' (choose from 'auto',
    # 'bfloat16', 'float16', 'fp8', 'fp8_ds_mla', ...)" and exits 2; the sim lists the six it models.
    assert (
        "argument --kv-cache-dtype: invalid choice: 'fp4' (choose from 'auto', 'bfloat16', "
        "'float16', 'fp8', 'fp8_e4m3', 'fp8_e5m2')"
    ) in err


@pytest.mark.parametrize(
    "flags",
    [["--gpu", "tpu"], ["--model", "gpt-5"], ["--max-model-len", "lots"], ["--json"]],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], flags: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(flags)
    assert caught.value.code == 2
    assert "slotop sim: error:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model", "llama-3.1-70b"], "tensor-parallel-size"),
        (["--gpu", "l4"], "max seq len (131072)"),
        (["--max-model-len", "200000"], "greater than the derived max_model_len"),
        (["--max-num-seqs", "512", "--max-num-batched-tokens", "256"], "must be greater"),
        (["--gpu-memory-utilization", "1.5"], "gpu-memory-utilization"),
        (["--model", "llama-3.1-8b", "-tp", "3"], "divisible"),
    ],
)
def test_configurations_vllm_would_refuse_exit_1_with_the_reason(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main([*flags, "--dry-run"]) == 1
    assert message in capsys.readouterr().err


def test_serving_hands_the_resolved_config_to_the_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[EngineConfig, ServeOptions]] = []
    fake = types.ModuleType("slotop.sim.server")

    def serve(config: EngineConfig, options: ServeOptions) -> int:
        calls.append((config, options))
        return 0

    fake.serve = serve  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "slotop.sim.server", fake)
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    flags = ["--port", "9123", "--kv-cache-dtype", "fp8", "--max-model-len", "4096"]
    assert cli.main([*flags, "--served-model-name", "a", "b"]) == 0
    config, options = calls[0]
    assert options == ServeOptions(
        host="127.0.0.1",
        port=9123,
        served_model_names=("a", "b"),
        api_key="from-env",
        lag_log_threshold_s=0.002,
        non_default_args=(
            ("port", 9123),
            ("served_model_name", ["a", "b"]),
            ("kv_cache_dtype", "fp8"),
            ("max_model_len", 4096),
        ),
    )
    assert config.kv_cache_dtype == "fp8"
    assert kv_capacity(config).max_model_len == 4096
    assert cli.main([*flags, "--api-key", "flag"]) == 0
    assert calls[1][1].api_key == "flag"
    assert calls[1][1].served_model_names == ("meta-llama/Llama-3.1-8B-Instruct",)


def test_prefix_caching_is_on_unless_turned_off_as_in_vllm_v1() -> None:
    parser = cli.build_parser()
    model = MODELS["llama-3.1-8b"]
    assert cli.config_from_args(parser.parse_args([]), model).enable_prefix_caching
    assert cli.config_from_args(
        parser.parse_args(["--enable-prefix-caching"]), model
    ).enable_prefix_caching
    off = parser.parse_args(["--no-enable-prefix-caching"])
    assert not cli.config_from_args(off, model).enable_prefix_caching
    assert dict(cli._non_default_args(parser, off)) == {"enable_prefix_caching": False}


def test_help_teaches_what_the_flags_do(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for phrase in ("twice the tokens", "chunked", "ceil(tokens / block_size)", "h100-sxm"):
        assert phrase in out


@pytest.mark.slow
def test_the_sim_runs_standalone_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "slotop.sim", "--dry-run", "--json", "--max-model-len", "8k"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["max_model_len"] == 8000


@pytest.mark.slow
def test_the_start_up_log_names_the_flags_given_as_vllm_does() -> None:
    """vLLM reports its batch limits only in `non-default args: {...}`; the sim must too."""
    parser = cli.build_parser()
    args = parser.parse_args(["--max-num-seqs", "8", "--kv-cache-dtype", "fp8", "--api-key", "k"])
    assert dict(cli._non_default_args(parser, args)) == {"max_num_seqs": 8, "kv_cache_dtype": "fp8"}
    assert cli._non_default_args(parser, parser.parse_args([])) == ()
    server = subprocess.Popen(
        [sys.executable, "-m", "slotop.sim", "--port", "0", "--max-num-seqs", "8"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        lines = []
        for line in server.stderr:
            lines.append(line)
            if "Application startup complete" in line:
                break
        assert any(
            "non-default args: {" in line and "'max_num_seqs': 8" in line for line in lines
        ), lines
    finally:
        server.terminate()
        server.wait(timeout=10)
