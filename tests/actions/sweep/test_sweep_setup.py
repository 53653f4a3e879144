"""`slotop sweep` without a replica: settings into a sweep, flags checked, refusals before any load."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from slotop.actions.sweep.command import ProgressLine, base_url_of
from slotop.actions.sweep.decide import ReplicaLimits
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec, plan_words, spec_from_settings
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.cli import main
from slotop.config import Settings, settings_from_mapping
from slotop.slo import Slo
from tests.support.sweep_steps import flat_step


def _step(concurrency: int, ttft_s: float, tokens_per_s: float, ok: int) -> StepResult:
    return flat_step(
        concurrency=concurrency,
        started_at_s=0.0,
        measured_s=3.0,
        requests_ok=ok,
        requests_failed=0,
        min_requests_met=True,
        ttft_slo_s=ttft_s,
        itl_slo_s=0.02,
        output_tokens_per_s=tokens_per_s,
    )


STEPS_RESULT = SweepResult(
    "http://127.0.0.1:8000/v1/completions",
    0.0,
    SweepSpec(plan=(1, 8), slo=Slo(0.5, 0.04, 99.0, 90.0)),
    (_step(1, 0.01, 100.0, 12), _step(8, 0.3, 400.0, 96)),
)


@pytest.fixture(autouse=True)
def _no_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)


def test_the_default_sweep_doubles_up_to_the_load_cap_under_the_slo() -> None:
    spec = spec_from_settings(Settings())
    assert spec.plan == (1, 2, 4, 8, 16, 32, 64)
    assert (spec.slo.ttft_s, spec.slo.itl_s) == (0.5, 0.05)
    assert (spec.slo.ttft_percentile, spec.slo.itl_percentile) == (99.0, 99.0)
    assert (spec.warmup_s, spec.dwell_s, spec.min_requests) == (5.0, 20.0, 10)
    assert spec.tick_s == Settings().replica.scrape_interval_s
    assert spec.limits == ReplicaLimits()


@pytest.mark.parametrize(
    ("data", "plan"),
    [
        ({"sweep": {"max_concurrency": 12}}, (1, 2, 4, 8, 12)),
        ({"sweep": {"concurrency": [6, 3]}}, (3, 6)),
        ({"sweep": {"start_concurrency": 4, "growth_factor": 3}}, (4, 12, 36, 64)),
        ({"load": {"max_concurrency": 5}}, (1, 2, 4, 5)),
    ],
)
def test_plans_from_settings(data: dict[str, object], plan: tuple[int, ...]) -> None:
    assert spec_from_settings(settings_from_mapping(data, "t")).plan == plan


def test_known_batch_limits_come_from_the_launch_dials() -> None:
    settings = settings_from_mapping({"launch": {"max_num_seqs": 32}}, "t")
    assert spec_from_settings(settings).limits == ReplicaLimits(max_num_seqs=32)


def test_the_plan_in_words_says_the_steps_and_how_long() -> None:
    spec = spec_from_settings(settings_from_mapping({"sweep": {"concurrency": [1, 2]}}, "t"))
    words = plan_words(spec, "http://127.0.0.1:8000/v1/completions", (1, 2))
    assert "at concurrency 1, 2, each step 5 s of warm-up (or until the load settles)" in words
    assert "then 20–120 s measured (until the 95% intervals of TTFT and ITL clear" in words
    # Each step: 5 s warm-up, 20–120 s dwell, up to 20 s (the dwell) more: 2 × 25 s to 2 × 145 s.
    assert "from 10 requests at least) and up to 20 s more for its last requests to end" in words
    assert ": 0.8–4.8 min" in words


def test_the_wait_past_the_dwell_comes_from_the_settings_zero_meaning_the_dwell() -> None:
    default = spec_from_settings(settings_from_mapping({"sweep": {"dwell_s": 30}}, "t"))
    assert (default.max_follow_s, default.follow_limit_s) == (None, 30.0)
    set_ = spec_from_settings(settings_from_mapping({"sweep": {"max_follow_s": 7.5}}, "t"))
    assert (set_.max_follow_s, set_.follow_limit_s) == (7.5, 7.5)


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("http://127.0.0.1:8000/v1/completions", "http://127.0.0.1:8000"),
        ("http://h:1/api/v1/chat/completions", "http://h:1/api"),
        ("http://h:1", "http://h:1"),
    ],
)
def test_base_url_of_a_loaded_url(url: str, base: str) -> None:
    assert base_url_of(url) == base


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        (["--concurrency", "1,x"], 2, "expected whole numbers like 1,2,4,8"),
        (["--concurrency", "0,2"], 2, "expected whole numbers ≥ 1"),
        (["--concurrency", "1,128"], 2, "asks for concurrency 128, above [load] max_concurrency"),
        (["--percentile", "100"], 2, "ttft_percentile = 100.0; expected between 0 and 100"),
        (["--dwell-s", "0"], 2, "dwell_s = 0.0; expected greater than 0"),
        (["http://10.0.0.9:8000"], 1, "needs --allow-remote-load"),
        (["--resume", "missing.json"], 1, "missing.json: no such sweep file"),
    ],
)
def test_bad_sweeps_are_refused_before_any_load(
    argv: list[str], code: int, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        found = main(["sweep", *argv])
    except SystemExit as exit_:  # argparse refuses a flag's value this way
        found = exit_.code  # type: ignore[assignment]
    assert found == code
    assert words in capsys.readouterr().err


def test_an_unreachable_replica_is_named_before_the_sweep(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sweep", "http://127.0.0.1:9"]) == 1
    assert "cannot read the replica before the sweep" in capsys.readouterr().err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _progress(phase: str, elapsed_s: float, ok: int) -> SweepProgress:
    return SweepProgress(2, 5, 4, phase, elapsed_s, ok, 50, 20.0)  # type: ignore[arg-type]


def test_progress_rewrites_one_line_on_a_terminal_and_prints_each_step_once() -> None:
    screen = Terminal()
    line = ProgressLine(screen)
    line.progress(_progress("warmup", 3.0, 0))
    line.progress(_progress("dwell", 12.0, 34))
    assert screen.getvalue().split("\r")[1:] == [
        "[2/5] concurrency 4: warming up 3 s",
        "[2/5] concurrency 4: dwell 12/20 s, 34/50 requests",
    ]
    steps = (STEPS_RESULT.steps[0],)
    result = dataclasses.replace(STEPS_RESULT, steps=steps)
    line.step(result)
    line.step(result)
    printed = screen.getvalue().split("\r")[-1]
    assert (
        printed == "concurrency 1: TTFT p99 10.0 ms, ITL p90 20.0 ms, 100 tokens/s, 12 requests\n"
    )


def test_progress_says_when_a_measured_step_waits_for_its_last_requests() -> None:
    screen = Terminal()
    ProgressLine(screen).progress(_progress("follow", 21.0, 40))
    assert screen.getvalue().split("\r")[1:] == [
        "[2/5] concurrency 4: measured 21 s; waiting for the dwell's last requests (40 ended)"
    ]


def test_progress_off_a_terminal_prints_only_the_steps() -> None:
    log = io.StringIO()
    line = ProgressLine(log)
    line.progress(_progress("dwell", 12.0, 34))
    line.step(STEPS_RESULT)
    line.clear()
    assert log.getvalue() == (
        "concurrency 8: TTFT p99 300.0 ms, ITL p90 20.0 ms, 400 tokens/s, 96 requests\n"
    )


def test_resume_says_which_flags_it_ignores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "--resume", "gone.json", "--ttft-ms", "100", "--dwell-s", "9"]) == 1
    err = capsys.readouterr().err
    assert (
        "--resume keeps the saved sweep's steps, timing and SLO; --ttft-ms, --dwell-s ignored"
        in err
    )
    assert "gone.json: no such sweep file" in err
