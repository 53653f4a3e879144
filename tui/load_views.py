"""The probe and curve panes' views: the load the probe sends, and the percentile-versus-concurrency curve."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from slotop import fmt
from slotop.actions.experiment.model import CurvePoint, curve_operating_point
from slotop.tui.inputs import (
    Inputs,
)
from slotop.tui.sweeping import merged_curve, progress_words, sweep_points


@dataclass(frozen=True, slots=True)
class ProbePaneView:
    """The load probe's state and counters."""

    state: str
    level: str
    counts: str
    errors: str
    running: bool
    sweep: str = ""


@dataclass(frozen=True, slots=True)
class CurveView:
    """p-latency against concurrency, with targets and the recommended point."""

    points: tuple[CurvePoint, ...]
    ttft_target_s: float
    itl_target_s: float
    recommended: int | None
    note: str
    header: str


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
    return ProbePaneView("ON", level, counts, f"errors {errors}", True)


def curve_view(inputs: Inputs) -> CurveView:
    """The curve's points with the targets and the recommended concurrency."""
    slo = inputs.settings.slo
    ttft_t, itl_t = slo.ttft_ms / 1e3, slo.itl_ms / 1e3
    curve = all_points(inputs)
    point = curve_operating_point(curve, ttft_t, itl_t)
    swept = inputs.sweep_result
    if swept is not None and swept.stop is not None:
        chosen = swept.recommendation.concurrency
        note = (
            f"sweep recommends concurrency {chosen}: {swept.recommendation.binding_detail}"
            if chosen is not None
            else f"sweep: {swept.recommendation.binding_detail}"
        )
        return CurveView(curve, ttft_t, itl_t, chosen, note, _curve_header(inputs))
    if not curve:
        note = "no points yet: turn the probe on (l) and step it (+/-), or sweep (s)"
    elif point.concurrency is None:
        note = "no step meets both targets"
    elif point.bent:
        note = f"recommended concurrency {point.concurrency} (one step below the bend)"
    else:
        note = f"all steps pass up to {point.concurrency}; keep stepping until p99 bends"
    return CurveView(curve, ttft_t, itl_t, point.concurrency, note, _curve_header(inputs))


def _curve_header(inputs: Inputs) -> str:
    """Column names with each target, so red and green on the rows need no legend."""
    slo = inputs.settings.slo
    ttft = f"TTFT {fmt.percentile_name(slo.ttft_percentile)}<{fmt.ms(slo.ttft_ms / 1e3)}"
    itl = f"ITL {fmt.percentile_name(slo.itl_percentile)}<{fmt.ms(slo.itl_ms / 1e3)}"
    return f"conc  {ttft:>15}  {itl:>15}     n"


def all_points(inputs: Inputs) -> tuple[CurvePoint, ...]:
    """The manual steps' points and the sweep's, on one curve."""
    return merged_curve(inputs.curve, sweep_points(inputs.sweep_result))
