"""The report's tune decisions: what `slotop tune` measured, decided and chose, with the evidence.

Read back through the tune's own code (`slotop.actions.tune.resume.recorded_tune`): the KV
budget it planned with, a row per configuration (its operating point, goodput and its standard
error, what bound it, why it could not be chosen), each decision in the words the diagnosis gave
(what bound, the evidence, the dial it named and why that value), each quality check, and the
choice with its margin over the baseline against the noise of the two. A recording that holds
no tune gives no section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slotop import fmt
from slotop.actions.replica.spec import Dials
from slotop.actions.report.markdown import table
from slotop.actions.session.reader import Recording
from slotop.actions.tune.model import Trial
from slotop.actions.tune.output import MOVE_WORDS, SERVE_COMMANDS, dial_note_lines, flags_line
from slotop.actions.tune.resume import recorded_tune


def _quality_words(trial: Trial) -> str:
    data = trial.quality
    if data is None:
        return ""
    if data.get("not_run"):
        return f"not run: {data['not_run']}"
    identical = f"{data.get('prompts_identical')} of {data.get('prompts_total')} prompts identical"
    match = fmt.percent(data.get("position_match_ratio"))
    return f"{identical}, {match} of tokens identical position by position"


def _trial_rows(trials: tuple[Trial, ...], chosen: int | None) -> list[list[str]]:
    rows = []
    for trial in trials:
        rec = trial.sweep.recommendation if trial.sweep is not None else None
        binds = rec.binding.value.replace("_", " ") if rec is not None and rec.binding else fmt.NA
        state = trial.rejected or ("cut short" if not trial.complete else "")
        mark = " ◀" if trial.number == chosen else ""
        rows.append(
            [
                f"#{trial.number}{mark}",
                f"`{flags_line(trial.dials)}`",
                MOVE_WORDS[trial.move],
                trial.restart,
                str(trial.concurrency) if trial.concurrency is not None else fmt.NA,
                fmt.fixed(trial.goodput_rps, ".2f"),
                fmt.fixed(trial.goodput_se_rps, ".2f"),
                binds,
                state or "can be chosen",
            ]
        )
    return rows


def _choice_lines(result: Mapping[str, Any] | None) -> list[str]:
    if result is None:
        return [
            "The tune was cut short before it chose (the process was stopped); the rows above "
            "are as it measured them.",
            "",
        ]
    choice: Mapping[str, Any] = result.get("choice") or {}
    lines = []
    if choice.get("trial") is None:
        lines.append(f"**Chosen:** none; {choice.get('words', '')}.")
    else:
        lines.append(
            f"**Chosen:** #{choice['trial']} at concurrency {choice.get('concurrency')}, "
            f"goodput {fmt.fixed(choice.get('goodput_rps'), '.2f')} req/s; {choice.get('words')}."
        )
        if choice.get("noise_rps") is not None:
            lines.append(
                f"The margin is judged against the run-to-run noise of the two goodputs: "
                f"±{choice['noise_rps']:.2f} req/s (Student's t for the fewer batches of the "
                "two, times √(se₁² + se₂²), each error from its step's batch means)."
            )
        lines.append(f"Binds next: {choice.get('binds_next_detail') or fmt.NA}.")
        chosen = choice.get("dials")
        engine = Dials.from_json(chosen).engine if isinstance(chosen, Mapping) else "vllm"
        lines.append(f"Flags to paste into `{SERVE_COMMANDS[engine]}`: `{result.get('paste')}`")
    lines.append(f"Stopped: {result.get('stop')}.")
    ended = result.get("ended_dials")
    verified = "verified" if result.get("verified") else "NOT verified"
    if ended is None:
        lines.append("The replica was left DOWN: a restart and its rollback failed.")
    else:
        lines.append(f"The replica was left on `{flags_line(Dials.from_json(ended))}`, {verified}.")
    return [*(f"{line}\n" for line in lines)]


def tune_section(recording: Recording) -> list[str]:
    """The tune's decisions and their evidence, or nothing when the session ran no tune."""
    tune = recorded_tune(recording)
    if tune is None:
        return []
    state = tune.state
    chosen = (tune.result or {}).get("choice", {}).get("trial") if tune.result else None
    lines = [
        "## Tune decisions",
        "",
        f"`slotop tune` began with {flags_line(tune.original)}. Each configuration was "
        "restarted into, verified and swept (refined: bisected between the last concurrency "
        "that met the SLO and the first that broke); goodput is the requests/s that met both "
        "targets at its operating point. What bound at the first break named the next dial; "
        "the sweeps below hold every step each decision read.",
        "",
    ]
    if tune.capacity is not None:
        lines += ["KV budget it planned with:", ""]
        lines += [f"- {line}" for line in tune.capacity.words()]
        lines.append("")
    header = ("#", "dials", "why", "restart", "point", "goodput (req/s)", "se", "binds", "state")
    lines += table(header, _trial_rows(state.trials, chosen), "lllrrrrll")
    lines += ["", "Decisions, in order:", ""]
    for decision in state.decisions:
        dials = f" → `{flags_line(decision.dials)}`" if decision.dials is not None else ""
        lines.append(
            f"- after #{decision.after} ({MOVE_WORDS[decision.move]}{dials}): {decision.words}"
        )
        lines += [f"  - {line}" for line in dial_note_lines(decision)]
    if not state.decisions:
        lines.append("- none was made")
    checked = [t for t in state.trials if t.quality is not None]
    if checked:
        lines += ["", "Quality checks (greedy prompts, the original KV dtype against the new):", ""]
        lines += [f"- #{t.number} `{flags_line(t.dials)}`: {_quality_words(t)}" for t in checked]
    lines.append("")
    lines += _choice_lines(tune.result)
    return lines
