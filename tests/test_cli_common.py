"""The flags `slotop sweep` and `slotop tune` share: one SLO and one set of step flags, taught
the same way in both helps, read into the same settings keys, refused the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.cli import build_parser, main
from slotop.cli.common import slo_overrides, sweep_step_overrides
from slotop.config import Settings, with_overrides

SWEEPING = ["sweep", "tune"]


@pytest.fixture(autouse=True)
def _no_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)


def _flagged(command: str, flags: list[str]) -> Settings:
    """The defaults with ``flags`` applied as ``command`` reads them."""
    args = build_parser().parse_args([command, *flags])
    settings = Settings()
    return with_overrides(settings, {**slo_overrides(args), **sweep_step_overrides(args, settings)})


@pytest.mark.parametrize("command", SWEEPING)
def test_the_slo_and_step_flags_set_their_keys(command: str) -> None:
    flags = ["--ttft-ms", "321", "--itl-ms", "43", "--percentile", "95"]
    settings = _flagged(command, [*flags, "--max-concurrency", "12", "--dwell-s", "30"])
    slo = settings.slo
    assert (slo.ttft_s, slo.itl_s, slo.ttft_percentile, slo.itl_percentile) == (
        0.321,
        0.043,
        95,
        95,
    )
    sweep = settings.sweep
    # A 30 s dwell fits under the default 120 s cap, which stays.
    assert (sweep.max_concurrency, sweep.dwell_s, sweep.max_dwell_s) == (12, 30, 120)


@pytest.mark.parametrize("command", SWEEPING)
def test_a_dwell_past_the_cap_lifts_the_cap(command: str) -> None:
    sweep = _flagged(command, ["--dwell-s", "300"]).sweep
    assert (sweep.dwell_s, sweep.max_dwell_s) == (300, 300)


@pytest.mark.parametrize("command", SWEEPING)
def test_no_flags_leave_the_settings_as_they_are(command: str) -> None:
    assert _flagged(command, []) == Settings()


@pytest.mark.parametrize("command", SWEEPING)
def test_both_helps_teach_the_slo_and_the_steps(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    words = " ".join(capsys.readouterr().out.split())
    for taught in (
        "the SLO: what a step must hold to count as met, both targets at once",
        "--ttft-ms MS time to first token: its percentile must stay under MS milliseconds "
        "(default: [slo] ttft_ms)",
        "--itl-ms MS inter-token latency, each gap between streamed tokens",
        "99 judges p99 (default: [slo] ttft_percentile and itl_percentile)",
        "sweep steps: how far a sweep ramps and how long each step is measured",
        "never above [load] max_concurrency (default: [sweep] max_concurrency)",
        "up to [sweep] max_dwell_s, which S lifts when longer (default: [sweep] dwell_s)",
    ):
        assert taught in words, taught


@pytest.mark.parametrize("command", SWEEPING)
@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--percentile", "100"], "[slo] ttft_percentile = 100.0; expected between 0 and 100"),
        (["--itl-ms", "-5"], "[slo] itl_ms = -5.0; expected greater than 0"),
        (["--dwell-s", "0"], "[sweep] dwell_s = 0.0; expected greater than 0"),
    ],
)
def test_a_value_no_sweep_can_take_is_refused_before_anything_runs(
    command: str, flags: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, *flags, "--no-record"]) == 2
    assert f"slotop: command line: {words}" in capsys.readouterr().err
