"""The sweep's plot: latency at the SLO's percentiles and tokens/s against concurrency.

Drawn by `slotop.actions.plots`, which imports matplotlib only when it draws.
"""

from __future__ import annotations

from pathlib import Path

from slotop.actions.plots import CurveFigure, Panel, Series, write_png
from slotop.actions.sweep.decide import by_concurrency
from slotop.actions.sweep.runner import SweepResult


def sweep_figure(result: SweepResult) -> CurveFigure:
    """The sweep's plot: TTFT and ITL at the SLO percentile (client, server faint) and tokens/s
    against concurrency, with the SLO targets and the operating point."""
    slo = result.settings.slo
    steps = by_concurrency(result.steps)
    conc = tuple(float(s.concurrency) for s in steps)

    def ms(values: list[float | None]) -> tuple[float | None, ...]:
        return tuple(None if v is None else v * 1000 for v in values)

    panels = []
    for name, percentile, target_s, client_values, server_values in (
        (
            "TTFT",
            slo.ttft_percentile,
            slo.ttft_s,
            ms([s.client.ttft_slo_s for s in steps]),
            ms([s.server.ttft_slo_s for s in steps]),
        ),
        (
            "ITL",
            slo.itl_percentile,
            slo.itl_s,
            ms([s.client.itl_slo_s for s in steps]),
            ms([s.server.itl_slo_s for s in steps]),
        ),
    ):
        label = f"{name} p{percentile:g}"
        client = Series(f"{label} (client)", conc, client_values)
        server = Series(f"{label} (server)", conc, server_values, "s--", faint=True)
        present = (client, server) if any(v is not None for v in server_values) else (client,)
        panels.append(
            Panel(f"{label} (ms)", present, target_s * 1000, f"SLO {target_s * 1000:g} ms")
        )
    tokens = Series(
        "output tokens/s (client)", conc, tuple(s.client.output_tokens_per_s for s in steps)
    )
    server_tokens = tuple(s.server.output_tokens_per_s for s in steps)
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
