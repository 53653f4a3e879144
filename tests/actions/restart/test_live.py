"""The dashboard's before/after, gathered as records arrive, on a run whose every time is chosen.

The probe ran 2 in flight from t = 0 (step 0); the restart began at 19.5, paused the probe at 20
(step 1, none in flight), stopped the replica at 21 (a request sent at 19.8 failed at 21.5: cut),
came up at 29 and resumed at 30 (step 2, 2 in flight). Every request takes its first token after
its TTFT and three more 25 ms apart: before, TTFT 125 ms, sent at 10..19 s (each over in 0.2 s);
after, TTFT 62.5 ms, sent at 30, 31, … s (over in 0.1375 s). No request opened a stream, so each
step settled as it began. A side holds min_requests = 4 and spans twelve of its requests'
lifetimes (2.4 s before, 1.65 s after), which four requests a second apart do:
  before: the latest 4 (sent 16..19) over (16, 20]: their 16 tokens in 4 s, 4.0 tok/s, 1 req/s;
  after: the first 4 (sent 30..33) over (30, 33]: the 12 tokens of 30..32 in 3 s, 4.0 tok/s.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.apply import RestartEvent, RestartPlan, RestartResult, plan_restart
from slotop.actions.restart.compare import Change
from slotop.actions.restart.live import RECORDS_PER_STREAM, BeforeAfter, LiveBeforeAfter
from slotop.actions.restart.starts import StartSpread
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.probe.records import ErrorClass, EventKind, ProbeRecord, ProbeStatus
from slotop.collectors.snapshot import Snapshot
from slotop.config import RestartSettings, Settings
from slotop.tui.views.change import change_view
from tests.support.paths import CAPTURES
from tests.support.probe_steps import step_started, timed_request

SETTINGS = Settings(restart=RestartSettings(min_requests=4))
GAPS = (0.025, 0.025, 0.025)
BEFORE = [timed_request(0, float(s), 0.125, GAPS) for s in range(10, 20)]
CUT = timed_request(0, 19.8, 0.125, GAPS, error=ErrorClass.STREAM_CUT, done_s=21.5)
AFTER = [timed_request(2, float(s), 0.0625, GAPS) for s in range(30, 40)]
PHASES = (
    ("plan", 19.5),
    ("pause_probe", 19.6),
    ("drain", 19.9),
    ("stop", 21.0),
    ("start", 21.1),
    ("health", 28.0),
    ("verify", 28.5),
    ("up", 29.0),
    ("resume_probe", 30.0),
)


def _snapshot(name: str, at_s: float) -> Snapshot:
    text = (CAPTURES / name).read_text(encoding="utf-8")
    return snapshot_of_dump(text, where=name, taken_at_s=at_s)


OLD = _snapshot("vllm-0.32-cpu-idle.txt", 19.0)
NEW = _snapshot("vllm-0.32-cpu-fp8-idle.txt", 40.0)


def _status(at_s: float, *streaming_sent_s: float) -> ProbeStatus:
    return ProbeStatus(at_s, 2, "closed", 2, None, len(streaming_sent_s), 0, 0, 0, streaming_sent_s)


def _status_openings(at_s: float, openings: int) -> ProbeStatus:
    return dataclasses.replace(_status(at_s), openings_streaming=openings)


def _plan(loaded: bool = True) -> RestartPlan:
    return plan_restart(
        Dials("auto"),
        Dials("fp8"),
        url="http://127.0.0.1:8000",
        how="managed",
        kv=None,
        last_downtime_s=None,
        probe_status=_status(19.5) if loaded else None,
        drain_timeout_s=5.0,
        health_timeout_s=30.0,
    )


def _result(plan: RestartPlan, outcome: str = "applied") -> RestartResult:
    events = tuple(RestartEvent(at, at - 19.5, phase, "") for phase, at in PHASES)
    dials = plan.after if outcome == "applied" else plan.before
    return RestartResult(plan, outcome, dials, None, 8.0, None, "", events)  # type: ignore[arg-type]


def _state(live: LiveBeforeAfter, snapshot: Snapshot) -> BeforeAfter | None:
    """The state, with the table built (as the dashboard does on a worker) once all is in."""
    state = live.state(snapshot)
    job = live.build()
    if job is not None:
        live.built(job())
        state = live.state(snapshot)
    return state


def _restarted(
    outcome: str = "applied", loaded: bool = True, spread: StartSpread | None = None
) -> LiveBeforeAfter:
    """The run up to the restart's end: the before side's records in, nothing after yet."""
    live = LiveBeforeAfter(SETTINGS)
    live.add(BEFORE, [step_started(0.0, 0, 2, EventKind.STARTED)])
    plan = _plan(loaded)
    live.began(plan, 19.5, OLD, spread)
    live.add([CUT], [step_started(20.0, 1, 0)])
    live.ended(_result(plan, outcome))
    return live


def test_the_after_side_says_how_many_of_its_requests_have_ended() -> None:
    live = _restarted()
    state = _state(live, OLD)
    assert state is not None and state.measuring
    assert (state.changes, state.load, state.requests, state.wanted) == (
        "kv_cache_dtype auto → fp8",
        "2 in flight",
        0,
        4,
    )
    live.add(AFTER[:2], [step_started(30.0, 2, 2)], _status(32.5, 32.0))
    state = _state(live, OLD)
    assert state is not None and (state.requests, state.comparison) == (2, None)


def test_enough_requests_give_the_table_once_the_replica_is_read_after_them() -> None:
    live = _restarted()
    live.add(AFTER[:4], [step_started(30.0, 2, 2)], _status(34.2, 34.0))
    waiting = _state(live, OLD)  # the newest snapshot predates the after side
    assert waiting is not None and waiting.requests == 4 and waiting.comparison is None
    state = _state(live, NEW)
    assert state is not None and not state.measuring and state.comparison is not None
    table = state.comparison
    before, after = table.before.stats, table.after.stats
    assert before is not None and after is not None
    assert (before.start_s, before.end_s, after.start_s, after.end_s) == (16.0, 20.0, 30.0, 33.0)
    assert (before.requests_ok, before.requests_failed, before.requests_cut) == (4, 0, 1)
    assert after.requests_ok == 4
    assert before.output_tokens_per_s == pytest.approx(4.0)
    assert after.output_tokens_per_s == pytest.approx(4.0)
    assert before.request_rate_rps == pytest.approx(1.0)
    assert after.request_rate_rps == pytest.approx(4 / 3)
    ttft = table.row("ttft_p50_s")
    assert ttft is not None and (ttft.before, ttft.after) == (0.125, 0.0625)
    assert ttft.verdict is Change.BETTER  # every TTFT alike on each side: no noise to clear
    tail = table.row("ttft_p99_s")  # a p99 of four requests is their largest: not judged
    assert tail is not None and tail.verdict is Change.NOISE_UNKNOWN
    tokens = table.row("output_tokens_per_s")
    assert tokens is not None and tokens.verdict is Change.WITHIN_NOISE
    blocks = table.row("kv_blocks_total")
    assert blocks is not None and (blocks.before, blocks.after) == (256.0, 1024.0)
    assert table.before.flags[0] == ("kv_cache_dtype", "auto")
    assert table.after.flags[0] == ("kv_cache_dtype", "fp8")
    assert state.table is not None and state.table.rows[0].cells[0] == "TTFT p50"
    assert live.state(NEW) is state  # built once, kept until the next restart
    assert live.build() is None


def test_the_replica_start_spread_given_when_the_restart_began_widens_the_band() -> None:
    spread = StartSpread({"ttft_p50_s": 0.5}, starts=4)
    live = _restarted(spread=spread)
    live.add(AFTER[:4], [step_started(30.0, 2, 2)], _status(34.2, 34.0))
    state = _state(live, NEW)
    assert state is not None and state.comparison is not None
    ttft = state.comparison.row("ttft_p50_s")
    # 125 → 62.5 ms against t(3) = 3.182 × 50% × √(125² + 62.5²) ms = 222 ms
    assert ttft is not None and ttft.verdict is Change.WITHIN_NOISE
    assert ttft.noise.between_starts == pytest.approx(3.182 * 0.5 * math.hypot(0.125, 0.0625))


def test_a_request_sent_before_the_last_counted_is_waited_for() -> None:
    live = _restarted()
    ended = [AFTER[0], AFTER[1], AFTER[3], AFTER[4]]  # the one sent at 32 still streams
    live.add(ended, [step_started(30.0, 2, 2)], _status(35.0, 32.0, 35.0))
    state = _state(live, NEW)
    assert state is not None and state.requests == 4 and state.comparison is None
    live.add([AFTER[2]], [], _status(35.5, 35.0))
    state = _state(live, NEW)
    assert state is not None and state.comparison is not None
    after = state.comparison.after.stats
    assert after is not None and (after.end_s, after.requests_ok) == (33.0, 4)


def test_a_change_of_load_ends_the_measure_short() -> None:
    live = _restarted()
    live.add(AFTER[:1], [step_started(30.0, 2, 2), step_started(31.5, 3, 4)], _status(32.0))
    state = _state(live, NEW)
    assert state is not None and not state.measuring and state.comparison is None
    assert state.stopped == "the load changed to 4 in flight after 1 of 4 requests"


def test_a_rolled_back_restart_shows_nothing() -> None:
    assert _restarted("rolled_back").state(NEW) is None


def test_without_load_the_replicas_own_numbers_once_read_after_it_came_up() -> None:
    live = _restarted(loaded=False)
    state = _state(live, OLD)
    assert state is not None and state.load == "no load" and state.comparison is None
    state = _state(live, NEW)
    assert state is not None and state.comparison is not None
    rows = {row.key: row for row in state.comparison.rows}
    assert rows["ttft_p99_s"].before is None and rows["kv_blocks_total"].verdict is Change.BETTER


def test_dismissed_until_the_next_restart() -> None:
    live = _restarted()
    live.dismiss()
    assert _state(live, NEW) is None
    plan = _plan()
    live.began(plan, 19.5, OLD)
    assert _state(live, NEW) is None  # restarting: nothing until it ends
    live.ended(_result(plan))
    again = _state(live, NEW)
    assert again is not None and again.measuring


def test_the_short_window_stands_for_a_side() -> None:
    live = _restarted()
    live.add(AFTER[:4], [step_started(30.0, 2, 2)], _status(34.2))
    short = dataclasses.replace(NEW.window, preemptions=3.0, covered_s=10.0)
    state = _state(live, dataclasses.replace(NEW, short_window=short))
    assert state is not None and state.comparison is not None
    row = state.comparison.row("preemptions")
    assert row is not None and row.after == 3.0


def test_the_table_waits_for_its_work_and_a_new_restart_drops_stale_work() -> None:
    live = _restarted()
    live.add(AFTER[:4], [step_started(30.0, 2, 2)], _status(34.2, 34.0))
    state = live.state(NEW)
    assert state is not None and state.measuring and state.requests == 4
    job = live.build()
    assert job is not None and live.build() is None  # handed out once
    assert live.state(NEW) is state  # still measuring until the work is handed back
    plan = _plan()
    live.began(plan, 50.0, NEW)  # another restart meanwhile: the old work is stale
    live.built(job())
    assert live.state(NEW) is None


def _opening(step: int, sent_s: float, gaps: int) -> ProbeRecord:
    """A stream's opening request: cut short to 62.5 ms and `gaps` more tokens 25 ms apart."""
    record = timed_request(step, sent_s, 0.0625, (0.025,) * gaps)
    return dataclasses.replace(record, opening=True)


def test_the_after_side_counts_only_once_the_resumed_streams_have_settled() -> None:
    # The probe resumes at 30 with two streams: their openings end at 30.4875 and 31.3125; a
    # stream's second request, sent at 30.5, ends at 30.6375, and that is the last one sent
    # before the later opening ended: the load settled at 31.3125. Then sends at 32, 33, …
    live = _restarted()
    openings = [_opening(2, 30.0, 17), _opening(2, 30.0, 50)]
    second = timed_request(2, 30.5, 0.0625, GAPS)
    live.add([openings[0], second], [step_started(30.0, 2, 2)], _status_openings(30.9, 1))
    state = _state(live, NEW)
    assert state is not None and state.settling and state.requests == 0
    assert change_view(state) is not None
    steady_after = [timed_request(2, float(s), 0.0625, GAPS) for s in range(32, 36)]
    live.add([openings[1], *steady_after], [], _status_openings(36.0, 0))
    state = _state(live, NEW)
    assert state is not None and not state.settling and state.comparison is not None
    after = state.comparison.after
    assert after.stats is not None and after.span is not None
    assert (after.stats.start_s, after.stats.end_s, after.stats.requests_ok) == (31.3125, 35.0, 4)
    assert after.span.settled_s == pytest.approx(1.3125)  # after the resume
    assert "(settled after 1.3 s)" in after.span.words()


def test_a_side_spans_twelve_of_its_requests_lifetimes() -> None:
    # Requests of 1.0625 s, sent a second apart: twelve lifetimes are 12.75 s of sends, so four
    # requests (three seconds) are not a side yet; the side is every request sent by 42.75.
    live = _restarted()
    slow = (0.25, 0.25, 0.25, 0.25)
    after = [timed_request(2, float(s), 0.0625, slow) for s in range(30, 50)]
    live.add(after[:4], [step_started(30.0, 2, 2)], _status(34.5))
    state = _state(live, NEW)
    assert state is not None and state.requests == 4 and state.comparison is None
    assert state.wanted_span_s == pytest.approx(12.75) and state.span_s == pytest.approx(3.0)
    live.add(after[4:], [], _status(51.0))
    state = _state(live, _snapshot("vllm-0.32-cpu-fp8-idle.txt", 60.0))
    assert state is not None and state.comparison is not None
    stats = state.comparison.after.stats
    assert stats is not None and (stats.start_s, stats.end_s) == (30.0, 42.75)
    assert stats.requests_ok == 13  # sent at 30..42


def test_a_heavy_load_keeps_the_records_its_before_side_spans() -> None:
    live = LiveBeforeAfter(SETTINGS, keep_records=100)
    live.add([timed_request(0, float(s), 0.125, GAPS) for s in range(150)])
    assert len(live._records) == 100  # the floor when no closed loop was seen
    live.add([], [step_started(200.0, 1, 64)])
    live.add([timed_request(1, 200.0 + s / 64, 0.125, GAPS) for s in range(2000)])
    assert len(live._records) == RECORDS_PER_STREAM * 64  # twelve lifetimes of 64 streams, twice
    live.add([], [step_started(300.0, 2, 2)])  # a lighter load keeps what was kept
    assert live._records.maxlen == RECORDS_PER_STREAM * 64
