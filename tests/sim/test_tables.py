"""The hardware and model tables, and reading a model from a Hugging Face config.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slotop.sim.errors import SimConfigError
from slotop.sim.tables import (
    GPUS,
    MODELS,
    gpu_by_name,
    load_hf_config,
    model_by_name_or_path,
)

# Parameter totals published with each checkpoint (safetensors metadata on the model cards).
PUBLISHED_PARAMS = [
    ("llama-3.1-8b", 8_030_261_248),
    ("llama-3.1-70b", 70_553_706_496),
    ("qwen2.5-7b", 7_615_616_512),
    ("qwen2.5-0.5b", 494_032_768),
    ("mistral-7b", 7_248_023_552),
]

# (table name, layers, kv heads, head_dim, max_position_embeddings) from each config.json.
PUBLISHED_SHAPES = [
    ("llama-3.1-8b", 32, 8, 128, 131072),
    ("llama-3.1-70b", 80, 8, 128, 131072),
    ("qwen2.5-7b", 28, 4, 128, 32768),
    ("qwen2.5-0.5b", 24, 2, 64, 32768),
    ("mistral-7b", 32, 8, 128, 32768),
]

REQUIRED_GPUS = ["h100-sxm", "h100-pcie", "h200", "a100-80gb", "l4", "l40s"]

LLAMA_8B_CONFIG = {
    "_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}


@pytest.mark.parametrize(("name", "params"), PUBLISHED_PARAMS)
def test_parameter_counts_match_the_published_totals(name: str, params: int) -> None:
    assert MODELS[name].num_params == params


@pytest.mark.parametrize(("name", "layers", "kv_heads", "head_dim", "max_pos"), PUBLISHED_SHAPES)
def test_model_shapes_match_their_configs(
    name: str, layers: int, kv_heads: int, head_dim: int, max_pos: int
) -> None:
    model = MODELS[name]
    assert (model.num_layers, model.num_kv_heads, model.head_dim) == (layers, kv_heads, head_dim)
    assert model.max_position_embeddings == max_pos


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_the_issue_s_gpus_are_in_the_table_with_sane_figures(name: str) -> None:
    gpu = GPUS[name]
    assert 16 * 2**30 < gpu.memory_bytes < 160 * 2**30
    assert 0.2e12 < gpu.hbm_bandwidth_bytes_per_s < 6e12
    assert 100e12 < gpu.bf16_dense_flops_per_s < 1000e12
    if gpu.fp8_dense_flops_per_s is not None:
        assert gpu.fp8_dense_flops_per_s == pytest.approx(2 * gpu.bf16_dense_flops_per_s, rel=0.05)


def test_only_ampere_lacks_fp8_tensor_cores() -> None:
    without = {name for name, gpu in GPUS.items() if gpu.fp8_dense_flops_per_s is None}
    assert without == {"a100-80gb", "a100-40gb"}


def test_h200_has_more_bandwidth_and_memory_than_h100() -> None:
    h100, h200 = GPUS["h100-sxm"], GPUS["h200"]
    assert h200.hbm_bandwidth_bytes_per_s > h100.hbm_bandwidth_bytes_per_s
    assert h200.memory_bytes > h100.memory_bytes
    assert h200.bf16_dense_flops_per_s == h100.bf16_dense_flops_per_s


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"),
        ("LLAMA-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"),
        ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct"),
        ("mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3"),
    ],
)
def test_models_are_found_by_short_name_or_hugging_face_id(given: str, expected: str) -> None:
    assert model_by_name_or_path(given).name == expected


def test_an_unknown_model_is_refused_with_the_choices() -> None:
    with pytest.raises(SimConfigError, match=re.escape("llama-3.1-8b")) as caught:
        model_by_name_or_path("gpt-5")
    assert "config.json" in str(caught.value)


def test_an_unknown_gpu_is_refused_with_the_choices() -> None:
    assert gpu_by_name("H100-SXM") is GPUS["h100-sxm"]
    with pytest.raises(SimConfigError, match="h100-sxm"):
        gpu_by_name("tpu-v5")


def test_a_config_json_reproduces_the_table_entry(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_8B_CONFIG), encoding="utf-8")
    loaded = load_hf_config(path)
    assert loaded == MODELS["llama-3.1-8b"]


def test_a_model_folder_or_its_config_path_both_load(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG), encoding="utf-8")
    assert model_by_name_or_path(str(tmp_path)).num_params == 8_030_261_248
    assert model_by_name_or_path(str(tmp_path / "config.json")).num_layers == 32


def test_config_head_dim_and_tied_embeddings_are_honoured(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(LLAMA_8B_CONFIG, tie_word_embeddings=True)), encoding="utf-8")
    tied = load_hf_config(path)
    assert tied.tie_word_embeddings
    assert tied.num_params == 8_030_261_248 - 128256 * 4096
    path.write_text(json.dumps(dict(LLAMA_8B_CONFIG, head_dim=64)), encoding="utf-8")
    narrow = load_hf_config(path)
    assert narrow.head_dim == 64
    # Halving head_dim halves q, k, v and o: 32 layers × (4096 × 3072 + 2048 × 4096) fewer.
    assert narrow.num_params == 8_030_261_248 - 32 * (4096 * 3072 + 2048 * 4096)


def test_multimodal_configs_are_read_through_their_text_config(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"text_config": LLAMA_8B_CONFIG}), encoding="utf-8")
    assert load_hf_config(path).hidden_size == 4096


def test_kv_heads_default_to_attention_heads(tmp_path: Path) -> None:
    config = {k: v for k, v in LLAMA_8B_CONFIG.items() if k != "num_key_value_heads"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert load_hf_config(path).num_kv_heads == 32


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"hidden_size": 4096}), "num_hidden_layers"),
        (json.dumps(dict(LLAMA_8B_CONFIG, vocab_size=-1)), "vocab_size"),
    ],
)
def test_broken_configs_are_refused_with_the_reason(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SimConfigError, match=message):
        load_hf_config(path)


def test_a_missing_config_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SimConfigError, match="cannot read"):
        load_hf_config(tmp_path / "absent.json")
