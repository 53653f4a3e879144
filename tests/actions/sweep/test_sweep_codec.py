"""The sweep file: older files read and are written again byte for byte, and a bad one is refused
with the file, the field and what was expected."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slotop.actions.errors import SweepError
from slotop.actions.sweep.codec import (
    STEP_FIELDS,
    read_json,
    sweep_json_text,
    sweep_to_json,
    write_json,
)
from slotop.actions.sweep.decide import StopReason, recommend
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult
from slotop.slo import Slo
from tests.support.paths import WRITTEN
from tests.support.sweep_steps import flat_step

OLDER_FILE = WRITTEN / "sweep-v1.json"
DERIVED = ("throughput_gap_ratio", "slo_met", "client_bound", "flags")


def test_an_older_file_is_written_again_byte_for_byte(tmp_path: Path) -> None:
    copy = tmp_path / "again.json"
    write_json(read_json(OLDER_FILE), copy)
    assert copy.read_bytes() == OLDER_FILE.read_bytes()


def test_a_step_is_laid_out_in_the_order_an_older_slotop_wrote_it() -> None:
    rows = json.loads(OLDER_FILE.read_text(encoding="utf-8"))["steps"]
    assert [tuple(row) for row in rows] == [(*STEP_FIELDS, *DERIVED)] * 3


def _every_field_step() -> dict[str, Any]:
    """A step row with a value of its own in every key (ints, a bool, verdict words)."""
    row: dict[str, Any] = {key: 0.5 + index for index, key in enumerate(STEP_FIELDS)}
    row.update(
        concurrency=4,
        requests_ok=37,
        requests_failed=2,
        requests_cut=1,
        min_requests_met=True,
        server_ttft_slo_verdict="undecided",
        server_itl_slo_verdict="pass",
    )
    return row


def test_a_step_with_every_field_reads_back_to_each_side_and_writes_the_same(
    tmp_path: Path,
) -> None:
    measured = flat_step(**_every_field_step())
    spec = SweepSpec(plan=(4,), slo=Slo(ttft_s=100.0, itl_s=100.0))
    result = SweepResult(
        url="http://replica/v1/completions",
        started_at_s=5.0,
        settings=spec,
        steps=(measured,),
        stop=StopReason.CAP,
        recommendation=recommend((measured,), spec.slo, spec.rules, spec.limits),
    )
    path = tmp_path / "sweep.json"
    write_json(result, path)
    back = read_json(path)
    assert back == result
    step = back.steps[0]
    assert (step.client.lag_p99_s, step.server.ttft_slo_s) == (47.5, 23.5)
    assert (step.server.ttft_slo_verdict, step.requests_cut) == ("undecided", 1)
    assert sweep_json_text(back) == path.read_text(encoding="utf-8")


def test_an_older_step_without_the_later_keys_reads_them_as_unknown(tmp_path: Path) -> None:
    data = json.loads(OLDER_FILE.read_text(encoding="utf-8"))
    for row in data["steps"]:
        for key in ("waiting_band", "client_lag_p99_s", "server_ttft_slo_s", "requests_cut"):
            del row[key]
    path = tmp_path / "older.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    step = read_json(path).steps[0]
    assert step.server.waiting_band is None and step.client.lag_p99_s is None
    assert step.server.ttft_slo_s is None and step.requests_cut is None


def _set(*keys: str | int, value: object) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        inner: Any = data
        for key in keys[:-1]:
            inner = inner[key]
        inner[keys[-1]] = value

    return change


def _drop(*keys: str | int) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        inner: Any = data
        for key in keys[:-1]:
            inner = inner[key]
        del inner[keys[-1]]

    return change


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            _set("steps", 0, "ttft_slo_s", value="fast"),
            'steps[0].ttft_slo_s: expected a number or null; found "fast"',
        ),
        (
            _set("steps", 2, "requests_ok", value=1.5),
            "steps[2].requests_ok: expected a whole number; found 1.5",
        ),
        (
            _set("steps", 1, "min_requests_met", value=1),
            "steps[1].min_requests_met: expected true or false; found 1",
        ),
        (
            _set("steps", 1, "requests_failed", value=True),
            "steps[1].requests_failed: expected a whole number; found true",
        ),
        (
            _set("steps", 1, "server_itl_slo_verdict", value=3),
            "steps[1].server_itl_slo_verdict: expected a string or null; found 3",
        ),
        (
            _set("steps", 0, "client_lag_p99_s", value=[0.1]),
            "steps[0].client_lag_p99_s: expected a number or null; found [0.1]",
        ),
        (
            _set("steps", 0, "waiting_band", value=float("nan")),
            "steps[0].waiting_band: expected a number or null; found NaN",
        ),
        (_set("steps", 2, value="step"), 'steps[2]: expected an object; found "step"'),
        (
            _set("settings", "plan", 1, value="2"),
            'settings.plan[1]: expected a whole number; found "2"',
        ),
        (
            _set("settings", "slo", "ttft_s", value=None),
            "settings.slo.ttft_s: expected a number; found null",
        ),
        (
            _set("settings", "rules", "allow_preemptions", value="no"),
            'settings.rules.allow_preemptions: expected true or false; found "no"',
        ),
        (
            _set("settings", "limits", "max_num_seqs", value=8.5),
            "settings.limits.max_num_seqs: expected a whole number or null; found 8.5",
        ),
        (
            _set("settings", "dwell_s", value="20 s"),
            'settings.dwell_s: expected a number; found "20 s"',
        ),
        (_set("started_at_s", value="now"), 'started_at_s: expected a number; found "now"'),
        (_set("url", value=8000), "url: expected a string; found 8000"),
        (_set("stop", value=1), "stop: expected a stop reason or null; found 1"),
        (
            _drop("steps", 0, "requests_failed"),
            "steps[0].requests_failed: expected a whole number; it is missing",
        ),
        (
            _drop("steps", 2, "ttft_p99_s"),
            "steps[2].ttft_p99_s: expected a number or null; it is missing",
        ),
        (_drop("settings", "slo", "itl_s"), "settings.slo.itl_s: expected a number; it is missing"),
        (_drop("url"), "url: expected a string; it is missing"),
    ],
)
def test_a_bad_file_names_itself_the_field_and_what_was_expected(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], words: str
) -> None:
    data = json.loads(OLDER_FILE.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SweepError) as caught:
        read_json(path)
    assert str(caught.value) == f"{path}: {words}"


def test_a_file_with_its_settings_reordered_still_reads_to_the_same_sweep(tmp_path: Path) -> None:
    data = json.loads(OLDER_FILE.read_text(encoding="utf-8"))
    data["settings"] = dict(reversed(data["settings"].items()))
    path = tmp_path / "reordered.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert sweep_to_json(read_json(path)) == sweep_to_json(read_json(OLDER_FILE))
