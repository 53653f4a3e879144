"""A sweep's outputs: the table at the end, JSON with every step (which a resume reads), CSV, a plot.

The JSON is the sweep's record: settings, every measured step with its flags, why it stopped and
the operating point. It is written after every step, so an interrupted sweep resumes from it.
Each step also says how far its token rate sits from the replica's counter rate
(`throughput_gap_ratio`, derived from the two, so not read back), and what the replica's
histogram bucket alone says of each target (`server_ttft_slo_verdict`, `server_itl_slo_verdict`:
"undecided" where the target lies inside the bucket; the table marks those values with "?").
The plot is drawn by `slotop.actions.plots`, which imports matplotlib only when it draws.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slotop import fmt
from slotop.actions.errors import SweepError
from slotop.actions.plots import CurveFigure, Panel, Series, write_png
from slotop.actions.slo import Binding, Verdict
from slotop.actions.sweep.decide import (
    Recommendation,
    ReplicaLimits,
    StepResult,
    StopReason,
    StopRules,
    all_step_flags,
    by_concurrency,
    recommend,
    slo_verdict,
)
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult
from slotop.collectors.probe.lag import CLIENT_ERROR_BOUND_S, error_words, past_bound
from slotop.collectors.probe.stats import (
    THROUGHPUT_AGREEMENT_RATIO,
    throughput_disagrees,
    throughput_gap_ratio,
)
from slotop.slo import Slo

JSON_FORMAT = "slotop-sweep"
JSON_VERSION = 1

STEP_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(StepResult))

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

_BINDING_WORDS = {
    Binding.TTFT: "TTFT",
    Binding.ITL: "inter-token latency",
    Binding.KV_CAPACITY: "KV-cache capacity",
    Binding.SEQ_CAP: "the sequence cap (max_num_seqs)",
    Binding.TOKEN_BUDGET: "the token budget (max_num_batched_tokens)",
}


def sweep_to_json(result: SweepResult) -> dict[str, Any]:
    """The whole sweep as a JSON-ready mapping."""
    settings = result.settings
    flags = all_step_flags(result.steps, settings.slo, settings.rules)
    steps = []
    for step, step_flags in zip(result.steps, flags, strict=True):
        row = {name: fmt.finite(getattr(step, name, None)) for name in STEP_FIELDS}
        row["throughput_gap_ratio"] = fmt.finite(_gap(step))
        row["slo_met"] = slo_verdict(step, settings.slo).met
        row["client_bound"] = client_bound(step)
        row["flags"] = [flag.value for flag in step_flags]
        steps.append(row)
    recommendation = result.recommendation
    headroom = recommendation.headroom
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "url": result.url,
        "started_at_s": result.started_at_s,
        "settings": {
            "plan": list(settings.plan),
            "warmup_s": settings.warmup_s,
            "dwell_s": settings.dwell_s,
            "min_requests": settings.min_requests,
            "max_dwell_s": settings.max_dwell_s,
            "tick_s": settings.tick_s,
            "max_follow_s": settings.max_follow_s,
            "refine": settings.refine,
            "refine_resolution_ratio": settings.refine_resolution_ratio,
            "slo": dataclasses.asdict(settings.slo),
            "rules": dataclasses.asdict(settings.rules),
            "limits": dataclasses.asdict(settings.limits),
        },
        "steps": steps,
        "stop": result.stop.value if result.stop is not None else None,
        "finished": result.finished,
        "met_slo": result.met_slo,
        "recommendation": {
            "concurrency": recommendation.concurrency,
            "next_concurrency": recommendation.next_concurrency,
            "binding": recommendation.binding.value if recommendation.binding else None,
            "binding_detail": recommendation.binding_detail,
            "certainty": recommendation.certainty,
            "headroom": (
                {k: fmt.finite(v) for k, v in dataclasses.asdict(headroom).items()}
                if headroom is not None
                else None
            ),
        },
    }


def _section(data: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, Mapping):
        raise SweepError(f"{where}: {key!r} is missing or not an object")
    return value


def _build(kind: type[Any], values: Mapping[str, Any], where: str) -> Any:
    try:
        return kind(**values)
    except (TypeError, ValueError) as exc:
        raise SweepError(f"{where}: {kind.__name__} cannot be read back ({exc})") from None
    except SweepError as exc:
        raise SweepError(f"{where}: {exc}") from None


def sweep_from_json(data: Any, where: str = "the sweep JSON") -> SweepResult:
    """Read a sweep back from `sweep_to_json`'s mapping (to resume it or to redraw its outputs)."""
    if not isinstance(data, Mapping) or data.get("format") != JSON_FORMAT:
        raise SweepError(f'{where}: not a slotop sweep file (no "format": {JSON_FORMAT!r})')
    if data.get("version") != JSON_VERSION:
        raise SweepError(
            f"{where}: sweep file version {data.get('version')!r}; this slotop reads "
            f"version {JSON_VERSION}"
        )
    raw = _section(data, "settings", where)
    plan = raw.get("plan")
    if not isinstance(plan, list) or not all(isinstance(c, int) for c in plan):
        raise SweepError(f"{where}: settings.plan must be a list of whole numbers")
    settings = _build(
        SweepSpec,
        {
            "plan": tuple(plan),
            "slo": _build(Slo, _section(raw, "slo", where), where),
            "rules": _build(StopRules, _section(raw, "rules", where), where),
            "limits": _build(ReplicaLimits, _section(raw, "limits", where), where),
            **{
                key: raw[key]
                for key in (
                    "warmup_s",
                    "dwell_s",
                    "min_requests",
                    "max_dwell_s",
                    "tick_s",
                    "max_follow_s",
                    "refine",
                    "refine_resolution_ratio",
                )
                if key in raw
            },
        },
        where,
    )
    rows = data.get("steps")
    if not isinstance(rows, list):
        raise SweepError(f"{where}: 'steps' must be a list")
    steps = []
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise SweepError(f"{where}: step {number} is not an object")
        values = {name: row[name] for name in STEP_FIELDS if name in row}
        steps.append(_build(StepResult, values, f"{where}, step {number}"))
    stop_value = data.get("stop")
    try:
        stop = StopReason(stop_value) if stop_value is not None else None
    except ValueError:
        raise SweepError(f"{where}: unknown stop reason {stop_value!r}") from None
    url = data.get("url")
    if not isinstance(url, str):
        raise SweepError(f"{where}: 'url' must be a string")
    started = data.get("started_at_s")
    return SweepResult(
        url=url,
        started_at_s=float(started) if isinstance(started, int | float) else 0.0,
        settings=settings,
        steps=tuple(steps),
        stop=stop,
        recommendation=recommend(steps, settings.slo, settings.rules, settings.limits),
    )


def write_json(result: SweepResult, path: Path) -> None:
    """Write the sweep's JSON atomically (a reader never sees half a file)."""
    text = json.dumps(sweep_to_json(result), indent=2, allow_nan=False) + "\n"
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def read_json(path: Path) -> SweepResult:
    """Read a sweep file, naming it in every error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(f"{path}: no such sweep file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError(f"{path}: cannot read the sweep file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise SweepError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return sweep_from_json(data, str(path))


def sweep_to_csv(result: SweepResult) -> str:
    """One CSV row per step: every measured field, whether it met the SLO, and its flags."""
    settings = result.settings
    flags = all_step_flags(result.steps, settings.slo, settings.rules)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*STEP_FIELDS, "throughput_gap_ratio", "slo_met", "flags"])
    for step, step_flags in zip(result.steps, flags, strict=True):
        values = ["" if (v := getattr(step, name, None)) is None else v for name in STEP_FIELDS]
        gap = "" if (g := _gap(step)) is None else g
        met = slo_verdict(step, settings.slo).met
        writer.writerow([*values, gap, met, " ".join(f.value for f in step_flags)])
    return out.getvalue()


def recommendation_lines(result: SweepResult) -> list[str]:
    """The verdict in words: operating point, headroom, what binds next, why the sweep stopped."""
    slo = result.settings.slo
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
        lines.append(
            f"Binds next: {_BINDING_WORDS.get(rec.binding, rec.binding.value)} {rec.binding_detail}"
        )
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
        lines.append(f"Stopped: {_STOP_WORDS[result.stop]}.")
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
        "preempt",
        "verdict",
    )
    ordered = by_concurrency(result.steps)
    flags = all_step_flags(ordered, slo, result.settings.rules)
    rows = [header]
    for step, step_flags in zip(ordered, flags, strict=True):
        verdict = "ok" if not step_flags else ",".join(f.value for f in step_flags)
        bent = "~" if client_bound(step) else ""
        undecided = "*" if StopReason.UNDECIDED in step_flags else ""
        rows.append(
            (
                str(step.concurrency),
                str(step.requests_ok) + undecided,
                str(step.requests_failed),
                fmt.millis(step.ttft_p50_s) + bent,
                fmt.millis(step.ttft_slo_s) + bent,
                fmt.millis(step.itl_p50_s) + bent,
                fmt.millis(step.itl_slo_s) + bent,
                _server_cell(step.server_ttft_slo_s, step.server_ttft_slo_verdict),
                _server_cell(step.server_itl_slo_s, step.server_itl_slo_verdict),
                fmt.fixed(step.output_tokens_per_s, ".1f"),
                fmt.fixed(step.server_output_tokens_per_s, ".1f"),
                fmt.fixed(step.requests_per_s, ".2f"),
                fmt.fixed(step.kv_usage_max_ratio, ".0%"),
                fmt.fixed(step.waiting_mean, ".1f"),
                fmt.fixed(step.preemptions, "g"),
                verdict,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        f"Sweep of {result.url}: TTFT {tp} ≤ {slo.ttft_s * 1000:g} ms, "
        f"ITL {ip} ≤ {slo.itl_s * 1000:g} ms (latencies in ms, client-side unless srv)",
        "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows[1:]]
    lines += undecided_notes(result)
    lines += client_bound_notes(result)
    if any(
        Verdict.UNDECIDED.value in (step.server_ttft_slo_verdict, step.server_itl_slo_verdict)
        for step in result.steps
    ):
        lines.append(
            "? the target lies inside the server's histogram bucket: its value alone cannot say "
            "pass or breach (the step is judged on the client's exact values)"
        )
    lines += step_notes(result)
    lines.append("")
    lines += recommendation_lines(result)
    return "\n".join(lines) + "\n"


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
            f"{step.requests_ok} of the {settings.min_requests} requests it takes to judge a "
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
                step.ttft_slo_s,
                step.ttft_slo_low_s,
                step.ttft_slo_high_s,
                slo.ttft_s,
            ),
            (
                "ITL",
                standing.itl,
                slo.itl_percentile,
                step.itl_slo_s,
                step.itl_slo_low_s,
                step.itl_slo_high_s,
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


def client_bound(step: StepResult) -> bool:
    """Whether the probe's own lag moved the step's TTFT or ITL past the bound."""
    return past_bound(step.client_ttft_error_s) or past_bound(step.client_itl_error_s)


def client_bound_notes(result: SweepResult) -> list[str]:
    """A footnote per step whose client numbers the probe's own lag bent (marked ~ in the table)."""
    slo = result.settings.slo
    return [
        f"~ concurrency {step.concurrency}: bent by the client: "
        + error_words(
            step.client_ttft_error_s,
            step.client_itl_error_s,
            step.client_lag_p99_s,
            slo.ttft_percentile,
            slo.itl_percentile,
        )
        + f" (over {CLIENT_ERROR_BOUND_S * 1e3:g} ms), so its client numbers read high; more "
        "probe workers ([load] workers) or a quieter machine measure it true"
        for step in result.steps
        if client_bound(step)
    ]


def _gap(step: StepResult) -> float | None:
    return throughput_gap_ratio(step.output_tokens_per_s, step.server_output_tokens_per_s)


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
        client, server = step.output_tokens_per_s, step.server_output_tokens_per_s
        if throughput_disagrees(client, server):
            notes.append(
                f"concurrency {step.concurrency}: the probe's {fmt.fixed(client, '.1f')} tok/s and "
                f"the replica's {fmt.fixed(server, '.1f')} tok/s differ by "
                f"{fmt.fixed(_gap(step), '+.0%')} (more than {THROUGHPUT_AGREEMENT_RATIO:.0%}): "
                "other clients share the replica, or its counters or scrapes missed the span"
            )
    return notes


def sweep_figure(result: SweepResult) -> CurveFigure:
    """The sweep's plot: TTFT and ITL at the SLO percentile (client, server faint) and tokens/s
    against concurrency, with the SLO targets and the operating point."""
    slo = result.settings.slo
    steps = by_concurrency(result.steps)
    conc = tuple(float(s.concurrency) for s in steps)

    def ms(values: list[float | None]) -> tuple[float | None, ...]:
        return tuple(None if v is None else v * 1000 for v in values)

    panels = []
    for name, percentile, target_s, client_key, server_key in (
        ("TTFT", slo.ttft_percentile, slo.ttft_s, "ttft_slo_s", "server_ttft_slo_s"),
        ("ITL", slo.itl_percentile, slo.itl_s, "itl_slo_s", "server_itl_slo_s"),
    ):
        label = f"{name} p{percentile:g}"
        client = Series(f"{label} (client)", conc, ms([getattr(s, client_key) for s in steps]))
        server_values = ms([getattr(s, server_key) for s in steps])
        server = Series(f"{label} (server)", conc, server_values, "s--", faint=True)
        present = (client, server) if any(v is not None for v in server_values) else (client,)
        panels.append(
            Panel(f"{label} (ms)", present, target_s * 1000, f"SLO {target_s * 1000:g} ms")
        )
    tokens = Series("output tokens/s (client)", conc, tuple(s.output_tokens_per_s for s in steps))
    server_tokens = tuple(s.server_output_tokens_per_s for s in steps)
    rates: tuple[Series, ...] = (tokens,)
    if any(v is not None for v in server_tokens):
        rates += (Series("output tokens/s (server)", conc, server_tokens, "s--", faint=True),)
    panels.append(Panel("output tokens/s", rates, zero_based=True))
    return CurveFigure(
        title=f"slotop sweep of {result.url}",
        panels=tuple(panels),
        ticks=tuple(s.concurrency for s in steps),
        chosen=result.recommendation.concurrency,
    )


def write_plot(result: SweepResult, path: Path) -> None:
    """Draw the sweep's plot (`sweep_figure`) as a PNG; PlotError names the file when it cannot."""
    write_png(sweep_figure(result), path)
