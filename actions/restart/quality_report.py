"""The quality check's report as plain text and as JSON-ready data."""

from __future__ import annotations

from slotop import fmt
from slotop.actions.restart.quality import PromptComparison, QualityReport


def _prompt_line(prompt: PromptComparison) -> str:
    if prompt.identical:
        state = f"identical ({prompt.tokens_before} tokens)"
    else:
        state = (
            f"diverges at token {prompt.first_divergence} "
            f"({prompt.matching_positions} of {max(prompt.tokens_before, prompt.tokens_after)} "
            "positions equal)"
        )
    drift = (
        f", drift {prompt.logprob_drift_sum / prompt.drift_tokens:+.4f}"
        if prompt.drift_tokens
        else ""
    )
    return f"{state}{drift}"


def format_quality_text(report: QualityReport) -> str:
    """The check as text: the headline shares and drift, then one line per prompt."""
    total = len(report.prompts)
    lines = [
        f"quality check: {total} prompts, greedy; tokens compared as {report.token_kind.value}",
        f"  identical outputs                      {report.prompts_identical} of {total}",
        f"  tokens identical to first divergence   {fmt.percent(report.prefix_match_ratio)}",
        f"  tokens identical position-wise         {fmt.percent(report.position_match_ratio)}",
    ]
    if report.logprob_drift_mean is None:
        lines.append("  mean log-prob drift                    N/A (no log-probs)")
    else:
        lines.append(
            f"  mean log-prob drift (after − before)   {fmt.fixed(report.logprob_drift_mean, '+.4f')} nats, "
            f"mean |drift| {report.logprob_abs_drift_mean:.4f}, over {report.drift_tokens} tokens"
        )
    width = max((len(p.name) for p in report.prompts), default=0)
    for prompt in report.prompts:
        lines.append(f"    {prompt.name.ljust(width)}  {_prompt_line(prompt)}")
    lines += [f"  note: {note}" for note in report.notes]
    return "\n".join(lines) + "\n"


def quality_to_json(report: QualityReport) -> dict[str, object]:
    """The check as JSON-ready data; null where a value is unavailable."""
    return {
        "model_before": report.model_before,
        "model_after": report.model_after,
        "token_kind": report.token_kind.name.lower(),
        "prompts_identical": report.prompts_identical,
        "prompts_total": len(report.prompts),
        "prefix_match_ratio": report.prefix_match_ratio,
        "position_match_ratio": report.position_match_ratio,
        "logprob_drift_mean": report.logprob_drift_mean,
        "logprob_abs_drift_mean": report.logprob_abs_drift_mean,
        "drift_tokens": report.drift_tokens,
        "prompts": [
            {
                "name": p.name,
                "tokens_before": p.tokens_before,
                "tokens_after": p.tokens_after,
                "prefix_match_tokens": p.prefix_match_tokens,
                "matching_positions": p.matching_positions,
                "first_divergence": p.first_divergence,
                "logprob_drift_mean": (
                    p.logprob_drift_sum / p.drift_tokens if p.drift_tokens else None
                ),
            }
            for p in report.prompts
        ],
        "notes": list(report.notes),
    }
