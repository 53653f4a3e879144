"""The latency-versus-concurrency curve: points per step, and the recommended point."""

from __future__ import annotations

import pytest

from slotop.collectors.probe.records import EventKind, ProbeEvent
from slotop.tui.curve import CurveBuilder, CurvePoint, curve_operating_point
from tests.support.fake_probe import probe_record


def _p(concurrency: int, ttft: float | None, itl: float | None) -> CurvePoint:
    return CurvePoint(concurrency, ttft, itl, 10)


@pytest.mark.parametrize(
    ("points", "expected"),
    [
        ((), None),
        ((_p(1, 0.1, 0.01), _p(2, 0.2, 0.02)), (2, False)),
        ((_p(1, 0.1, 0.01), _p(2, 0.2, 0.02), _p(4, 0.6, 0.02)), (2, True)),
        ((_p(1, 0.1, 0.01), _p(2, 0.2, 0.09), _p(4, 0.2, 0.02)), (1, True)),
        ((_p(1, 0.9, 0.01),), None),
        ((_p(4, 0.6, 0.02), _p(1, 0.1, 0.01)), (1, True)),  # order does not matter
        ((_p(1, 0.1, 0.01), _p(2, None, None)), (1, False)),  # unknown is no breach
    ],
)
def test_recommend_backs_off_one_step_from_the_bend(
    points: tuple[CurvePoint, ...], expected: tuple[int, bool] | None
) -> None:
    found = curve_operating_point(points, ttft_target_s=0.5, itl_target_s=0.05)
    assert ((found.concurrency, found.bent) if found.concurrency is not None else None) == expected


def test_builder_makes_one_point_per_closed_loop_step_and_latest_wins() -> None:
    builder = CurveBuilder(99.0, 99.0)
    builder.add_events(
        [
            ProbeEvent(0.0, EventKind.STARTED, 0, "closed", concurrency=2),
            ProbeEvent(10.0, EventKind.CONCURRENCY_SET, 1, "closed", concurrency=4),
            ProbeEvent(20.0, EventKind.RATE_SET, 2, "open", rate_rps=3.0),
            ProbeEvent(30.0, EventKind.CONCURRENCY_SET, 3, "closed", concurrency=2),
        ]
    )
    builder.add_records(probe_record(0, i, 0.1, (0.01, 0.01)) for i in range(5))
    builder.add_records(probe_record(1, 10 + i, 0.3, (0.02, 0.02)) for i in range(5))
    # open loop: no point
    builder.add_records(probe_record(2, 20 + i, 0.9, (0.05,)) for i in range(5))
    assert [p.concurrency for p in builder.points()] == [2, 4]
    assert builder.points()[0].ttft_s == pytest.approx(0.1)
    builder.add_records(probe_record(3, 30 + i, 0.2, (0.01,)) for i in range(5))
    first = builder.points()[0]
    assert (first.concurrency, first.ttft_s) == (2, pytest.approx(0.2))


def test_a_step_with_too_few_requests_makes_no_point() -> None:
    builder = CurveBuilder(99.0, 99.0)
    builder.add_events([ProbeEvent(0.0, EventKind.STARTED, 0, "closed", concurrency=1)])
    builder.add_records([probe_record(0, 1, 0.1, (0.01,)), probe_record(0, 2, 0.1, (0.01,))])
    assert builder.points() == ()
