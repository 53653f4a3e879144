"""Sweeps of a replica that speaks SGLang, decided in virtual time: the same rules, SGLang's words,
and what SGLang cannot measure said so rather than read as nothing.

The replica is `slotop sim --engine sglang`'s engine (`sim/sglang/config.resolve`), its /metrics
read as SGLang serves them: no tokens-per-step histogram, retractions for preemptions.
"""

from __future__ import annotations

import json

from slotop.actions.slo import Binding
from slotop.actions.sweep.codec import sweep_from_json, sweep_to_json
from slotop.actions.sweep.decide import ReplicaLimits
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.table import format_sweep_text
from slotop.slo import Slo
from tests.support.virtual_load import fixed_shape, sglang_engine_config
from tests.support.virtual_sweep import virtual_sweep

SLO = Slo(ttft_s=2.0, itl_s=0.08)


def _sweep(max_running_requests: int, *, limits: ReplicaLimits | None = None):  # type: ignore[no-untyped-def]
    config = sglang_engine_config(max_running_requests=max_running_requests, context_length=4096)
    spec = SweepSpec(
        plan=(1, 2, 4, 8, 16, 32),
        slo=SLO,
        dwell_s=8.0,
        limits=limits or ReplicaLimits(max_num_seqs=max_running_requests),
    )
    return virtual_sweep(config, fixed_shape(), spec, engine="sglang")


def test_the_sweep_takes_the_engine_from_the_replica_and_names_sglangs_cap() -> None:
    # --max-running-requests 8: eight run, the ninth waits; doubling to 16 buys no throughput.
    result = _sweep(8)
    assert result.settings.limits.engine == "sglang"  # the spec said vLLM; the scrape said SGLang
    rec = result.recommendation
    assert rec.concurrency == 8 and rec.next_concurrency == 16
    assert rec.binding is Binding.SEQ_CAP
    assert "max_running_requests 8" in rec.binding_detail
    assert "max_num_seqs" not in rec.binding_detail
    text = format_sweep_text(result)
    assert "(SGLang)" in text.splitlines()[0]
    assert "retract" in text.splitlines()[1] and "preempt" not in text.splitlines()[1]
    assert "the sequence cap (max_running_requests)" in text
    assert "Tokens per step: SGLang has no such metric" in text
    assert "share of its KV pool in tokens" in text and "retractions (running" in text


def test_no_step_reads_a_batch_size_and_the_file_says_why() -> None:
    result = _sweep(8)
    assert all(step.server.batch_tokens_p99 is None for step in result.steps)
    data = json.loads(json.dumps(sweep_to_json(result)))
    assert data["settings"]["limits"]["engine"] == "sglang"
    assert data["unmeasured"]["batch_tokens_p99"] == "tokens per step: SGLang has no such metric"
    back = sweep_from_json(data)
    assert back.settings.limits.engine == "sglang"
    assert back.recommendation == result.recommendation


def test_a_queue_under_the_cap_is_not_called_the_token_budget() -> None:
    # The cap unknown to slotop and far above the load: requests queue only when the chunk
    # size or the pool holds them, and SGLang's /metrics cannot tell which, so the sweep says
    # so instead of naming chunked_prefill_size as vLLM's rule would with no batch size.
    result = _sweep(8, limits=ReplicaLimits(max_num_seqs=64, max_num_batched_tokens=2048))
    rec = result.recommendation
    assert rec.binding is not Binding.TOKEN_BUDGET
    assert "whether chunked_prefill_size 2,048 binds cannot be read" in rec.binding_detail
    assert "SGLang has no such metric" in rec.binding_detail
