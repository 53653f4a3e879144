"""The probe pane's lag line: dim while the probe keeps up, red words when it bends the numbers."""

from __future__ import annotations

from slotop.actions.probe_control import ProbeControl, load_shape_from_settings
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.records import (
    EventKind,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
    WorkerLag,
)
from slotop.collectors.probe.stats import probe_stats
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.replica import ReplicaClient
from slotop.config import Settings
from slotop.tui.feed import Feed
from slotop.tui.messages import ProbeView, TimelineNoted
from slotop.tui.panes.probe import ProbePane
from slotop.tui.views.inputs import Inputs
from slotop.tui.views.load import probe_view
from tests.support.fake_probe import FakeProbe
from tests.support.lagged import stamped


def worker(index: int, itl_error_s: float, bound: bool) -> WorkerLag:
    return WorkerLag(
        worker=index,
        span_s=1.0,
        loop_delay_p99_s=0.0002,
        loop_delay_max_s=0.0004,
        chunk_lag_p99_s=0.0003,
        chunk_lag_max_s=0.0009,
        reads=3000,
        ttft_error_s=0.0001,
        itl_error_s=itl_error_s,
        client_bound=bound,
    )


def inputs(*lags: WorkerLag, stats_records: tuple[ProbeRecord, ...] = ()) -> Inputs:
    status = ProbeStatus(
        at_s=10.0,
        step=0,
        mode="closed",
        target_concurrency=128,
        rate_rps=None,
        in_flight=128,
        sent_total=500,
        done_total=372,
        failed_total=0,
        lag=lags,
    )
    stats = probe_stats(list(stats_records), 0.0, 10.0) if stats_records else None
    return Inputs(
        settings=Settings(),
        now_s=10.0,
        started_s=0.0,
        probe=ProbeView(running=True, status=status, short_stats=stats),
    )


def test_a_probe_that_keeps_up_shows_its_lag_dimly() -> None:
    view = probe_view(inputs(worker(0, 0.0002, False), worker(1, 0.0004, False)))
    assert not view.client_bound
    assert view.lag == (
        "client lag: TTFT p99 error 0.10 ms · ITL p99 error 0.40 ms · chunk lag p99 0.30 ms · "
        "loop delay p99 0.20 ms (2 workers, worst)"
    )


def test_a_worker_that_falls_behind_marks_the_numbers_bent() -> None:
    view = probe_view(inputs(worker(0, 0.0002, False), worker(1, 0.0042, True)))
    assert view.client_bound
    assert view.lag.startswith("BENT BY THE CLIENT: ")
    assert "ITL p99 error 4.20 ms" in view.lag and view.lag.endswith("more [load] workers")
    drawn = ProbePane().draw(view)
    line = next(span for span in drawn.spans if drawn.plain[span.start : span.end] == view.lag)
    assert str(line.style) == "bold red"


def test_the_short_window_s_requests_can_mark_them_bent_too() -> None:
    late = [stamped(i, i * 0.1, [i * 0.1 + 0.03, i * 0.1 + 0.05], [0.0, 0.005]) for i in range(20)]
    view = probe_view(inputs(worker(0, 0.0002, False), stats_records=tuple(late)))
    assert view.client_bound
    assert "the client added" in view.lag and "ITL p99 +5.00 ms" in view.lag


class FallingBehindProbe(FakeProbe):
    """A probe that says it fell behind its reads, and later that it caught up."""

    def __init__(self) -> None:
        super().__init__(concurrency=64)
        self.said = [
            ProbeEvent(1.0, EventKind.STARTED, 0, "closed", 64),
            ProbeEvent(
                5.0, EventKind.CLIENT_BOUND, 0, detail="bent: ITL p99 error 3 ms", lag_s=0.003
            ),
            ProbeEvent(12.0, EventKind.CLIENT_CAUGHT_UP, 0, detail="keeps up", lag_s=0.0002),
        ]

    def events(self) -> list[ProbeEvent]:
        return list(self.said)


def test_the_timeline_notes_when_the_probe_falls_behind_and_catches_up() -> None:
    settings = Settings()
    probe = FallingBehindProbe()
    control = ProbeControl(
        ProbeTarget(base_url=settings.replica.url),
        load_shape_from_settings(settings.load),
        allow_remote_load=False,
        start_probe=lambda *_: probe,
    )
    control.apply(control.plan_start(concurrency=64))
    posted: list[object] = []
    client = ReplicaClient("http://127.0.0.1:9")  # never asked: only the probe is polled
    feed = Feed(ReplicaMonitor(client), posted.append, probe=control, clock=lambda: 20.0)
    feed._poll_probe()
    notes = [m.event for m in posted if isinstance(m, TimelineNoted)]
    assert [(n.kind, n.text) for n in notes] == [
        ("probe", "bent: ITL p99 error 3 ms"),
        ("probe", "keeps up"),
    ]
