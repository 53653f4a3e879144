"""The operator's dial on the load probe: safety rules, plans that say what they will do, events.

Every change goes plan (pure: checked against the caps and the loopback guard, described in
words) → apply (turns the probe) → event (stamped, kept for the session's timeline). Load on a
replica off this machine needs `allow_remote_load`; nothing is sent before a start is applied.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol
from urllib.parse import urlsplit

from slotop.actions.errors import LoadRefusedError
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import (
    LengthDistribution,
    LoadShape,
    PromptItem,
    load_prompt_file,
)
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.config import LoadSettings, Settings
from slotop.redact import shown_url

ChangeKind = Literal["start", "concurrency", "rate", "stop"]


def is_loopback_url(url: str) -> bool:
    """Whether a URL names this machine: localhost, 127.0.0.0/8, ::1, or the unspecified address."""
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a name other than localhost may resolve anywhere
    return address.is_loopback or address.is_unspecified


def load_shape_from_settings(load: LoadSettings, base_dir: Path | None = None) -> LoadShape:
    """The probe's load shape from [load], reading the prompts file when one is named."""
    items: tuple[PromptItem, ...] = ()
    if load.prompts_file:
        path = Path(load.prompts_file)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        items = load_prompt_file(path, load.endpoint)
    return LoadShape(
        endpoint=load.endpoint,
        prompt_form=load.prompt_form,
        prompt_lengths=LengthDistribution(
            load.prompt_distribution, load.prompt_tokens, load.prompt_spread_tokens
        ),
        output_lengths=LengthDistribution(
            load.output_distribution, load.output_tokens, load.output_spread_tokens
        ),
        prompt_items=items,
        ignore_eos=load.ignore_eos,
        burstiness=load.burstiness,
        max_concurrency=load.max_concurrency,
        max_rate_rps=load.max_rate_rps,
        shared_prefix_tokens=load.shared_prefix_tokens,
        shared_prefix_ratio=load.shared_prefix_ratio,
        workers=None if load.workers == "auto" else load.workers,
        output_dither_ratio=load.output_dither_ratio,
    )


def probe_target_from_settings(settings: Settings) -> ProbeTarget:
    """Where the probe sends load: the replica the app watches, with its key and timeout."""
    return ProbeTarget(
        base_url=settings.replica.url,
        api_key=settings.replica.api_key,
        request_timeout_s=settings.load.request_timeout_s,
    )


@dataclass(frozen=True, slots=True)
class LoadPlan:
    """One checked change of the load, with the words a confirmation shows."""

    kind: ChangeKind
    url: str
    concurrency: int | None = None
    rate_rps: float | None = None
    burstiness: float | None = None
    summary: str = ""


@dataclass(frozen=True, slots=True)
class LoadEvent:
    """A plan that was applied, and when."""

    at_s: float
    plan: LoadPlan


def _lengths_words(name: str, lengths: LengthDistribution) -> str:
    if lengths.kind == "fixed" or lengths.spread_tokens == 0:
        return f"{name} {lengths.mean_tokens} tokens"
    return f"{name} {lengths.kind} {lengths.mean_tokens} ± {lengths.spread_tokens} tokens"


def _shape_words(shape: LoadShape) -> str:
    prompts = (
        f"prompts replayed from a file ({len(shape.prompt_items)} lines)"
        if shape.prompt_items
        else _lengths_words("prompts", shape.prompt_lengths)
    )
    if shape.shared_prefix_tokens:
        prompts += (
            f" after a {shape.shared_prefix_tokens:,}-token prefix that "
            f"{shape.shared_prefix_ratio:.0%} of them share"
        )
    eos = ", end-of-sequence ignored" if shape.ignore_eos else ""
    return f"{prompts}, {_lengths_words('outputs', shape.output_lengths)}{eos}"


def _check_concurrency(concurrency: int, shape: LoadShape) -> None:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 0:
        raise LoadRefusedError(f"concurrency {concurrency!r}; it must be a whole number ≥ 0")
    if concurrency > shape.max_concurrency:
        raise LoadRefusedError(
            f"concurrency {concurrency} is above the cap of {shape.max_concurrency}; "
            "raise [load] max_concurrency to go higher"
        )


def _check_rate(rate_rps: float, burstiness: float | None, shape: LoadShape) -> None:
    if not (math.isfinite(rate_rps) and rate_rps >= 0):
        raise LoadRefusedError(f"request rate {rate_rps!r} req/s; it must be a finite number ≥ 0")
    if rate_rps > shape.max_rate_rps:
        raise LoadRefusedError(
            f"request rate {rate_rps:g} req/s is above the cap of {shape.max_rate_rps:g}; "
            "raise [load] max_rate_rps to go higher"
        )
    if burstiness is not None and not burstiness > 0:
        raise LoadRefusedError(f"burstiness {burstiness!r}; it must be above 0 (1 is Poisson)")


def plan_start(
    target: ProbeTarget,
    shape: LoadShape,
    allow_remote_load: bool,
    *,
    concurrency: int | None = None,
    rate_rps: float | None = None,
) -> LoadPlan:
    """Plan turning the probe on, closed loop at `concurrency` or open loop at `rate_rps`."""
    url = shown_url(target.url(shape.endpoint))
    if not allow_remote_load and not is_loopback_url(target.url(shape.endpoint)):
        raise LoadRefusedError(
            f"{shown_url(target.base_url)} is not on this machine; load on another replica needs "
            "--allow-remote-load (or [load] allow_remote_load = true)"
        )
    if rate_rps is not None:
        if concurrency is not None:
            raise LoadRefusedError("give a concurrency or a request rate, not both")
        _check_rate(rate_rps, None, shape)
        level = (
            f"{rate_rps:g} requests/s (gamma gaps, burstiness {shape.burstiness:g}), "
            f"at most {shape.max_concurrency} in flight"
        )
        return LoadPlan(
            "start",
            url,
            rate_rps=rate_rps,
            summary=f"Send {level} to {url}: {_shape_words(shape)}.",
        )
    concurrency = 1 if concurrency is None else concurrency
    _check_concurrency(concurrency, shape)
    kv_words = ""
    if not shape.prompt_items:
        per_request = (
            shape.shared_prefix_tokens
            + shape.prompt_lengths.mean_tokens
            + shape.output_lengths.mean_tokens
        )
        kv_words = (
            f" At full length they hold about {concurrency * per_request:,} tokens of KV cache."
        )
    requests = "1 request" if concurrency == 1 else f"{concurrency} requests"
    summary = f"Keep {requests} in flight against {url}: {_shape_words(shape)}.{kv_words}"
    return LoadPlan("start", url, concurrency=concurrency, summary=summary)


def plan_concurrency(
    url: str, concurrency: int, shape: LoadShape, status: ProbeStatus | None
) -> LoadPlan:
    """Plan a closed-loop step: up sends more at once, down lets in-flight requests finish."""
    _check_concurrency(concurrency, shape)
    in_flight = status.in_flight if status is not None else None
    if in_flight is not None and concurrency < in_flight:
        how = f"the {in_flight} in flight finish and no new request goes out above {concurrency}"
    elif in_flight is not None and concurrency > in_flight:
        more = concurrency - in_flight
        how = (
            "1 more request goes out at once"
            if more == 1
            else f"{more} more requests go out at once"
        )
    else:
        how = "the load holds"
    return LoadPlan(
        "concurrency", url, concurrency=concurrency, summary=f"Concurrency → {concurrency}: {how}."
    )


def plan_rate(url: str, rate_rps: float, burstiness: float | None, shape: LoadShape) -> LoadPlan:
    """Plan an open-loop step to `rate_rps` (0 sends nothing new)."""
    _check_rate(rate_rps, burstiness, shape)
    shape_words = f", burstiness {burstiness:g}" if burstiness is not None else ""
    return LoadPlan(
        "rate",
        url,
        rate_rps=rate_rps,
        burstiness=burstiness,
        summary=f"Rate → {rate_rps:g} requests/s{shape_words}, at most {shape.max_concurrency} "
        "in flight.",
    )


def plan_stop(url: str, status: ProbeStatus | None) -> LoadPlan:
    """Plan turning the probe off: in-flight requests are cancelled at once."""
    in_flight = status.in_flight if status is not None else 0
    return LoadPlan("stop", url, summary=f"Stop the load: cancel {in_flight} requests in flight.")


class ProbeHandle(Protocol):
    """What the controller needs of a running probe (`Probe`, or a fake in tests)."""

    @property
    def running(self) -> bool: ...
    def set_concurrency(self, concurrency: int) -> None: ...
    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None: ...
    def stop(self, timeout_s: float = 5.0) -> None: ...
    def status(self) -> ProbeStatus | None: ...
    def drain_records(self) -> list[ProbeRecord]: ...
    def events(self) -> list[ProbeEvent]: ...


StartProbe = Callable[[ProbeTarget, LoadShape, int | None, float | None], ProbeHandle]


def _start_real_probe(
    target: ProbeTarget, shape: LoadShape, concurrency: int | None, rate_rps: float | None
) -> ProbeHandle:
    return Probe.start(target, shape, concurrency=concurrency, rate_rps=rate_rps)


class ProbeControl:
    """Owns the probe for one session: plans against its state, applies, and keeps the events."""

    def __init__(
        self,
        target: ProbeTarget,
        shape: LoadShape,
        allow_remote_load: bool,
        *,
        start_probe: StartProbe = _start_real_probe,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._target = target
        self._shape = shape
        self._allow_remote_load = allow_remote_load
        self._start_probe = start_probe
        self._clock = clock
        self._probe: ProbeHandle | None = None
        self._events: list[LoadEvent] = []

    @property
    def probe(self) -> ProbeHandle | None:
        """The running probe, or None while the load is off."""
        return self._probe if self._probe is not None and self._probe.running else None

    @property
    def url(self) -> str:
        """The URL the load goes to, as slotop shows it (no user info)."""
        return shown_url(self._target.url(self._shape.endpoint))

    def events(self) -> list[LoadEvent]:
        """Every applied change, oldest first."""
        return list(self._events)

    def plan_start(
        self, *, concurrency: int | None = None, rate_rps: float | None = None
    ) -> LoadPlan:
        """Plan turning the load on; refused while it is already on."""
        if self.probe is not None:
            raise LoadRefusedError("the load is already on; step it, or stop it first")
        return plan_start(
            self._target,
            self._shape,
            self._allow_remote_load,
            concurrency=concurrency,
            rate_rps=rate_rps,
        )

    def plan_concurrency(self, concurrency: int) -> LoadPlan:
        """Plan a closed-loop step of the running load."""
        return plan_concurrency(self.url, concurrency, self._shape, self._running().status())

    def plan_rate(self, rate_rps: float, burstiness: float | None = None) -> LoadPlan:
        """Plan an open-loop step of the running load."""
        self._running()
        return plan_rate(self.url, rate_rps, burstiness, self._shape)

    def plan_stop(self) -> LoadPlan:
        """Plan turning the load off."""
        return plan_stop(self.url, self._running().status())

    def apply(self, plan: LoadPlan) -> LoadEvent:
        """Carry out a plan made by this controller, and record it as an event."""
        if plan.url != self.url:
            raise LoadRefusedError(f"the plan is for {plan.url}, but this probe loads {self.url}")
        if plan.kind == "start":
            if self.probe is not None:
                raise LoadRefusedError("the load is already on; step it, or stop it first")
            self.plan_start(concurrency=plan.concurrency, rate_rps=plan.rate_rps)  # re-check
            self._probe = self._start_probe(
                self._target, self._shape, plan.concurrency, plan.rate_rps
            )
        elif plan.kind == "concurrency" and plan.concurrency is not None:
            _check_concurrency(plan.concurrency, self._shape)
            self._running().set_concurrency(plan.concurrency)
        elif plan.kind == "rate" and plan.rate_rps is not None:
            _check_rate(plan.rate_rps, plan.burstiness, self._shape)
            self._running().set_rate(plan.rate_rps, plan.burstiness)
        elif plan.kind == "stop":
            self._running().stop()
        else:
            raise LoadRefusedError(f"a {plan.kind} plan without its value cannot be applied")
        event = LoadEvent(self._clock(), plan)
        self._events.append(event)
        return event

    def _running(self) -> ProbeHandle:
        probe = self.probe
        if probe is None:
            raise LoadRefusedError("the load is off; turn it on first")
        return probe
