"""`slotop sim --engine sglang`: SGLang's flag names and refusals, its defaults for the GPU, its
KV-pool sizing, and how the flags map onto the engine model.

The expected defaults are worked by hand from SGLang 0.5.23's rules
(`arg_groups/memory_hook.py`, `KVCacheConfigurator.resolve_max_num_reqs`); the GPUs' memory is the
hardware table's (H100: 79.19 GiB, so 81,090 MiB as SGLang counts it).
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from slotop.sim import cli
from slotop.sim.sglang import flags
from slotop.sim.sglang.config import SglangReplica
from slotop.sim.types import ServeOptions

LLAMA_8B_BF16_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2
"""K and V, 32 layers, 8 KV heads of 128, two bytes each."""


def dry_run(capsys: pytest.CaptureFixture[str], *given: str) -> dict[str, Any]:
    assert cli.main(["--engine", "sglang", "--dry-run", "--json", *given]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return report


@pytest.mark.parametrize(
    ("gpu", "chunk", "graph_bs", "fraction"),
    [
        # 512 + 1.5 × 8192 + 128 + 2 × 256 + 8 × 58 prefill graph sizes = 13,904 MiB reserved.
        ("h100-sxm", 8192, 256, 0.829),  # (81090 − 13904) / 81090
        ("h200", 8192, 256, 0.903),  # (143165 − 13904) / 143165
        # 512 + 1.5 × 4096 + 128 + 2 × 32 + 8 × 50 = 7,248 MiB; no 10 GiB floor under 60 GiB.
        ("a100-40gb", 4096, 32, 0.82),  # (40335 − 7248) / 40335
        ("l40s", 4096, 32, 0.841),  # (45588 − 7248) / 45588
    ],
)
def test_defaults_are_sglangs_for_the_gpu(
    capsys: pytest.CaptureFixture[str], gpu: str, chunk: int, graph_bs: int, fraction: float
) -> None:
    report = dry_run(capsys, "--gpu", gpu)
    assert report["chunked_prefill_size"] == chunk
    assert report["cuda_graph_max_bs_decode"] == graph_bs
    assert report["mem_fraction_static"] == fraction
    assert report["page_size"] == 1
    assert report["max_prefill_tokens"] == 16384


def test_the_pool_is_what_the_weights_leave_of_the_static_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = dry_run(capsys)
    assert report["bytes_per_token"] == LLAMA_8B_BF16_BYTES_PER_TOKEN
    pre_load = report["total_gpu_memory_bytes"] - int(0.30 * (1 << 30))
    room = int(pre_load * 0.829) - report["weights_bytes"]
    tokens = report["max_total_num_tokens"]
    assert (
        tokens * LLAMA_8B_BF16_BYTES_PER_TOKEN
        <= room
        < (tokens + 1) * LLAMA_8B_BF16_BYTES_PER_TOKEN
    )
    # 412,967 / 131,072 × 512 = 1,613 requests, raised to SGLang's floor of 2,048.
    assert report["max_running_requests"] == 2048
    assert report["context_len"] == 131072


@pytest.mark.parametrize(
    ("dtype", "bytes_per_token"),
    [
        ("fp8_e4m3", 65536),
        ("fp8_e5m2", 65536),
        ("bf16", 131072),
        ("mxfp8", 65536 + 65536 // 32),
        ("nvfp4", 65536 // 2 + 65536 // 16),
    ],
)
def test_kv_cache_dtypes_size_the_pool_per_token(
    capsys: pytest.CaptureFixture[str], dtype: str, bytes_per_token: int
) -> None:
    auto = dry_run(capsys)
    report = dry_run(capsys, "--kv-cache-dtype", dtype)
    assert report["bytes_per_token"] == bytes_per_token
    ratio = auto["bytes_per_token"] / bytes_per_token
    assert report["max_total_num_tokens"] == pytest.approx(
        auto["max_total_num_tokens"] * ratio, abs=ratio
    )


def test_explicit_limits_override_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    report = dry_run(
        capsys,
        "--max-total-tokens=4100",
        "--page-size=16",
        "--max-running-requests=8",
        "--chunked-prefill-size=2048",
        "--mem-fraction-static=0.7",
        "--context-length=8k",
    )
    assert report["max_total_num_tokens"] == 4096  # whole pages of 16
    assert report["num_pages"] == 256
    assert report["max_running_requests"] == 8
    assert report["chunked_prefill_size"] == 2048
    assert report["mem_fraction_static"] == 0.7
    assert report["context_len"] == 8000
    assert report["cuda_graph_max_bs_decode"] == 8  # never above the running cap


def test_the_running_cap_is_never_more_than_half_the_pool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        dry_run(capsys, "--max-total-tokens=100", "--max-running-requests=80")[
            "max_running_requests"
        ]
        == 50
    )
    # 412,967 / 8,192 × 512 = 25,810, lowered to SGLang's ceiling of 4,096.
    assert dry_run(capsys, "--context-length=8192")["max_running_requests"] == 4096


def test_flags_map_onto_the_engine_model() -> None:
    args = flags.build_parser().parse_args(
        [
            "--max-running-requests=8",
            "--chunked-prefill-size=512",
            "--page-size=16",
            "--max-total-tokens=8192",
            "--disable-radix-cache",
            "--disable-overlap-schedule",
            "--kv-cache-dtype=fp8_e4m3",
        ]
    )
    replica = flags.replica_from_args(args)
    engine = replica.engine
    assert engine.max_num_seqs == 8
    assert engine.max_num_batched_tokens == 512
    assert engine.block_size == 16
    assert not engine.enable_prefix_caching
    assert not engine.async_scheduling
    assert engine.kv_pool is not None
    assert engine.kv_pool.num_gpu_blocks - 1 == 8192 // 16
    assert engine.kv_pool.bytes_per_token == 65536


def test_the_token_budget_never_holds_a_decode_back() -> None:
    """SGLang decodes apart from its prefill chunks: every running request decodes each step."""
    args = flags.build_parser().parse_args(
        ["--max-running-requests=600", "--chunked-prefill-size=256"]
    )
    assert flags.replica_from_args(args).engine.max_num_batched_tokens == 600
    off = flags.build_parser().parse_args(["--chunked-prefill-size=-1", "--context-length=32768"])
    assert flags.replica_from_args(off).engine.max_num_batched_tokens == 32768


def test_the_dry_run_prints_sglangs_start_up_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--engine", "sglang", "--dry-run", "--kv-cache-dtype", "fp8_e5m2"]) == 0
    out = capsys.readouterr().out
    report = dry_run(capsys, "--kv-cache-dtype", "fp8_e5m2")
    assert (
        f"KV Cache is allocated. dtype: torch.float8_e5m2, #tokens: "
        f"{report['max_total_num_tokens']}," in out
    )
    assert (
        f"max_total_num_tokens={report['max_total_num_tokens']}, chunked_prefill_size=8192, "
        "max_prefill_tokens=16384, max_running_requests=3226, context_len=131072, "
        "available_gpu_mem=" in out
    )
    # Twice the bf16 pool: 825,934 / 131,072 × 512 = 3,226 requests, within SGLang's 2,048-4,096.
    assert report["max_total_num_tokens"] == 825934
    assert "mem_fraction_static=0.829" in out


def test_a_kv_cache_dtype_sglang_lacks_is_refused_by_its_argparse(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--engine", "sglang", "--kv-cache-dtype", "fp8"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --kv-cache-dtype: invalid choice: 'fp8'" in err
    assert "'fp8_e4m3'" in err and "'nvfp4'" in err


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (["--gpu", "l4"], "Loaded weights leave no GPU memory for the KV cache"),
        (["--mem-fraction-static", "1.5"], "--mem-fraction-static must be between 0 and 1"),
        (["--context-length", "200000"], "is greater than the derived context_length (131072)"),
        (["--tp-size", "3"], "must be divisible by --tp-size (3)"),
        (["--model-path", "nope"], "unknown model 'nope'"),
    ],
)
def test_settings_sglang_would_refuse_exit_1_with_the_reason(
    capsys: pytest.CaptureFixture[str], given: list[str], message: str
) -> None:
    assert cli.main(["--engine", "sglang", "--dry-run", *given]) == 1
    assert message in capsys.readouterr().err


def test_the_vllm_mode_takes_engine_vllm_and_stays_the_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.engine_of([]) == "vllm"
    assert cli.engine_of(["--engine=sglang", "--port", "1"]) == "sglang"
    assert cli.main(["--engine", "vllm", "--dry-run", "--json"]) == 0
    assert "num_gpu_blocks" in json.loads(capsys.readouterr().out)
    with pytest.raises(SystemExit):
        cli.main(["--engine", "tgi", "--dry-run"])


def test_serving_hands_the_resolved_settings_to_the_sglang_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[SglangReplica, ServeOptions]] = []
    fake = types.ModuleType("slotop.sim.sglang.server")

    def serve(replica: SglangReplica, options: ServeOptions) -> int:
        calls.append((replica, options))
        return 0

    fake.serve = serve  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "slotop.sim.sglang.server", fake)
    given = ["--engine", "sglang", "--api-key", "k", "--max-running-requests", "16"]
    assert cli.main([*given, "--enable-metrics"]) == 0
    replica, options = calls[0]
    assert options == ServeOptions(
        host="127.0.0.1",
        port=30000,
        served_model_names=("meta-llama/Llama-3.1-8B-Instruct",),
        api_key="k",
        lag_log_threshold_s=0.002,
    )
    assert replica.args.enable_metrics
    assert replica.max_running_requests == replica.engine.max_num_seqs == 16
    assert "--max-running-requests=16" in replica.args.launch_command
    assert "--enable-metrics" in replica.args.launch_command
    assert "engine" not in replica.args.launch_command
    assert cli.main(["--engine", "sglang", "--model", "qwen2.5-7b", "--served-model-name=q"]) == 0
    assert calls[1][0].args.model_path == "Qwen/Qwen2.5-7B-Instruct"
    assert calls[1][1].served_model_names == ("q",)


def test_help_teaches_what_the_flags_do(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--engine", "sglang", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for phrase in ("--max-running-requests", "ceil(tokens / page_size)", "twice the tokens", "404"):
        assert phrase in out
