"""Simulated replicas whose best configuration only a full grid of the dials knows.

Each is Llama-3.1-8B on a simulated H100 (`slotop sim --model llama-3.1-8b --gpu h100-sxm`), its
KV cache sized as vLLM sizes it at start-up (the activation peak of the profile run at
max_num_batched_tokens taken out first), under the probe's closed loop of fixed lengths:

- `seq-cap`: a roomy cache and a low max_num_seqs; the sequence cap binds until the SLO does.
- `kv-fp8`: long contexts in a small cache; KV capacity binds, and fp8 doubles the sequences.
- `token-budget`: long prompts against a small chunked-prefill budget; each prompt takes many
  steps, so TTFT breaks while the steps batch the whole budget, and too large a budget stalls
  the decodes behind long chunks (ITL).
- `activation`: an fp8 cache squeezed by a large max_num_batched_tokens; a lower one gives its
  activation memory back to the KV cache at start-up, and the cache binds no more.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from slotop.actions.replica.spec import Dials
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.tune.model import TuneSpec
from slotop.sim.types import EngineConfig
from slotop.slo import Slo
from tests.support.virtual_load import engine_config, fixed_shape, sglang_engine_config
from tests.support.virtual_tune import Scenario, grid_cells

ALL_DIALS = frozenset({"kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens"})


def _sim_flags(gpu_memory_utilization: float, max_model_len: int) -> tuple[str, ...]:
    """The `slotop sim` flags of the scenario's replica besides the dials (lengths run to
    max_tokens, as the virtual load's requests do)."""
    return (
        "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
        "--gpu-memory-utilization", f"{gpu_memory_utilization:g}",
        "--max-model-len", str(max_model_len), "--output-len-distribution", "never",
    )  # fmt: skip


def _engine(gpu_memory_utilization: float, max_model_len: int) -> Callable[[Dials], EngineConfig]:
    def engine(dials: Dials) -> EngineConfig:
        return engine_config(
            kv_cache_dtype=dials.kv_cache_dtype,
            max_num_seqs=dials.max_num_seqs,
            max_num_batched_tokens=dials.max_num_batched_tokens,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
        )

    return engine


def _spec(plan: tuple[int, ...], slo: Slo, dwell_s: float = 30.0) -> TuneSpec:
    """The tune's plan: refined sweeps (bisected to 5%) whose dwells hold some six request
    lifetimes, so that a goodput's noise comes from three batches at the least."""
    sweep = SweepSpec(
        plan=plan,
        slo=slo,
        warmup_s=5.0,
        dwell_s=dwell_s,
        max_dwell_s=2 * dwell_s,
        refine=True,
        refine_resolution_ratio=0.05,
    )
    return TuneSpec(
        sweep=sweep,
        dials=ALL_DIALS,
        budget_s=24 * 3600.0,
        max_candidates=7,
        quality_min_match_ratio=0.9,
    )


def _shape(prompt_tokens: int, output_tokens: int, plan: tuple[int, ...]):  # type: ignore[no-untyped-def]
    return dataclasses.replace(fixed_shape(prompt_tokens, output_tokens), max_concurrency=max(plan))


SEQ_CAP_PLAN = (4, 8, 16, 32, 64, 128, 256)
SEQ_CAP = Scenario(
    name="seq-cap",
    words="a roomy cache (gpu_memory_utilization 0.9) and max_num_seqs 8: the cap binds",
    engine=_engine(0.9, 4096),
    sim_flags=_sim_flags(0.9, 4096),
    shape=_shape(512, 128, SEQ_CAP_PLAN),
    spec=_spec(SEQ_CAP_PLAN, Slo(ttft_s=0.5, itl_s=0.06)),
    start=Dials("auto", 8, 2048),
    grid=grid_cells(("auto", "fp8"), (8, 32, 128, 256), (1024, 2048, 4096)),
)

KV_PLAN = (2, 4, 8, 16, 32, 64)
KV_FP8 = Scenario(
    name="kv-fp8",
    words="6,400-token contexts in 84k tokens of cache at 16 bits (13 sequences, 26 at fp8)",
    engine=_engine(0.34, 8192),
    sim_flags=_sim_flags(0.34, 8192),
    shape=_shape(6144, 256, KV_PLAN),
    spec=_spec(KV_PLAN, Slo(ttft_s=5.0, itl_s=0.25), dwell_s=60.0),
    start=Dials("auto", 64, 8192),
    grid=grid_cells(("auto", "fp8"), (16, 32, 64), (512, 1024, 2048, 8192)),
)

TOKEN_PLAN = (2, 4, 8, 16, 32, 64)
TOKEN_BUDGET = Scenario(
    name="token-budget",
    words="4,096-token prompts against max_num_batched_tokens 256: 16 steps to a first token",
    engine=_engine(0.9, 8192),
    sim_flags=_sim_flags(0.9, 8192),
    shape=_shape(4096, 256, TOKEN_PLAN),
    spec=_spec(TOKEN_PLAN, Slo(ttft_s=0.4, itl_s=0.05)),
    start=Dials("auto", 64, 256),
    grid=grid_cells(("auto", "fp8"), (16, 64), (256, 512, 1024, 2048, 4096, 8192)),
)

ACTIVATION_PLAN = (4, 8, 16, 32, 64, 128)
ACTIVATION = Scenario(
    name="activation",
    words="an fp8 cache of 35k tokens at max_num_batched_tokens 16384 (2.4 GiB of activations)",
    engine=_engine(0.25, 4096),
    sim_flags=_sim_flags(0.25, 4096),
    shape=_shape(1024, 256, ACTIVATION_PLAN),
    spec=_spec(ACTIVATION_PLAN, Slo(ttft_s=1.0, itl_s=0.06)),
    start=Dials("fp8", 64, 16384),
    grid=grid_cells(("auto", "fp8"), (32, 64, 128), (256, 1024, 4096, 16384)),
)

KV_THEN_CAP_PLAN = (2, 4, 8, 16)
KV_THEN_CAP = Scenario(
    name="kv-then-cap",
    words="288 KV blocks at 16 bits and 577 at fp8 for 66-block requests, max_num_seqs 6",
    engine=_engine(0.217, 2048),
    sim_flags=_sim_flags(0.217, 2048),
    shape=_shape(1024, 32, KV_THEN_CAP_PLAN),
    spec=dataclasses.replace(_spec(KV_THEN_CAP_PLAN, Slo(ttft_s=0.5, itl_s=0.1)), max_candidates=2),
    start=Dials("auto", 6),
    grid=(),
)
"""The replica `slotop tune` runs on end to end (tests/support/tune_sim.py) in virtual time: 4
of the load's requests fit its cache at 16 bits and 8 at fp8, with the cap at 6, so the cache
binds first and then the cap."""

SCENARIOS: dict[str, Scenario] = {s.name: s for s in (SEQ_CAP, KV_FP8, TOKEN_BUDGET, ACTIVATION)}


def _sglang_engine(context_length: int) -> Callable[[Dials], EngineConfig]:
    def engine(dials: Dials) -> EngineConfig:
        return sglang_engine_config(
            kv_cache_dtype=dials.kv_cache_dtype,
            max_running_requests=dials.max_num_seqs,
            chunked_prefill_size=dials.max_num_batched_tokens,
            context_length=context_length,
        )

    return engine


SGLANG_TOKEN_BUDGET = Scenario(
    name="sglang-token-budget",
    words="the token-budget load on SGLang: 4,096-token prompts chunked 256 at a time",
    engine=_sglang_engine(8192),
    shape=_shape(4096, 256, TOKEN_PLAN),
    spec=_spec(TOKEN_PLAN, Slo(ttft_s=0.4, itl_s=0.05)),
    start=Dials("auto", 64, 256, engine="sglang"),
    grid=(),
)
"""`slotop sim --engine sglang --chunked-prefill-size 256 --max-running-requests 64`: on vLLM
the steps' batch size shows the budget binding; SGLang's /metrics cannot show it."""

SGLANG_SEQ_CAP = Scenario(
    name="sglang-seq-cap",
    words="the seq-cap load on SGLang: --max-running-requests 8 in a roomy pool",
    engine=_sglang_engine(4096),
    shape=_shape(512, 128, SEQ_CAP_PLAN),
    spec=_spec(SEQ_CAP_PLAN, Slo(ttft_s=0.5, itl_s=0.06)),
    start=Dials("auto", 8, 2048, engine="sglang"),
    grid=(),
)
