"""Judgements from live data: verdicts, the client–server gap, what binds, the litmus checklist."""

from __future__ import annotations

import dataclasses

import pytest

from slotop.actions.experiment.model import CurvePoint
from slotop.actions.slo import Binding, Verdict, judge, overall
from slotop.collectors.gpu.reader import GpuDevice, GpuSnapshot
from slotop.tui.views.verdict import diagnose, gap_unexplained, litmus
from tests.support.tui_fakes import capture_snapshot, estimate, with_load


@pytest.mark.parametrize(
    ("value", "target", "verdict"),
    [
        (0.2, 0.5, Verdict.PASS),
        (0.5, 0.5, Verdict.PASS),
        (0.51, 0.5, Verdict.BREACH),
        (None, 0.5, Verdict.UNKNOWN),
    ],
)
def test_judge_passes_at_or_under_the_target(
    value: float | None, target: float, verdict: Verdict
) -> None:
    assert judge(value, target) is verdict


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ((Verdict.PASS, Verdict.PASS), Verdict.PASS),
        ((Verdict.PASS, Verdict.BREACH), Verdict.BREACH),
        ((Verdict.UNKNOWN, Verdict.BREACH), Verdict.BREACH),
        ((Verdict.PASS, Verdict.UNKNOWN), Verdict.UNKNOWN),
        ((), Verdict.UNKNOWN),
    ],
)
def test_overall_breaches_if_any_breaches(verdicts: tuple[Verdict, ...], expected: Verdict) -> None:
    assert overall(verdicts) is expected


@pytest.mark.parametrize(
    ("client", "server", "gap"),
    [
        (0.030, estimate(0.039, 0.020, 0.040), False),  # inside the bucket: agrees
        (0.045, estimate(0.039, 0.020, 0.040), True),  # above the bucket
        (0.010, estimate(0.039, 0.020, 0.040), True),  # below the bucket
        (0.020, estimate(0.039, 0.020, 0.040), False),  # on the edge
        (50.0, estimate(20.0, 20.0, float("inf"), clamped=True), False),  # above the last bound
        (5.0, estimate(20.0, 20.0, float("inf"), clamped=True), True),
        (None, estimate(0.039, 0.020, 0.040), False),
        (0.030, None, False),
    ],
)
def test_a_gap_is_flagged_only_outside_the_servers_bucket(
    client: float | None, server: object, gap: bool
) -> None:
    assert gap_unexplained(client, server) is gap  # type: ignore[arg-type]


BASE = capture_snapshot()


@pytest.mark.parametrize(
    ("kwargs", "limits", "binding"),
    [
        ({"running": 0, "waiting": 0, "usage": 0.0}, {}, Binding.IDLE),
        ({"running": 8, "waiting": 0, "usage": 0.4}, {}, Binding.NOTHING),
        ({"running": 8, "waiting": 3, "usage": 0.97}, {}, Binding.KV_CAPACITY),
        (
            {"running": 8, "waiting": 0, "usage": 0.6, "preemptions_per_s": 0.5},
            {},
            Binding.KV_CAPACITY,
        ),
        ({"running": 16, "waiting": 5, "usage": 0.3}, {"max_num_seqs": 16}, Binding.SEQ_CAP),
        ({"running": 10, "waiting": 5, "usage": 0.3}, {"max_num_seqs": 16}, Binding.QUEUEING),
        (
            {"running": 10, "waiting": 5, "usage": 0.3},
            {"max_num_batched_tokens": 2048},
            Binding.TOKEN_BUDGET,
        ),
        ({"running": 10, "waiting": 5, "usage": 0.3}, {}, Binding.QUEUEING),
        ({"running": None, "waiting": None, "usage": None}, {}, Binding.NO_DATA),
    ],
)
def test_diagnosis_names_what_binds(
    kwargs: dict[str, float | None], limits: dict[str, int], binding: Binding
) -> None:
    snapshot = with_load(BASE, **kwargs)  # type: ignore[arg-type]
    assert diagnose(snapshot, snapshot.window, **limits).binding is binding


def test_an_sglang_replica_is_diagnosed_in_its_terms_as_its_sweep_is() -> None:
    # a queue under the cap names the token budget on vLLM (the batch size unknown live); on
    # SGLang the sweep cannot read it either, and the dashboard must not disagree with it
    sglang = dataclasses.replace(BASE, replica=dataclasses.replace(BASE.replica, engine="sglang"))
    queued = with_load(sglang, running=10, waiting=5, usage=0.3)
    found = diagnose(queued, queued.window, max_num_batched_tokens=2048)
    assert found.binding is Binding.QUEUEING
    assert "whether chunked_prefill_size 2,048 binds cannot be read" in found.evidence
    retracting = with_load(sglang, running=8, waiting=0, usage=0.6, preemptions_per_s=0.5)
    assert "0.50 retractions/s" in diagnose(retracting, retracting.window).evidence


def test_diagnosis_without_a_scrape_says_so() -> None:
    assert diagnose(None, None).binding is Binding.NO_DATA


def _device(util: int | None) -> GpuDevice:
    return GpuDevice(0, None, "H100", util, None, None, None, None, None, None, None, None, None)


def _litmus(**changes: object) -> dict[str, tuple[bool, str]]:
    arguments: dict[str, object] = {
        "ttft_percentile": 99.0,
        "itl_percentile": 99.0,
        "slo_source": "slotop.toml",
        "snapshot": BASE,
        "gpu": GpuSnapshot(0.0, (_device(90),)),
        "slo_verdict": Verdict.PASS,
        "curve": (),
        "ttft_target_s": 0.5,
        "itl_target_s": 0.05,
    }
    arguments.update(changes)
    return {item.label: (item.ticked, item.detail) for item in litmus(**arguments)}  # type: ignore[arg-type]


def test_litmus_ticks_from_live_data() -> None:
    items = _litmus()
    assert items["targets named with percentiles"][0]
    assert items["GPU > 80% with p99 in budget"][0]
    assert not items["batch size set by a measured curve"][0]
    fits = items["seqs that fit at max context"]
    assert fits[0] is (BASE.kv.max_concurrency is not None)


@pytest.mark.parametrize(
    ("changes", "label"),
    [
        ({"gpu": GpuSnapshot(0.0, (_device(90), _device(40)))}, "GPU > 80% with p99 in budget"),
        ({"slo_verdict": Verdict.BREACH}, "GPU > 80% with p99 in budget"),
        (
            {"gpu": GpuSnapshot(0.0, unavailable_cause="driver not loaded")},
            "GPU > 80% with p99 in budget",
        ),
        (
            {
                "snapshot": dataclasses.replace(
                    BASE, kv=dataclasses.replace(BASE.kv, max_concurrency=None)
                )
            },
            "seqs that fit at max context",
        ),
    ],
)
def test_litmus_items_untick_when_their_evidence_is_missing_or_bad(
    changes: dict[str, object], label: str
) -> None:
    assert not _litmus(**changes)[label][0]


def test_the_curve_item_ticks_once_p99_has_bent() -> None:
    curve = (
        CurvePoint(1, 0.1, 0.01, 10),
        CurvePoint(2, 0.2, 0.02, 10),
        CurvePoint(4, 0.9, 0.02, 10),
    )
    ticked, detail = _litmus(curve=curve)["batch size set by a measured curve"]
    assert ticked
    assert "operating point 2" in detail


def test_the_curve_item_counts_its_points_in_words() -> None:
    one = _litmus(curve=(CurvePoint(2, 0.1, 0.01, 10),))["batch size set by a measured curve"]
    assert one[1].startswith("1 point; operating point 2")
    two = (CurvePoint(1, 0.1, 0.01, 10), CurvePoint(2, 0.2, 0.02, 10))
    assert _litmus(curve=two)["batch size set by a measured curve"][1].startswith("2 points; ")


# Ten client TTFTs: 9.5, 9.7, …, 11.3 ms. Their median is (10.3 + 10.5) / 2 = 10.4 ms; at n = 10
# its interval runs over ranks ⌊5 − 1.96·√2.5⌋ = 1 to ⌈5 + 3.10⌉ = 9, i.e. 9.5 to 11.1 ms.
TEN_MS = [0.0095 + 0.0002 * i for i in range(10)]


def test_the_gap_allows_for_the_clients_sampling_error() -> None:
    from slotop.collectors.probe.stats import summarize_latency

    summary = summarize_latency(TEN_MS, (50.0,))
    client_s, interval = summary.at(50.0), summary.interval(50.0)
    assert client_s == pytest.approx(0.0104)
    assert interval == (pytest.approx(0.0095), pytest.approx(0.0111))
    first_bucket = estimate(0.009, 0.0, 0.010)  # vLLM's first ITL bucket, (0, 10 ms]
    assert gap_unexplained(client_s, first_bucket)  # the value alone lies above 10 ms
    assert not gap_unexplained(client_s, first_bucket, interval)  # but may well be ≤ 10 ms
    assert gap_unexplained(client_s, estimate(0.004, 0.0, 0.005), interval)  # all above 5 ms
    assert gap_unexplained(client_s, estimate(0.03, 0.025, 0.05), interval)  # all below 25 ms


def test_a_client_value_on_a_buckets_upper_bound_is_inside_it() -> None:
    assert not gap_unexplained(0.010, estimate(0.009, 0.0, 0.010))  # `le` is inclusive
    assert not gap_unexplained(0.010, estimate(0.009, 0.0, 0.010), (0.010, 0.010))
