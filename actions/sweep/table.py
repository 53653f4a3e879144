"""The sweep as text: the table of its steps, their footnotes, and the verdict in words.

Latencies are client-side unless marked srv; a server value whose histogram bucket straddles the
target is marked "?", a step the probe's own lag bent "~", and an undecided step "*".
"""

from __future__ import annotations

from slotop import fmt
from slotop.actions.slo import VLLM_TERMS, Binding, EngineTerms, Verdict
from slotop.actions.sweep.decide import (
    Recommendation,
    StopReason,
    all_step_flags,
    by_concurrency,
    slo_verdict,
)
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.runner import SweepResult
from slotop.collectors.probe.lag import CLIENT_ERROR_BOUND_S, error_words
from slotop.collectors.probe.stats import THROUGHPUT_AGREEMENT_RATIO, throughput_disagrees

_STOP_WORDS = {
    StopReason.SLO_BROKEN: "an SLO broke",
    StopReason.KNEE: "throughput stopped rising (knee)",
    StopReason.PREEMPTIONS: "the replica preempted requests",
    StopReason.QUEUE: "requests queued (waiting grew)",
    StopReason.ERRORS: "requests failed, or none ended within the longest dwell",
    StopReason.CAP: "the last planned step was reached",
    StopReason.INTERRUPTED: "interrupted; resume with --resume",
    StopReason.UNDECIDED: "a step stayed undecided against a target",
}


def _binding_words(binding: Binding, terms: EngineTerms) -> str:
    words = {
        Binding.TTFT: "TTFT",
        Binding.ITL: "inter-token latency",
        Binding.KV_CAPACITY: "KV-cache capacity",
        Binding.SEQ_CAP: f"the sequence cap ({terms.seq_cap})",
        Binding.TOKEN_BUDGET: f"the token budget ({terms.token_budget})",
    }
    return words.get(binding, binding.value)


def _stop_words(stop: StopReason, terms: EngineTerms) -> str:
    if stop is StopReason.PREEMPTIONS and terms != VLLM_TERMS:
        return f"the replica sent running requests back to wait ({terms.preemptions})"
    return _STOP_WORDS[stop]


def recommendation_lines(result: SweepResult) -> list[str]:
    """The verdict in words: operating point, headroom, what binds next, why the sweep stopped."""
    slo = result.settings.slo
    terms = result.settings.limits.terms
    rec: Recommendation = result.recommendation
    lines = []
    if rec.concurrency is None:
        lines.append(
            f"No step met TTFT p{slo.ttft_percentile:g} ≤ {slo.ttft_s * 1000:g} ms and "
            f"ITL p{slo.itl_percentile:g} ≤ {slo.itl_s * 1000:g} ms."
        )
    else:
        lines.append(f"Operating point: concurrency {rec.concurrency}.")
        room = rec.headroom
        if room is not None:
            seqs = f", {room.seqs_free} sequence slots free" if room.seqs_free is not None else ""
            lines.append(
                f"  headroom: TTFT {fmt.fixed(room.ttft_ratio, '.0%')}, ITL {fmt.fixed(room.itl_ratio, '.0%')} of "
                f"the target left; KV cache {fmt.fixed(room.kv_free_ratio, '.0%')} free{seqs}"
            )
    if rec.binding is not None:
        lines.append(f"Binds next: {_binding_words(rec.binding, terms)} {rec.binding_detail}")
    else:
        lines.append(f"Binds next: unknown; {rec.binding_detail}")
    if rec.certainty:
        lines.append(f"How sure: {rec.certainty}.")
    undecided = _undecided_steps(result)
    if undecided:
        settings = result.settings
        counts = ", ".join(f"concurrency {step.concurrency}" for step in undecided)
        lines.append(
            f"Undecided, so never recommended: {counts}; an interval straddled a target, or too "
            f"few requests ended, within the longest dwell. A longer max_dwell_s (now "
            f"{settings.max_dwell_s:g} s) decides them."
        )
    if result.stop is not None:
        lines.append(f"Stopped: {_stop_words(result.stop, terms)}.")
    refined = refine_words(result)
    if refined:
        lines.append(refined)
    return lines


def refine_words(result: SweepResult) -> str:
    """The steps a refined sweep measured between the operating point and the break, in words."""
    plan = set(result.settings.plan)
    extra = [step.concurrency for step in result.steps if step.concurrency not in plan]
    if not extra:
        return ""
    return (
        f"Refined: measured concurrency {', '.join(map(str, extra))} (in that order) between "
        "the ramp's operating point and the step that broke; each judged against the step "
        "below it."
    )


def format_sweep_text(result: SweepResult) -> str:
    """The table of every step, then the verdict in words."""
    slo = result.settings.slo
    terms = result.settings.limits.terms
    tp, ip = f"p{slo.ttft_percentile:g}", f"p{slo.itl_percentile:g}"
    header = (
        "conc",
        "reqs",
        "fail",
        "TTFT p50",
        f"TTFT {tp}",
        "ITL p50",
        f"ITL {ip}",
        f"srv TTFT {tp}",
        f"srv ITL {ip}",
        "tok/s",
        "srv tok/s",
        "req/s",
        "KV max",
        "wait",
        terms.preempt,
        "verdict",
    )
    ordered = by_concurrency(result.steps)
    flags = all_step_flags(ordered, slo, result.settings.rules)
    rows = [header]
    for step, step_flags in zip(ordered, flags, strict=True):
        verdict = "ok" if not step_flags else ",".join(_flag_cell(f, terms) for f in step_flags)
        bent = "~" if step.client.bent_by_lag else ""
        undecided = "*" if StopReason.UNDECIDED in step_flags else ""
        rows.append(
            (
                str(step.concurrency),
                str(step.client.requests_ok) + undecided,
                str(step.client.requests_failed),
                fmt.millis(step.client.ttft_p50_s) + bent,
                fmt.millis(step.client.ttft_slo_s) + bent,
                fmt.millis(step.client.itl_p50_s) + bent,
                fmt.millis(step.client.itl_slo_s) + bent,
                _server_cell(step.server.ttft_slo_s, step.server.ttft_slo_verdict),
                _server_cell(step.server.itl_slo_s, step.server.itl_slo_verdict),
                fmt.fixed(step.client.output_tokens_per_s, ".1f"),
                fmt.fixed(step.server.output_tokens_per_s, ".1f"),
                fmt.fixed(step.client.requests_per_s, ".2f"),
                fmt.fixed(step.server.kv_usage_max_ratio, ".0%"),
                fmt.fixed(step.server.waiting_mean, ".1f"),
                fmt.fixed(step.server.preemptions, "g"),
                verdict,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    engine = "" if terms == VLLM_TERMS else f" ({terms.label})"
    lines = [
        f"Sweep of {result.url}{engine}: TTFT {tp} ≤ {slo.ttft_s * 1000:g} ms, "
        f"ITL {ip} ≤ {slo.itl_s * 1000:g} ms (latencies in ms, client-side unless srv)",
        "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows[1:]]
    lines += undecided_notes(result)
    lines += client_bound_notes(result)
    if any(
        Verdict.UNDECIDED.value in (step.server.ttft_slo_verdict, step.server.itl_slo_verdict)
        for step in result.steps
    ):
        lines.append(
            "? the target lies inside the server's histogram bucket: its value alone cannot say "
            "pass or breach (the step is judged on the client's exact values)"
        )
    lines += step_notes(result)
    lines += engine_notes(result)
    lines.append("")
    lines += recommendation_lines(result)
    return "\n".join(lines) + "\n"


def _flag_cell(flag: StopReason, terms: EngineTerms) -> str:
    """A flag in the verdict column: its value, SGLang's retractions for preemptions."""
    return terms.preemptions if flag is StopReason.PREEMPTIONS else flag.value


def engine_notes(result: SweepResult) -> list[str]:
    """What the columns mean on an engine that is not vLLM, and what it cannot measure."""
    terms = result.settings.limits.terms
    if terms == VLLM_TERMS:
        return []
    notes = [
        f"{terms.label}: KV usage is the share of its KV pool in tokens (token_usage of "
        f"max_total_num_tokens); {terms.preemptions} (running requests sent back to wait) stand "
        "where vLLM's preemptions do; the server's token rate counts a request's tokens when it "
        "finishes; its TTFT buckets start at 100 ms, so a faster first token reads near 100 ms "
        "on the server (the client's values are exact)"
    ]
    if not terms.batch_tokens_served:
        notes.append(
            f"Tokens per step: {terms.label} has no such metric, so the sweep cannot tell "
            f"whether the token budget ({terms.token_budget}) binds and never names it"
        )
    return notes


def _server_cell(value_s: float | None, verdict: str | None) -> str:
    """A server latency in ms, marked "?" where its bucket straddles the target."""
    return fmt.millis(value_s) + ("?" if verdict == Verdict.UNDECIDED.value else "")


def _undecided_steps(result: SweepResult) -> list[StepResult]:
    """The steps left undecided (marked * in the table), in concurrency order."""
    settings = result.settings
    ordered = by_concurrency(result.steps)
    flags = all_step_flags(ordered, settings.slo, settings.rules)
    return [
        step
        for step, step_flags in zip(ordered, flags, strict=True)
        if StopReason.UNDECIDED in step_flags
    ]


def _undecided_words(step: StepResult, result: SweepResult) -> str:
    settings = result.settings
    if not step.min_requests_met:
        return (
            f"{step.client.requests_ok} of the {settings.min_requests} requests it takes to judge a "
            f"step ended in its {step.measured_s:.0f} s dwell"
        )
    slo = settings.slo
    standing = slo_verdict(step, slo)
    straddled = [
        f"{name} p{percentile:g} {fmt.ms(value)} (95% interval {fmt.ms(low)}–{fmt.ms(high)}) "
        f"straddles {fmt.ms(target)}"
        for name, verdict, percentile, value, low, high, target in (
            (
                "TTFT",
                standing.ttft,
                slo.ttft_percentile,
                step.client.ttft_slo_s,
                step.client.ttft_slo_low_s,
                step.client.ttft_slo_high_s,
                slo.ttft_s,
            ),
            (
                "ITL",
                standing.itl,
                slo.itl_percentile,
                step.client.itl_slo_s,
                step.client.itl_slo_low_s,
                step.client.itl_slo_high_s,
                slo.itl_s,
            ),
        )
        if verdict is not Verdict.PASS
    ]
    return f"after its {step.measured_s:.0f} s dwell, " + "; ".join(straddled)


def undecided_notes(result: SweepResult) -> list[str]:
    """A footnote per undecided step (marked * in the table): why it could not be judged."""
    return [
        f"* concurrency {step.concurrency}: undecided, so never recommended: "
        f"{_undecided_words(step, result)}"
        for step in _undecided_steps(result)
    ]


def client_bound_notes(result: SweepResult) -> list[str]:
    """A footnote per step whose client numbers the probe's own lag bent (marked ~ in the table)."""
    slo = result.settings.slo
    return [
        f"~ concurrency {step.concurrency}: bent by the client: "
        + error_words(
            step.client.ttft_error_s,
            step.client.itl_error_s,
            step.client.lag_p99_s,
            slo.ttft_percentile,
            slo.itl_percentile,
        )
        + f" (over {CLIENT_ERROR_BOUND_S * 1e3:g} ms), so its client numbers read high; more "
        "probe workers ([load] workers) or a quieter machine measure it true"
        for step in result.steps
        if step.client.bent_by_lag
    ]


def step_notes(result: SweepResult) -> list[str]:
    """What to keep in mind about single steps: requests cut by the wait, token rates that disagree."""
    notes = []
    for step in result.steps:
        cut = step.requests_cut
        if cut:
            waited = step.followed_s
            wait = f"{waited:.0f} s" if waited is not None else "its longest"
            notes.append(
                f"concurrency {step.concurrency}: {cut} requests still streamed after a wait of "
                f"{wait} past the dwell; their latencies are left out, and their tokens after it"
            )
        client, server = step.client.output_tokens_per_s, step.server.output_tokens_per_s
        if throughput_disagrees(client, server):
            notes.append(
                f"concurrency {step.concurrency}: the probe's {fmt.fixed(client, '.1f')} tok/s and "
                f"the replica's {fmt.fixed(server, '.1f')} tok/s differ by "
                f"{fmt.fixed(step.throughput_gap_ratio, '+.0%')} (more than {THROUGHPUT_AGREEMENT_RATIO:.0%}): "
                "other clients share the replica, or its counters or scrapes missed the span"
            )
    return notes
