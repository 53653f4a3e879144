"""Experiments: every verified dial change opens a configuration, and each has its own curve.

`model` holds the frozen values (a configuration, a curve point) and the verdict of a point;
`builder` places probe records in the configuration and the load step they were sent in and turns
each into a point; `recording` rebuilds the same from a session recording. No point or statistic
ever mixes two configurations.
"""

from __future__ import annotations

from slotop.actions.experiment.builder import ExperimentBuilder
from slotop.actions.experiment.model import (
    Configuration,
    ConfigurationCurve,
    CurvePoint,
    curve_operating_point,
    dial_pairs,
    point_verdict,
)
from slotop.actions.experiment.recording import experiment_from_recording

__all__ = [
    "Configuration",
    "ConfigurationCurve",
    "CurvePoint",
    "ExperimentBuilder",
    "curve_operating_point",
    "dial_pairs",
    "experiment_from_recording",
    "point_verdict",
]
