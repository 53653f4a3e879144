"""The report's configurations: each set of dials the replica ran with, its curve, its verdicts and
its operating point, and the rows of `steps.csv` (pure).

Configurations and their curves are the experiment's (`slotop.actions.experiment`), rebuilt from
the recording as the dashboard built them live; each point's verdict and each curve's operating
point come from the method's rules (`slotop.actions.slo`, through the experiment's
`point_verdict` and `operating_point`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

from slotop import fmt
from slotop.actions.experiment import (
    Configuration,
    CurvePoint,
    ExperimentBuilder,
    point_verdict,
)
from slotop.actions.experiment.builder import MIN_REQUESTS_PER_POINT
from slotop.actions.plots import CurveFigure, Panel, Series
from slotop.actions.report.markdown import offset, table
from slotop.actions.slo import OperatingPoint, Verdict
from slotop.slo import Slo

VERDICT_WORDS = {
    Verdict.PASS: "met",
    Verdict.BREACH: "broken",
    Verdict.UNDECIDED: "undecided",
    Verdict.UNKNOWN: "unknown",
}


@dataclass(frozen=True, slots=True)
class ConfigurationResult:
    """One configuration with its points, each point's verdict, and its operating point."""

    configuration: Configuration
    points: tuple[CurvePoint, ...]
    verdicts: tuple[Verdict, ...]
    operating_point: OperatingPoint

    @property
    def png_name(self) -> str:
        """The file its curve goes to."""
        return f"curve-{self.configuration.index}.png"


def configuration_results(
    builder: ExperimentBuilder, targets: Slo
) -> tuple[ConfigurationResult, ...]:
    """Every configuration's curve, judged against the targets."""
    percentiles = (builder.ttft_percentile, builder.itl_percentile)
    results = []
    for configuration in builder.configurations():
        points = builder.curve(configuration.index)
        verdicts = tuple(
            point_verdict(point, targets.ttft_s, targets.itl_s, percentiles) for point in points
        )
        point = builder.operating_point(configuration.index, targets.ttft_s, targets.itl_s)
        results.append(ConfigurationResult(configuration, points, verdicts, point))
    return tuple(results)


def operating_point_words(result: ConfigurationResult) -> str:
    """The operating point in words: where, and whether the curve has bent above it."""
    point = result.operating_point
    if not result.points:
        return (
            "no curve: no closed-loop load step of this configuration ended "
            f"{MIN_REQUESTS_PER_POINT} requests"
        )
    if point.concurrency is None:
        if point.first_break is not None:
            return f"none: the SLO broke at concurrency {point.first_break}, the lowest measured"
        return "none: no point could be judged"
    if point.first_break is not None:
        return (
            f"concurrency {point.concurrency} (the SLO broke at {point.first_break}, the next "
            "step up)"
        )
    highest = result.points[-1].concurrency
    return (
        f"concurrency {point.concurrency} (no point broke the SLO up to {highest}: the curve "
        "has not bent; load further to find where it does)"
    )


def _point_row(point: CurvePoint, verdict: Verdict, chosen: int | None) -> list[str]:
    return [
        str(point.concurrency) + (" ◀" if point.concurrency == chosen else ""),
        str(point.requests),
        str(point.requests_failed),
        fmt.millis(point.ttft_s),
        fmt.millis(point.itl_s),
        fmt.fixed(point.output_tokens_per_s, ",.1f"),
        fmt.fixed(point.goodput_rps, ".2f"),
        VERDICT_WORDS[verdict],
    ]


def configurations_section(
    results: Sequence[ConfigurationResult], targets: Slo, start_s: float, sweeps: int
) -> list[str]:
    """Every configuration: a summary table, then each one's curve table, pick and plot."""
    tp, ip = targets.percentile_names
    lines = [
        "## Configurations",
        "",
        "Every verified dial change opens a configuration; each load step inside one is a point "
        "of its curve (the requests sent during that step, warm-up included), so no point mixes "
        f"two configurations. Latencies are the probe's, at TTFT {tp} and ITL {ip}.",
        "",
    ]
    if sweeps:
        lines += [
            "A sweep's own table (under Sweeps) counts only each step's measured dwell after its "
            "warm-up, so its numbers differ a little from these points.",
            "",
        ]
    summary = [
        (
            result.configuration.label,
            offset(result.configuration.started_at_s, start_s),
            str(len(result.points)),
            str(result.operating_point.concurrency)
            if result.operating_point.concurrency is not None
            else fmt.NA,
        )
        for result in results
    ]
    lines += table(("configuration", "from", "points", "operating point"), summary)
    lines.append("")
    header = (
        "concurrency",
        "requests",
        "failed",
        f"TTFT {tp} (ms)",
        f"ITL {ip} (ms)",
        "output tokens/s",
        "goodput (req/s)",
        "SLO",
    )
    for result in results:
        configuration = result.configuration
        dials = " ".join(f"{flag}={value}" for flag, value in configuration.dials) or "not known"
        lines += [
            f"### Configuration {configuration.label}",
            "",
            f"From {offset(configuration.started_at_s, start_s)}; dials: {dials}.",
            "",
        ]
        chosen = result.operating_point.concurrency
        if result.points:
            rows = [
                _point_row(point, verdict, chosen)
                for point, verdict in zip(result.points, result.verdicts, strict=True)
            ]
            lines += table(header, rows, "lrrrrrrl")
            lines.append("")
        lines += [f"Operating point: {operating_point_words(result)}.", ""]
        if result.points:
            lines += [f"![Configuration {configuration.label}]({result.png_name})", ""]
    return lines


def _ms(values: Sequence[float | None]) -> tuple[float | None, ...]:
    return tuple(None if v is None else v * 1000 for v in values)


def _series(result: ConfigurationResult, faint: bool) -> tuple[Series, Series, Series]:
    label = result.configuration.label
    x = tuple(float(p.concurrency) for p in result.points)
    style = "s--" if faint else "o-"
    return (
        Series(label, x, _ms([p.ttft_s for p in result.points]), style, faint),
        Series(label, x, _ms([p.itl_s for p in result.points]), style, faint),
        Series(label, x, tuple(p.output_tokens_per_s for p in result.points), style, faint),
    )


def configuration_figure(
    result: ConfigurationResult, previous: ConfigurationResult | None, targets: Slo
) -> CurveFigure:
    """A configuration's curve (TTFT, ITL, tokens/s against concurrency), the previous one faint
    beside it, the targets and the operating point marked."""
    tp, ip = targets.percentile_names
    ttft, itl, tokens = _series(result, faint=False)
    before = _series(previous, faint=True) if previous is not None and previous.points else None
    ticks = sorted(
        {p.concurrency for p in result.points}
        | ({p.concurrency for p in previous.points} if before is not None and previous else set())
    )
    return CurveFigure(
        title=f"Configuration {result.configuration.label}",
        panels=(
            Panel(
                f"TTFT {tp} (ms)",
                (ttft, before[0]) if before else (ttft,),
                targets.ttft_s * 1000,
                f"SLO {targets.ttft_s * 1000:g} ms",
            ),
            Panel(
                f"ITL {ip} (ms)",
                (itl, before[1]) if before else (itl,),
                targets.itl_s * 1000,
                f"SLO {targets.itl_s * 1000:g} ms",
            ),
            Panel("output tokens/s", (tokens, before[2]) if before else (tokens,), zero_based=True),
        ),
        ticks=tuple(ticks),
        chosen=result.operating_point.concurrency,
    )


def steps_csv(results: Sequence[ConfigurationResult], targets: Slo) -> str:
    """One row per configuration and concurrency step: its numbers (units in the column names),
    its SLO verdict, and whether it is the configuration's operating point."""
    tp, ip = targets.percentile_names
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        (
            "configuration",
            "configuration_label",
            "configuration_started_at_s",
            "concurrency",
            "requests_ok",
            "requests_failed",
            f"ttft_{tp}_s",
            f"itl_{ip}_s",
            "output_tokens_per_s",
            "goodput_rps",
            "slo_verdict",
            "operating_point",
        )
    )
    for result in results:
        configuration = result.configuration
        for point, verdict in zip(result.points, result.verdicts, strict=True):
            writer.writerow(
                (
                    configuration.index,
                    configuration.label,
                    configuration.started_at_s,
                    point.concurrency,
                    point.requests,
                    point.requests_failed,
                    "" if point.ttft_s is None else point.ttft_s,
                    "" if point.itl_s is None else point.itl_s,
                    "" if point.output_tokens_per_s is None else point.output_tokens_per_s,
                    "" if point.goodput_rps is None else point.goodput_rps,
                    verdict.value,
                    point.concurrency == result.operating_point.concurrency,
                )
            )
    return out.getvalue()
