"""The one SLO type: its goodput targets, and the same SLO read from every file an older slotop
wrote (tests/fixtures/files/), each written again as it was."""

from __future__ import annotations

import json

from slotop.actions.experiment.recording import experiment_from_recording
from slotop.actions.report.sections import slo_targets
from slotop.actions.session.lines import header_line
from slotop.actions.session.reader import parse_lines
from slotop.actions.session.rebuild import recorded_settings
from slotop.actions.sweep.codec import read_json, sweep_to_json
from slotop.actions.sweep.plan import spec_from_settings
from slotop.slo import GoodputTargets, Slo
from tests.fixtures.write_files import settings as written_settings
from tests.support.paths import WRITTEN

WRITTEN_SLO = Slo(ttft_s=1.003, itl_s=0.0425, ttft_percentile=95.0, itl_percentile=90.0)
"""The `[slo]` the files were written with: TTFT p95 under 1003 ms, ITL p90 under 42.5 ms."""


def test_the_slo_gives_its_goodput_targets_and_percentile_names() -> None:
    slo = Slo(ttft_s=0.25, itl_s=0.02, ttft_percentile=99.9, itl_percentile=50.0)
    assert slo.goodput_targets == GoodputTargets(ttft_s=0.25, tpot_s=0.02, e2e_s=None)
    assert slo.percentile_names == ("p99.9", "p50")
    assert Slo(ttft_s=1.0, itl_s=0.1) == Slo(1.0, 0.1, 99.0, 99.0)


def test_an_older_sweep_file_reads_to_the_same_slo_and_is_written_again_as_it_was() -> None:
    path = WRITTEN / "sweep-v1.json"
    result = read_json(path)
    assert result.settings.slo == WRITTEN_SLO
    assert spec_from_settings(written_settings()).slo == WRITTEN_SLO
    on_disk = path.read_text(encoding="utf-8")
    assert json.dumps(sweep_to_json(result), indent=2) + "\n" == on_disk


def test_an_older_recordings_header_reads_to_the_same_slo_and_is_written_again_as_it_was() -> None:
    path = WRITTEN / "session-header.jsonl"
    on_disk = path.read_text(encoding="utf-8")
    recording = parse_lines([on_disk], path.name)
    settings, notes = recorded_settings(recording)
    assert notes == ()
    assert settings.slo == WRITTEN_SLO
    assert slo_targets(recording) == WRITTEN_SLO
    assert experiment_from_recording(recording).goodput_targets == GoodputTargets(
        ttft_s=1.003, tpot_s=0.0425
    )
    # 1003 ms comes back as 1003.0, not the 1002.9999999999999 of a plain trip through seconds
    header = header_line(command="demo", settings=written_settings(), started_at_s=1000.0)
    assert json.loads(on_disk)["settings"]["slo"] == {
        "ttft_ms": 1003.0,
        "ttft_percentile": 95.0,
        "itl_ms": 42.5,
        "itl_percentile": 90.0,
    }
    written = header["settings"]
    del written["replica"]["engine"]  # a key added since that recording was made
    assert json.dumps(written) == json.dumps(json.loads(on_disk)["settings"])
