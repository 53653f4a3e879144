"""The tune's rules (pure): the next dial from what binds, never from a grid, and the choice.

After each measured configuration, what binds at its first break (`slotop.actions.slo.what_binds`
through the sweep's recommendation) names the next dial:

- KV capacity binds (preemptions, or a full cache with a queue) → a narrower KV dtype (fp8),
  kept only when the greedy quality check passes;
- the sequence cap binds (a queue with max_num_seqs running, or running held at max_num_seqs
  for most of the step while any request waited: `slotop.actions.slo.seats_held`) → a higher
  max_num_seqs, at most twice the cap and at most the sequences of the load's length the KV cache holds at its dtype;
- ITL breaks while TTFT holds (long prompts' prefill chunks stall the running decodes) → half
  the max_num_batched_tokens, no lower than max_num_seqs or 256 tokens;
- anything else (the SLO itself binds with headroom elsewhere, a queue with neither full, no
  break up to the load cap) → stop.

What binds is read at every step that broke, lowest first: the first where a resource binds (KV
capacity, the sequence cap) names the dial, since the step just past the operating point often
shows only the SLO starting to bend; without one, the first break's own binding decides. The
configuration diagnosed is the latest one unless it measured worse than the best beyond the
noise; dials already tried are never tried again. The choice is the highest goodput at an
operating point, with its margin over the baseline's against the run-to-run noise of the two
(`goodput_noise`, about 95%): a margin within it is said to be.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from slotop.actions.budget.kv import dtype_bytes
from slotop.actions.replica.spec import Dials
from slotop.actions.restart.noise import band_multiplier, difference_noise
from slotop.actions.slo import Binding, Verdict
from slotop.actions.sweep.decide import (
    ReplicaLimits,
    StepResult,
    all_step_flags,
    binding_constraint,
    by_concurrency,
    slo_verdict,
    step_judgement,
)
from slotop.actions.tune.capacity import SMALLER_KV_DTYPE, Capacity
from slotop.actions.tune.model import (
    MOVE_DIAL,
    Choice,
    Decision,
    Move,
    Trial,
    TuneSpec,
    break_step,
)

MIN_BATCHED_TOKENS = 256
"""The lowest max_num_batched_tokens tune proposes: below it a step barely fits one prompt block."""


def _worse_beyond_noise(trial: Trial, than: Trial) -> bool:
    if trial.goodput_rps is None or than.goodput_rps is None:
        return False
    gap = than.goodput_rps - trial.goodput_rps
    noise = goodput_noise(trial, than)
    return gap > (noise if noise is not None else 0.0)


def goodput_noise(first: Trial, second: Trial) -> float | None:
    """The ± band of two trials' goodput difference: Student's t for the fewer batches of the
    two, times the root of their squared errors (`slotop.actions.restart.noise`)."""
    multiplier = band_multiplier(first.goodput_batches, second.goodput_batches)
    return difference_noise(first.goodput_se_rps, second.goodput_se_rps, multiplier)


def base_trial(trials: Sequence[Trial]) -> Trial | None:
    """The configuration to diagnose: the latest usable one, unless the best measured beat it
    beyond the noise (then the best). Usable: measured whole, not rejected."""
    usable = [t for t in trials if t.complete and t.rejected is None and t.sweep is not None]
    if not usable:
        return None
    latest = usable[-1]
    scored = [t for t in usable if t.goodput_rps is not None]
    if not scored:
        return latest
    best = max(scored, key=lambda t: (t.goodput_rps or 0.0, -t.number))
    return best if _worse_beyond_noise(latest, best) else latest


def _stop(after: Trial, binding: Binding | None, evidence: str, words: str) -> Decision:
    return Decision(after.number, binding, evidence, Move.STOP, None, words)


def next_decision(trials: Sequence[Trial], capacity: Capacity | None, spec: TuneSpec) -> Decision:
    """What to try after `trials` (the baseline first), or why to stop."""
    base = base_trial(trials)
    if base is None or base.sweep is None:
        first = trials[0] if trials else Trial(0, Dials(), Move.BASELINE, "", None)
        return _stop(first, None, "", "no configuration was measured whole: nothing to diagnose")
    rec = base.sweep.recommendation
    binding, evidence = rec.binding, rec.binding_detail
    broke = break_step(base.sweep)
    resource = resource_break(base)
    if resource is not None:
        broke, binding, evidence = resource
    if binding is None or broke is None:
        return _stop(
            base,
            binding,
            evidence,
            f"#{base.number} broke at no concurrency up to the sweep's cap: the load cap binds, "
            "not a dial; raise [load] max_concurrency to look further",
        )
    verdict = slo_verdict(broke, base.sweep.settings.slo)
    if binding is Binding.KV_CAPACITY:
        move = Move.SMALLER_KV_DTYPE
    elif binding is Binding.SEQ_CAP:
        move = Move.MORE_SEQS
    elif verdict.itl is Verdict.BREACH and verdict.ttft is Verdict.PASS:
        move = Move.FEWER_BATCHED_TOKENS
    else:
        return _stop(base, binding, evidence, _slo_binds_words(base, binding, evidence))
    if MOVE_DIAL[move] not in spec.dials:
        return _stop(
            base,
            binding,
            evidence,
            f"{_WHAT[move]} would be next ({evidence}), but --dials leaves {MOVE_DIAL[move]} alone",
        )
    proposed = _propose(move, base, broke.running_max, capacity)
    if isinstance(proposed, str):
        return _stop(base, binding, evidence, proposed)
    dials, why = proposed
    tried = next((t for t in trials if t.dials == dials), None)
    if tried is not None:
        return _stop(
            base,
            binding,
            evidence,
            f"{_WHAT[move]} names {' '.join(dials.flag_args())}, already tried as #{tried.number}",
        )
    return Decision(base.number, binding, evidence, move, dials, f"{evidence}; {why}")


RESOURCES = (Binding.KV_CAPACITY, Binding.SEQ_CAP)
"""What binds that a dial can move: the KV cache's size and the sequence cap."""


def resource_break(trial: Trial) -> tuple[StepResult, Binding, str] | None:
    """The lowest step that broke where a resource binds (KV capacity, the sequence cap), with
    the evidence; None when none did. The step just past the operating point often shows only
    the SLO bending (half a request waiting); the ramp's own break, at more load, shows what ran
    out. Each step is judged by `what_binds` as the sweep judges it."""
    sweep = trial.sweep
    if sweep is None:
        return None
    spec = sweep.settings
    limits = ReplicaLimits(trial.dials.max_num_seqs, trial.dials.max_num_batched_tokens)
    ordered = by_concurrency(sweep.steps)
    flags = all_step_flags(ordered, spec.slo, spec.rules)
    for step, step_flags in zip(ordered, flags, strict=True):
        if step_judgement(step_flags) is not Verdict.BREACH:
            continue
        binding, evidence = binding_constraint(step, spec.slo, spec.rules, limits)
        if binding in RESOURCES:
            why = ", ".join(flag.value.replace("_", " ") for flag in step_flags)
            return step, binding, f"at concurrency {step.concurrency} ({why}): {evidence}"
    return None


_WHAT = {
    Move.SMALLER_KV_DTYPE: "a narrower KV dtype",
    Move.MORE_SEQS: "a higher max_num_seqs",
    Move.FEWER_BATCHED_TOKENS: "a lower max_num_batched_tokens",
}


def _slo_binds_words(base: Trial, binding: Binding, evidence: str) -> str:
    point = base.sweep.recommendation if base.sweep is not None else None
    room = point.headroom if point is not None else None
    left = ""
    if room is not None:
        kv = f"KV cache {room.kv_free_ratio:.0%} free" if room.kv_free_ratio is not None else ""
        seqs = f"{room.seqs_free} sequence slots free" if room.seqs_free is not None else ""
        left = ", ".join(part for part in (kv, seqs) if part)
    if binding in (Binding.TTFT, Binding.ITL):
        return (
            f"the SLO itself binds ({evidence}) with headroom elsewhere"
            + (f" ({left})" if left else "")
            + ": no dial the diagnosis names would raise goodput"
        )
    return f"what binds ({binding.value}: {evidence}) names no dial tune turns"


def _propose(
    move: Move, base: Trial, running_max: float | None, capacity: Capacity | None
) -> tuple[Dials, str] | str:
    """The candidate's dials and why that value, or why there is none."""
    dials = base.dials
    if move is Move.SMALLER_KV_DTYPE:
        return _narrower_dtype(dials, capacity)
    if move is Move.MORE_SEQS:
        return _more_seqs(dials, running_max, capacity)
    return _fewer_batched_tokens(dials)


def _narrower_dtype(dials: Dials, capacity: Capacity | None) -> tuple[Dials, str] | str:
    now, narrow = dtype_bytes(dials.kv_cache_dtype), dtype_bytes(SMALLER_KV_DTYPE)
    if now <= narrow:
        return (
            f"KV capacity binds, and {dials.kv_cache_dtype} is already the narrowest KV dtype "
            "tune tries: more KV memory (gpu_memory_utilization, tensor parallelism) is next"
        )
    words = f"{SMALLER_KV_DTYPE} stores an element in {narrow} byte instead of {now}"
    before = capacity.at(dials.kv_cache_dtype) if capacity is not None else None
    after = capacity.at(SMALLER_KV_DTYPE) if capacity is not None else None
    if capacity is not None and before is not None and after is not None:
        words += f": {before.kv_tokens:,} → {after.kv_tokens:,} KV tokens"
        if before.seqs_at_max_context is not None and after.seqs_at_max_context is not None:
            words += (
                f", {before.seqs_at_max_context:.1f} → {after.seqs_at_max_context:.1f} "
                "sequences at max context"
            )
        if before.seqs_at_load is not None and after.seqs_at_load is not None:
            words += (
                f", {before.seqs_at_load:.1f} → {after.seqs_at_load:.1f} of the load's "
                f"{capacity.load_tokens:,} tokens"
            )
    words += " (the greedy quality check runs before and after)"
    return dataclasses.replace(dials, kv_cache_dtype=SMALLER_KV_DTYPE), words


def _more_seqs(
    dials: Dials, running_max: float | None, capacity: Capacity | None
) -> tuple[Dials, str] | str:
    cap = dials.max_num_seqs
    now = cap if cap is not None else math.ceil(running_max) if running_max else None
    fit = capacity.seqs_at_load(dials.kv_cache_dtype) if capacity is not None else None
    if now is None and fit is None:
        return "the sequence cap binds, but neither max_num_seqs nor the KV budget is known"
    limits = [n for n in (2 * now if now is not None else None, fit) if n is not None]
    new = min(limits)
    if dials.max_num_batched_tokens is not None:
        new = min(new, dials.max_num_batched_tokens)  # vLLM wants batched tokens ≥ sequences
    held = (
        f"the KV cache holds {fit} sequences of the load's {capacity.load_tokens:,} tokens at "
        f"{dials.kv_cache_dtype}"
        if fit is not None and capacity is not None
        else "the KV budget is unknown"
    )
    if now is not None and new <= now:
        return f"the sequence cap binds, but {held}: max_num_seqs {now} already uses them"
    shown = (
        f"max_num_seqs {cap}"
        if cap is not None
        else f"{now} running (max_num_seqs default)"
        if now is not None
        else "max_num_seqs default"
    )
    return (
        dataclasses.replace(dials, max_num_seqs=new),
        f"{held}: {shown} → {new} (at most twice the cap and what the cache holds)",
    )


def _fewer_batched_tokens(dials: Dials) -> tuple[Dials, str] | str:
    budget = dials.max_num_batched_tokens
    if budget is None:
        return (
            "ITL breaks while TTFT holds, but max_num_batched_tokens is the replica's default, "
            "unknown to slotop: set [launch] max_num_batched_tokens to let tune lower it"
        )
    floor = max(MIN_BATCHED_TOKENS, dials.max_num_seqs or 0)
    new = max(budget // 2, floor)
    if new >= budget:
        return (
            f"ITL breaks while TTFT holds, but max_num_batched_tokens {budget} is at its floor "
            f"({floor}: max_num_seqs or {MIN_BATCHED_TOKENS})"
        )
    return (
        dataclasses.replace(dials, max_num_batched_tokens=new),
        f"ITL broke while TTFT held: long prompts' prefill chunks stall the running decodes; "
        f"max_num_batched_tokens {budget} → {new} caps each step's prefill chunk",
    )


def choose(trials: Sequence[Trial]) -> Choice:
    """The eligible trial with the highest goodput, its margin over the baseline against the
    noise of the two (where it is known), and what binds it next."""
    eligible = [t for t in trials if t.eligible]
    baseline = trials[0] if trials else None
    if not eligible:
        return Choice(
            None, None, None, None, None, None, None, None, None, "",
            "no configuration met both SLOs at any concurrency: none is recommended",
        )  # fmt: skip
    best = max(eligible, key=lambda t: (t.goodput_rps or 0.0, -t.number))
    base_rps = baseline.goodput_rps if baseline is not None and baseline.eligible else None
    gain = noise = None
    beyond: bool | None = None
    if baseline is not None and base_rps is not None and best is not baseline:
        gain = (best.goodput_rps or 0.0) - base_rps
        noise = goodput_noise(baseline, best)
        beyond = gain > noise if noise is not None else None
    chosen = best
    if best is baseline:
        words = "no candidate measured a higher goodput than the replica's own dials: keep them"
    elif base_rps is None:
        words = f"#{best.number} met both SLOs; the replica's own dials met them at no concurrency"
    else:
        band = f"± {noise:.2f}" if noise is not None else "(noise unknown)"
        words = (
            f"#{best.number} beats the baseline by {gain:+.2f} {band} req/s of goodput "
            f"({(best.goodput_rps or 0.0) / base_rps - 1:+.0%})"
        )
        if beyond is False:
            words += (
                ", within the run-to-run noise: the gain may be chance; longer dwells "
                "([sweep] dwell_s) measure it closer"
            )
        elif beyond:
            words += ", beyond the run-to-run noise"
    rec = chosen.sweep.recommendation if chosen.sweep is not None else None
    return Choice(
        trial=chosen.number,
        dials=chosen.dials,
        concurrency=chosen.concurrency,
        goodput_rps=chosen.goodput_rps,
        baseline_rps=base_rps,
        gain_rps=gain,
        noise_rps=noise,
        beyond_noise=beyond,
        binding=rec.binding if rec is not None else None,
        binding_detail=rec.binding_detail if rec is not None else "",
        words=words,
    )
