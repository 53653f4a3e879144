"""The /metrics parser: regrouping, `_created`, label and sample orders, errors, and fuzzing."""

from __future__ import annotations

import contextlib
import math
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from slotop.collectors.errors import MetricsParseError
from slotop.collectors.parse import Exposition, MetricsParser, parse_metrics
from tests.support.paths import CAPTURES

INTERLEAVED_CREATED = """\
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 5.0
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
vllm:prompt_tokens_total{engine="1",model_name="m"} 3.0
vllm:prompt_tokens_created{engine="1",model_name="m"} 1.7e+09
"""

SEPARATE_CREATED = """\
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 5.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 3.0
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e+09
vllm:prompt_tokens_created{engine="1",model_name="m"} 1.7e+09
"""


def _values(
    exposition: Exposition, family: str
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = exposition.families[family]
    return {(sample.name, sample.labels): sample.value for sample in found.samples}


@pytest.mark.parametrize("text", [INTERLEAVED_CREATED, SEPARATE_CREATED])
def test_created_series_are_dropped_and_counter_keeps_every_sample(text: str) -> None:
    exposition = parse_metrics(text)
    assert set(exposition.families) == {"vllm:prompt_tokens"}
    family = exposition.families["vllm:prompt_tokens"]
    assert family.kind == "counter"
    assert {s.name for s in family.samples} == {"vllm:prompt_tokens_total"}
    assert sorted(s.value for s in family.samples) == [3.0, 5.0]


def test_label_order_does_not_matter_and_a_series_given_twice_is_refused() -> None:
    a = parse_metrics('# TYPE g gauge\ng{b="2",a="1"} 4\n')
    b = parse_metrics('# TYPE g gauge\ng{a="1",b="2"} 4\n')
    assert a == b
    with pytest.raises(MetricsParseError, match="appears twice"):
        parse_metrics('# TYPE g gauge\ng{b="2",a="1"} 4\ng{a="1",b="2"} 5\n')


def test_histogram_lines_in_any_order_and_le_anywhere_give_one_family() -> None:
    text = (
        "# TYPE h histogram\n"
        'h_sum{x="a"} 2.5\n'
        'h_bucket{le="+Inf",x="a"} 10\n'
        'h_bucket{x="a",le="0.5"} 10\n'
        'h_count{x="a"} 10\n'
        'h_bucket{le="0.1",x="a"} 3\n'
    )
    family = parse_metrics(text).families["h"]
    assert family.kind == "histogram"
    assert len(family.samples) == 5


def test_family_without_samples_is_kept_empty_and_get_says_absent() -> None:
    exposition = parse_metrics(
        "# HELP vllm:lora_requests_info x\n# TYPE vllm:lora_requests_info gauge\n"
    )
    assert exposition.families["vllm:lora_requests_info"].samples == ()
    assert exposition.get("vllm:lora_requests_info") is None


def test_lines_without_type_become_untyped_families_by_sample_name() -> None:
    text = 'vllm:prompt_tokens_total{engine="0"} 7\nvllm:ttft_bucket{le="1"} 2\n'
    exposition = parse_metrics(text)
    assert exposition.families["vllm:prompt_tokens_total"].kind == "untyped"
    assert exposition.families["vllm:ttft_bucket"].samples[0].label("le") == "1"


def test_prefix_keeps_only_matching_families() -> None:
    text = "# TYPE process_open_fds gauge\nprocess_open_fds 3\n" + SEPARATE_CREATED
    assert set(parse_metrics(text, prefix="vllm:").families) == {"vllm:prompt_tokens"}


GARBAGE = [
    pytest.param("<html><body>Not Found</body></html>\n", id="html"),
    pytest.param('vllm:x{engine="0" 1\n', id="unclosed braces"),
    pytest.param("vllm:x 1 2 3 4 five\n", id="bad timestamp"),
    pytest.param("vllm:x one\n", id="bad value"),
    pytest.param("# TYPE vllm:x\n", id="TYPE without a type"),
    pytest.param('vllm:x{engine="0"} 1_000\n', id="underscore in value"),
]


@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_raises_our_error_naming_the_line(text: str) -> None:
    with pytest.raises(MetricsParseError, match="line 1"):
        parse_metrics(text)


def test_error_names_the_right_line_number() -> None:
    text = "# TYPE g gauge\ng 1\ng{a=1} 2\n"
    with pytest.raises(MetricsParseError, match="line 3"):
        parse_metrics(text)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('h_bucket{x="a"} 1', "no le"),
        ('h_bucket{le="wide"} 1', "not a number"),
        ('h_bucket{le="NaN"} 1', "NaN"),
    ],
)
def test_bucket_needs_a_numeric_le(line: str, words: str) -> None:
    with pytest.raises(MetricsParseError, match=words):
        parse_metrics(f"# TYPE h histogram\n{line}\n")


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.txt")), ids=lambda p: p.name)
def test_warm_parser_gives_what_a_fresh_one_gives_on_real_captures(path: Path) -> None:
    parser = MetricsParser(prefix="vllm:")
    for other in sorted(CAPTURES.glob("*.txt")):
        parser.parse(other.read_text(encoding="utf-8"))
    text = path.read_text(encoding="utf-8")
    assert parser.parse(text) == parse_metrics(text, prefix="vllm:")


def test_cache_is_bounded() -> None:
    parser = MetricsParser(max_cached_lines=10)
    for index in range(50):
        parser.parse(f'# TYPE g gauge\ng{{i="{index}"}} 1\n')
    assert len(parser._series) + len(parser._comments) <= 11


_LABEL_VALUES = st.text(alphabet=string.ascii_letters + string.digits + ' "\\\n{},=#', max_size=12)


@settings(max_examples=60, deadline=None)
@given(
    counter_value=st.floats(min_value=0, max_value=1e15, allow_nan=False),
    gauge_value=st.floats(allow_nan=False),
    label=_LABEL_VALUES,
    observations=st.lists(st.floats(min_value=0, max_value=100, allow_nan=False), max_size=20),
)
def test_round_trip_through_prometheus_client_exposition(
    counter_value: float, gauge_value: float, label: str, observations: list[float]
) -> None:
    registry = CollectorRegistry()
    counter = Counter("vllm:c", "help", ["tag"], registry=registry)
    gauge = Gauge("vllm:g", "help \\ with escapes\n", ["tag"], registry=registry)
    histogram = Histogram("vllm:h", "help", ["tag"], buckets=(0.5, 5.0), registry=registry)
    counter.labels(label).inc(counter_value)
    gauge.labels(label).set(gauge_value)
    for value in observations:
        histogram.labels(label).observe(value)
    text = generate_latest(registry).decode()
    parser = MetricsParser()
    for exposition in (parser.parse(text), parser.parse(text)):
        assert _values(exposition, "vllm:c") == {
            ("vllm:c_total", (("tag", label),)): pytest.approx(counter_value)
        }
        assert exposition.families["vllm:g"].samples[0].value == pytest.approx(gauge_value)
        if observations:
            count = [s for s in exposition.families["vllm:h"].samples if s.name == "vllm:h_count"]
            assert count[0].value == len(observations)


_EXPOSITION_ALPHABET = (
    string.ascii_letters[:6] + string.digits + ' {}="#:_.,+-\\\n\tIinfNaTYPEHLcoutrghsm'
)


def _parses_the_same(text: str, warm: MetricsParser) -> None:
    try:
        cold = parse_metrics(text)
    except MetricsParseError:
        with pytest.raises(MetricsParseError):
            warm.parse(text)
        return
    # Compared by repr: a NaN sample value is never == itself, but its repr is the same.
    assert repr(warm.parse(text)) == repr(cold)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_fuzz_any_text_parses_or_raises_our_error(text: str) -> None:
    _parses_the_same(text, MetricsParser())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=_EXPOSITION_ALPHABET, max_size=300), st.data())
def test_fuzz_exposition_like_text_gives_the_same_answer_warm_or_cold(
    text: str, data: st.DataObject
) -> None:
    warm = MetricsParser()
    lines = text.splitlines()
    warm_up = "\n".join(data.draw(st.lists(st.sampled_from(lines), max_size=8))) if lines else ""
    with contextlib.suppress(MetricsParseError):
        warm.parse(warm_up)
    _parses_the_same(text, warm)


def test_a_nan_sample_parses_the_same_warm_or_cold() -> None:
    warm = MetricsParser()
    warm.parse("NaN")
    _parses_the_same("NaN", warm)
    assert math.isnan(warm.parse("NaN").families["Na"].samples[0].value)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_decoded_bytes_never_crash(raw: bytes) -> None:
    text = raw.decode("utf-8", errors="replace")
    with contextlib.suppress(MetricsParseError):
        parse_metrics(text)
