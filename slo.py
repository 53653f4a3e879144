"""The latency SLO, in seconds: one type for settings, sweeps, tune, reports and the dashboard.

It stands beside `slotop.config` rather than inside a layer so that collectors, actions and the
tui all read the same type; the settings file's `[slo]` keys are in milliseconds and become seconds
once, where settings are parsed (`slotop.config.slo_from_keys`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop import fmt


@dataclass(frozen=True, slots=True)
class GoodputTargets:
    """Per-request SLO targets, as `--goodput ttft:… tpot:… e2el:…`; None leaves one out.

    An inter-token-latency SLO is checked per request through TPOT, the request's mean gap.
    """

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None


@dataclass(frozen=True, slots=True)
class Slo:
    """The latency SLO: TTFT and inter-token latency targets, each at a numbered percentile."""

    ttft_s: float
    itl_s: float
    ttft_percentile: float = 99.0
    itl_percentile: float = 99.0

    @property
    def goodput_targets(self) -> GoodputTargets:
        """The SLO as per-request targets: TTFT, and the ITL target checked through TPOT."""
        return GoodputTargets(ttft_s=self.ttft_s, tpot_s=self.itl_s)

    @property
    def percentile_names(self) -> tuple[str, str]:
        """`p99`-style names of the two percentiles."""
        return fmt.percentile_name(self.ttft_percentile), fmt.percentile_name(self.itl_percentile)
