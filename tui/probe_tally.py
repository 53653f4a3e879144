"""What the dashboard makes of the probe's records and load steps, for the live feed and a replay.

The feed hands each poll's records, steps and status here; a replay hands the same from a
recording. Both get the same ProbeView (client statistics over both windows, errors by class)
and the same curves of the current and the previous configuration, from this one piece of code.
What a poll takes is counted at once (errors, windows, curves); its view's statistics are worked
out from the windows as they stood, when first asked for: at once live, and in a replay only for
the polls it shows.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from collections.abc import Callable, Sequence

from slotop.actions.experiment.builder import ExperimentBuilder
from slotop.actions.experiment.model import ConfigurationCurve, DialPairs
from slotop.collectors.probe.lag import WindowClientErrors
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.probe.stats import RecordWindow
from slotop.slo import GoodputTargets
from slotop.tui.messages import ProbeView

Curves = tuple[ConfigurationCurve | None, ConfigurationCurve | None]
"""The current configuration's curve and the previous one's."""
KEPT_CONFIGURATIONS = 2
"""Configurations whose records are kept: the two the curve pane draws (older ones keep their
points), so a dashboard restarting its replica all week holds no more than two configurations'
records."""


class PolledView:
    """One poll's ProbeView, worked out when first asked for, then kept."""

    __slots__ = ("_view", "_work")

    def __init__(self, work: Callable[[], ProbeView]) -> None:
        self._work: Callable[[], ProbeView] | None = work
        self._view: ProbeView | None = None

    def get(self) -> ProbeView:
        """The view (worked out now, the first time)."""
        if self._view is None:
            assert self._work is not None
            self._view, self._work = self._work(), None
        return self._view


class ProbeTally:
    """The probe's records and steps so far, as the dashboard shows them; open_configuration may
    come from another thread than the polls."""

    def __init__(
        self,
        *,
        long_window_s: float,
        short_window_s: float,
        slo_percentiles: tuple[float, float],
        goodput_targets: GoodputTargets | None,
        opened_at_s: float,
    ) -> None:
        self._long_s = long_window_s
        self._short_s = short_window_s
        self._percentiles = sorted({50.0, 90.0, 99.0, *slo_percentiles})
        self._targets = goodput_targets
        self._records = RecordWindow(max(long_window_s, short_window_s))
        self._errors: Counter[str] = Counter()
        self._experiment = ExperimentBuilder(
            *slo_percentiles, goodput_targets, keep_configurations=KEPT_CONFIGURATIONS
        )
        self._experiment_lock = threading.Lock()
        self._experiment.open_configuration((), opened_at_s)  # dials learnt when told
        self._last_curves: Curves | None = None
        self._last: PolledView | None = None
        self._last_shown: ProbeView | None = None

    def _error_counts(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(self._errors.items()))

    def off(self, now_s: float) -> ProbeView:
        """No probe runs: forget what fell out of the windows."""
        return self.off_polled(now_s).get()

    def off_polled(self, now_s: float) -> PolledView:
        """`off`, its view worked out when asked for."""
        self._records.evict(now_s)
        view = ProbeView(running=False, errors=self._error_counts())
        self._last = PolledView(lambda: view)
        return self._last

    def held(self, status: ProbeStatus | None) -> ProbeView:
        """Someone else (a sweep) takes the records: the status now, the statistics of the view
        before."""
        return self.held_polled(status).get()

    def held_polled(self, status: ProbeStatus | None) -> PolledView:
        """`held`, its view worked out when asked for."""
        before, errors = self._last, self._error_counts()

        def work() -> ProbeView:
            last = before.get() if before is not None else None
            return ProbeView(
                running=True,
                status=status,
                long_stats=last.long_stats if last is not None else None,
                short_stats=last.short_stats if last is not None else None,
                errors=errors,
            )

        self._last = PolledView(work)
        return self._last

    def read(
        self,
        records: Sequence[ProbeRecord],
        events: Sequence[ProbeEvent],
        status: ProbeStatus | None,
        now_s: float,
        clients: WindowClientErrors | None = None,
    ) -> ProbeView:
        """Take the records and steps the probe gave at `now_s`; the view with both windows.

        `clients` stands in for the client errors over the long and the short window where the
        records lack the chunk lags they are measured from (a recording keeps them as measured).
        """
        return self.read_polled(records, events, status, now_s, clients).get()

    def read_polled(
        self,
        records: Sequence[ProbeRecord],
        events: Sequence[ProbeEvent],
        status: ProbeStatus | None,
        now_s: float,
        clients: WindowClientErrors | None = None,
    ) -> PolledView:
        """`read`, its view's statistics worked out when asked for, over the windows as now."""
        for record in records:
            if record.counts_as_failure and record.error is not None:
                self._errors[record.error.value] += 1
        self._records.add(records)
        self._records.evict(now_s)
        with self._experiment_lock:
            self._experiment.add_events(events)
            self._experiment.add_records(records)
        window, errors = self._records.frozen(), self._error_counts()

        def work() -> ProbeView:
            percentiles, targets = self._percentiles, self._targets
            long_stats = window.stats(now_s, self._long_s, percentiles, targets)
            short_stats = window.stats(now_s, self._short_s, percentiles, targets)
            if clients is not None:
                long_stats = dataclasses.replace(long_stats, client=clients.long_window)
                short_stats = dataclasses.replace(short_stats, client=clients.short_window)
            return ProbeView(
                running=True,
                status=status,
                long_stats=long_stats,
                short_stats=short_stats,
                errors=errors,
            )

        self._last = PolledView(work)
        return self._last

    @staticmethod
    def clients(view: ProbeView) -> WindowClientErrors:
        """A view's client errors over the long and the short window."""
        long_stats, short_stats = view.long_stats, view.short_stats
        return WindowClientErrors(
            long_window=long_stats.client if long_stats is not None else None,
            short_window=short_stats.client if short_stats is not None else None,
        )

    def shown(self, view: ProbeView) -> bool:
        """Whether `view` differs from the last one shown (then it is the last one shown)."""
        if view == self._last_shown:
            return False
        self._last_shown = view
        return True

    def open_configuration(self, dials: DialPairs, at_s: float) -> None:
        """The replica runs with `dials` from `at_s` on; records sent from then on land there."""
        with self._experiment_lock:
            self._experiment.open_configuration(dials, at_s)

    def changed_curves(self) -> Curves | None:
        """The current and the previous configuration's curves when they changed since last
        asked, else None."""
        with self._experiment_lock:
            experiment = self._experiment
            curves = (
                experiment.curve_of(experiment.current),
                experiment.curve_of(experiment.previous),
            )
            if curves == self._last_curves:
                return None
            self._last_curves = curves
            return curves
