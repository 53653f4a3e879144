"""Configurations and their curves: placing records, points worked by hand, and the rebuild.

The SLO here is TTFT p50 < 500 ms and ITL p50 < 50 ms, so every percentile is a median a person
can read off the numbers; goodput checks TTFT <= 0.5 s and TPOT <= 0.05 s per request.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from slotop.actions.experiment import (
    Configuration,
    CurvePoint,
    ExperimentBuilder,
    curve_operating_point,
    dial_pairs,
    experiment_from_recording,
)
from slotop.actions.experiment import builder as experiment_builder
from slotop.actions.replica.spec import Dials
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import SessionRecorder, start_recording
from slotop.collectors.probe.records import ErrorClass, EventKind, ProbeEvent, ProbeRecord
from slotop.config import SessionSettings, Settings
from slotop.slo import GoodputTargets, Slo

TARGETS = GoodputTargets(ttft_s=0.5, tpot_s=0.05)
AUTO = Dials(kv_cache_dtype="auto")
FP8 = Dials(kv_cache_dtype="fp8")
START_S = 1000.0
RESTART_S = 1013.0


def request(
    step: int,
    sent_s: float,
    ttft_s: float,
    gaps_s: tuple[float, ...],
    error: ErrorClass | None = None,
) -> ProbeRecord:
    """A request sent at `sent_s` that streamed its first token after `ttft_s`, then `gaps_s`
    (one token a chunk); a failed one ends 0.1 s after its send with no token."""
    if error is not None:
        return ProbeRecord(
            request_id=int(sent_s * 10), step=step, sent_at_s=sent_s, done_at_s=sent_s + 0.1,
            in_flight_at_send=1, planned_prompt_tokens=16, planned_output_tokens=3,
            ttft_s=None, itl_s=(), e2e_s=None, chunk_count=0, prompt_tokens=None,
            output_tokens=None, finish_reason=None, error=error, http_status=503,
        )  # fmt: skip
    e2e = ttft_s + sum(gaps_s)
    return ProbeRecord(
        request_id=int(sent_s * 10), step=step, sent_at_s=sent_s, done_at_s=sent_s + e2e,
        in_flight_at_send=1, planned_prompt_tokens=16, planned_output_tokens=len(gaps_s) + 1,
        ttft_s=ttft_s, itl_s=gaps_s, e2e_s=e2e, chunk_count=len(gaps_s) + 1, prompt_tokens=16,
        output_tokens=len(gaps_s) + 1, finish_reason="length", error=None,
    )  # fmt: skip


EVENTS = (
    ProbeEvent(1000.5, EventKind.STARTED, 0, "closed", concurrency=2),
    ProbeEvent(1010.0, EventKind.CONCURRENCY_SET, 1, "closed", concurrency=4),
)
STEP_0 = (
    request(0, 1001.0, 0.1, (0.01, 0.01)),
    request(0, 1002.0, 0.2, (0.02, 0.02)),
    request(0, 1003.0, 0.3, (0.03, 0.03)),
)
STEP_1_BEFORE = (
    request(1, 1010.5, 0.6, (0.01, 0.01)),
    request(1, 1011.0, 0.7, (0.01, 0.01)),
    request(1, 1012.0, 0.8, (0.01, 0.01)),
)
STEP_1_AFTER = (
    request(1, 1014.0, 0.1, (0.04, 0.04)),
    request(1, 1015.0, 0.2, (0.06, 0.06)),
    request(1, 1016.0, 0.3, (0.04, 0.04)),
    request(1, 1016.5, 0.0, (), ErrorClass.HTTP_STATUS),
)

# Worked by hand. Configuration 1, concurrency 2: TTFTs 0.1 0.2 0.3 (median 0.2), gaps
# 0.01 0.01 0.02 0.02 0.03 0.03 (median 0.02); 9 tokens from the first send (1001) to the last
# end (1003 + 0.3 + 0.06 = 1003.36), 2.36 s; TPOTs 0.01 0.02 0.03 all meet 0.05, so 3 good.
C1_AT_2 = CurvePoint(
    concurrency=2, ttft_s=0.2, itl_s=0.02, requests=3,
    output_tokens_per_s=9 / 2.36, goodput_rps=3 / 2.36, requests_failed=0,
)  # fmt: skip
# Concurrency 4 before the restart: TTFTs 0.6 0.7 0.8 (median 0.7, over 0.5); every gap 0.01;
# 1010.5 to 1012.82 (1012 + 0.8 + 0.02) is 2.32 s; no request meets the TTFT target, so no goodput.
C1_AT_4 = CurvePoint(
    concurrency=4, ttft_s=0.7, itl_s=0.01, requests=3,
    output_tokens_per_s=9 / 2.32, goodput_rps=0.0, requests_failed=0,
)  # fmt: skip
# Concurrency 4 after it: TTFTs 0.1 0.2 0.3 (median 0.2), gaps 0.04 0.04 0.06 0.06 0.04 0.04
# (median 0.04); the failed request ends last (1016.6), so the span is 2.6 s; TPOTs 0.04 0.06
# 0.04: two good requests of the four that ended.
C2_AT_4 = CurvePoint(
    concurrency=4, ttft_s=0.2, itl_s=0.04, requests=3,
    output_tokens_per_s=9 / 2.6, goodput_rps=2 / 2.6, requests_failed=1,
)  # fmt: skip


def assert_points(found: tuple[CurvePoint, ...], expected: tuple[CurvePoint, ...]) -> None:
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert (got.concurrency, got.requests, got.requests_failed) == (
            want.concurrency,
            want.requests,
            want.requests_failed,
        )
        for name in ("ttft_s", "itl_s", "output_tokens_per_s", "goodput_rps"):
            assert getattr(got, name) == pytest.approx(getattr(want, name), rel=1e-9), name


def live_session(late_dials: bool) -> ExperimentBuilder:
    """Two steps, then a restart to fp8 in the middle of the second; with `late_dials` the app
    hears of the new dials only after records sent under them were placed."""
    builder = ExperimentBuilder(50.0, 50.0, TARGETS)
    builder.open_configuration(dial_pairs(AUTO), START_S)
    builder.add_events(EVENTS)
    builder.add_records(STEP_0)
    builder.add_records(STEP_1_BEFORE)
    if late_dials:
        builder.add_records(STEP_1_AFTER)
        builder.open_configuration(dial_pairs(FP8), RESTART_S)
    else:
        builder.open_configuration(dial_pairs(FP8), RESTART_S)
        builder.add_records(STEP_1_AFTER)
    return builder


@pytest.mark.parametrize("late_dials", [False, True])
def test_a_step_spanning_a_restart_is_two_points_never_one(late_dials: bool) -> None:
    builder = live_session(late_dials)
    assert builder.configurations() == (
        Configuration(1, (("--kv-cache-dtype", "auto"),), START_S, "#1 kv auto"),
        Configuration(2, (("--kv-cache-dtype", "fp8"),), RESTART_S, "#2 kv fp8"),
    )
    assert builder.current == builder.configurations()[1]
    assert builder.previous == builder.configurations()[0]
    assert_points(builder.curve(1), (C1_AT_2, C1_AT_4))
    assert_points(builder.curve(2), (C2_AT_4,))
    # #1 breaks at 4 (TTFT 0.7 s), so it backs off to 2; #2 passes at 4 (one failure of four
    # ended is within the 50% a p50 target leaves) and has not bent yet.
    first = builder.operating_point(1, 0.5, 0.05)
    second = builder.operating_point(2, 0.5, 0.05)
    assert (first.concurrency, first.bent) == (2, True)
    assert (second.concurrency, second.bent) == (4, False)


def test_configurations_older_than_those_kept_keep_their_points_and_let_records_go() -> None:
    builder = ExperimentBuilder(50.0, 50.0, TARGETS, keep_configurations=1)
    builder.open_configuration(dial_pairs(AUTO), START_S)
    builder.add_events(EVENTS)
    builder.add_records(STEP_0)
    builder.add_records(STEP_1_BEFORE)
    builder.open_configuration(dial_pairs(FP8), RESTART_S)
    builder.add_records(STEP_1_AFTER)
    assert_points(builder.curve(1), (C1_AT_2, C1_AT_4))  # worked out as it closed, and kept
    assert_points(builder.curve(2), (C2_AT_4,))
    held = [s for s in builder._segments.values() if s.configuration == 1]
    assert held and all(not s.records and not s.arrays for s in held)
    # A request sent under #1 that ends now counts nowhere: #1's points stay as they were.
    builder.add_records((request(1, 1012.5, 0.05, (0.01, 0.01)),))
    assert_points(builder.curve(1), (C1_AT_2, C1_AT_4))
    everything = live_session(late_dials=False)
    everything.add_records((request(1, 1012.5, 0.05, (0.01, 0.01)),))
    assert everything.curve(1)[1].requests == 4  # kept without a limit


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
def test_the_operating_point_backs_off_one_step_from_the_bend(
    points: tuple[CurvePoint, ...], expected: tuple[int, bool] | None
) -> None:
    found = curve_operating_point(points, ttft_target_s=0.5, itl_target_s=0.05)
    assert ((found.concurrency, found.bent) if found.concurrency is not None else None) == expected


def test_failures_beyond_what_the_percentile_leaves_breach_the_point() -> None:
    builder = ExperimentBuilder(50.0, 50.0)
    builder.open_configuration((), START_S)
    builder.add_events(EVENTS[:1])
    failed = tuple(request(0, 1004.0 + i, 0.0, (), ErrorClass.CONNECT) for i in range(4))
    builder.add_records(STEP_0 + failed)  # 3 fast requests, 4 failed: 4 > 50% of 7
    (point,) = builder.curve(1)
    assert (point.ttft_s, point.requests_failed, point.goodput_rps) == (0.2, 4, None)
    assert builder.operating_point(1, 0.5, 0.05).concurrency is None


def test_records_sent_before_the_first_configuration_land_nowhere() -> None:
    builder = ExperimentBuilder(50.0, 50.0)
    builder.add_events(EVENTS[:1])
    builder.add_records(STEP_0[:1])  # no configuration yet
    builder.open_configuration((), 1001.5)
    builder.add_records(STEP_0)  # the one sent at 1001 was before #1 opened
    assert builder.records_before_first == 2
    assert builder.curve(1) == ()  # two requests are too few for a point


def test_a_new_probe_counting_steps_from_zero_again_does_not_merge_with_the_old() -> None:
    builder = ExperimentBuilder(50.0, 50.0)
    builder.open_configuration((), START_S)
    builder.add_events(EVENTS[:1])
    builder.add_records(STEP_0)
    builder.add_events([ProbeEvent(1020.0, EventKind.STARTED, 0, "closed", concurrency=2)])
    again = (request(0, 1021.0, 0.4, (0.01,)), request(0, 1022.0, 0.4, (0.01,)))
    builder.add_records(again)
    # the new probe's step 0 has two requests: too few, so the old probe's point stands
    assert builder.curve(1)[0].ttft_s == pytest.approx(0.2)
    builder.add_records([request(0, 1023.0, 0.5, (0.01,))])
    # now three: TTFTs 0.4 0.4 0.5, median 0.4, none of the old probe's
    assert builder.curve(1)[0].ttft_s == pytest.approx(0.4)


def test_unknown_dials_are_learnt_until_a_record_lands_and_the_same_dials_open_nothing() -> None:
    builder = ExperimentBuilder(99.0, 99.0)
    builder.open_configuration((), START_S)
    learnt = builder.open_configuration(
        dial_pairs(Dials("fp8", max_num_seqs=64, max_num_batched_tokens=2048)), 1000.2
    )
    assert learnt == Configuration(
        1,
        (("--kv-cache-dtype", "fp8"), ("--max-num-seqs", "64"),
         ("--max-num-batched-tokens", "2048")),
        START_S,
        "#1 kv fp8 · seqs 64 · mbt 2048",
    )  # fmt: skip
    assert builder.open_configuration(learnt.dials, 1005.0) is learnt  # a rollback: no change
    assert len(builder.configurations()) == 1


def test_pooled_gaps_of_records_in_two_segments_count_in_neither() -> None:
    builder = ExperimentBuilder(50.0, 50.0)
    builder.open_configuration((), START_S)
    builder.add_events(EVENTS)
    bare = [  # two tokens each, their one gap pooled apart as a recording pools them
        dataclasses.replace(request(step, sent, 0.1, (0.02,)), itl_s=())
        for step, sent in ((0, 1001.0), (0, 1002.0), (0, 1003.0), (1, 1011.0))
    ]
    builder.add_records(bare, pooled_itl_s=[0.02, 0.02, 0.02, 0.02])
    (point,) = builder.curve(1)
    assert point.itl_s is None and point.ttft_s == pytest.approx(0.1)
    builder.add_records(bare[:3], pooled_itl_s=[0.03, 0.03, 0.03])  # one step: they count
    assert builder.curve(1)[0].itl_s == pytest.approx(0.03)


@pytest.mark.parametrize("late_dials", [False, True])
@pytest.mark.parametrize("ask_between", [False, True])
def test_the_same_records_in_one_batch_or_one_at_a_time_give_the_same_curves(
    late_dials: bool, ask_between: bool
) -> None:
    whole = live_session(late_dials)
    builder = ExperimentBuilder(50.0, 50.0, TARGETS)
    builder.open_configuration(dial_pairs(AUTO), START_S)
    builder.add_events(EVENTS)
    after = STEP_1_AFTER if late_dials else ()
    for record in STEP_0 + STEP_1_BEFORE + after:
        builder.add_records([record])
        if ask_between:  # as the dashboard asks after every poll
            builder.curve(1)
    builder.open_configuration(dial_pairs(FP8), RESTART_S)
    for record in () if late_dials else STEP_1_AFTER:
        builder.add_records([record])
        if ask_between:
            builder.curve(2)
    for index in (1, 2):
        assert builder.curve(index) == whole.curve(index)
    assert_points(builder.curve(1), (C1_AT_2, C1_AT_4))
    assert_points(builder.curve(2), (C2_AT_4,))


def test_pooled_gaps_of_records_a_full_segment_turns_away_count_nowhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(experiment_builder, "MAX_RECORDS_PER_SEGMENT", 3)
    builder = ExperimentBuilder(50.0, 50.0)
    builder.open_configuration((), START_S)
    builder.add_events(EVENTS[:1])
    sends = ((1001.0, (0.02,)), (1002.0, (0.02,)), (1003.0, (0.02,)), (1004.0, (0.09,) * 4))
    bare = [dataclasses.replace(request(0, sent, 0.1, gaps), itl_s=()) for sent, gaps in sends]
    builder.add_records(bare[:3], pooled_itl_s=[0.02] * 3)
    # The segment holds 3, so it is full: the fourth request and its 4 gaps are left out (were
    # they counted, the median of 0.02 x3 and 0.09 x4 would be 0.09).
    builder.add_records(bare[3:], pooled_itl_s=[0.09] * 4)
    (point,) = builder.curve(1)
    assert (point.requests, point.itl_s) == (3, pytest.approx(0.02))


def _record_live(recorder: SessionRecorder, restart_headless: bool) -> None:
    """What a session writes, in the order it writes it, for `live_session(late_dials=True)`."""
    if restart_headless:
        recorder.action(
            "restart_planned",
            {"dials_before": AUTO.to_json(), "dials_after": FP8.to_json()},
            at_s=1000.1,
        )
    else:
        recorder.action("dials", {"dials": AUTO.to_json(), "since_s": START_S}, at_s=1000.1)
    recorder.probe_events(EVENTS[:1])
    recorder.probe_records(STEP_0[:2])
    recorder.probe_events(EVENTS[1:])
    recorder.probe_records([STEP_0[2], *STEP_1_BEFORE[:1]])  # a batch across a step change
    recorder.probe_records(STEP_1_BEFORE[1:])
    recorder.event("restart", "up: serving again after 0.9 s of downtime", at_s=RESTART_S)
    recorder.probe_records(STEP_1_AFTER)
    if restart_headless:
        recorder.action("restart", {"outcome": "applied", "dials_now": FP8.to_json()}, at_s=1030.0)
    else:
        recorder.action("dials", {"dials": FP8.to_json(), "since_s": RESTART_S}, at_s=1017.0)


@pytest.mark.parametrize("keep_gaps", [True, False])
@pytest.mark.parametrize("restart_headless", [False, True])
def test_rebuilt_from_a_recording_equals_live(
    tmp_path: Path, keep_gaps: bool, restart_headless: bool
) -> None:
    settings = Settings(
        slo=Slo(ttft_s=0.5, itl_s=0.05, ttft_percentile=50.0, itl_percentile=50.0),
        session=SessionSettings(itl_gaps=keep_gaps),
    )
    path = tmp_path / "s.jsonl"
    recorder = start_recording(
        command="attach", settings=settings, path=path, clock=lambda: START_S
    )
    _record_live(recorder, restart_headless)
    recorder.close()
    rebuilt = experiment_from_recording(read_recording(path))
    live = live_session(late_dials=True)
    assert [(c.index, c.dials, c.label) for c in rebuilt.configurations()] == [
        (c.index, c.dials, c.label) for c in live.configurations()
    ]
    starts = [c.started_at_s for c in rebuilt.configurations()]
    assert starts == pytest.approx([START_S, RESTART_S])
    # pooled gaps come back at their 1% bucket's middle: within half a percent
    for index in (1, 2):
        found, expected = rebuilt.curve(index), live.curve(index)
        assert len(found) == len(expected)
        for got, want in zip(found, expected, strict=True):
            assert (got.concurrency, got.requests, got.requests_failed) == (
                want.concurrency,
                want.requests,
                want.requests_failed,
            )
            assert got.ttft_s == pytest.approx(want.ttft_s, abs=1e-6)
            assert got.itl_s == pytest.approx(want.itl_s, rel=1e-6 if keep_gaps else 0.005)
            assert got.output_tokens_per_s == pytest.approx(want.output_tokens_per_s, rel=1e-5)
            assert got.goodput_rps == pytest.approx(want.goodput_rps, rel=1e-5)
