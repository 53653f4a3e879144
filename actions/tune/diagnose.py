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
- TTFT holds where the steps themselves bind (full steps at a knee, ITL nearest its target, or
  nothing named), or the dial what binds names was tried already → fp8 at those dials, since
  each decode step reads the KV cache of every running sequence and fp8 reads half the bytes
  (the quality check as for KV capacity);
- anything else (the SLO itself binds with headroom elsewhere, the SLO held where the sweep
  broke with no resource binding there, a queue with neither full, no break up to the load cap)
  → stop; a dial named that `--dials` leaves alone stops too, and says so.

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
from dataclasses import dataclass

from slotop.actions.budget.kv import dtype_bytes
from slotop.actions.replica.spec import Dials
from slotop.actions.restart.noise import band_multiplier, difference_noise
from slotop.actions.restart.starts import StartSpread
from slotop.actions.slo import (
    Binding,
    Certainty,
    Diagnosis,
    EngineTerms,
    Verdict,
    engine_terms,
    what_binds,
)
from slotop.actions.sweep.decide import (
    ReplicaLimits,
    StopReason,
    all_step_flags,
    by_concurrency,
    flag_words,
    slo_verdict,
    step_evidence,
    step_judgement,
)
from slotop.actions.sweep.model import StepResult
from slotop.actions.tune.capacity import Capacity, smaller_kv_dtype
from slotop.actions.tune.model import (
    MOVE_DIAL,
    Choice,
    Decision,
    DialNote,
    Move,
    Trial,
    TuneSpec,
    break_step,
)

MIN_BATCHED_TOKENS = 256
"""The lowest max_num_batched_tokens tune proposes: below it a step barely fits one prompt block."""


def _worse_beyond_noise(trial: Trial, than: Trial, spread: StartSpread | None = None) -> bool:
    if than.goodput_rps is None:
        return False
    if trial.goodput_rps is None:  # met the SLO at no concurrency: worse than any that did
        return True
    gap = than.goodput_rps - trial.goodput_rps
    noise = goodput_noise(trial, than, spread)
    return gap > (noise if noise is not None else 0.0)


def goodput_noise(first: Trial, second: Trial, spread: StartSpread | None = None) -> float | None:
    """The ± band of two trials' goodput difference: Student's t for the fewer batches of the
    two, times the root of their squared errors (`slotop.actions.restart.noise`), widened in
    quadrature by the replica's start-to-start spread where one was measured (two trials are
    two starts). None where neither part is known."""
    multiplier = band_multiplier(first.goodput_batches, second.goodput_batches)
    sampling = difference_noise(first.goodput_se_rps, second.goodput_se_rps, multiplier)
    between = None
    if spread is not None and first.goodput_rps is not None and second.goodput_rps is not None:
        between = spread.half_width("goodput_rps", first.goodput_rps, second.goodput_rps)
    if sampling is None and between is None:
        return None
    return math.hypot(sampling or 0.0, between or 0.0)


def base_trial(trials: Sequence[Trial], spread: StartSpread | None = None) -> Trial | None:
    """The configuration to diagnose: the latest usable one, unless the best measured beat it
    beyond the noise, or it met the SLO at no concurrency (then the best). Usable: measured
    whole, not rejected."""
    usable = [t for t in trials if t.complete and t.rejected is None and t.sweep is not None]
    if not usable:
        return None
    latest = usable[-1]
    scored = [t for t in usable if t.goodput_rps is not None]
    if not scored:
        return latest
    best = max(scored, key=lambda t: (t.goodput_rps or 0.0, -t.number))
    return best if _worse_beyond_noise(latest, best, spread) else latest


@dataclass(frozen=True, slots=True)
class BreakRead:
    """What the diagnosis read at a trial's break: the step, what binds there and how sure."""

    step: StepResult
    diagnosis: Diagnosis
    evidence: str


def _stop(
    after: Trial,
    read: BreakRead | None,
    words: str,
    considered: tuple[DialNote, ...] = (),
) -> Decision:
    return Decision(
        after.number,
        read.diagnosis.binding if read is not None else None,
        read.evidence if read is not None else "",
        Move.STOP,
        None,
        words,
        read.diagnosis.certainty if read is not None else None,
        considered,
    )


def next_decision(trials: Sequence[Trial], capacity: Capacity | None, spec: TuneSpec) -> Decision:
    """What to try after `trials` (the baseline first), or why to stop, with why each dial was
    tried or left alone."""
    base = base_trial(trials, spec.start_spread)
    if base is None or base.sweep is None:
        first = trials[0] if trials else Trial(0, Dials(), Move.BASELINE, "", None)
        return _stop(first, None, "no configuration was measured whole: nothing to diagnose")
    capacity = base.capacity or capacity
    read = read_break(base)
    if read is None:
        words = (
            f"#{base.number} broke at no concurrency up to the sweep's cap: the load cap binds, "
            "not a dial; raise [load] max_concurrency to look further"
        )
        return _stop(base, None, words, _all_skipped(spec, "no step broke: nothing binds yet"))
    move = _move(read, base, spec)
    if move is None:
        words = _slo_binds_words(base, read, spec)
        return _stop(base, read, words, considered(None, read, base, spec, words))
    if MOVE_DIAL[move] not in spec.dials:
        words = (
            f"{_what(move, base.dials)} would be next ({read.evidence}), but --dials leaves "
            f"{MOVE_DIAL[move]} alone"
        )
        return _stop(base, read, words, considered(None, read, base, spec, words))
    proposed = _propose(move, base, read, capacity)
    if isinstance(proposed, str):
        return _stop(base, read, proposed, considered(None, read, base, spec, proposed))
    dials, why = proposed
    tried = next((t for t in trials if t.dials == dials), None)
    if tried is not None:
        words = f"{_what(move, base.dials)} names {' '.join(dials.flag_args())}, already tried as #{tried.number}"
        left = _dtype_left(base, read, spec, trials, words)
        if left is not None:
            return left
        return _stop(base, read, words, considered(None, read, base, spec, words))
    words = f"{_sure_words(read)}; {why}"
    return Decision(
        base.number,
        read.diagnosis.binding,
        read.evidence,
        move,
        dials,
        words,
        read.diagnosis.certainty,
        considered(move, read, base, spec, why),
    )


def _move(read: BreakRead, base: Trial, spec: TuneSpec) -> Move | None:
    """The dial what binds names: KV capacity a narrower dtype (or, at the narrowest, a lower
    token budget, whose activation reserve goes to the cache), the cap more sequences, a token
    budget that holds TTFT back a larger one, ITL breaking while TTFT holds a smaller one."""
    binding = read.diagnosis.binding
    verdict = slo_verdict(read.step, spec.sweep.slo)
    if binding is Binding.KV_CAPACITY:
        if _wider_than_narrowest(base.dials) and "kv_cache_dtype" in spec.dials:
            return Move.SMALLER_KV_DTYPE
        if base.dials.max_num_batched_tokens is not None:
            return Move.FEWER_BATCHED_TOKENS
        return Move.SMALLER_KV_DTYPE
    if binding is Binding.SEQ_CAP:
        return Move.MORE_SEQS
    if binding is Binding.TOKEN_BUDGET and verdict.ttft is Verdict.BREACH:
        return Move.MORE_BATCHED_TOKENS
    if verdict.itl is Verdict.BREACH and verdict.ttft is Verdict.PASS:
        return Move.FEWER_BATCHED_TOKENS
    if _decode_binds(read, base, spec):
        return Move.SMALLER_KV_DTYPE
    return None


def _wider_than_narrowest(dials: Dials) -> bool:
    """Whether the dials' KV dtype is wider than the narrowest tune tries on their engine."""
    return dtype_bytes(dials.kv_cache_dtype) > dtype_bytes(smaller_kv_dtype(dials.engine))


DECODE_BINDINGS = (Binding.TOKEN_BUDGET, Binding.ITL, Binding.NOTHING)
"""What binds when the steps themselves are the limit: full steps at a knee, ITL nearest its
target, or nothing named at all."""


def _decode_binds(read: BreakRead, base: Trial, spec: TuneSpec) -> bool:
    """No resource binds and the first tokens keep their target, so what is left is how fast
    the steps run; each decode step reads the KV cache of every running sequence, and a narrower
    KV dtype reads fewer bytes of it."""
    verdict = slo_verdict(read.step, spec.sweep.slo)
    return (
        _wider_than_narrowest(base.dials)
        and verdict.ttft is Verdict.PASS
        and read.diagnosis.binding in DECODE_BINDINGS
        and read.diagnosis.certainty is not Certainty.WITHIN_NOISE
    )


def _sure_words(read: BreakRead) -> str:
    """What binds, how sure, and the evidence."""
    certainty = read.diagnosis.certainty
    how = {
        Certainty.CLEAR: "clear",
        Certainty.WITHIN_NOISE: "likely, a reading within its noise of the mark",
        Certainty.NOISE_UNKNOWN: "noise unknown",
    }[certainty]
    return f"{read.diagnosis.binding.value.replace('_', ' ')} binds ({how}) {read.evidence}"


RESOURCES = (Binding.KV_CAPACITY, Binding.SEQ_CAP)
"""What binds that a dial can move: the KV cache's size and the sequence cap."""


def _read(trial: Trial, step: StepResult, flags: Sequence[StopReason]) -> BreakRead:
    sweep = trial.sweep
    assert sweep is not None
    spec = sweep.settings
    limits = ReplicaLimits(
        trial.dials.max_num_seqs, trial.dials.max_num_batched_tokens, trial.dials.engine
    )
    diagnosis = what_binds(step_evidence(step, spec.slo, limits), spec.rules.thresholds)
    why = ", ".join(flag_words(flag, limits.terms) for flag in flags)
    return BreakRead(
        step, diagnosis, f"at concurrency {step.concurrency} ({why}): {diagnosis.evidence}"
    )


def read_break(trial: Trial) -> BreakRead | None:
    """What binds where the trial broke: the lowest step that broke where a resource binds (KV
    capacity, the sequence cap), else its first break; None when no step broke.

    The step just past the operating point often shows only the SLO bending (half a request
    waiting); the ramp's own break, at more load, shows what ran out. Each step is judged by
    `what_binds` as the sweep judges it.
    """
    sweep = trial.sweep
    if sweep is None:
        return None
    spec = sweep.settings
    ordered = by_concurrency(sweep.steps)
    flags = all_step_flags(ordered, spec.slo, spec.rules)
    broken = [
        (step, step_flags)
        for step, step_flags in zip(ordered, flags, strict=True)
        if step_judgement(step_flags) is Verdict.BREACH
    ]
    reads = [_read(trial, step, step_flags) for step, step_flags in broken]
    resource = next((r for r in reads if r.diagnosis.binding in RESOURCES), None)
    if resource is not None:
        return resource
    first = break_step(sweep)
    return next((r for r in reads if first is not None and r.step is first), None) or (
        reads[0] if reads else None
    )


def _what(move: Move, dials: Dials) -> str:
    """The move in the engine's words."""
    terms = engine_terms(dials.engine)
    return {
        Move.SMALLER_KV_DTYPE: "a narrower KV dtype",
        Move.MORE_SEQS: f"a higher {terms.seq_cap}",
        Move.FEWER_BATCHED_TOKENS: f"a lower {terms.token_budget}",
        Move.MORE_BATCHED_TOKENS: f"a higher {terms.token_budget}",
    }[move]


def _slo_binds_words(base: Trial, read: BreakRead, spec: TuneSpec) -> str:
    point = base.sweep.recommendation if base.sweep is not None else None
    room = point.headroom if point is not None else None
    left = ""
    if room is not None:
        kv = f"KV cache {room.kv_free_ratio:.0%} free" if room.kv_free_ratio is not None else ""
        seqs = f"{room.seqs_free} sequence slots free" if room.seqs_free is not None else ""
        left = ", ".join(part for part in (kv, seqs) if part)
    binding, evidence = read.diagnosis.binding, read.evidence
    if binding in (Binding.TTFT, Binding.ITL):
        if read.diagnosis.certainty is Certainty.WITHIN_NOISE:
            return (
                f"the SLO binds ({evidence}), but not surely alone: no dial is named on a "
                "reading within its noise; a longer dwell ([sweep] dwell_s) would tell"
            )
        verdict = slo_verdict(read.step, spec.sweep.slo)
        if verdict.ttft is Verdict.PASS and verdict.itl is Verdict.PASS:
            # the step broke on its throughput or its queue; the target named is only the nearer
            return (
                f"no target binds: the SLO held where the sweep broke ({evidence}), and no "
                "resource binds there" + (f" ({left})" if left else "") + ": no dial the "
                "diagnosis names would raise goodput"
            )
        unread = ""
        terms = engine_terms(base.dials.engine)
        if verdict.ttft is Verdict.BREACH and not terms.batch_tokens_served:
            unread = (
                f"; {terms.token_budget} may hold the first tokens back, but {terms.label} "
                "cannot show it: a before/after (`slotop restart --max-num-batched-tokens N`, "
                f"passed as --{terms.token_budget.replace('_', '-')}) measures it"
            )
        return (
            f"the SLO itself binds ({evidence}) with headroom elsewhere"
            + (f" ({left})" if left else "")
            + ": no dial the diagnosis names would raise goodput"
            + unread
        )
    return f"what binds ({binding.value}: {evidence}) names no dial tune turns"


def _propose(
    move: Move, base: Trial, read: BreakRead, capacity: Capacity | None
) -> tuple[Dials, str] | str:
    """The candidate's dials and why that value, or why there is none."""
    dials = base.dials
    if move is Move.SMALLER_KV_DTYPE and read.diagnosis.binding is not Binding.KV_CAPACITY:
        return _faster_decode_dtype(dials, read.step)
    if move is Move.SMALLER_KV_DTYPE:
        return _narrower_dtype(dials, capacity)
    if move is Move.MORE_SEQS:
        return _more_seqs(dials, read.step.server.running_max, capacity)
    if move is Move.MORE_BATCHED_TOKENS:
        return _more_batched_tokens(dials, capacity)
    if read.diagnosis.binding is Binding.KV_CAPACITY:
        return _tokens_for_kv(dials, read.step)
    return _fewer_batched_tokens(dials)


def _more_memory(dials: Dials) -> str:
    """The engine's dials for more KV memory, which tune does not turn."""
    share = "mem_fraction_static" if dials.engine == "sglang" else "gpu_memory_utilization"
    return f"more KV memory ({share}, tensor parallelism) is next"


def _narrower_dtype(dials: Dials, capacity: Capacity | None) -> tuple[Dials, str] | str:
    smaller = smaller_kv_dtype(dials.engine)
    now, narrow = dtype_bytes(dials.kv_cache_dtype), dtype_bytes(smaller)
    if now <= narrow:
        return (
            f"KV capacity binds, and {dials.kv_cache_dtype} is already the narrowest KV dtype "
            f"tune tries: {_more_memory(dials)}"
        )
    words = f"{smaller} stores an element in {narrow} byte instead of {now}"
    before = capacity.at(dials.kv_cache_dtype) if capacity is not None else None
    after = capacity.at(smaller) if capacity is not None else None
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
    return dataclasses.replace(dials, kv_cache_dtype=smaller), words


def _dtype_left(
    base: Trial, read: BreakRead, spec: TuneSpec, trials: Sequence[Trial], named: str
) -> Decision | None:
    """fp8 at the diagnosed dials when the dial what binds names was tried already: the KV dtype
    is the dial left, and a narrower one makes every step that decodes read less (None: the
    dtype is at its narrowest, left alone, or tried)."""
    if not _wider_than_narrowest(base.dials) or "kv_cache_dtype" not in spec.dials:
        return None
    dials, why = _faster_decode_dtype(base.dials, read.step, f"{named}; the KV dtype is left")
    if any(t.dials == dials for t in trials):
        return None
    return Decision(
        base.number,
        read.diagnosis.binding,
        read.evidence,
        Move.SMALLER_KV_DTYPE,
        dials,
        f"{_sure_words(read)}; {why}",
        read.diagnosis.certainty,
        considered(Move.SMALLER_KV_DTYPE, read, base, spec, why),
    )


def _faster_decode_dtype(
    dials: Dials, step: StepResult, lead: str = "TTFT held where the steps bound"
) -> tuple[Dials, str]:
    """A narrower KV dtype for faster steps: every decode step reads the cache of each running
    sequence, so the same steps read half the bytes."""
    smaller = smaller_kv_dtype(dials.engine)
    now, narrow = dtype_bytes(dials.kv_cache_dtype), dtype_bytes(smaller)
    running = step.server.running_max
    usage = step.server.kv_usage_max_ratio
    held = []
    if running is not None:
        held.append(f"{running:g} sequences running")
    if usage is not None:
        held.append(f"{usage:.0%} of the cache in use")
    at = f" ({', '.join(held)})" if held else ""
    return (
        dataclasses.replace(dials, kv_cache_dtype=smaller),
        f"{lead}{at}: each decode step reads the KV cache of every "
        f"running sequence, and {smaller} stores an element in {narrow} byte instead of "
        f"{now}, so the same steps read half of it (the greedy quality check runs before and "
        "after)",
    )


def _more_seqs(
    dials: Dials, running_max: float | None, capacity: Capacity | None
) -> tuple[Dials, str] | str:
    name = engine_terms(dials.engine).seq_cap
    cap = dials.max_num_seqs
    now = cap if cap is not None else math.ceil(running_max) if running_max else None
    fit = capacity.seqs_at_load(dials.kv_cache_dtype) if capacity is not None else None
    if now is None and fit is None:
        return f"the sequence cap binds, but neither {name} nor the KV budget is known"
    limits = [n for n in (2 * now if now is not None else None, fit) if n is not None]
    new = min(limits)
    if dials.max_num_batched_tokens is not None and dials.engine == "vllm":
        new = min(new, dials.max_num_batched_tokens)  # vLLM wants batched tokens ≥ sequences
    held = (
        f"the KV cache holds {fit} sequences of the load's {capacity.load_tokens:,} tokens at "
        f"{dials.kv_cache_dtype}"
        if fit is not None and capacity is not None
        else "the KV budget is unknown"
    )
    if now is not None and new <= now:
        return f"the sequence cap binds, but {held}: {name} {now} already uses them"
    shown = (
        f"{name} {cap}"
        if cap is not None
        else f"{now} running ({name} default)"
        if now is not None
        else f"{name} default"
    )
    return (
        dataclasses.replace(dials, max_num_seqs=new),
        f"{held}: {shown} → {new} (at most twice the cap and what the cache holds)",
    )


def _token_floor(dials: Dials) -> tuple[int, str]:
    """The lowest token budget tune proposes, and why: vLLM batches decodes in the same budget,
    so it wants one token per sequence; SGLang decodes apart from its prefill chunks."""
    if dials.engine == "vllm":
        return max(
            MIN_BATCHED_TOKENS, dials.max_num_seqs or 0
        ), f"max_num_seqs or {MIN_BATCHED_TOKENS}"
    return MIN_BATCHED_TOKENS, f"{MIN_BATCHED_TOKENS} tokens"


def _budget_unknown(terms: EngineTerms, what: str) -> str:
    passed = (
        ""
        if terms.token_budget == "max_num_batched_tokens"
        else f" (passed as {terms.token_budget})"
    )
    return (
        f"{terms.token_budget} is the replica's default, unknown to slotop: set [launch] "
        f"max_num_batched_tokens{passed} to let tune {what} it"
    )


def _fewer_batched_tokens(dials: Dials) -> tuple[Dials, str] | str:
    terms = engine_terms(dials.engine)
    name = terms.token_budget
    budget = dials.max_num_batched_tokens
    if budget is None:
        return f"ITL breaks while TTFT holds, but {_budget_unknown(terms, 'lower')}"
    floor, floor_words = _token_floor(dials)
    new = max(budget // 2, floor)
    if new >= budget:
        return (
            f"ITL breaks while TTFT holds, but {name} {budget} is at its floor "
            f"({floor}: {floor_words})"
        )
    if dials.engine == "sglang":
        return (
            dataclasses.replace(dials, max_num_batched_tokens=new),
            "ITL broke while TTFT held: SGLang runs a long prompt's prefill chunks as batches "
            f"between its decode batches, and each stalls the running decodes; {name} "
            f"{budget} → {new} halves the longest stall",
        )
    return (
        dataclasses.replace(dials, max_num_batched_tokens=new),
        f"ITL broke while TTFT held: long prompts' prefill chunks stall the running decodes; "
        f"max_num_batched_tokens {budget} → {new} caps each step's prefill chunk",
    )


def _tokens_for_kv(dials: Dials, step: StepResult) -> tuple[Dials, str] | str:
    """A lower token budget for a cache at its narrowest dtype: vLLM's start-up profile run
    reserves activation memory for a step of max_num_batched_tokens, and what a smaller step
    needs less of goes to the KV cache. To what the steps batched (the p99's bucket) when that is
    under half the budget, else half."""
    budget = dials.max_num_batched_tokens
    assert budget is not None
    terms = engine_terms(dials.engine)
    floor, _ = _token_floor(dials)
    batched = step.server.batch_tokens_p99_upper
    new = budget // 2
    if batched is not None and batched < budget / 2:
        new = 1 << max(0, math.ceil(math.log2(max(batched, 1))))
    new = max(new, floor)
    if new >= budget:
        return (
            f"KV capacity binds at {dials.kv_cache_dtype}, and {terms.token_budget} {budget} is "
            f"at its floor ({floor}): {_more_memory(dials)}"
        )
    if dials.engine == "sglang":
        return (
            dataclasses.replace(dials, max_num_batched_tokens=new),
            f"{dials.kv_cache_dtype} is the narrowest KV dtype tune tries; SGLang's default "
            "mem_fraction_static keeps back activation memory for a prefill chunk of "
            f"chunked_prefill_size ({terms.batch_tokens_missing}, so half): {budget} → {new} "
            "gives the KV pool what the smaller chunk no longer keeps back, unless [launch] "
            f"sets --mem-fraction-static (a prompt over {new} tokens is prefilled in more chunks)",
        )
    seen = (
        f"the busiest steps batched at most {batched:,.0f} tokens"
        if batched is not None
        else "the steps' batch size is unknown"
    )
    return (
        dataclasses.replace(dials, max_num_batched_tokens=new),
        f"{dials.kv_cache_dtype} is the narrowest KV dtype tune tries; vLLM's start-up profile "
        f"run reserves activation memory for a step of max_num_batched_tokens, and {seen}: "
        f"{budget} → {new} gives the cache what the smaller step no longer reserves (a prompt "
        f"over {new} tokens is prefilled in more steps)",
    )


def _more_batched_tokens(dials: Dials, capacity: Capacity | None) -> tuple[Dials, str] | str:
    """Twice the token budget, when the steps batch all of it and TTFT breaks: each long prompt
    waits through more chunked steps than the budget would need at twice its size."""
    budget = dials.max_num_batched_tokens
    if budget is None:
        terms = engine_terms(dials.engine)
        return f"the token budget holds TTFT back, but {_budget_unknown(terms, 'raise')}"
    new = 2 * budget
    limit = capacity.max_model_len_tokens if capacity is not None else None
    if limit is not None and budget >= limit:
        return (
            f"the token budget holds TTFT back, but max_num_batched_tokens {budget} already "
            f"covers max_model_len {limit}: a prompt is prefilled in one step"
        )
    return (
        dataclasses.replace(dials, max_num_batched_tokens=new),
        f"prompts are chunked {budget} tokens a step and TTFT broke: {budget} → {new} halves the "
        "steps a long prompt waits through (vLLM's profile run reserves activation memory for "
        "the larger step, which the KV cache gives up)",
    )


def _all_skipped(spec: TuneSpec, words: str) -> tuple[DialNote, ...]:
    return tuple(DialNote(dial, False, words) for dial in DIAL_ORDER if dial in spec.dials)


DIAL_ORDER = ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens")


def considered(
    move: Move | None, read: BreakRead, base: Trial, spec: TuneSpec, why: str
) -> tuple[DialNote, ...]:
    """Why each dial was tried after `base`, or left alone, from what the break showed."""
    notes = []
    tried = MOVE_DIAL[move] if move is not None else None
    for dial in DIAL_ORDER:
        if dial == tried:
            notes.append(DialNote(dial, True, why))
        elif dial not in spec.dials:
            notes.append(DialNote(dial, False, "--dials leaves it alone"))
        else:
            notes.append(DialNote(dial, False, _skipped_words(dial, read, base, spec, move, why)))
    return tuple(notes)


def _skipped_words(
    dial: str, read: BreakRead, base: Trial, spec: TuneSpec, move: Move | None, why: str
) -> str:
    """Why a dial was left as it was: what the break showed of what it moves."""
    step, binding = read.step, read.diagnosis.binding
    terms = engine_terms(base.dials.engine)
    named = move is None and _named_dial(read, base, spec) == dial
    if named:
        return f"named, but not tried: {why}"
    if dial == "kv_cache_dtype":
        usage = step.server.kv_usage_max_ratio
        peak = f"KV usage peaked at {usage:.0%}" if usage is not None else "KV usage unknown"
        if binding is Binding.KV_CAPACITY:
            return f"already {base.dials.kv_cache_dtype}, the narrowest tune tries ({peak})"
        return (
            f"KV capacity does not bind: {peak}, {step.server.preemptions or 0:g} "
            f"{terms.preemptions}"
        )
    if dial == "max_num_seqs":
        cap = base.dials.max_num_seqs
        running = f"{step.server.running_max:g}" if step.server.running_max is not None else "?"
        of = f" of {terms.seq_cap} {cap}" if cap is not None else ""
        if binding is Binding.SEQ_CAP:
            return f"the cap binds, but another dial went first ({running} running{of})"
        return f"the cap does not bind: running peaked at {running}{of}"
    budget = base.dials.max_num_batched_tokens
    batched = step.server.batch_tokens_p99_upper
    verdict = slo_verdict(step, spec.sweep.slo)
    if not terms.batch_tokens_served:
        return (
            f"ITL did not break alone (TTFT {verdict.ttft.value}, ITL {verdict.itl.value}), and "
            f"whether {terms.token_budget} holds TTFT back cannot be read: "
            f"{terms.batch_tokens_missing}"
        )
    seen = f"steps batched up to {batched:,.0f} tokens" if batched is not None else "batch unknown"
    of = f" of {budget:,}" if budget is not None else ""
    return (
        f"neither ITL breaking alone nor the budget holding TTFT back ({seen}{of}; TTFT "
        f"{verdict.ttft.value}, ITL {verdict.itl.value})"
    )


def _named_dial(read: BreakRead, base: Trial, spec: TuneSpec) -> str | None:
    move = _move(read, base, spec)
    return MOVE_DIAL[move] if move is not None else None


def choose(trials: Sequence[Trial], spread: StartSpread | None = None) -> Choice:
    """The eligible trial with the highest goodput, its margin over the baseline against the
    noise of the two (where it is known; with the replica's start-to-start `spread` where one
    was measured), and what binds it next."""
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
        noise = goodput_noise(baseline, best, spread)
        beyond = gain > noise if noise is not None else None
    chosen = best
    if best is baseline:
        words = "no candidate measured a higher goodput than the replica's own dials: keep them"
    elif base_rps is None:
        words = f"#{best.number} met both SLOs; the replica's own dials met them at no concurrency"
    else:
        band = f"± {noise:.2f}" if noise is not None else "(noise unknown)"
        starts = noise is not None and spread is not None and "goodput_rps" in spread.relative
        words = (
            f"#{best.number} beats the baseline by {gain:+.2f} {band} req/s of goodput "
            f"({(best.goodput_rps or 0.0) / base_rps - 1:+.0%})"
        )
        if beyond is False and starts:
            words += (
                ", within the run-to-run noise and the replica's start-to-start spread: the "
                "gain may be chance, or the restart's"
            )
        elif beyond is False:
            words += (
                ", within the run-to-run noise: the gain may be chance; longer dwells "
                "([sweep] dwell_s) measure it closer"
            )
        elif beyond:
            words += ", beyond the run-to-run noise" + (
                " and the replica's start-to-start spread"
                if starts
                else "; the replica's start-to-start spread is unmeasured (`slotop restart "
                "--starts 4 --concurrency N` measures it), so part of the gain may be the restart's"
            )
        else:
            words += (
                ": its noise is unknown (a trial of too few batches of requests has no band), "
                "so the gain is not shown to be more than chance; longer dwells "
                "([sweep] dwell_s) band it"
            )
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
