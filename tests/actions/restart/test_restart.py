"""Restart with changed dials: the plan, the verification, and apply with rollback (fakes, pure)."""

from __future__ import annotations

import json

import httpx
import pytest

from slotop.actions.replica.process import ProgressCallback
from slotop.actions.replica.spec import Dials, HealthTimeoutError, LaunchError, ReplicaExitedError
from slotop.actions.restart.apply import (
    RestartEvent,
    RestartPlan,
    RestartRefusedError,
    apply_restart,
    plan_restart,
)
from slotop.actions.restart.verify import (
    SOURCE_CACHE_INFO,
    SOURCE_STARTUP_LOG,
    Verification,
    one_token,
    startup_args,
    verify_dials,
)
from slotop.collectors.probe.records import ProbeStatus
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.snapshot import kv_cache_state
from tests.support.fake_probe import FakeProbe
from tests.support.paths import CAPTURES


def _reading(name: str):  # type: ignore[no-untyped-def]
    return read_metrics_text((CAPTURES / name).read_text(encoding="utf-8"))


def _plan(before: Dials, after: Dials, **changes: object) -> RestartPlan:
    values: dict[str, object] = {
        "url": "http://127.0.0.1:8000",
        "how": "managed",
        "kv": kv_cache_state(_reading("vllm-0.32-cpu-idle.txt")),
        "last_downtime_s": None,
        "probe_status": None,
        "drain_timeout_s": 5.0,
        "health_timeout_s": 60.0,
        "model_dtype": "float32",
    }
    values.update(changes)
    return plan_restart(before, after, **values)  # type: ignore[arg-type]


def test_a_plan_names_the_change_capacity_downtime_and_probe() -> None:
    status = ProbeStatus(0.0, 2, "closed", 8, None, 8, 100, 92, 0)
    plan = _plan(Dials(), Dials("fp8"), last_downtime_s=21.5, probe_status=status)
    assert plan.changes == (("kv_cache_dtype", "auto", "fp8"),)
    assert plan.capacity is not None
    assert plan.capacity.blocks_before == 256  # the fp32 capture's num_gpu_blocks
    assert plan.capacity.blocks_after == 1024  # 4 bytes → 1 byte: the fp8 capture's count
    text = "\n".join(plan.lines())
    assert "kv_cache_dtype: auto → fp8" in text
    assert "blocks 256 → 1,024" in text
    assert "about 21.5 s (the last restart's)" in text
    assert "The probe pauses (8 in flight now" in text
    assert "resumes at the same load" in text


def test_a_plan_without_history_or_known_dtype_says_what_it_does_not_know() -> None:
    plan = _plan(Dials(), Dials("fp4"))
    assert plan.capacity is None
    assert "KV capacity change unknown: unknown dtype 'fp4'" in plan.capacity_words
    assert "unknown until measured (at most 60 s to /health)" in "\n".join(plan.lines())
    batch = _plan(Dials(), Dials(max_num_seqs=4))
    assert batch.capacity_words == ""
    assert batch.changes == (("max_num_seqs", "default", "4"),)


def test_nothing_to_change_is_refused() -> None:
    with pytest.raises(RestartRefusedError, match="already runs with --kv-cache-dtype=fp8"):
        _plan(Dials("fp8"), Dials("fp8"))


def test_startup_args_reads_vllms_non_default_args_line() -> None:
    log = (CAPTURES / "vllm-0.32-cpu-queue-startup.log").read_text(encoding="utf-8")
    args = startup_args(log)
    assert args["max_num_seqs"] == 4
    assert args["kv_cache_memory_bytes"] == 67108864
    assert startup_args("no such line") == {}
    assert startup_args("x non-default args: {broken") == {}


@pytest.mark.parametrize(
    ("dials", "metrics", "log", "problems", "sources"),
    [
        (Dials("fp8"), "vllm-0.32-cpu-fp8-idle.txt", "", (), (SOURCE_CACHE_INFO, None, None)),
        (
            Dials("fp8"),
            "vllm-0.32-cpu-idle.txt",
            "",
            ("kv_cache_dtype: started with fp8, but the vllm:cache_config_info says auto",),
            (SOURCE_CACHE_INFO, None, None),
        ),
        (
            Dials("auto", 4),
            "vllm-0.32-cpu-queue.txt",
            "vllm-0.32-cpu-queue-startup.log",
            (),
            (SOURCE_CACHE_INFO, SOURCE_STARTUP_LOG, SOURCE_STARTUP_LOG),
        ),
        (
            Dials("auto", 8),
            "vllm-0.32-cpu-queue.txt",
            "vllm-0.32-cpu-queue-startup.log",
            ("max_num_seqs: started with 8, but the start-up log says 4",),
            (SOURCE_CACHE_INFO, SOURCE_STARTUP_LOG, SOURCE_STARTUP_LOG),
        ),
    ],
)
def test_verify_compares_the_dials_with_what_the_replica_reports(
    dials: Dials,
    metrics: str,
    log: str,
    problems: tuple[str, ...],
    sources: tuple[str | None, ...],
) -> None:
    log_text = (CAPTURES / log).read_text(encoding="utf-8") if log else ""
    verification = verify_dials(dials, _reading(metrics), ("tiny-llama",), log_text)
    assert verification.problems == problems
    assert verification.ok is (not problems)
    assert tuple(check.source for check in verification.checks) == sources


def test_verify_fails_without_the_api_and_marks_unreported_dials() -> None:
    failed = verify_dials(Dials("fp8"), None, (), "", ("cannot read /metrics: refused",))
    assert not failed.ok
    assert failed.unverified == ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens")
    empty = verify_dials(Dials(), _reading("vllm-0.32-cpu-idle.txt"), (), "")
    assert empty.problems == ("/v1/models lists no model",)
    text = "\n".join(verify_dials(Dials(), _reading("vllm-0.32-cpu-idle.txt"), ("m",), "").lines())
    assert "kv_cache_dtype = auto: ✓ vllm:cache_config_info says auto" in text
    assert "max_num_seqs = default: not reported by the replica" in text
    assert "KV cache: 256 blocks of 128 tokens (32,768 tokens, dtype auto)" in text


class FakeTarget:
    """A replica whose starts succeed or fail as scripted; it records every call."""

    def __init__(self, running: Dials, fail_on: dict[str, LaunchError] | None = None) -> None:
        self.url = "http://127.0.0.1:8000"
        self.dials: Dials | None = running
        self.last_downtime_s: float | None = None
        self.fail_on = fail_on or {}
        self.calls: list[str] = []
        self._starting: Dials | None = None

    def stop(self) -> None:
        self.calls.append("stop")
        self.dials = None

    def spawn(self, dials: Dials) -> None:
        self.calls.append(f"spawn {dials.kv_cache_dtype}")
        self._starting = dials

    def wait_healthy(self, on_progress: ProgressCallback | None = None) -> float:
        assert self._starting is not None
        error = self.fail_on.get(self._starting.kv_cache_dtype)
        if error is not None:
            raise error
        self.dials = self._starting
        return 1.5

    def log_tail(self, lines: int = 40) -> str:
        return f"tail of {self._starting.kv_cache_dtype if self._starting else '-'}"

    def log_since_start(self) -> str:
        return ""

    def record_downtime(self, downtime_s: float) -> None:
        self.last_downtime_s = downtime_s


def _verifier(target: FakeTarget, lie_for: str | None = None):  # type: ignore[no-untyped-def]
    def verify(dials: Dials, log: str) -> Verification:
        problems = ()
        if dials.kv_cache_dtype == lie_for:
            problems = (f"kv_cache_dtype: started with {lie_for}, but ... says auto",)
        return Verification(dials, (), ("m",), None, problems)

    return verify


class DrainingProbe(FakeProbe):
    """A probe held at concurrency 8 that drains one request per status poll."""

    def __init__(self, in_flight: int) -> None:
        super().__init__()
        self.in_flight = in_flight

    def status(self) -> ProbeStatus | None:
        status = ProbeStatus(0.0, 1, "closed", 8, None, self.in_flight, 10, 2, 0)
        self.in_flight = max(0, self.in_flight - 1)
        return status


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _apply(plan: RestartPlan, target: FakeTarget, **kwargs: object):  # type: ignore[no-untyped-def]
    clock = Clock()
    events: list[RestartEvent] = []
    verify = kwargs.pop("verify", _verifier(target))
    result = apply_restart(
        plan,
        target,
        verify,  # type: ignore[arg-type]
        on_event=events.append,
        wall_clock=clock,
        clock=clock,
        sleep=clock.sleep,
        **kwargs,  # type: ignore[arg-type]
    )
    assert list(result.events) == events
    return result


def test_apply_pauses_the_probe_restarts_verifies_and_resumes() -> None:
    target = FakeTarget(Dials())
    probe = DrainingProbe(in_flight=3)
    result = _apply(_plan(Dials(), Dials("fp8"), drain_timeout_s=5.0), target, probe=probe)
    assert result.outcome == "applied" and result.applied
    assert result.dials == Dials("fp8") == target.dials
    assert target.calls == ["stop", "spawn fp8"]
    assert probe.commands == [("concurrency", 0), ("concurrency", 8)]
    phases = [event.phase for event in result.events]
    assert phases == [
        "plan",
        "pause_probe",
        "drain",
        "stop",
        "start",
        "health",
        "verify",
        "up",
        "resume_probe",
    ]
    assert result.events[2].detail == "no request in flight"
    assert result.downtime_s is not None and target.last_downtime_s == result.downtime_s
    assert result.failure is None and result.failure_log_tail == ""


@pytest.mark.parametrize(
    ("error", "lie_for"),
    [
        (ReplicaExitedError("the replica ended (exit code 2)"), None),
        (HealthTimeoutError("the replica did not answer /health within 3 s"), None),
        (None, "fp8"),
    ],
)
def test_a_failed_start_rolls_back_to_the_previous_dials(
    error: LaunchError | None, lie_for: str | None
) -> None:
    target = FakeTarget(Dials(), {"fp8": error} if error else {})
    result = _apply(
        _plan(Dials(), Dials("fp8")),
        target,
        verify=_verifier(target, lie_for),
        probe=DrainingProbe(0),
    )
    assert result.outcome == "rolled_back" and not result.applied
    assert result.dials == Dials() == target.dials
    assert target.calls == ["stop", "spawn fp8", "stop", "spawn auto"]
    assert result.failure is not None
    assert result.failure_log_tail == "tail of fp8"
    phases = [event.phase for event in result.events]
    assert phases[-7:] == [
        "failed",
        "rollback_stop",
        "rollback_start",
        "rollback_health",
        "rollback_verify",
        "up",
        "resume_probe",
    ]
    text = "\n".join(result.lines())
    assert "ROLLED BACK" in text and "| tail of fp8" in text


def test_a_failed_rollback_says_the_replica_is_down_and_keeps_the_probe_paused() -> None:
    down = ReplicaExitedError("exit code 1")
    target = FakeTarget(Dials(), {"fp8": down, "auto": down})
    probe = DrainingProbe(0)
    result = _apply(_plan(Dials(), Dials("fp8")), target, probe=probe)
    assert result.outcome == "down"
    assert result.dials is None and result.downtime_s is None
    assert probe.commands == [("concurrency", 0)]
    assert result.events[-1].phase == "down"
    assert "the rollback failed too" in (result.failure or "")
    assert "the replica is DOWN" in result.lines()[0]


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (200, {"choices": [{"text": "x"}]}, None),
        (500, {"error": "boom"}, "answered HTTP 500"),
        (200, {"choices": []}, "came back without choices"),
        (200, "not json", "came back without choices"),
    ],
)
def test_the_one_token_check_says_what_went_wrong(
    status: int, body: object, words: str | None
) -> None:
    seen: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        assert request.headers["authorization"] == "Bearer k"
        if isinstance(body, str):
            return httpx.Response(status, text=body)
        return httpx.Response(status, json=body)

    problem = one_token(
        "http://r:1/v1", "m", api_key="k", timeout_s=1, transport=httpx.MockTransport(answer)
    )
    assert seen[0]["max_tokens"] == 1 and seen[0]["model"] == "m"
    assert problem is None if words is None else words in (problem or "")


def test_the_one_token_check_reports_a_refused_connection() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    problem = one_token(
        "http://r:1", "m", api_key=None, timeout_s=1, transport=httpx.MockTransport(refuse)
    )
    assert problem is not None and "http://r:1/v1/completions failed: ConnectError" in problem
