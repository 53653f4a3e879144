"""The before/after action read back: every state, and data no slotop wrote refused by name."""

from __future__ import annotations

import pytest

from slotop.actions.restart.compare import Change
from slotop.actions.restart.live import BeforeAfter
from slotop.actions.restart.live_record import before_after_from_json, before_after_json

MEASURING = BeforeAfter("kv_cache_dtype auto → fp8", "2 in flight", 0, 4, concurrency=2)
TABLE = {
    "header": ["metric", "before", "after", "delta", "noise", "ratio", "verdict"],
    "sides": ["before: as it ran kv_cache_dtype=auto", "after:  restarted kv_cache_dtype=fp8"],
    "rows": [
        ["TTFT p99", "125.0 ms", "62.5 ms", "−62.5 ms", "±0.0", "×0.50", "better"],
        ["failed", "0", "0", "+0", "p 1.00", "N/A", "same"],
        ["KV tokens", "N/A", "N/A", "N/A", "", "N/A", ""],
    ],
    "footer": ["note: few requests"],
}


def test_each_change_of_the_panel_is_named() -> None:
    progress = BeforeAfter(MEASURING.changes, MEASURING.load, 2, 4, concurrency=2)
    stopped = BeforeAfter(MEASURING.changes, MEASURING.load, 1, 4, stopped="the load changed")
    assert before_after_json(MEASURING, None)["state"] == "measuring"
    assert before_after_json(progress, MEASURING)["state"] == "progress"
    assert before_after_json(stopped, progress)["state"] == "stopped"
    assert before_after_json(None, progress) == {"state": "hidden"}


def test_a_measured_line_reads_back_as_the_table_it_showed() -> None:
    data = {
        "state": "measured",
        "changes": "kv_cache_dtype auto → fp8",
        "load": "2 in flight",
        "mode": "closed",
        "concurrency": 2,
        "rate_rps": None,
        "requests": 4,
        "wanted": 4,
        "stopped": "",
        "dials_before": None,
        "dials_after": None,
        "before_span_s": [10.0, 14.5],
        "after_span_s": [20.0, 23.0],
        "table": TABLE,
    }
    state = before_after_from_json(data)
    assert state is not None and state.table is not None
    assert not state.measuring  # no comparison, but the table is in
    assert [row.verdict for row in state.table.rows] == [Change.BETTER, Change.SAME, None]
    assert state.table.rows[0].cells[1:3] == ("125.0 ms", "62.5 ms")
    assert (state.before_span_s, state.after_span_s) == ((10.0, 14.5), (20.0, 23.0))
    assert before_after_from_json({"state": "hidden"}) is None


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"state": "half"}, "unknown before/after state 'half'"),
        (
            {**before_after_json(MEASURING, None), "table": {**TABLE, "rows": [["TTFT p99"]]}},
            "a before/after row holds 1 cells; expected 7",
        ),
        (
            {**before_after_json(MEASURING, None), "table": {**TABLE, "sides": ["before"]}},
            "names 1 sides; expected 2",
        ),
    ],
)
def test_data_no_slotop_wrote_is_refused(data: dict[str, object], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        before_after_from_json(data)
