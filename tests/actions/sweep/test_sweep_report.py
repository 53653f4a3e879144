"""The sweep's outputs: JSON that reads back (for resume), CSV, the table, the plot."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys
from pathlib import Path

import pytest

from slotop.actions.errors import SweepError
from slotop.actions.plots import PlotError
from slotop.actions.slo import Binding
from slotop.actions.sweep.codec import (
    STEP_FIELDS,
    read_json,
    sweep_from_json,
    sweep_to_csv,
    sweep_to_json,
    write_json,
)
from slotop.actions.sweep.decide import ReplicaLimits, StopReason, StopRules, recommend
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.plot import write_plot
from slotop.actions.sweep.runner import SweepResult
from slotop.actions.sweep.table import format_sweep_text
from slotop.slo import Slo
from tests.support.png import png_size
from tests.support.sweep_steps import flat_step

SLO = Slo(ttft_s=0.5, itl_s=0.04, ttft_percentile=99.0, itl_percentile=90.0)
SPEC = SweepSpec(
    plan=(1, 2, 4, 8),
    slo=SLO,
    warmup_s=1.0,
    dwell_s=3.0,
    min_requests=10,
    rules=StopRules(kv_full_ratio=0.8),
    limits=ReplicaLimits(max_num_seqs=4),
)


def step(concurrency: int, ttft_s: float, waiting: float = 0.0, **extra: object) -> StepResult:
    values: dict[str, object] = dict(
        concurrency=concurrency,
        started_at_s=100.0 * concurrency,
        measured_s=3.0,
        requests_ok=12 * concurrency,
        requests_failed=0,
        min_requests_met=True,
        ttft_p50_s=ttft_s / 2,
        ttft_slo_s=ttft_s,
        itl_p50_s=0.01,
        itl_slo_s=0.02,
        output_tokens_per_s=100.0 * min(concurrency, 4),
        requests_per_s=float(concurrency),
        kv_usage_max_ratio=0.05 * concurrency,
        preemptions=0.0,
        waiting_mean=waiting,
        running_max=float(min(concurrency, 4)),
    )
    return flat_step(**(values | extra))


STEPS = (step(1, 0.01), step(2, 0.02), step(4, 0.04), step(8, 0.3, waiting=4.0))


def result(
    stop: StopReason | None = StopReason.QUEUE, steps: tuple[StepResult, ...] = STEPS
) -> SweepResult:
    return SweepResult(
        url="http://127.0.0.1:8000/v1/completions",
        started_at_s=99.0,
        settings=SPEC,
        steps=steps,
        stop=stop,
        recommendation=recommend(steps, SPEC.slo, SPEC.rules, SPEC.limits),
    )


def test_json_holds_every_step_its_flags_and_the_verdict() -> None:
    data = sweep_to_json(result())
    assert data["format"] == "slotop-sweep" and data["version"] == 1
    assert [row["concurrency"] for row in data["steps"]] == [1, 2, 4, 8]
    assert data["steps"][3]["flags"] == ["queue", "knee"]
    assert data["steps"][0]["slo_met"] is True
    assert data["steps"][0]["server_ttft_p99_s"] is None
    assert data["stop"] == "queue"
    assert data["met_slo"] is True and data["finished"] is True
    assert data["recommendation"]["concurrency"] == 4
    assert data["recommendation"]["binding"] == "seq_cap"
    assert data["recommendation"]["headroom"]["seqs_free"] == 0
    assert data["settings"]["slo"]["itl_percentile"] == 90.0
    json.dumps(data, allow_nan=False)


def test_json_reads_back_to_the_same_sweep(tmp_path: Path) -> None:
    original = result()
    path = tmp_path / "sweep.json"
    write_json(original, path)
    assert not (tmp_path / "sweep.json.partial").exists()
    assert read_json(path) == original
    interrupted = result(StopReason.INTERRUPTED, STEPS[:2])
    back = sweep_from_json(json.loads(json.dumps(sweep_to_json(interrupted))))
    assert back == interrupted
    assert not back.finished
    assert back.recommendation.binding is None


def test_non_finite_values_are_written_as_null() -> None:
    odd = result(steps=(step(1, 0.01, output_tokens_per_s=float("inf")),))
    assert sweep_to_json(odd)["steps"][0]["output_tokens_per_s"] is None


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.update(format="other"), "not a slotop sweep file"),
        (lambda d: d.update(version=7), "sweep file version 7; this slotop reads version 1"),
        (
            lambda d: d["settings"].update(plan="1,2"),
            's.json: settings.plan: expected a list of whole numbers; found "1,2"',
        ),
        (
            lambda d: d["settings"].pop("slo"),
            "s.json: settings.slo: expected an object; it is missing",
        ),
        (
            lambda d: d["settings"]["slo"].update(ttft_ms=5),
            "s.json: settings.slo.ttft_ms: not a field of Slo (expected ttft_s, itl_s, ",
        ),
        (lambda d: d["settings"].update(plan=[]), "the sweep has no steps"),
        (
            lambda d: d["steps"][1].pop("concurrency"),
            "s.json: steps[1].concurrency: expected a whole number; it is missing",
        ),
        (lambda d: d.update(stop="bored"), "unknown stop reason 'bored'"),
        (lambda d: d.update(steps={}), "s.json: steps: expected a list of steps; found {}"),
    ],
)
def test_bad_sweep_files_are_refused_with_what_is_wrong(change: object, words: str) -> None:
    data = sweep_to_json(result())
    change(data)  # type: ignore[operator]
    with pytest.raises(SweepError) as caught:
        sweep_from_json(data, "s.json")
    assert str(caught.value).startswith("s.json")
    assert words in str(caught.value)


def test_unreadable_files_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(SweepError, match="no such sweep file"):
        read_json(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(SweepError, match=r"bad\.json: not JSON"):
        read_json(tmp_path / "bad.json")


def test_csv_has_a_row_per_step_with_every_field() -> None:
    rows = list(csv.DictReader(io.StringIO(sweep_to_csv(result()))))
    assert [int(r["concurrency"]) for r in rows] == [1, 2, 4, 8]
    assert set(STEP_FIELDS) <= set(rows[0])
    assert rows[3]["flags"] == "queue knee"
    assert rows[0]["slo_met"] == "True" and rows[3]["slo_met"] == "True"
    assert rows[0]["server_itl_p99_s"] == ""
    assert float(rows[2]["ttft_slo_s"]) == pytest.approx(0.04)


def test_the_table_shows_each_step_and_the_verdict_in_words() -> None:
    text = format_sweep_text(result())
    lines = text.splitlines()
    assert "TTFT p99 ≤ 500 ms, ITL p90 ≤ 40 ms" in lines[0]
    assert "ITL p90" in lines[1]
    row_8 = next(line for line in lines if line.lstrip().startswith("8 "))
    assert "300.0" in row_8 and row_8.endswith("queue,knee")
    assert "Operating point: concurrency 4." in text
    assert "headroom: TTFT 92%, ITL 50% of the target left; KV cache 80% free, 0 sequence" in text
    assert "Binds next: the sequence cap (max_num_seqs) at concurrency 8 (queue, knee)" in text
    assert "Stopped: requests queued (waiting grew)." in text


def test_the_table_says_when_no_step_met_the_slo_and_marks_short_steps() -> None:
    steps = (step(1, 0.9, requests_ok=7, min_requests_met=False),)
    text = format_sweep_text(result(StopReason.SLO_BROKEN, steps))
    assert "No step met TTFT p99 ≤ 500 ms and ITL p90 ≤ 40 ms." in text
    assert "Binds next: TTFT at concurrency 1" in text
    row_1 = next(line for line in text.splitlines() if line.lstrip().startswith("1 "))
    assert "7 " in row_1 and row_1.endswith("slo_broken")  # a thin step may break, never pass
    assert "undecided" not in text.lower()


def test_binding_reads_back_from_json() -> None:
    back = sweep_from_json(sweep_to_json(result()))
    assert back.recommendation.binding is Binding.SEQ_CAP


def test_the_plot_without_matplotlib_names_the_file_and_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = tmp_path / "sweep.png"
    with pytest.raises(PlotError, match=rf"{path}: .*pip install matplotlib"):
        write_plot(result(), path)
    assert not path.exists()


def test_the_plot_is_a_png_of_three_panels(tmp_path: Path) -> None:
    path = tmp_path / "sweep.png"
    write_plot(result(), path)
    assert png_size(path) == (1500, 440)  # TTFT, ITL and tokens/s, 500 × 440 px each
    partial = dataclasses.replace(result(), steps=STEPS[:1])
    write_plot(partial, path)
    assert png_size(path) == (1500, 440)


def test_the_table_and_json_say_where_the_servers_bucket_could_not_decide() -> None:
    straddled = step(
        4, 0.04, server_ttft_slo_s=0.3333, server_ttft_slo_verdict="undecided"
    )  # a 333 ms server p99 in (250, 500] ms against its target
    steps = (step(1, 0.01, server_ttft_slo_s=0.01, server_ttft_slo_verdict="pass"), straddled)
    text = format_sweep_text(result(None, steps))
    assert "333.3?" in text and "10.0?" not in text
    assert "? the target lies inside the server's histogram bucket" in text
    data = sweep_to_json(result(None, steps))
    assert [row["server_ttft_slo_verdict"] for row in data["steps"]] == ["pass", "undecided"]
    assert sweep_from_json(json.loads(json.dumps(data))).steps == steps


def test_an_undecided_step_is_shown_with_its_reason_and_never_recommended() -> None:
    # min_requests is 10; concurrency 4 ended 7 requests in its 3 s dwell and met the SLO
    steps = (step(1, 0.01), step(2, 0.02), step(4, 0.04, requests_ok=7, min_requests_met=False))
    swept = result(StopReason.CAP, steps)
    text = format_sweep_text(swept)
    row_4 = next(line for line in text.splitlines() if line.lstrip().startswith("4 "))
    assert "7*" in row_4 and row_4.endswith("undecided")
    assert (
        "* concurrency 4: undecided, so never recommended: 7 of the 10 requests it takes to "
        "judge a step ended in its 3 s dwell"
    ) in text
    assert "Operating point: concurrency 2." in text
    assert (
        "Undecided, so never recommended: concurrency 4; an interval straddled a target, or too "
        "few requests ended, within the longest dwell. A longer max_dwell_s (now 120 s) decides "
        "them."
    ) in text
    data = sweep_to_json(swept)
    assert data["steps"][2]["flags"] == ["undecided"]
    assert data["recommendation"]["concurrency"] == 2
    back = sweep_from_json(json.loads(json.dumps(data)))
    assert back == swept and back.recommendation.concurrency == 2
    rows = list(csv.DictReader(io.StringIO(sweep_to_csv(swept))))
    assert rows[2]["flags"] == "undecided"


def test_a_step_whose_interval_straddles_a_target_says_so() -> None:
    # TTFT p99 480 ms against 500 ms, its interval reaching 520 ms: not yet a pass.
    straddling = step(
        4, 0.48, ttft_slo_low_s=0.41, ttft_slo_high_s=0.52, itl_slo_low_s=0.001,
        itl_slo_high_s=0.002,
    )  # fmt: skip
    text = format_sweep_text(result(StopReason.CAP, (step(1, 0.01), step(2, 0.02), straddling)))
    assert (
        "* concurrency 4: undecided, so never recommended: after its 3 s dwell, TTFT p99 480 ms "
        "(95% interval 410 ms–520 ms) straddles 500 ms"
    ) in text


def test_the_token_bucket_reads_back_and_older_files_without_it_still_load() -> None:
    # the +Inf bucket above 8,192 has no upper bound: null in JSON, None when read back
    steps = (
        step(
            1,
            0.01,
            batch_tokens_p99=4075.52,
            batch_tokens_p99_lower=2048.0,
            batch_tokens_p99_upper=4096.0,
        ),
        step(2, 0.02, batch_tokens_p99=8192.0, batch_tokens_p99_lower=8192.0),
    )
    data = json.loads(json.dumps(sweep_to_json(result(StopReason.CAP, steps))))
    back = sweep_from_json(data)
    assert back.steps == steps
    assert back.steps[1].server.batch_tokens_p99_upper is None
    for row in data["steps"]:
        del row["batch_tokens_p99_lower"], row["batch_tokens_p99_upper"]
    older = sweep_from_json(data)
    assert older.steps[0].server.batch_tokens_p99 == 4075.52
    assert older.steps[0].server.batch_tokens_p99_lower is None
