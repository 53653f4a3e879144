"""A gauge's mean over a dwell with its noise: batch means and Student's t, worked by hand."""

from __future__ import annotations

import pytest

from slotop.actions.sweep.step import mean_band


@pytest.mark.parametrize(
    ("values", "per_batch", "band"),
    [
        # batches (0, 0), (1, 1), (2, 2): means 0, 1, 2, sd 1, se 1/√3; t for 2 degrees 4.303
        ([0, 0, 1, 1, 2, 2], 2, 4.303 / 3**0.5),
        # a queue that never moved has no spread
        ([1, 1, 1, 1, 1, 1], 2, 0.0),
        # five samples in batches of two make two batches: too few to say
        ([0, 1, 0, 1, 0], 2, None),
        # twenty samples in batches of one are cut into ten of two: means 0.5 each, no spread
        ([0, 1] * 10, 1, 0.0),
    ],
)
def test_a_gauges_mean_band_comes_from_batch_means(
    values: list[float], per_batch: int, band: float | None
) -> None:
    found = mean_band(values, per_batch)
    if band is None:
        assert found is None
    else:
        assert found == pytest.approx(band, rel=1e-3)
