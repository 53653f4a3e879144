"""The load dial's safety rules: loopback guard, caps, plan → apply → event, with a fake probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotop.actions.errors import LoadRefusedError
from slotop.actions.probe_control import (
    LoadPlan,
    ProbeControl,
    is_loopback_url,
    load_shape_from_settings,
    plan_concurrency,
    plan_start,
    probe_target_from_settings,
)
from slotop.collectors.errors import PromptFileError
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.config import LoadSettings, settings_from_mapping
from tests.support.fake_probe import FakeProbe

SHAPE = LoadShape(
    prompt_lengths=LengthDistribution("fixed", 100),
    output_lengths=LengthDistribution("fixed", 28),
    max_concurrency=8,
    max_rate_rps=10.0,
)
LOCAL = ProbeTarget("http://127.0.0.1:8000")


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000", True),
        ("http://127.3.2.1", True),
        ("http://localhost:8000/", True),
        ("http://api.localhost", True),
        ("http://[::1]:8000", True),
        ("http://0.0.0.0:8000", True),
        ("http://10.0.0.5:8000", False),
        ("https://replica.prod.example:443", False),
        ("http://[2001:db8::1]", False),
        ("not a url", False),
    ],
)
def test_loopback_urls_are_told_apart(url: str, local: bool) -> None:
    assert is_loopback_url(url) is local


def test_remote_load_needs_the_explicit_flag() -> None:
    remote = ProbeTarget("http://10.0.0.5:8000")
    with pytest.raises(LoadRefusedError, match="--allow-remote-load"):
        plan_start(remote, SHAPE, allow_remote_load=False)
    plan = plan_start(remote, SHAPE, allow_remote_load=True, concurrency=2)
    assert plan.url == "http://10.0.0.5:8000/v1/completions"


def test_a_start_plan_says_what_it_will_send_and_what_it_costs() -> None:
    plan = plan_start(LOCAL, SHAPE, False, concurrency=4)
    assert (plan.kind, plan.concurrency, plan.rate_rps) == ("start", 4, None)
    assert "Keep 4 requests in flight" in plan.summary
    assert "prompts 100 tokens, outputs 28 tokens, end-of-sequence ignored" in plan.summary
    assert "about 512 tokens of KV cache" in plan.summary
    assert "Keep 1 request in flight" in plan_start(LOCAL, SHAPE, False, concurrency=1).summary
    open_plan = plan_start(LOCAL, SHAPE, False, rate_rps=2.5)
    assert (open_plan.concurrency, open_plan.rate_rps) == (None, 2.5)
    assert "2.5 requests/s" in open_plan.summary and "at most 8 in flight" in open_plan.summary


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"concurrency": 9}, "concurrency 9 is above the cap of 8; raise [load] max_concurrency"),
        ({"concurrency": -1}, "whole number ≥ 0"),
        ({"rate_rps": 10.5}, "10.5 req/s is above the cap of 10; raise [load] max_rate_rps"),
        ({"rate_rps": float("nan")}, "finite number"),
        ({"concurrency": 1, "rate_rps": 1.0}, "not both"),
    ],
)
def test_caps_refuse_levels_past_the_settings(kwargs: dict[str, float], words: str) -> None:
    with pytest.raises(LoadRefusedError, match=words.replace("[", r"\[").replace("]", r"\]")):
        plan_start(LOCAL, SHAPE, False, **kwargs)  # type: ignore[arg-type]


def status(in_flight: int) -> ProbeStatus:
    return ProbeStatus(0.0, 0, "closed", in_flight, None, in_flight, in_flight, 0, 0)


@pytest.mark.parametrize(
    ("target", "in_flight", "words"),
    [
        (6, 2, "4 more requests go out at once"),
        (3, 2, "Concurrency → 3: 1 more request goes out at once."),
        (1, 5, "the 5 in flight finish and no new request goes out above 1"),
        (3, 3, "the load holds"),
    ],
)
def test_concurrency_plans_say_how_the_step_lands(target: int, in_flight: int, words: str) -> None:
    plan = plan_concurrency("u", target, SHAPE, status(in_flight))
    assert words in plan.summary


def controller(
    allow_remote: bool = False, url: str = "http://127.0.0.1:8000"
) -> tuple[ProbeControl, list[FakeProbe]]:
    started: list[FakeProbe] = []

    def start(
        _: ProbeTarget, __: LoadShape, concurrency: int | None, rate_rps: float | None
    ) -> FakeProbe:
        started.append(FakeProbe(concurrency, rate_rps, status=status(2)))
        return started[-1]

    ticks = iter(range(100, 200))
    control = ProbeControl(
        ProbeTarget(url), SHAPE, allow_remote, start_probe=start, clock=lambda: float(next(ticks))
    )
    return control, started


def test_nothing_is_sent_until_a_start_is_applied() -> None:
    control, started = controller()
    plan = control.plan_start(concurrency=2)
    assert started == [] and control.probe is None
    with pytest.raises(LoadRefusedError, match="the load is off"):
        control.plan_concurrency(3)
    control.apply(plan)
    assert started[0].calls == [("start", 2)]
    assert control.probe is started[0]


def test_every_applied_change_is_an_event_with_its_time() -> None:
    control, started = controller()
    control.apply(control.plan_start(concurrency=2))
    control.apply(control.plan_concurrency(6))
    control.apply(control.plan_rate(3.0, burstiness=0.5))
    control.apply(control.plan_stop())
    assert started[0].calls == [
        ("start", 2),
        ("concurrency", 6),
        ("rate", (3.0, 0.5)),
        ("stop", None),
    ]
    events = control.events()
    assert [(e.at_s, e.plan.kind) for e in events] == [
        (100.0, "start"),
        (101.0, "concurrency"),
        (102.0, "rate"),
        (103.0, "stop"),
    ]
    assert control.probe is None


def test_a_second_start_is_refused_while_the_load_is_on() -> None:
    control, _ = controller()
    plan = control.plan_start()
    control.apply(plan)
    with pytest.raises(LoadRefusedError, match="already on"):
        control.apply(plan)
    with pytest.raises(LoadRefusedError, match="already on"):
        control.plan_start()


def test_apply_rechecks_the_rules_so_a_forged_plan_cannot_pass() -> None:
    control, started = controller(url="http://10.1.1.1:8000")
    forged = plan_start(ProbeTarget("http://10.1.1.1:8000"), SHAPE, True)
    with pytest.raises(LoadRefusedError, match="--allow-remote-load"):
        control.apply(forged)
    assert started == []
    local, local_started = controller()
    local.apply(local.plan_start())
    too_many = LoadPlan("concurrency", local.url, concurrency=50)
    with pytest.raises(LoadRefusedError, match="above the cap"):
        local.apply(too_many)
    assert local_started[0].calls == [("start", 1)]


def test_a_plan_for_another_replica_is_refused() -> None:
    control, _ = controller()
    other = plan_start(ProbeTarget("http://localhost:9999"), SHAPE, False)
    with pytest.raises(LoadRefusedError, match="this probe loads"):
        control.apply(other)


def test_settings_become_a_shape_and_a_target(tmp_path: Path) -> None:
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt": "hi", "output_tokens": 3}) + "\n", encoding="utf-8")
    settings = settings_from_mapping(
        {
            "replica": {"url": "http://127.0.0.1:9000", "timeout_s": 2},
            "load": {
                "endpoint": "chat",
                "max_concurrency": 4,
                "output_distribution": "uniform",
                "output_tokens": 50,
                "output_spread_tokens": 10,
                "prompts_file": "p.jsonl",
                "request_timeout_s": 30,
            },
        },
        "t",
    )
    shape = load_shape_from_settings(settings.load, base_dir=tmp_path)
    assert shape.endpoint == "chat"
    assert shape.max_concurrency == 4
    assert shape.output_lengths == LengthDistribution("uniform", 50, 10)
    assert shape.prompt_items[0].text == "hi"
    target = probe_target_from_settings(settings)
    assert (target.base_url, target.request_timeout_s) == ("http://127.0.0.1:9000", 30.0)


def test_a_bad_prompts_file_names_its_line() -> None:
    with pytest.raises(PromptFileError, match="no such prompts file"):
        load_shape_from_settings(LoadSettings(prompts_file="/nonexistent/p.jsonl"))
