"""Windows over hostile scrape sequences: resets, gaps, NaN and cut pages never give a negative rate.

A fake replica's counter and small histogram grow or restart between scrapes; each page is then
served whole, without one family, with a value no counter holds, cut short, or not at all, and goes
through the real parse → reading → window path, a failed parse skipped as the poller skips it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from slotop.collectors.errors import MetricsParseError
from slotop.collectors.reading import ScrapeReader
from slotop.collectors.window import Window, WindowView

LAST_FINITE_BOUND = 1.0
SPANS_S = (1.0, 5.0, 60.0)
QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)
PAGES = ("whole", "no counter", "no histogram", "empty", "bad value", "cut", "failed")
BAD_VALUES = ("NaN", "+Inf", "-Inf", "-1")


@dataclass
class _Replica:
    """A replica's cumulative prompt tokens and TTFT observations per bucket (≤0.1, ≤1, +Inf)."""

    tokens: int = 0
    in_bucket: list[int] = field(default_factory=lambda: [0, 0, 0])

    def grow(self, tokens: int, observations: tuple[int, int, int]) -> None:
        self.tokens += tokens
        self.in_bucket = [
            have + new for have, new in zip(self.in_bucket, observations, strict=True)
        ]

    def restart(self) -> None:
        self.tokens, self.in_bucket = 0, [0, 0, 0]

    def counter_lines(self) -> list[str]:
        return [
            "# TYPE vllm:prompt_tokens_total counter",
            f'vllm:prompt_tokens_total{{engine="0",model_name="m"}} {self.tokens}',
        ]

    def histogram_lines(self) -> list[str]:
        name = "vllm:time_to_first_token_seconds"
        low, mid, high = self.in_bucket
        total = low + mid + high
        labels = 'engine="0",model_name="m"'
        return [
            f"# TYPE {name} histogram",
            f'{name}_bucket{{{labels},le="0.1"}} {low}',
            f'{name}_bucket{{{labels},le="1.0"}} {low + mid}',
            f'{name}_bucket{{{labels},le="+Inf"}} {total}',
            f"{name}_count{{{labels}}} {total}",
            f"{name}_sum{{{labels}}} {0.05 * low + 0.5 * mid + 2.0 * high}",
        ]


def _page(replica: _Replica, kind: str, data: st.DataObject) -> tuple[str | None, bool]:
    """Render one scrape as the page kind says (None: failed), and whether it served the counter."""
    counter = [] if kind in ("no counter", "empty", "failed") else replica.counter_lines()
    histogram = [] if kind in ("no histogram", "empty") else replica.histogram_lines()
    lines = counter + histogram
    if kind == "bad value":
        samples = [index for index, line in enumerate(lines) if not line.startswith("#")]
        index = data.draw(st.sampled_from(samples))
        series = lines[index].rsplit(" ", 1)[0]
        lines[index] = f"{series} {data.draw(st.sampled_from(BAD_VALUES))}"
        counter = [line for line in counter if line in lines]
    text = "\n".join(lines) + "\n"
    if kind == "cut":
        return text[: data.draw(st.integers(0, len(text) - 1))], False
    return (None if kind == "failed" else text), len(counter) == 2


def _assert_truthful(view: WindowView) -> None:
    for key, increase in view.counters.items():
        assert increase >= 0, (key, view)
        rate = view.rate_per_s(key)
        assert rate is None or rate >= 0, (key, view)
    for key, delta in view.histograms.items():
        assert all(count >= 0 for _, count in delta.buckets), (key, delta)
        assert delta.count >= 0 and delta.sum >= 0, (key, delta)
        for q in QUANTILES:
            estimate = delta.quantile(q)
            assert estimate is None or 0 <= estimate.value <= LAST_FINITE_BOUND, (q, delta)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), scrapes=st.integers(2, 25))
def test_no_rate_or_increase_is_negative_and_quantiles_stay_in_the_buckets(
    data: st.DataObject, scrapes: int
) -> None:
    replica = _Replica()
    reader = ScrapeReader()  # as the monitor reads a replica
    window = Window(60.0)
    truthful = True  # no restart and no cut page: every value read is the replica's own
    first_tokens: int | None = None
    last_tokens: int | None = None
    for second in range(scrapes):
        if data.draw(st.integers(0, 9)) == 0:
            replica.restart()
            truthful = False
        replica.grow(
            data.draw(st.integers(0, 1000)),
            (
                data.draw(st.integers(0, 5)),
                data.draw(st.integers(0, 5)),
                data.draw(st.integers(0, 2)),
            ),
        )
        kind = data.draw(st.sampled_from(PAGES))
        truthful = truthful and kind != "cut"
        text, served_counter = _page(replica, kind, data)
        if text is None:
            continue
        try:
            reading = reader.read(text)
        except MetricsParseError:
            continue
        window.push(float(second), reading)
        if served_counter:
            first_tokens = replica.tokens if first_tokens is None else first_tokens
            last_tokens = replica.tokens
        for span in SPANS_S:
            view = window.view(span)
            if view is not None:
                _assert_truthful(view)
    whole = window.view(60.0)
    if truthful and whole is not None and first_tokens is not None and last_tokens is not None:
        # Growth, gaps and skipped values only: the increase is the last value taken less the first.
        assert whole.increase("prompt_tokens") == last_tokens - first_tokens
