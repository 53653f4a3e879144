"""The tune's parts on a real replica: restart with verify and rollback, a recorded sweep, the
greedy quality check, and the KV budget, each through the code `slotop restart`, `slotop sweep`
and `slotop budget` use, and recorded as they record (so `slotop report` reads a tune as it
reads them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from slotop.actions.budget.kv import BudgetError
from slotop.actions.budget.sources import BudgetRequest, resolve_budget
from slotop.actions.experiment.recording import RESTART_UP_PHASE
from slotop.actions.probe_control import ProbeControl
from slotop.actions.replica.journal import RestartJournal
from slotop.actions.replica.process import ProgressCallback, RestartTarget
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.restart.apply import RestartEvent, apply_restart, plan_restart
from slotop.actions.restart.quality_check import (
    QualityBaseline,
    configured_prompts,
    quality_baseline,
    quality_check,
)
from slotop.actions.restart.verify import replica_verifier
from slotop.actions.session.recorder import SessionRecorder
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import StepMeasured, SweepProgress, SweepResult
from slotop.actions.tune.capacity import Capacity, capacity_from_budget, capacity_from_sglang
from slotop.actions.tune.runner import Applied, QualityResult
from slotop.actions.wiring.sweep import sweep_replica
from slotop.collectors.errors import CollectorError
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import KvCacheState, kv_cache_state
from slotop.config import Settings

Write = Callable[[str], None]


def load_tokens(settings: Settings) -> int:
    """Tokens a probe request holds at its end: the [load] prompt and output lengths (means)."""
    return settings.load.prompt_tokens + settings.load.output_tokens


def replica_capacity(
    settings: Settings, url: str, dials: Dials | None = None
) -> tuple[Capacity | None, str | None]:
    """The KV budget of the replica as it runs now at `dials`, or None and why it could not be
    read: vLLM's from its cache_config_info, as `slotop budget --url` sizes it; SGLang's from
    its pool gauges (`capacity_from_sglang`)."""
    if dials is not None and dials.engine == "sglang":
        return _sglang_capacity(settings, url, dials.kv_cache_dtype)
    request = BudgetRequest(
        url=url,
        api_key=settings.replica.api_key,
        timeout_s=settings.replica.timeout_s,
        avg_len=load_tokens(settings),
    )
    try:
        return capacity_from_budget(resolve_budget(request), load_tokens(settings)), None
    except (BudgetError, CollectorError) as exc:
        return None, str(exc)


def _sglang_capacity(
    settings: Settings, url: str, kv_cache_dtype: str
) -> tuple[Capacity | None, str | None]:
    try:
        with ReplicaClient(
            url, api_key=settings.replica.api_key, timeout_s=settings.replica.timeout_s
        ) as client:
            kv = kv_cache_state(read_metrics_text(client.metrics_text(), "sglang"))
    except CollectorError as exc:
        return None, str(exc)
    if not kv.size_tokens:
        return None, "the replica's /metrics has no sglang:max_total_num_tokens (--enable-metrics?)"
    return capacity_from_sglang(kv, kv_cache_dtype, load_tokens(settings)), None


def _kv_now(url: str, api_key: str | None) -> KvCacheState | None:
    try:
        with ReplicaClient(url, api_key=api_key, timeout_s=5.0) as client:
            return kv_cache_state(read_metrics_text(client.metrics_text()))
    except CollectorError:
        return None


class LiveReplica:
    """The managed or command-restarted replica as a tune's `TuneReplica`."""

    def __init__(
        self,
        settings: Settings,
        spec: LaunchSpec,
        target: RestartTarget,
        how: Literal["managed", "command"],
        control: ProbeControl,
        recorder: SessionRecorder | None,
        write: Write,
        *,
        on_step: Callable[[SweepResult], None] | None = None,
        on_restart_event: Callable[[RestartEvent], None] | None = None,
        on_dials: Callable[[Dials, float | None], None] | None = None,
        on_health: ProgressCallback | None = None,
    ) -> None:
        """`on_restart_event` and `on_dials` replace writing and recording a restart's phases
        and the dials it left (a dashboard puts them on its timeline and opens a configuration
        itself); without them they are written and recorded here, readings included. `on_health`
        hears the wait for /health after each start."""
        self._settings = settings
        self._spec = spec
        self._target = target
        self._how = how
        self._control = control
        self._recorder = recorder
        self._write = write
        self._on_step = on_step
        self._on_restart_event = on_restart_event
        self._on_dials = on_dials
        self._on_health = on_health

    def apply(self, before: Dials, after: Dials) -> Applied:
        """Restart into `after` (verify; roll back to `before` on failure), recorded as
        `slotop restart` records one, with the dials it runs from its `up` phase."""
        spec, recorder = self._spec, self._recorder
        plan = plan_restart(
            before,
            after,
            url=spec.url,
            how=self._how,
            kv=_kv_now(spec.url, spec.api_key),
            last_downtime_s=self._target.last_downtime_s,
            probe_status=None,
            drain_timeout_s=spec.drain_timeout_s,
            health_timeout_s=spec.health_timeout_s,
        )
        dials = {"dials_before": before.to_json(), "dials_after": after.to_json(), "how": self._how}
        for line in plan.lines():
            self._write(f"  {line}")
        if recorder is not None:
            recorder.action("restart_planned", {**dials, "plan": list(plan.lines())})
        journal = RestartJournal(
            spec.state_path,
            before,
            after,
            command="tune",
            how=self._how,
            recording=recorder.path if recorder is not None else None,
        )
        shown = self._on_restart_event or self._event

        def noted(event: RestartEvent) -> None:
            journal.phase(event.phase)
            shown(event)

        result = apply_restart(
            plan,
            self._target,
            replica_verifier(spec.url, api_key=spec.api_key),
            on_event=noted,
            on_progress=self._on_health,
        )
        lines = result.lines()
        for line in lines:
            self._write(f"  {line}")
        if result.dials is not None:
            up = [e.at_s for e in result.events if e.phase == RESTART_UP_PHASE]
            since = up[-1] if up else None
            if self._on_dials is not None:
                self._on_dials(result.dials, since)
            elif recorder is not None:
                recorder.action("dials", {"dials": result.dials.to_json(), "since_s": since})
        if recorder is not None:
            recorder.action(
                "restart",
                {
                    **dials,
                    "dials_now": result.dials.to_json() if result.dials is not None else None,
                    "outcome": result.outcome,
                    "downtime_s": result.downtime_s,
                    "failure": result.failure,
                    "lines": list(lines),
                    "comparison": None,
                    "table": None,
                    "quality": None,
                },
            )
        capacity = None
        if result.dials is not None:
            capacity, _problem = replica_capacity(self._settings, spec.url, result.dials)
        return Applied(result.outcome, result.dials, lines, result.downtime_s, capacity)

    def _event(self, event: RestartEvent) -> None:
        self._write(f"  [{event.elapsed_s:6.1f} s] {event.phase}: {event.detail}")
        if self._recorder is not None:
            text = f"{event.phase}: {event.detail}"
            self._recorder.event("restart", text, at_s=event.at_s, elapsed_s=event.elapsed_s)

    def verify(self, dials: Dials) -> tuple[bool, tuple[str, ...]]:
        """Verify the replica runs `dials` as it is, without a restart."""
        spec = self._spec
        verification = replica_verifier(spec.url, api_key=spec.api_key)(
            dials, self._target.log_since_start()
        )
        return verification.ok, verification.lines()

    def sweep(
        self,
        spec: SweepSpec,
        resume: SweepResult | None,
        cancel: threading.Event,
        on_progress: Callable[[SweepProgress], None],
        on_measured: StepMeasured,
    ) -> SweepResult:
        """One refined sweep of the replica as it runs now, recorded as `slotop sweep` records."""
        return sweep_replica(
            self._settings,
            spec,
            self._control,
            self._recorder,
            resume=resume,
            cancel=cancel,
            on_progress=on_progress,
            on_step=self._on_step,
            on_measured=on_measured,
            record_readings=self._on_dials is None,
        )

    def quality_baseline(self) -> object:
        """The greedy prompts run on the replica as it runs now (the original KV dtype)."""
        prompts = configured_prompts(self._settings.launch.quality_prompts_file)
        return quality_baseline(self._spec.url, self._spec.api_key, prompts)

    def quality_check(self, baseline: object, outcome: str) -> QualityResult:
        """The same prompts again, compared token by token with the baseline."""
        assert isinstance(baseline, QualityBaseline)
        checked = quality_check(
            self._spec.url,
            self._spec.api_key,
            baseline,
            "applied" if outcome == "applied" else "rolled_back",
        )
        for line in checked.text().splitlines():
            self._write(f"  {line}")
        ratio = checked.report.position_match_ratio if checked.report is not None else None
        return QualityResult(checked.to_json(), ratio)
