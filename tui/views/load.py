"""The probe and curve panes' views: the load the probe sends, and the percentile-versus-concurrency curve."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from slotop import fmt
from slotop.actions.experiment.model import CurvePoint, curve_operating_point
from slotop.collectors.probe.lag import status_words
from slotop.tui.messages import ProbeView
from slotop.tui.sweeping import merged_curve, progress_words, sweep_points
from slotop.tui.views.inputs import (
    Inputs,
)


@dataclass(frozen=True, slots=True)
class ProbePaneView:
    """The load probe's state and counters."""

    state: str
    level: str
    counts: str
    errors: str
    running: bool
    sweep: str = ""
    lag: str = ""
    client_bound: bool = False


CURVE_COLUMNS = (4, 10, 9, 6, 6, 5)
"""Widths of the curve table's columns: concurrency, TTFT, ITL, tokens/s, goodput/s, requests."""


@dataclass(frozen=True, slots=True)
class CurveView:
    """The current configuration's curve beside the previous one's, the targets, the
    recommended point; frozen and free of time, so an equal view repaints nothing."""

    points: tuple[CurvePoint, ...]
    ttft_target_s: float
    itl_target_s: float
    recommended: int | None
    note: str
    header: str
    label: str = ""
    previous: tuple[CurvePoint, ...] = ()
    previous_label: str = ""
    ttft_name: str = "TTFT p99"
    itl_name: str = "ITL p99"
    table: bool = False


def probe_view(inputs: Inputs) -> ProbePaneView:
    """On/off, the dial, in-flight and completed counts, errors by class, and any sweep."""
    pane = _probe_view(inputs)
    sweep = progress_words(inputs.sweep_progress, inputs.sweep_result)
    return dataclasses.replace(pane, sweep=sweep) if sweep else pane


def _probe_view(inputs: Inputs) -> ProbePaneView:
    view = inputs.probe
    status = view.status
    errors = "  ".join(f"{name} {count}" for name, count in view.errors) or "none"
    if not view.running:
        return ProbePaneView("off (l turns it on)", "", "", f"errors {errors}", False)
    if status is None:
        return ProbePaneView("starting…", "", "", f"errors {errors}", True)
    level = (
        f"concurrency {status.target_concurrency}"
        if status.mode == "closed"
        else f"rate {fmt.number(status.rate_rps, 2)} req/s"
    )
    counts = (
        f"in flight {status.in_flight}  done {status.done_total:,}  failed {status.failed_total:,}"
    )
    lag, bound = _lag_words(view)
    return ProbePaneView("ON", level, counts, f"errors {errors}", True, lag=lag, client_bound=bound)


def _lag_words(view: ProbeView) -> tuple[str, bool]:
    """The probe's own lag, and whether it bends the numbers (over the short window or now)."""
    status = view.status
    client = view.short_stats.client if view.short_stats is not None else None
    bound = (status is not None and status.client_bound) or (
        client is not None and client.client_bound
    )
    lag = status_words(status.lag) if status is not None else ""
    if bound:
        added = client.words() if client is not None and client.client_bound else lag
        return f"BENT BY THE CLIENT: {added}; more [load] workers", True
    return (f"client lag: {lag}" if lag else ""), False


def curve_view(inputs: Inputs) -> CurveView:
    """The curve's points with the targets and the recommended concurrency."""
    slo = inputs.settings.slo
    curve = all_points(inputs)
    percentiles = (slo.ttft_percentile, slo.itl_percentile)
    point = curve_operating_point(curve, slo.ttft_s, slo.itl_s, percentiles)
    previous = inputs.previous_curve
    shown = CurveView(
        points=curve,
        ttft_target_s=slo.ttft_s,
        itl_target_s=slo.itl_s,
        recommended=point.concurrency,
        note="",
        header=_curve_header(inputs),
        label=inputs.configuration.label if inputs.configuration is not None else "",
        previous=previous.points if previous is not None else (),
        previous_label=previous.configuration.label if previous is not None else "",
        ttft_name=f"TTFT {fmt.percentile_name(slo.ttft_percentile)}",
        itl_name=f"ITL {fmt.percentile_name(slo.itl_percentile)}",
        table=inputs.curve_table,
    )
    swept = inputs.sweep_result
    if swept is not None and swept.stop is not None:
        chosen = swept.recommendation.concurrency
        note = (
            f"sweep recommends concurrency {chosen}: {swept.recommendation.binding_detail}"
            if chosen is not None
            else f"sweep: {swept.recommendation.binding_detail}"
        )
        return dataclasses.replace(shown, recommended=chosen, note=note)
    if not curve:
        note = "no points yet: turn the probe on (l) and step it (+/-), or sweep (s)"
    elif point.concurrency is None:
        note = "no step meets both targets"
    elif point.bent:
        note = f"recommended concurrency {point.concurrency} (one step below the bend)"
    else:
        note = f"all steps pass up to {point.concurrency}; keep stepping until p99 bends"
    return dataclasses.replace(shown, note=note)


def _curve_header(inputs: Inputs) -> str:
    """The table's column names, at widths `CURVE_COLUMNS` gives."""
    slo = inputs.settings.slo
    names = (
        "conc",
        f"TTFT {fmt.percentile_name(slo.ttft_percentile)}",
        f"ITL {fmt.percentile_name(slo.itl_percentile)}",
        "tok/s",
        "good/s",
        "n",
    )
    return " ".join(f"{name:>{width}}" for name, width in zip(names, CURVE_COLUMNS, strict=True))


def all_points(inputs: Inputs) -> tuple[CurvePoint, ...]:
    """The manual steps' points and the sweep's, on one curve."""
    return merged_curve(inputs.curve, sweep_points(inputs.sweep_result))
