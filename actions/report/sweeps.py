"""The report's sweeps: every step a recorded `slotop sweep` measured, its verdicts and its pick.

The numbers, the flags and the SLO verdict of each step are the sweep's own, as it recorded them
(`sweep_step` and `sweep_result` actions, in the form of `slotop sweep --json`); the operating
point and what binds are read back through the sweep's own code, which holds them to the rules of
`slotop.actions.slo`. A sweep cut short (no `sweep_result`: the process was killed) keeps its
measured steps and says that no operating point was decided.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slotop import fmt
from slotop.actions.errors import SweepError
from slotop.actions.report.markdown import offset, table
from slotop.actions.report.sections import slo_targets
from slotop.actions.session.reader import Recording
from slotop.actions.slo import VLLM_TERMS, EngineTerms
from slotop.actions.sweep.codec import sweep_from_json
from slotop.actions.sweep.runner import SweepResult
from slotop.actions.sweep.table import (
    engine_notes,
    recommendation_lines,
    step_notes,
    undecided_notes,
)


@dataclass(frozen=True, slots=True)
class RecordedSweep:
    """One sweep of the session: its steps as recorded, and its result when it ended.

    `rows` are `sweep_to_json`'s step rows (every measured field, `slo_met` and `flags`);
    `slo` the targets it judged them by (`ttft_s`, `itl_s`, `ttft_percentile`, `itl_percentile`).
    """

    number: int
    rows: tuple[Mapping[str, Any], ...]
    slo: Mapping[str, Any]
    result: SweepResult | None
    ended_at_s: float | None
    problem: str | None = None
    terms: EngineTerms = VLLM_TERMS
    """The engine's words (SGLang's retractions), from the result's limits where it has one."""

    @property
    def plotted(self) -> SweepResult | None:
        """The result its plot draws: None for a sweep cut short or without a step."""
        return self.result if self.result is not None and self.rows else None

    @property
    def png_name(self) -> str:
        """The file its plot goes to."""
        return f"sweep-{self.number}.png"


def _undecided(row: Mapping[str, Any]) -> bool:
    """Whether a recorded step was left undecided (an older slotop said under-sampled)."""
    flags = row.get("flags") or ()
    return "undecided" in flags or "under_sampled" in flags or not row.get("min_requests_met", True)


def _header_slo(recording: Recording) -> Mapping[str, Any]:
    """The recorded settings' SLO in the sweep's JSON form (a sweep cut short has no other)."""
    return dataclasses.asdict(slo_targets(recording))


def recorded_sweeps(recording: Recording) -> tuple[RecordedSweep, ...]:
    """Every sweep in the recording: steps since the previous result, closed by their result."""
    sweeps: list[RecordedSweep] = []
    pending: list[Mapping[str, Any]] = []
    for line in recording.of_kind("action"):
        action = line.data.get("action")
        if action == "sweep_step" and isinstance(line.data.get("step"), Mapping):
            pending.append(line.data["step"])
        elif action == "sweep_result" and isinstance(line.data.get("sweep"), Mapping):
            data = line.data["sweep"]
            where = f"{recording.source}:{line.line_number}"
            try:
                result: SweepResult | None = sweep_from_json(data, where)
                problem = None
            except SweepError as exc:
                result, problem = None, str(exc)
            rows = tuple(r for r in data.get("steps") or () if isinstance(r, Mapping))
            slo = (data.get("settings") or {}).get("slo") or _header_slo(recording)
            terms = result.settings.limits.terms if result is not None else VLLM_TERMS
            sweeps.append(
                RecordedSweep(
                    len(sweeps) + 1, rows or tuple(pending), slo, result, line.t_s, problem, terms
                )
            )
            pending = []
    if pending:
        sweeps.append(
            RecordedSweep(len(sweeps) + 1, tuple(pending), _header_slo(recording), None, None)
        )
    return tuple(sweeps)


def _concurrency(row: Mapping[str, Any]) -> float:
    """A step row's concurrency, for the table's order (a refined sweep measures out of order)."""
    value = row.get("concurrency")
    return float(value) if isinstance(value, int | float) else 0.0


def _verdict(row: Mapping[str, Any]) -> str:
    met = row.get("slo_met")
    return "met" if met is True else "not met" if met is False else fmt.NA


def _flags(row: Mapping[str, Any]) -> str:
    flags = row.get("flags") or []
    return ", ".join(str(f).replace("_", " ") for f in flags) if flags else "none"


def sweep_rows(sweep: RecordedSweep) -> tuple[tuple[str, ...], list[list[str]]]:
    """The steps table: header and rows, latencies in ms at p50 and the SLO's percentiles."""
    tp = f"p{float(sweep.slo.get('ttft_percentile', 99.0)):g}"
    ip = f"p{float(sweep.slo.get('itl_percentile', 99.0)):g}"
    header = (
        "concurrency",
        "requests",
        "failed",
        "TTFT p50 (ms)",
        f"TTFT {tp} (ms)",
        "ITL p50 (ms)",
        f"ITL {ip} (ms)",
        f"server TTFT {tp} (ms)",
        f"server ITL {ip} (ms)",
        "output tokens/s",
        "server tokens/s",
        "requests/s",
        "goodput",
        "KV max",
        "waiting",
        sweep.terms.preemptions,
        "SLO",
        "flags",
    )
    rows = []
    for row in sorted(sweep.rows, key=_concurrency):
        rows.append(
            [
                str(row.get("concurrency")),
                str(row.get("requests_ok")) + ("*" if _undecided(row) else ""),
                str(row.get("requests_failed")),
                fmt.millis(row.get("ttft_p50_s")),
                fmt.millis(row.get("ttft_slo_s")),
                fmt.millis(row.get("itl_p50_s")),
                fmt.millis(row.get("itl_slo_s")),
                fmt.millis(row.get("server_ttft_slo_s")),
                fmt.millis(row.get("server_itl_slo_s")),
                fmt.fixed(row.get("output_tokens_per_s"), ",.1f"),
                fmt.fixed(row.get("server_output_tokens_per_s"), ",.1f"),
                fmt.fixed(row.get("requests_per_s"), ".2f"),
                fmt.percent(row.get("goodput_ratio"), 0),
                fmt.percent(row.get("kv_usage_max_ratio"), 0),
                fmt.fixed(row.get("waiting_mean"), ".1f"),
                fmt.fixed(row.get("preemptions"), "g"),
                _verdict(row),
                _flags(row),
            ]
        )
    return header, rows


def sweep_section(sweep: RecordedSweep, start_s: float, png: bool) -> list[str]:
    """A sweep's section: its SLO, the steps table, the pick in words, notes, and its plot."""
    slo = sweep.slo
    lines = [f"### Sweep {sweep.number}", ""]
    url = sweep.result.url if sweep.result is not None else None
    targets = (
        f"TTFT p{float(slo.get('ttft_percentile', 99)):g} ≤ {float(slo.get('ttft_s', 0)) * 1000:g} ms, "
        f"ITL p{float(slo.get('itl_percentile', 99)):g} ≤ {float(slo.get('itl_s', 0)) * 1000:g} ms"
    )
    where = f" of {url}" if url else ""
    lines.append(
        f"Steps measured{where} against {targets}; latencies are the probe's (client-side, "
        "exact), server values come from the replica's histograms (bucket-coarse)."
    )
    lines.append("")
    header, rows = sweep_rows(sweep)
    lines += table(header, rows, "l" + "r" * 15 + "ll")
    lines.append("")
    if sweep.result is not None:
        result = sweep.result
        notes = undecided_notes(result) + step_notes(result) + engine_notes(result)
        lines += [f"- {note.removeprefix('* ')}" for note in notes]
        if notes:
            lines.append("")
        ended = offset(sweep.ended_at_s, start_s) if sweep.ended_at_s is not None else "?"
        lines.append(f"Result (recorded at {ended}):")
        lines.append("")
        lines += [f"- {text.strip()}" for text in recommendation_lines(result)]
    elif sweep.problem is not None:
        lines.append(f"The sweep's result line does not read back: {sweep.problem}.")
    else:
        lines.append(
            "The sweep was cut short: the recording holds no result for it (the process was "
            "stopped before it ended), so no operating point was decided. The steps above are "
            "as it measured them."
        )
    if png:
        lines += [
            "",
            f"![Sweep {sweep.number}: latency and throughput against concurrency]"
            f"({sweep.png_name})",
        ]
    lines.append("")
    return lines


def sweeps_section(sweeps: Sequence[RecordedSweep], start_s: float) -> list[str]:
    """Every sweep of the session, or nothing when it ran none."""
    if not sweeps:
        return []
    lines = ["## Sweeps", ""]
    for sweep in sweeps:
        lines += sweep_section(sweep, start_s, png=sweep.plotted is not None)
    return lines
