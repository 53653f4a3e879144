"""The header's lines at any width: the least important items go first, and nothing wraps.

Widths are worked by hand from each item's length and the two-space gap between items.
"""

from __future__ import annotations

import pytest

from slotop.tui.panes.header import fit
from slotop.tui.views.header import (
    ALWAYS,
    ATTACHED,
    BLOCK_SIZE,
    BLOCKS,
    DEMO_WORDS,
    KV_DTYPE,
    MODEL,
    UPTIME,
    VERSION,
    HeaderPart,
)

URL = HeaderPart("http://127.0.0.1:8000", ALWAYS)  # 21 cells
SECOND = (
    URL,
    HeaderPart("KV auto", KV_DTYPE),  # 7
    HeaderPart("block 16 tok", BLOCK_SIZE),  # 12
    HeaderPart("1,000 blocks", BLOCKS),  # 12
    HeaderPart("up 3h12m", UPTIME),  # 8
    HeaderPart("attached 1m", ATTACHED),  # 11
)  # 71 cells of words and 5 gaps of 2: 81 in all


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (81, "http://127.0.0.1:8000  KV auto  block 16 tok  1,000 blocks  up 3h12m  attached 1m"),
        # 80 (an 80-column terminal holds 78): attached goes first, 81 - 13 = 68 cells.
        (80, "http://127.0.0.1:8000  KV auto  block 16 tok  1,000 blocks  up 3h12m"),
        (68, "http://127.0.0.1:8000  KV auto  block 16 tok  1,000 blocks  up 3h12m"),
        # then the block size: 68 - 14 = 54.
        (67, "http://127.0.0.1:8000  KV auto  1,000 blocks  up 3h12m"),
        (54, "http://127.0.0.1:8000  KV auto  1,000 blocks  up 3h12m"),
        # then the block count: 54 - 14 = 40, then the KV dtype: 40 - 9 = 31.
        (53, "http://127.0.0.1:8000  KV auto  up 3h12m"),
        (39, "http://127.0.0.1:8000  up 3h12m"),
        # then the uptime; the URL alone is cut, never dropped: 19 letters and an ellipsis.
        (30, "http://127.0.0.1:8000"),
        (20, "http://127.0.0.1:80…"),
        (1, "…"),
    ],
)
def test_the_second_line_drops_the_least_important_first(width: int, shown: str) -> None:
    assert "  ".join(words for words in fit(SECOND, width) if words is not None) == shown


def test_the_demo_words_shorten_before_a_figure_goes() -> None:
    demo = HeaderPart("SIMULATED replica (slotop demo)", DEMO_WORDS, short="SIMULATED")
    # 31 + 2 + 81 = 114; without attached 101, without the block size 87, and with the demo
    # words as SIMULATED (22 fewer) 65: the block count and the uptime stay at 78.
    assert fit((demo, *SECOND), 78) == [
        "SIMULATED",
        "http://127.0.0.1:8000",
        "KV auto",
        None,
        "1,000 blocks",
        "up 3h12m",
        None,
    ]
    # Neither goes: at 21 cells everything else has gone and the URL is cut to the 10 cells left
    # after SIMULATED and its gap (9 + 2), 9 letters and an ellipsis.
    assert fit((demo, *SECOND), 21) == ["SIMULATED", "http://12…", None, None, None, None, None]


STALE = HeaderPart("STALE: no answer for 30s", ALWAYS)  # 24 cells
FIRST = (
    STALE,
    HeaderPart("meta-llama/Llama-3.1-8B-Instruct", MODEL),  # 32
    HeaderPart("vLLM 0.32.0", VERSION),  # 11
)  # 24 + 2 + 32 + 2 + 11 = 71


@pytest.mark.parametrize(
    ("width", "shown"),
    [
        (71, ["STALE: no answer for 30s", "meta-llama/Llama-3.1-8B-Instruct", "vLLM 0.32.0"]),
        (70, ["STALE: no answer for 30s", "meta-llama/Llama-3.1-8B-Instruct", None]),  # 58
        (57, ["STALE: no answer for 30s", None, None]),
        (24, ["STALE: no answer for 30s", None, None]),
        (20, ["STALE: no answer fo…", None, None]),
    ],
)
def test_the_first_line_keeps_the_freshness_longest(width: int, shown: list[str | None]) -> None:
    assert fit(FIRST, width) == shown


def test_of_two_items_that_always_stay_the_rightmost_is_cut_first() -> None:
    replay = (
        HeaderPart("REPLAY ▶ 1×", ALWAYS),  # 11 cells
        HeaderPart("12:00:00 (0:02 of 0:06)", ALWAYS),  # 23
    )
    # 11 + 2 + 23 = 36: 16 too many at 20, so the second keeps 7 cells, 6 letters and "…".
    assert fit(replay, 20) == ["REPLAY ▶ 1×", "12:00:…"]
    # At 8 the second has no room at all and goes; the first is cut to 7 cells and an ellipsis,
    # and the space its cut ends on goes too.
    assert fit(replay, 8) == ["REPLAY…", None]


def test_before_the_pane_is_laid_out_every_item_is_whole() -> None:
    assert fit(FIRST, 0) == [part.text for part in FIRST]
