"""Assemble a session's report from its recording (pure): the markdown, the CSV, and the figures.

Nothing here writes a file or draws a pixel: `Report` holds the text of `report.md` and
`steps.csv` and, for each PNG, what it draws (`slotop.actions.plots` draws them, `write` writes).
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop.actions.experiment import experiment_from_recording
from slotop.actions.plots import CurveFigure, TimelineFigure
from slotop.actions.report.configurations import (
    configuration_figure,
    configuration_results,
    configurations_section,
    steps_csv,
)
from slotop.actions.report.markdown import offset, table
from slotop.actions.report.restarts import restarts_section
from slotop.actions.report.sections import (
    events_section,
    files_section,
    replica_section,
    slo_section,
    slo_targets,
    summary_section,
)
from slotop.actions.report.sweeps import recorded_sweeps, sweeps_section
from slotop.actions.report.timeline import replica_series, timeline_figure, timeline_marks
from slotop.actions.report.tune import tune_section
from slotop.actions.session.reader import Recording
from slotop.actions.sweep.plot import sweep_figure

REPORT_MD = "report.md"
STEPS_CSV = "steps.csv"
TIMELINE_PNG = "timeline.png"
OWN_PATTERNS = (REPORT_MD, STEPS_CSV, TIMELINE_PNG, "curve-*.png", "sweep-*.png")
"""Names of the files a report writes; in an existing folder only these are ever replaced."""

Figure = CurveFigure | TimelineFigure


@dataclass(frozen=True, slots=True)
class Report:
    """A report ready to write: `report.md`, `steps.csv`, and each PNG's name and figure."""

    markdown: str
    steps_csv: str
    figures: tuple[tuple[str, Figure], ...]
    notes: tuple[str, ...] = ()

    def file_names(self) -> tuple[str, ...]:
        """Every file the report writes, `report.md` first."""
        return (REPORT_MD, STEPS_CSV, *(name for name, _ in self.figures))


def timeline_section(recording: Recording) -> list[str]:
    """The timeline's PNG and what each numbered line on it marks."""
    lines = [
        "## Timeline",
        "",
        "The replica's numbers as the monitor showed them (its short window), each request's "
        "TTFT and TPOT as the probe measured them, the probe's load, the KV cache and the queue; "
        "each numbered line marks an action, each shaded span a measured sweep step.",
        "",
        f"![The session over time]({TIMELINE_PNG})",
        "",
    ]
    marks = timeline_marks(recording)
    if marks:
        start = recording.header.started_at_s
        rows = [(str(m.number), offset(m.t_s, start), m.words) for m in marks]
        lines += [*table(("mark", "time", "action"), rows, "rrl"), ""]
    return lines


def build_report(recording: Recording, source: str) -> Report:
    """The whole report of a recording; `source` is how report.md names the recording's file."""
    start = recording.header.started_at_s
    targets = slo_targets(recording)
    series = replica_series(recording)
    results = configuration_results(experiment_from_recording(recording), targets)
    sweeps = recorded_sweeps(recording)

    figures: list[tuple[str, Figure]] = [
        (
            TIMELINE_PNG,
            timeline_figure(
                recording,
                series,
                ttft_target_s=targets.ttft_s,
                itl_target_s=targets.itl_s,
                percentile_words=targets.percentile_names,
            ),
        )
    ]
    previous = None
    for result in results:
        if result.points:
            figures.append((result.png_name, configuration_figure(result, previous, targets)))
            previous = result
    for sweep in sweeps:
        if sweep.plotted is not None:
            figures.append((sweep.png_name, sweep_figure(sweep.plotted)))

    files = [
        (STEPS_CSV, "one row per configuration and concurrency step, units in the column names"),
        (TIMELINE_PNG, "the session over time, every action marked"),
    ]
    files += [
        (r.png_name, f"configuration {r.configuration.label}'s curve") for r in results if r.points
    ]
    files += [(w.png_name, f"sweep {w.number}'s steps") for w in sweeps if w.plotted is not None]
    lines = summary_section(recording, source)
    lines += replica_section(recording, series.first, series.last)
    lines += slo_section(recording)
    lines += tune_section(recording)
    lines += configurations_section(results, targets, start, len(sweeps))
    lines += sweeps_section(sweeps, start)
    lines += restarts_section(recording)
    lines += timeline_section(recording)
    lines += events_section(recording)
    lines += files_section(files)
    return Report(
        "\n".join(lines).rstrip() + "\n",
        steps_csv(results, targets),
        tuple(figures),
        recording.notes,
    )
