"""SGLang's KV budget: a pool of tokens in pages, scaled by element width, held at its cap.

Expected values are worked by hand, read from the real CPU server's captured /get_server_info
(float32, `--max-total-tokens 4096`), or taken from the simulated SGLang replica's own sizing at
each dtype (sim/capacity.py sizes the pool from memory as SGLang does, apart from this code).
"""

from __future__ import annotations

import json

import pytest

from slotop.actions.budget.kv import BudgetError, KvShape, describe_capacity_change
from slotop.actions.budget.report import budget_to_json, format_budget_text
from slotop.actions.budget.sglang import (
    SglangPool,
    max_total_tokens_of,
    model_dtype_of_server,
    pool_from_server_info,
    seqs_at,
    sglang_budget,
    sglang_capacity_change,
    tokens_at,
)
from slotop.actions.budget.sources import BudgetRequest, resolve_budget
from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import plan_restart
from slotop.collectors.snapshot import KvCacheState
from slotop.sim.sglang.flags import build_parser, replica_from_args
from tests.support.paths import CAPTURES
from tests.support.sglang_pool import sglang_pool
from tests.support.sglang_replica import SglangReplica
from tests.support.sglang_sim import running

BF16_POOL = SglangPool(412_967, model_dtype="bfloat16")
"""Llama-3.1-8B on an H100 as the sim sizes it: 412,967 tokens of 128 KiB at bf16."""


@pytest.mark.parametrize(
    ("pool", "dtype", "tokens", "basis"),
    [
        (BF16_POOL, "bf16", 412_967, "reported"),
        (BF16_POOL, "auto", 412_967, "reported"),  # auto is the model's bf16
        (BF16_POOL, "fp8_e4m3", 825_934, "estimated"),
        (BF16_POOL, "fp8_e5m2", 825_934, "estimated"),
        # pages of 16: 63 pages at fp8 are 31.5 pages at bf16, floored to 31
        (SglangPool(1_008, 16, "fp8_e4m3", "bfloat16"), "bf16", 496, "estimated"),
        (SglangPool(992, 16, "bf16", "bfloat16"), "fp8_e4m3", 1_984, "estimated"),
        # a float32 model: auto is 4 bytes, so fp8 holds four times the tokens
        (SglangPool(1_000, model_dtype="float32"), "fp8_e4m3", 4_000, "estimated"),
        # a cap that does not bind now still holds the narrower dtype
        (SglangPool(412_967, max_total_tokens=1_000_000), "fp8_e4m3", 825_934, "estimated"),
        (SglangPool(412_967, max_total_tokens=600_000), "fp8_e4m3", 600_000, "capped"),
        # a cap that binds now: narrower stays at it (floored to pages), wider is at least scaled
        (
            SglangPool(4_096, kv_cache_dtype="auto", model_dtype="float32", max_total_tokens=4_096),
            "bf16",
            4_096,
            "capped",
        ),
        (
            SglangPool(200_000, 16, "fp8_e4m3", max_total_tokens=200_005),
            "bf16",
            100_000,
            "at least",
        ),
        (SglangPool(200_000, 16, "bf16", max_total_tokens=200_005), "fp8_e4m3", 200_000, "capped"),
    ],
)
def test_tokens_at_another_dtype_by_hand(
    pool: SglangPool, dtype: str, tokens: int, basis: str
) -> None:
    at = tokens_at(pool, dtype)
    assert (at.tokens, at.basis) == (tokens, basis)


def test_sequences_count_whole_pages() -> None:
    # the sim's own figure for Llama-3.1-8B on an H100: 412,967 / 131,072
    assert seqs_at(412_967, 131_072, 1) == pytest.approx(3.1506881713867188)
    assert seqs_at(200_000, 131_072, 16) == 12_500 / 8_192
    assert seqs_at(200_000, 100, 16) == 12_500 / 7  # 100 tokens take 7 pages of 16
    assert seqs_at(200_000, None, 16) is None


def test_launch_flags_and_server_dtypes() -> None:
    assert (
        max_total_tokens_of(["python", "-m", "sglang.launch_server", "--max-total-tokens", "8192"])
        == 8192
    )
    assert max_total_tokens_of(["--max-total-tokens=4096", "--port", "1"]) == 4096
    assert max_total_tokens_of(["--port", "1"]) is None
    assert max_total_tokens_of(["--max-total-tokens", "lots"]) is None
    assert model_dtype_of_server("float32") == "float32"
    assert model_dtype_of_server("auto") is None
    assert model_dtype_of_server(None) is None


def _real_cpu_server_info() -> dict[str, object]:
    path = CAPTURES / "sglang-0.5.23-cpu-server-info.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_real_cpu_server_is_held_at_its_cap_at_every_dtype() -> None:
    pool = pool_from_server_info(_real_cpu_server_info())
    assert pool == SglangPool(
        4_096, 1, "auto", "float32", 4_096, None, 0.716, 1
    )  # its log: "#tokens: 4096", float32, --max-total-tokens 4096
    budget = sglang_budget(pool, context_len_tokens=2_048, model="tiny-llama")
    rows = {row.kv_cache_dtype: row for row in budget.rows}
    assert rows["auto"].dtype_bytes == 4
    assert [(r.kv_tokens, r.basis) for r in budget.rows] == [
        (4_096, "reported"),
        (4_096, "capped"),
        (4_096, "capped"),
    ]
    assert rows["fp8_e5m2"].seqs_at_max_context == 2.0  # its log: context_len=2048
    assert "--max-total-tokens 4,096 caps the pool and holds it now" in budget.notes
    text = format_budget_text(budget)
    assert "fp8_e5m2      1      N/A     N/A  4,096   4,096       2.0       N/A  capped" in text
    assert "capped: held at --max-total-tokens" in text
    assert budget_to_json(budget)["engine"] == "sglang"


def test_a_config_gives_bytes_per_token_and_the_auto_width() -> None:
    # a float32 checkpoint under --dtype auto: SGLang loads it in 16 bits, so auto is 2 bytes
    shape = KvShape(num_layers=32, num_kv_heads=8, head_dim=128, model_dtype="float32")
    budget = sglang_budget(SglangPool(412_967), shape=shape, context_len_tokens=131_072)
    auto, fp8 = budget.row("auto"), budget.row("fp8_e5m2")
    assert auto is not None and fp8 is not None
    assert (auto.bytes_per_token, fp8.bytes_per_token) == (131_072, 65_536)
    assert fp8.kv_tokens == 825_934
    assert budget.memory is not None and budget.memory.kv_cache_bytes == 412_967 * 131_072
    assert not [note for note in budget.notes if note.startswith("auto taken")]


def _sim_tokens(*flags: str) -> int:
    """The pool the simulated SGLang replica sizes from memory with these flags."""
    return replica_from_args(build_parser().parse_args(list(flags))).max_total_num_tokens


def test_a_live_simulated_sglang_replica_against_the_sims_own_sizing() -> None:
    with running() as (url, _):
        budget = resolve_budget(BudgetRequest(url=url, avg_len=2_000))
    assert (budget.engine, budget.source, budget.model) == ("sglang", "sglang", "tiny-llama")
    assert budget.max_model_len_tokens == 131_072  # /v1/models' max_model_len
    for row in budget.rows:
        sized = _sim_tokens(f"--kv-cache-dtype={row.kv_cache_dtype}")
        # the estimate floors once more than SGLang does: at most one token short per width step
        assert 0 <= sized - row.kv_tokens <= 1, row
    fp8 = budget.row("fp8_e5m2")
    assert fp8 is not None and fp8.basis == "estimated"
    assert fp8.seqs_at_avg_len == fp8.kv_tokens / 2_000


def test_a_capped_simulated_replica_gives_bounds_the_sim_falls_within() -> None:
    flags = ("--kv-cache-dtype=fp8_e4m3", "--page-size=16", "--max-total-tokens=200000")
    # with metrics: /metrics answers without vLLM's cache_config_info, and SGLang is asked
    with running(*flags, "--context-length=8192", "--enable-metrics") as (url, _):
        budget = resolve_budget(BudgetRequest(url=url))
    bf16, fp8 = budget.row("bf16"), budget.row("fp8_e5m2")
    assert bf16 is not None and fp8 is not None
    assert (fp8.kv_tokens, fp8.basis, fp8.kv_blocks) == (200_000, "reported", 12_500)
    assert (bf16.kv_tokens, bf16.basis) == (100_000, "at least")
    sized = _sim_tokens("--kv-cache-dtype=bf16", "--page-size=16", "--max-total-tokens=200000")
    assert bf16.kv_tokens <= sized <= 200_000
    assert fp8.seqs_at_max_context == 12_500 / 512  # --context-length 8192 is 512 pages


def test_the_capacity_change_a_pane_shows_says_what_it_could_not_know() -> None:
    change = sglang_capacity_change(
        sglang_pool(412_967, 131_072), "fp8_e4m3", model_dtype="bfloat16"
    )
    assert (change.tokens_after, change.ratio) == (825_934, 2.0)
    assert change.notes == ("unless --max-total-tokens caps it",)
    known = sglang_capacity_change(
        sglang_pool(4_096, 2_048, "auto"),
        "fp8_e4m3",
        model_dtype="float32",
        max_total_tokens=4_096,
        cap_known=True,
    )
    assert (known.tokens_after, known.ratio, known.notes) == (
        4_096,
        1.0,
        ("--max-total-tokens 4,096 holds it",),
    )


def _plan(kv: KvCacheState | None, launch: list[str] | None) -> tuple[object, str]:
    plan = plan_restart(
        Dials("auto", engine="sglang"),
        Dials("fp8_e4m3", engine="sglang"),
        url="http://127.0.0.1:30000",
        how="managed" if launch is not None else "command",
        kv=kv,
        last_downtime_s=None,
        probe_status=None,
        drain_timeout_s=5.0,
        health_timeout_s=60.0,
        launch_command=launch,
    )
    return plan.capacity, plan.capacity_words


def test_the_restart_plan_predicts_an_sglang_dtype_change() -> None:
    launch = ["python", "-m", "sglang.launch_server", "--dtype", "bfloat16"]
    capacity, words = _plan(sglang_pool(412_967, 131_072), launch)
    assert capacity is not None
    assert words == (
        "KV cache auto (2 B) → fp8_e4m3 (1 B): ×2 capacity (tokens 412,967 → 825,934, "
        "sequences at max context 3.2 → 6.3)"
    )
    # the real CPU server's command: float32 and a cap of 4,096 tokens, which holds it
    launch = [*launch[:3], "--dtype=float32", "--max-total-tokens", "4096"]
    _, words = _plan(sglang_pool(4_096, 2_048), launch)
    assert words == (
        "KV cache auto (4 B) → fp8_e4m3 (1 B): ×1 capacity (tokens 4,096 → 4,096, "
        "sequences at max context 2.0 → 2.0, --max-total-tokens 4,096 holds it)"
    )
    # a restart command's cap is not known: the prediction says a cap would hold it
    _, words = _plan(sglang_pool(412_967, 131_072), None)
    assert words.endswith("unless --max-total-tokens caps it)")
    assert "auto taken as 2 bytes" in words
    _, words = _plan(None, launch)
    assert words.startswith("KV capacity change unknown: the replica's max_total_num_tokens")


def test_describe_names_pages_only_when_they_are_not_tokens() -> None:
    kv = KvCacheState(0.0, (), 16, 1_000, 0, 1_000, "bf16", 16_000, 16_000 / 4_096, None)
    change = sglang_capacity_change(kv, "fp8_e4m3", cap_known=True)
    assert describe_capacity_change(change) == (
        "KV cache bf16 (2 B) → fp8_e4m3 (1 B): ×2 capacity (pages 1,000 → 2,000, tokens 16,000 "
        "→ 32,000, sequences at max context 3.9 → 7.8)"
    )


@pytest.mark.sglang
@pytest.mark.slow
def test_budget_of_the_real_sglang_server(sglang_replica: SglangReplica) -> None:
    budget = resolve_budget(BudgetRequest(url=sglang_replica.url))
    # its log: "#tokens: 4096 ... dtype: torch.float32" and "context_len=2048"
    assert (budget.current_dtype, budget.max_model_len_tokens) == ("auto", 2_048)
    assert [(r.kv_cache_dtype, r.dtype_bytes, r.kv_tokens, r.basis) for r in budget.rows] == [
        ("auto", 4, 4_096, "reported"),
        ("bf16", 2, 4_096, "capped"),
        ("fp8_e5m2", 1, 4_096, "capped"),
    ]
    assert budget.rows[0].seqs_at_max_context == 2.0


def test_a_pool_of_scaled_elements_is_refused_by_name() -> None:
    with pytest.raises(BudgetError, match="not --kv-cache-dtype mxfp8, which stores scales"):
        sglang_budget(SglangPool(1_000, kv_cache_dtype="mxfp8"))
