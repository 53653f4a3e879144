"""`slotop report` of a real `slotop sweep` on the simulated replica: sections, numbers, PNGs, CSV.

The expected numbers come from the recording itself, read here with the json module and numpy:
the sweep's own result line, and the probe's raw rows of each load step.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from slotop.cli import main
from tests.support.png import png_size
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow

STEPS = (1, 2, 4)
SWEEP_FLAGS = (
    "--concurrency",
    ",".join(str(c) for c in STEPS),
    "--dwell-s",
    "1.5",
    "--warmup-s",
    "0.5",
    "--min-requests",
    "3",
    "--ttft-ms",
    "500",
    "--itl-ms",
    "50",
)


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    yield from run_sim()


def _sweep(url: str, state: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotop", "sweep", url, *SWEEP_FLAGS, *flags],
        env={**os.environ, "XDG_STATE_HOME": str(state)},
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture(scope="module")
def recording(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording `slotop sweep` made by default, with no flag asking for one."""
    state = tmp_path_factory.mktemp("state")
    done = _sweep(sim_url, state)
    assert done.returncode == 0, done.stderr
    made = list((state / "slotop" / "sessions").glob("*_sweep.jsonl"))
    assert len(made) == 1, made
    assert f"recording this session to {made[0]}" in done.stderr
    return made[0]


@pytest.fixture(scope="module")
def report(recording: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "out"
    assert main(["report", str(recording), "--out", str(out)]) == 0
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _sweep_result(path: Path) -> dict[str, Any]:
    found = [line["sweep"] for line in _lines(path) if line.get("action") == "sweep_result"]
    assert len(found) == 1
    return found[0]


def test_no_record_writes_no_recording(sim_url: str, tmp_path: Path) -> None:
    done = _sweep(sim_url, tmp_path, "--no-record", "--concurrency", "1")
    assert done.returncode == 0, done.stderr
    assert "recording this session" not in done.stderr
    assert not (tmp_path / "slotop").exists()


def test_the_report_has_every_section_and_file(report: Path) -> None:
    text = (report / "report.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Replica",
        "## SLO",
        "## Configurations",
        "## Sweeps",
        "## Timeline",
        "## Events",
        "## Files",
    ]
    assert "Recorded by `slotop sweep`" in text
    assert "| model | Qwen/Qwen2.5-0.5B-Instruct |" in text
    assert "TTFT p99 ≤ 500 ms and ITL p99 ≤ 50 ms" in text
    for name in ("steps.csv", "timeline.png", "curve-1.png", "sweep-1.png"):
        assert f"]({name})" in text  # linked, and there
        assert (report / name).is_file()


def test_the_sweep_table_holds_the_recorded_sweeps_numbers(recording: Path, report: Path) -> None:
    sweep = _sweep_result(recording)
    text = (report / "report.md").read_text(encoding="utf-8")
    assert [step["concurrency"] for step in sweep["steps"]] == list(STEPS)
    for step in sweep["steps"]:
        cells = (
            step["concurrency"],
            step["requests_ok"],
            step["requests_failed"],
            f"{step['ttft_p50_s'] * 1000:.1f}",
            f"{step['ttft_p99_s'] * 1000:.1f}",
            f"{step['itl_p50_s'] * 1000:.1f}",
            f"{step['itl_p99_s'] * 1000:.1f}",
        )
        row = "| " + " | ".join(str(c) for c in cells) + " |"
        assert row in text, row
        assert f"| {step['output_tokens_per_s']:,.1f} |" in text
    chosen = sweep["recommendation"]["concurrency"]
    assert chosen == max(STEPS)  # the simulated replica holds a 500/50 ms SLO at 4 easily
    assert f"- Operating point: concurrency {chosen}." in text
    assert "| #1 dials unknown | +0.0 s | 3 | 4 |" in text  # the configuration's own pick


def test_the_pngs_are_pngs_of_their_size(report: Path) -> None:
    assert png_size(report / "timeline.png") == (1400, 900)
    assert png_size(report / "curve-1.png") == (1500, 440)  # three panels of 500 × 440
    assert png_size(report / "sweep-1.png") == (1500, 440)


def _probe_steps(path: Path) -> dict[int, list[dict[str, Any]]]:
    """The raw probe rows of each load step, as dicts, keyed by the step's concurrency."""
    lines = _lines(path)
    columns = lines[0]["probe_columns"]
    concurrency = {
        line["step"]: line["concurrency"]
        for line in lines
        if line.get("kind") == "probe_event" and line["event"] in ("started", "concurrency_set")
    }
    steps: dict[int, list[dict[str, Any]]] = {}
    for line in lines:
        if line.get("kind") != "probe_records":
            continue
        for raw in line["rows"]:
            row = dict(zip(columns, raw, strict=False))
            steps.setdefault(concurrency[row["step"]], []).append(row)
    return steps


def test_the_csv_has_a_row_per_sweep_step_with_the_steps_numbers(
    recording: Path, report: Path
) -> None:
    with (report / "steps.csv").open(encoding="utf-8", newline="") as stream:
        rows = list(csv.DictReader(stream))
    sweep = _sweep_result(recording)
    assert [int(row["concurrency"]) for row in rows] == [s["concurrency"] for s in sweep["steps"]]
    assert {row["configuration"] for row in rows} == {"1"}
    assert "ttft_p99_s" in rows[0] and "output_tokens_per_s" in rows[0]
    steps = _probe_steps(recording)
    for row, step in zip(rows, sweep["steps"], strict=True):
        ok = [r for r in steps[step["concurrency"]] if r.get("error") is None]
        # Every request the load step sent, warm-up included: at least the sweep's dwell.
        assert int(row["requests_ok"]) == len(ok) >= step["requests_ok"]
        ttft = np.percentile([r["ttft_s"] for r in ok], 99)
        assert float(row["ttft_p99_s"]) == pytest.approx(ttft, rel=1e-9)
        sent = steps[step["concurrency"]]  # the span runs over every request, cancelled too
        span = max(r["done_at_s"] for r in sent) - min(r["sent_at_s"] for r in sent)
        tokens = sum(r["output_tokens"] for r in ok)
        assert float(row["output_tokens_per_s"]) == pytest.approx(tokens / span, rel=1e-6)
        assert row["slo_verdict"] == "pass"
    assert [row["operating_point"] for row in rows] == ["False", "False", "True"]
