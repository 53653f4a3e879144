"""The probe's closed loop against the simulated engine in virtual time: seconds of load in milliseconds.

A `VirtualRun` drives `slotop.sim.engine.Engine` behind the sim's own API-server queue, as the
real-time replica does, with a client that keeps N streams in flight as the probe's workers do:
each stream sends its next request a client turnaround after its last one ended, a stream that
the load adds opens with the probe's own opening request (`loadshape.opening_output_tokens`), a
stream rests the probe's random part of a step between its requests (`worker.rest_s`), and
a restart drains the load, swaps in a fresh engine after a downtime and resumes it. What comes out
is what the probe reports: `ProbeRecord`s and `ProbeEvent`s with their steps, streams and times,
so the decisions read it exactly as they read a real probe's.

Nothing here waits: a minute of load at a few streams takes well under a second to run.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from dataclasses import dataclass, field

import numpy as np

from slotop.collectors.probe.loadshape import (
    LengthDistribution,
    LoadShape,
    dithered_output_tokens,
    opening_output_tokens,
)
from slotop.collectors.probe.records import EventKind, ProbeEvent, ProbeRecord
from slotop.collectors.probe.worker import rest_s
from slotop.sim.apiserver import ApiServerQueue, api_server_timing
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.sglang.config import SglangArgs
from slotop.sim.sglang.config import resolve as resolve_sglang
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.types import EngineConfig, OutputLengths

TURNAROUND_S = 0.0015
"""The client's median time from a request's last chunk to its next request's send (the probe's
own work and the loopback's), as the real probe shows on the simulated replica."""
TURNAROUND_SIGMA = 0.3
"""The spread of that time (lognormal sigma): a host's scheduling never repeats to the microsecond."""


def engine_config(
    *,
    gpu: str = "h100-sxm",
    model: str = "llama-3.1-8b",
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    kv_cache_dtype: str = "auto",
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
) -> EngineConfig:
    """The engine `slotop sim` would run with these flags (ignore_eos requests: lengths exact)."""
    return resolve_engine_config(
        MODELS[model],
        GPUS[gpu],
        kv_cache_dtype=kv_cache_dtype,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        output_lengths=OutputLengths("never", 1.0, 0.0),
    )


def sglang_engine_config(
    *,
    gpu: str = "h100-sxm",
    model: str = "llama-3.1-8b",
    max_running_requests: int | None = None,
    chunked_prefill_size: int | None = None,
    kv_cache_dtype: str = "auto",
    context_length: int | None = None,
) -> EngineConfig:
    """The engine `slotop sim --engine sglang` would run with these flags (lengths exact)."""
    args = SglangArgs(
        model_path=model,
        kv_cache_dtype=kv_cache_dtype,
        max_running_requests=max_running_requests,
        chunked_prefill_size=chunked_prefill_size,
        context_length=context_length,
    )
    replica = resolve_sglang(
        args, MODELS[model], GPUS[gpu], output_lengths=OutputLengths("never", 1.0, 0.0)
    )
    return replica.engine


@dataclass(slots=True)
class _Request:
    request_id: int
    stream: int
    step: int
    sent_s: float
    in_flight: int
    prompt_tokens: int
    output_tokens: int
    opening: bool
    token_s: list[float] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Restart:
    """A restart at `at_s`: drain, `downtime_s` without a replica, then `config` serves."""

    at_s: float
    config: EngineConfig
    downtime_s: float = 2.0


@dataclass(frozen=True, slots=True)
class SetLoad:
    """The closed loop's concurrency from `at_s` on."""

    at_s: float
    concurrency: int


Change = Restart | SetLoad


class VirtualRun:
    """One closed-loop run against one engine (then another after each restart), in virtual time.

    `open_streams` False starts new streams with full-length requests, as the probe did before it
    opened them: the contrast the phase-free tests are checked against.
    """

    def __init__(
        self,
        config: EngineConfig,
        shape: LoadShape,
        *,
        seed: int = 0,
        turnaround_s: float = TURNAROUND_S,
        turnaround_sigma: float = TURNAROUND_SIGMA,
        open_streams: bool = True,
        rest: bool = True,
    ) -> None:
        self._engine = Engine(config)
        self._api = api_server_timing(config.host)
        self._queue = ApiServerQueue(self._api.latency_s)
        self._shape = shape
        self._rng = np.random.default_rng(seed)
        self._turnaround_s = turnaround_s
        self._turnaround_sigma = turnaround_sigma
        self._open_streams = open_streams
        self._rest = rest
        self._ids = itertools.count()
        self._streams = itertools.count()
        self._serial = itertools.count()
        self._arrivals: list[tuple[float, int, _Request]] = []
        self._live: dict[str, _Request] = {}
        self._concurrency = 0
        self._in_flight = 0
        self._retire = 0
        self._step = -1
        self.records: list[ProbeRecord] = []
        self.events: list[ProbeEvent] = []
        self.sent = 0
        """Requests the client has sent (or timed to send)."""
        self.step_tokens: list[tuple[float, int]] = []
        """Each step's end and its tokens as vLLM's `iteration_tokens_total` counts them: the
        prompts whose first token it made (all their tokens) and the tokens it emitted."""
        self.restarts: list[tuple[float, float, float]] = []
        """Each restart's (pause, up, resume) times."""

    # the load

    def _event(self, at_s: float, concurrency: int) -> None:
        self._step += 1
        kind = EventKind.STARTED if self._step == 0 else EventKind.CONCURRENCY_SET
        self.events.append(ProbeEvent(at_s, kind, self._step, "closed", concurrency))

    def _draw(self) -> tuple[int, int]:
        prompt = int(self._shape.prompt_lengths.sample(self._rng, 1)[0])
        output = int(self._shape.output_lengths.sample(self._rng, 1)[0])
        return prompt, output

    def _send(self, at_s: float, stream: int, opening: bool) -> None:
        prompt, output = self._draw()
        output = dithered_output_tokens(self._rng, output, self._shape.output_dither_ratio)
        if opening and self._open_streams:
            output = opening_output_tokens(self._rng, output)
        request = _Request(
            next(self._ids), stream, self._step, at_s, self._in_flight, prompt, output, opening
        )
        self._in_flight += 1
        self.sent += 1
        heapq.heappush(self._arrivals, (at_s, next(self._serial), request))

    def _set(self, at_s: float, concurrency: int) -> None:
        self._event(at_s, concurrency)
        more = concurrency - self._concurrency
        self._concurrency = concurrency
        if more > 0:
            taking = min(more, self._retire)
            self._retire -= taking
            for _ in range(more - taking):
                self._send(at_s, next(self._streams), opening=True)
        else:
            self._retire += -more

    def _ended(self, request: _Request, done_s: float) -> None:
        self._in_flight -= 1
        token_s, sent_s = request.token_s, request.sent_s
        gaps = tuple(map(operator.sub, token_s[1:], token_s[:-1]))
        self.records.append(
            ProbeRecord(
                request_id=request.request_id,
                step=request.step,
                sent_at_s=sent_s,
                done_at_s=done_s,
                in_flight_at_send=request.in_flight,
                planned_prompt_tokens=request.prompt_tokens,
                planned_output_tokens=request.output_tokens,
                ttft_s=token_s[0] - sent_s,
                itl_s=gaps,
                e2e_s=token_s[-1] - sent_s,
                chunk_count=len(token_s),
                prompt_tokens=request.prompt_tokens,
                output_tokens=len(token_s),
                finish_reason="length",
                error=None,
                stream=request.stream,
                opening=request.opening,
            )
        )
        if self._retire > 0:
            self._retire -= 1
            return
        turnaround = self._turnaround_s * float(self._rng.lognormal(0.0, self._turnaround_sigma))
        # the probe's rest before a stream's next request (off only to show what it does)
        rest = rest_s(self._rng, gaps) if self._rest else 0.0
        self._send(done_s + turnaround + rest, request.stream, opening=False)

    # the replica

    def _admit(self, until_s: float) -> None:
        arrivals = self._arrivals
        work_s = self._api.request_work_s("completion", 0)  # token ids: nothing to tokenise
        while arrivals and arrivals[0][0] <= until_s:
            at_s, _, request = heapq.heappop(arrivals)
            key = str(request.request_id)
            self._queue.hold(
                at_s, work_s, ((key, request.prompt_tokens, request.output_tokens, True),)
            )
            self._live[key] = request
        self._queue.admit(self._engine, until_s, self._live)

    def _next_start_s(self) -> float | None:
        """When the next step starts: at once while busy, else when the next request is ready."""
        engine = self._engine
        if engine.has_work():
            return engine.end_s
        ready = self._queue.next_ready_s()
        if self._arrivals:
            at_s = self._arrivals[0][0] + self._api.alone_s("completion", 0)
            ready = at_s if ready is None else min(ready, at_s)
        return None if ready is None else max(ready, engine.end_s)

    def _run_until(self, until_s: float, stop_when_idle: bool = False) -> float:
        """Step the engine until `until_s` (or until it is empty and nothing comes)."""
        response_s = self._api.response_s
        while True:
            start_s = self._next_start_s()
            if start_s is None or start_s >= until_s:
                return until_s if start_s is not None or not stop_when_idle else self._engine.end_s
            self._admit(start_s)
            if not self._engine.has_work():
                continue
            outcome = self._engine.step(start_s)
            token_s = outcome.end_s + response_s
            prefilled = sum(self._live[i].prompt_tokens for i in outcome.first_token_ids)
            if prefilled or outcome.emitted_ids:
                self.step_tokens.append((outcome.end_s, prefilled + len(outcome.emitted_ids)))
            for request_id in outcome.emitted_ids:
                self._live[request_id].token_s.append(token_s)
            for finished in outcome.finished:
                request = self._live.pop(finished.request_id)
                self._ended(request, token_s)
            if stop_when_idle and not self._engine.has_work() and not self._arrivals:
                return token_s

    # the run

    def run(self, changes: list[Change], until_s: float) -> VirtualRun:
        """Apply each change at its time (the first a `SetLoad`), and run to `until_s`.

        A restart takes as long as its drain and downtime: a change timed inside it waits for it.
        """
        now = 0.0
        for change in sorted(changes, key=lambda c: c.at_s):
            at_s = max(change.at_s, now)
            now = self._run_until(at_s)
            if isinstance(change, SetLoad):
                self._set(at_s, change.concurrency)
            else:
                now = self._restart(at_s, change)
        self._run_until(until_s)
        return self

    # one step at a time, for a driver with a clock of its own (`VirtualProbe`)

    def set_load(self, at_s: float, concurrency: int) -> None:
        """Run to `at_s`, then keep `concurrency` streams in flight from there."""
        self._run_until(at_s)
        self._set(at_s, concurrency)

    def advance(self, until_s: float) -> None:
        """Run every step that starts before `until_s`."""
        self._run_until(until_s)

    def in_flight_sent_s(self) -> list[float]:
        """When each request still in flight was sent (queued, in the engine, or just ended)."""
        sent = [r.sent_s for r in self._live.values()]
        return sent + [request.sent_s for _, _, request in self._arrivals]

    def openings_in_flight(self) -> int:
        """Opening requests still in flight."""
        live = [r for r in self._live.values() if r.opening]
        return len(live) + sum(1 for _, _, r in self._arrivals if r.opening)

    @property
    def concurrency(self) -> int:
        """The closed loop's level now."""
        return self._concurrency

    @property
    def engine(self) -> Engine:
        """The engine serving now (a restart swaps it)."""
        return self._engine

    def _restart(self, at_s: float, change: Restart) -> float:
        """Pause (a step at 0), let the requests end, swap the engine after the downtime, resume
        at the same load; returns when the load resumed."""
        load = self._concurrency
        self._set(at_s, 0)
        drained_s = max(self._run_until(float("inf"), stop_when_idle=True), at_s)
        up_s = drained_s + change.downtime_s
        self._engine = Engine(change.config)
        self._api = api_server_timing(change.config.host)
        self._queue = ApiServerQueue(self._api.latency_s)
        self.restarts.append((at_s, up_s, up_s))
        self._set(up_s, load)
        return up_s


def fixed_shape(prompt_tokens: int = 512, output_tokens: int = 128) -> LoadShape:
    """The probe's default load: fixed prompt and output lengths, end of sequence ignored."""
    return LoadShape(
        prompt_lengths=LengthDistribution("fixed", prompt_tokens),
        output_lengths=LengthDistribution("fixed", output_tokens),
    )


def varied_shape(prompt_tokens: int = 512, output_tokens: int = 128) -> LoadShape:
    """Lengths that vary from request to request (lognormal, spread half the mean)."""
    return LoadShape(
        prompt_lengths=LengthDistribution("lognormal", prompt_tokens, prompt_tokens // 2),
        output_lengths=LengthDistribution("lognormal", output_tokens, output_tokens // 2),
    )
