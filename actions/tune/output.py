"""A tune's result as text (a table of the configurations, the decisions, the choice and the line
to paste) and as JSON (schema `slotop.tune/1`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from slotop import fmt
from slotop.actions.replica.spec import Dials
from slotop.actions.tune.model import JSON_SCHEMA, Decision, Move, Trial
from slotop.actions.tune.runner import TuneResult

MOVE_WORDS = {
    Move.BASELINE: "baseline",
    Move.SMALLER_KV_DTYPE: "narrower KV dtype",
    Move.MORE_SEQS: "more sequences",
    Move.FEWER_BATCHED_TOKENS: "fewer batched tokens",
    Move.MORE_BATCHED_TOKENS: "more batched tokens",
    Move.STOP: "stop",
}


SERVE_COMMANDS = {"vllm": "vllm serve", "sglang": "python -m sglang.launch_server"}
"""What each engine's flags are pasted into."""


def flags_line(dials: Dials) -> str:
    """The dials as `vllm serve`'s (or `sglang.launch_server`'s) flags, a line to paste."""
    return " ".join(arg.replace("=", " ", 1) for arg in dials.flag_args())


def trial_row(trial: Trial) -> tuple[str, ...]:
    """One configuration in the table: its dials, why, its KV cache, its point, goodput and
    what binds."""
    rec = trial.sweep.recommendation if trial.sweep is not None else None
    binds = rec.binding.value if rec is not None and rec.binding is not None else fmt.NA
    state = trial.rejected or ("" if trial.complete else "cut short")
    return (
        f"#{trial.number}",
        flags_line(trial.dials),
        MOVE_WORDS[trial.move],
        f"{trial.kv_tokens:,}" if trial.kv_tokens is not None else fmt.NA,
        str(trial.concurrency) if trial.concurrency is not None else fmt.NA,
        fmt.fixed(trial.goodput_rps, ".2f"),
        fmt.fixed(trial.goodput_se_rps, ".2f"),
        binds,
        state or "ok",
    )


TRIAL_HEADER = ("#", "dials", "why", "KV tokens", "point", "goodput/s", "se", "binds", "state")


def dial_note_lines(decision: Decision) -> list[str]:
    """Why each dial was tried after a decision's trial, or left alone, a line each."""
    return [
        f"{note.dial}: {'tried' if note.tried else 'left'}: {note.words}"
        for note in decision.considered
    ]


def _aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def format_tune_text(result: TuneResult, command: Sequence[str] = ()) -> str:
    """The tune in words: the configurations, each decision, the choice, the line to paste,
    and where the replica was left."""
    slo = result.spec.sweep.slo
    lines = [
        f"slotop tune of {result.url}: TTFT p{slo.ttft_percentile:g} ≤ {slo.ttft_s * 1000:g} ms, "
        f"ITL p{slo.itl_percentile:g} ≤ {slo.itl_s * 1000:g} ms; goodput is the requests/s that "
        "met both, at each configuration's operating point",
    ]
    if result.capacity is not None:
        lines.append("KV budget:")
        lines += [f"  {line}" for line in result.capacity.words()]
    lines.append("")
    lines += _aligned([TRIAL_HEADER, *(trial_row(t) for t in result.trials)])
    lines += ["", "Decisions (each dial: tried, or why not):"]
    for decision in result.decisions:
        lines.append(f"  after #{decision.after}: {decision.words}")
        lines += [f"    {line}" for line in dial_note_lines(decision)]
    if not result.decisions:
        lines.append("  none")
    choice = result.choice
    lines.append("")
    if choice.trial is None or choice.dials is None:
        lines.append(f"Chosen: none; {choice.words}.")
    else:
        lines.append(
            f"Chosen: #{choice.trial} at concurrency {choice.concurrency}, goodput "
            f"{fmt.fixed(choice.goodput_rps, '.2f')} req/s; {choice.words}."
        )
        lines.append(f"Binds next: {choice.binding_detail or fmt.NA}")
        serve = SERVE_COMMANDS[choice.dials.engine]
        lines.append(f"Paste into `{serve}`: {flags_line(choice.dials)}")
        if command:
            lines.append(f"  as [launch] runs it: {' '.join(command)}")
    lines.append(f"Stopped: {result.stop_words}.")
    lines.append(_end_words(result))
    return "\n".join(lines) + "\n"


def _end_words(result: TuneResult) -> str:
    if result.ended is None:
        return "The replica is DOWN: a restart and its rollback failed; see the restart lines."
    which = "its original dials" if result.ended == result.original else "the chosen dials"
    verified = "verified" if result.verified else "NOT verified (see the lines above)"
    return f"The replica runs {which} ({flags_line(result.ended)}), {verified}."


def tune_to_json(
    result: TuneResult,
    *,
    command: Sequence[str] = (),
    recording: str | None = None,
    report: str | None = None,
) -> dict[str, Any]:
    """The tune as JSON-ready data, schema `slotop.tune/1`."""
    spec = result.spec
    choice = result.choice
    return {
        "schema": JSON_SCHEMA,
        "url": result.url,
        "slo": dataclasses.asdict(spec.sweep.slo),
        "dials_allowed": sorted(spec.dials),
        "budget_s": spec.budget_s,
        "max_candidates": spec.max_candidates,
        "keep": spec.keep,
        "original_dials": result.original.to_json(),
        "capacity": result.capacity.to_json() if result.capacity is not None else None,
        "trials": [trial.to_json() for trial in result.trials],
        "decisions": [decision.to_json() for decision in result.decisions],
        "choice": choice.to_json(),
        "paste": flags_line(choice.dials) if choice.dials is not None else None,
        "command": list(command) if command and choice.dials is not None else None,
        "ended_dials": result.ended.to_json() if result.ended is not None else None,
        "verified": result.verified,
        "end_lines": list(result.end_lines),
        "stop": result.stop_words,
        "interrupted": result.interrupted,
        "resumable": result.resumable,
        "took_s": result.took_s,
        "recording": recording,
        "report": report,
    }
