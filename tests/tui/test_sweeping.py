"""The sweep's one-line progress in the dashboard: warming up, measuring, waiting for the last requests."""

from __future__ import annotations

import pytest

from slotop.actions.sweep.runner import SweepProgress
from slotop.tui.sweeping import progress_words


@pytest.mark.parametrize(
    ("phase", "elapsed_s", "ok", "words"),
    [
        ("warmup", 2.0, 0, "sweep step 2/5: concurrency 4, warming up"),
        ("dwell", 12.0, 34, "sweep step 2/5: concurrency 4, 12/20 s, 34/50 requests"),
        (
            "follow",
            21.0,
            40,
            "sweep step 2/5: concurrency 4, measured; waiting for the dwell's last requests "
            "to end (40 ended)",
        ),
    ],
)
def test_progress_words_name_the_phase(phase: str, elapsed_s: float, ok: int, words: str) -> None:
    progress = SweepProgress(2, 5, 4, phase, elapsed_s, ok, 50, 20.0)  # type: ignore[arg-type]
    assert progress_words(progress, None) == words


def test_no_sweep_says_nothing() -> None:
    assert progress_words(None, None) == ""
