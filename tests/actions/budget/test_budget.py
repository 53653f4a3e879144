"""KV budget: hand-computed bytes per token, blocks and sequences, and the three sources."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from slotop.actions.budget.config_json import (
    budget_from_config,
    estimate_weight_bytes,
    kv_shape_from_config,
)
from slotop.actions.budget.kv import (
    GIB,
    BudgetError,
    KvShape,
    describe_capacity_change,
    dtype_bytes,
    expected_capacity_change,
    kv_bytes_per_token,
    kv_memory,
    sequences_that_fit,
)
from slotop.actions.budget.readings import (
    budget_from_cache_info,
    budget_from_sim_report,
    cache_info_from_labels,
)
from slotop.actions.budget.report import budget_to_json, format_budget_text
from slotop.actions.budget.sources import (
    BudgetRequest,
    BudgetUsageError,
    cache_infos_from_metrics,
    read_config_json,
    resolve_budget,
    sim_dry_run_argv,
    simulator_sizing,
)
from slotop.cli import main
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.snapshot import kv_cache_state
from tests.support.paths import CAPTURES

LLAMA_8B = {
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
LLAMA_70B = {
    **LLAMA_8B,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "hidden_size": 8192,
    "intermediate_size": 28672,
}
TINY_LLAMA = {  # tests/support/tiny_model.py's config: what the real vLLM CPU captures served
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "hidden_size": 256,
    "intermediate_size": 512,
    "vocab_size": 1024,
    "torch_dtype": "float32",
}


@pytest.mark.parametrize(
    ("config", "tp", "dtype", "expected"),
    [
        (LLAMA_8B, 1, "auto", 2 * 32 * 8 * 128 * 2),  # 131072 B
        (LLAMA_8B, 1, "bfloat16", 131072),
        (LLAMA_8B, 1, "fp8", 65536),
        (LLAMA_8B, 1, "fp8_e5m2", 65536),
        (LLAMA_8B, 1, "float32", 262144),
        (LLAMA_8B, 2, "auto", 2 * 32 * 4 * 128 * 2),
        (LLAMA_70B, 1, "auto", 2 * 80 * 8 * 128 * 2),  # 327680 B over the whole model
        (LLAMA_70B, 4, "auto", 2 * 80 * 2 * 128 * 2),  # 81920 B on each of 4 GPUs
        (LLAMA_70B, 8, "fp8", 2 * 80 * 1 * 128 * 1),
        (LLAMA_70B, 16, "auto", 2 * 80 * 1 * 128 * 2),  # 8 KV heads on 16 ranks: replicated
        (TINY_LLAMA, 1, "auto", 2 * 2 * 2 * 64 * 4),  # float32 model: auto is 4 bytes
        (TINY_LLAMA, 1, "fp8", 2 * 2 * 2 * 64 * 1),
    ],
)
def test_bytes_per_token_by_hand(
    config: dict[str, object], tp: int, dtype: str, expected: int
) -> None:
    shape = kv_shape_from_config(config, tensor_parallel_size=tp)
    assert kv_bytes_per_token(shape, dtype) == expected


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # no num_key_value_heads: multi-head attention, head_dim from hidden / heads
        ({"num_hidden_layers": 12, "num_attention_heads": 12, "hidden_size": 768}, 2 * 12 * 12 * 64 * 2),
        # GPT-2 style keys
        ({"n_layer": 24, "n_head": 16, "n_embd": 1024}, 2 * 24 * 16 * 64 * 2),
        # Falcon multi-query
        ({"num_hidden_layers": 32, "num_attention_heads": 71, "hidden_size": 4544, "multi_query": True}, 2 * 32 * 1 * 64 * 2),
        # multimodal checkpoint: the language model's keys under text_config
        ({"text_config": {**LLAMA_8B}, "vision_config": {"num_hidden_layers": 27}}, 131072),
        # DeepSeek-V3 latent attention: 61 layers × (512 + 64) × 2 bytes, no K/V pair
        ({"num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
          "hidden_size": 7168, "kv_lora_rank": 512, "qk_rope_head_dim": 64}, 61 * 576 * 2),
    ],
)  # fmt: skip
def test_config_key_variants(config: dict[str, object], expected: int) -> None:
    assert kv_bytes_per_token(kv_shape_from_config(config)) == expected


def test_latent_attention_is_not_split_across_ranks() -> None:
    shape = KvShape(61, 128, 128, tensor_parallel_size=8, mla_latent_dim=576)
    assert shape.elements_per_token() == 61 * 576


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"num_attention_heads": 8, "hidden_size": 512}, "num_hidden_layers"),
        ({"num_hidden_layers": 8, "hidden_size": 512}, "num_attention_heads"),
        ({"num_hidden_layers": 8, "num_attention_heads": 8}, "hidden_size"),
    ],
)
def test_config_without_the_keys_is_refused(config: dict[str, object], message: str) -> None:
    with pytest.raises(BudgetError, match=message):
        kv_shape_from_config(config, where="model/config.json")


def test_dtype_bytes() -> None:
    assert [dtype_bytes(d) for d in ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3")] == [
        2,
        2,
        2,
        1,
        1,
    ]
    assert dtype_bytes("auto", "float32") == 4
    assert dtype_bytes("auto", "torch.float16") == 2
    with pytest.raises(BudgetError, match="'int3'"):
        dtype_bytes("int3")


def test_weights_of_llama_8b_are_its_parameter_count() -> None:
    # 8,030,261,248 parameters, of which 266,240 are norm weights the estimate leaves out.
    assert estimate_weight_bytes(LLAMA_8B) == (8_030_261_248 - 266_240) * 2
    assert estimate_weight_bytes(LLAMA_8B, 2) == (8_030_261_248 - 266_240)
    assert estimate_weight_bytes({"num_hidden_layers": 2, "num_attention_heads": 2}) is None


def test_kv_memory_and_blocks_by_hand() -> None:
    memory = kv_memory(80 * GIB, 0.9, 16 * GIB, 2 * GIB)
    assert memory.kv_cache_bytes == 72 * GIB - 18 * GIB
    budget = budget_from_config(
        LLAMA_8B, gpu_memory_bytes=80 * GIB, weights_bytes=16 * GIB, overhead_bytes=2 * GIB,
        max_model_len_tokens=8192, avg_len_tokens=1000,
    )  # fmt: skip
    auto = budget.row("auto")
    fp8 = budget.row("fp8")
    assert auto is not None and fp8 is not None
    # 54 GiB // (131072 B × 16) = 27648 blocks; 8192 tokens = 512 blocks; 1000 tokens = 63 blocks
    assert (auto.kv_blocks, auto.kv_tokens) == (27648, 27648 * 16)
    assert auto.seqs_at_max_context == pytest.approx(27648 / 512)
    assert auto.seqs_at_avg_len == pytest.approx(27648 / 63)
    assert fp8.kv_blocks == 2 * auto.kv_blocks
    assert fp8.bytes_per_block == 65536 * 16


def test_kv_memory_refuses_what_cannot_fit() -> None:
    with pytest.raises(BudgetError, match="nothing is left"):
        kv_memory(24 * GIB, 0.9, 140 * GIB, 2 * GIB)
    with pytest.raises(BudgetError, match="utilization"):
        kv_memory(24 * GIB, 1.5, GIB, GIB)


def test_config_budget_defaults_max_len_to_the_model_and_notes_estimates() -> None:
    budget = budget_from_config(LLAMA_8B, gpu_memory_bytes=80 * GIB)
    assert budget.max_model_len_tokens == 131072
    assert any("estimated" in note for note in budget.notes)


@pytest.mark.parametrize(
    ("blocks", "length", "block_size", "expected"),
    [
        (1000, 131072, 16, 1000 / 8192),
        (1000, 100, 16, 1000 / 7),
        (256, 1024, 128, 32.0),
        (1000, None, 16, None),
        (1000, 0, 16, None),
    ],
)
def test_sequences_that_fit(
    blocks: int, length: int | None, block_size: int, expected: float | None
) -> None:
    assert sequences_that_fit(blocks, length, block_size) == expected


def _capture(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def test_cache_info_of_the_real_cpu_replica() -> None:
    (auto,) = cache_infos_from_metrics(_capture("vllm-0.32-cpu-idle.txt"))
    (fp8,) = cache_infos_from_metrics(_capture("vllm-0.32-cpu-fp8-idle.txt"))
    assert (auto.num_gpu_blocks, auto.block_size_tokens, auto.cache_dtype) == (256, 128, "auto")
    assert (fp8.num_gpu_blocks, fp8.cache_dtype) == (1024, "fp8")
    assert auto.kv_cache_memory_bytes == 64 * 1024 * 1024
    assert auto.max_model_len_tokens() == 1024


def test_replica_budget_with_the_config_predicts_the_fp8_restart() -> None:
    (auto,) = cache_infos_from_metrics(_capture("vllm-0.32-cpu-idle.txt"))
    (fp8,) = cache_infos_from_metrics(_capture("vllm-0.32-cpu-fp8-idle.txt"))
    budget = budget_from_cache_info(
        auto, shape=kv_shape_from_config(TINY_LLAMA), avg_len_tokens=300
    )
    row = budget.row("fp8")
    assert row is not None and row.kv_blocks == fp8.num_gpu_blocks
    auto_row = budget.row("auto")
    assert auto_row is not None and auto_row.bytes_per_token == 2048
    assert not any("B/token but" in note for note in budget.notes)


def test_replica_budget_without_the_config_says_what_auto_was_taken_as() -> None:
    (auto,) = cache_infos_from_metrics(_capture("vllm-0.32-cpu-idle.txt"))
    budget = budget_from_cache_info(auto)
    row = budget.row("auto")
    assert row is not None and row.bytes_per_token == 2048  # measured: memory over tokens
    assert any("auto taken as 2 bytes" in note for note in budget.notes)


def test_replica_budget_flags_a_config_that_does_not_match() -> None:
    (auto,) = cache_infos_from_metrics(_capture("vllm-0.32-cpu-idle.txt"))
    budget = budget_from_cache_info(auto, shape=kv_shape_from_config(LLAMA_8B))
    assert any("is it the same model" in note for note in budget.notes)


def test_cache_info_without_blocks_is_refused() -> None:
    with pytest.raises(BudgetError, match="num_gpu_blocks"):
        cache_info_from_labels({"block_size": "16", "num_gpu_blocks": "None"})


def test_expected_capacity_change_matches_the_real_fp8_restart() -> None:
    state = kv_cache_state(read_metrics_text(_capture("vllm-0.32-cpu-idle.txt")))
    change = expected_capacity_change(state, "fp8", model_dtype="float32")
    assert (change.blocks_before, change.blocks_after, change.ratio) == (256, 1024, 4.0)
    assert (change.tokens_before, change.tokens_after) == (32768, 131072)
    assert (change.seqs_at_max_context_before, change.seqs_at_max_context_after) == (32.0, 128.0)
    assert "256 → 1,024" in describe_capacity_change(change)


def test_expected_capacity_change_without_model_dtype_assumes_16_bit() -> None:
    state = kv_cache_state(read_metrics_text(_capture("vllm-0.32-cpu-idle.txt")))
    change = expected_capacity_change(state, "fp8")
    assert change.blocks_after == 512
    assert change.notes and "auto taken as 2 bytes" in change.notes[0]
    back = expected_capacity_change(
        kv_cache_state(read_metrics_text(_capture("vllm-0.32-cpu-fp8-idle.txt"))),
        "auto",
        model_dtype="float32",
    )
    assert (back.blocks_after, back.ratio) == (256, 0.25)


def _sim_report(*flags: str) -> dict[str, object]:
    argv = sim_dry_run_argv("llama-3.1-8b", "h100-sxm", max_model_len=32768)
    return simulator_sizing([*argv, *flags])


@pytest.mark.slow
def test_simulator_budget_agrees_with_the_simulator_at_each_dtype() -> None:
    auto = _sim_report()
    fp8 = _sim_report("--kv-cache-dtype", "fp8")
    budget = budget_from_sim_report(auto, avg_len_tokens=2048)
    auto_row, fp8_row = budget.row("auto"), budget.row("fp8")
    assert auto_row is not None and fp8_row is not None
    assert auto_row.bytes_per_token == 131072 == auto["bytes_per_token"]
    assert auto_row.kv_blocks == auto["num_gpu_blocks"]
    assert auto_row.seqs_at_max_context == pytest.approx(auto["max_concurrency"])
    assert fp8_row.kv_blocks == fp8["num_gpu_blocks"]


def test_simulator_refusal_is_reported_with_its_reason() -> None:
    def refuse(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 2, "", "usage: ...\nslotop sim: error: too big\n")

    with pytest.raises(BudgetError, match="refused this sizing: slotop sim: error: too big"):
        simulator_sizing(["sim"], runner=refuse)


def test_read_config_json_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B))
    assert read_config_json(tmp_path)["num_hidden_layers"] == 32
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(BudgetError, match=r"bad\.json is not JSON"):
        read_config_json(bad)
    with pytest.raises(BudgetError, match="cannot read"):
        read_config_json(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (BudgetRequest(), "say what to size"),
        (BudgetRequest(config_json=Path("c.json")), "--gpu-memory-gib"),
        (BudgetRequest(url="http://127.0.0.1:1", gpu="h100-sxm"), "--gpu do not apply"),
        (BudgetRequest(gpu="h100-sxm", gpu_memory_gib=80.0), "--gpu-memory-gib do not apply"),
        (BudgetRequest(model="x", gpu="l4", config_json=Path("c.json")), "not both"),
    ],
)
def test_budget_request_needs_one_source(request_: BudgetRequest, message: str) -> None:
    with pytest.raises(BudgetUsageError, match=message):
        resolve_budget(request_)


def test_text_and_json_reports(tmp_path: Path) -> None:
    budget = budget_from_config(LLAMA_8B, gpu_memory_bytes=80 * GIB, avg_len_tokens=1000)
    text = format_budget_text(budget)
    assert "2 (K,V) × layers 32 × kv_heads 8" in text
    assert "131,072" in text and "65,536" in text
    data = budget_to_json(budget)
    assert json.loads(json.dumps(data))["rows"][0]["bytes_per_token"] == 131072


def test_cli_budget_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_70B))
    code = main(
        ["budget", "--config-json", str(path), "--gpu-memory-gib", "80", "-tp", "4", "--json"]
    )
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["kv_cache_dtype"]: row for row in data["rows"]}
    assert rows["auto"]["bytes_per_token"] == 81920
    assert rows["fp8"]["bytes_per_token"] == 40960
    assert data["shape"]["kv_heads_per_gpu"] == 2


def test_cli_budget_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget"]) == 2
    assert "say what to size" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_budget_help_teaches_the_formula() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "slotop", "budget", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "2 (K and V) × layers × kv_heads_per_gpu × head_dim × dtype bytes" in out
    assert "131,072 B/token" in out


@pytest.mark.slow
def test_budget_of_a_live_simulated_replica() -> None:
    from slotop.sim.defaults import resolve_engine_config
    from slotop.sim.server import ServerThread
    from slotop.sim.tables import gpu_by_name, model_by_name_or_path
    from slotop.sim.types import ServeOptions

    config = resolve_engine_config(
        model_by_name_or_path("llama-3.1-8b"), gpu_by_name("h100-sxm"), max_model_len=32768
    )
    sized = _sim_report()  # the same model, GPU and max_model_len, from the dry run
    with ServerThread(config, ServeOptions("127.0.0.1", 0, ("sim",), None, 0.0)) as running:
        budget = resolve_budget(BudgetRequest(url=running.url, avg_len=2048))
    auto, fp8 = budget.row("auto"), budget.row("fp8")
    assert auto is not None and fp8 is not None
    assert (budget.source, budget.model, budget.current_dtype) == ("replica", "sim", "auto")
    assert auto.kv_blocks == sized["num_gpu_blocks"]
    assert fp8.kv_blocks == 2 * auto.kv_blocks
    assert budget.max_model_len_tokens == 32768
    assert auto.seqs_at_avg_len == pytest.approx(auto.kv_blocks / 128)


def test_weights_of_a_mixture_of_experts_count_every_expert() -> None:
    mixtral = {
        **LLAMA_8B,
        "vocab_size": 32000,
        "num_local_experts": 8,
        "max_position_embeddings": 32768,
    }
    params = estimate_weight_bytes(mixtral, 1)
    # Mixtral-8x7B has 46.7 B parameters; the estimate leaves out norms and the router
    assert params is not None and params / 2 == pytest.approx(46.7e9, rel=0.002)


def test_config_budget_names_the_model() -> None:
    budget = budget_from_config(
        {**LLAMA_8B, "architectures": ["LlamaForCausalLM"]}, gpu_memory_bytes=80 * GIB
    )
    assert budget.model == "LlamaForCausalLM"


@pytest.mark.vllm
def test_budget_of_the_real_vllm_replica(vllm_replica: object, tiny_model_dir: Path) -> None:
    """The live budget with the tiny model's config: measured and computed bytes per token agree."""
    url = vllm_replica.url  # type: ignore[attr-defined]
    budget = resolve_budget(BudgetRequest(url=url, config_json=tiny_model_dir, avg_len=256))
    auto, fp8 = budget.row("auto"), budget.row("fp8")
    assert auto is not None and fp8 is not None
    assert (auto.bytes_per_token, auto.kv_blocks, auto.dtype_bytes) == (2048, 256, 4)
    assert fp8.kv_blocks == 1024  # what vLLM CPU sized when started with --kv-cache-dtype fp8
    assert budget.max_model_len_tokens == 1024
    assert budget.memory is not None and budget.memory.kv_cache_bytes == 64 * 1024 * 1024
    assert not any("same model" in note or "auto taken" in note for note in budget.notes)


def test_a_sliding_window_is_noted() -> None:
    budget = budget_from_config({**LLAMA_8B, "sliding_window": 4096}, gpu_memory_bytes=80 * GIB)
    assert any("sliding window of 4,096 tokens" in note for note in budget.notes)
    plain = budget_from_config({**LLAMA_8B, "sliding_window": None}, gpu_memory_bytes=80 * GIB)
    assert not any("sliding" in note for note in plain.notes)
