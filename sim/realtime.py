"""The real-time loop: steps the engine in simulated time and sends each token at its wall-clock time.

Simulated time is wall time since the loop's origin. A request reaches the engine the API
server's time after it arrives (`apiserver`: its work, shared with the requests arriving beside
it, then the host's latency), and each token leaves that server's response time after the step
that made it. While the engine stays
busy, steps run back to back in simulated time (as a GPU's do), however long the host takes to
process them, and a request that reaches the engine mid-step waits for the next one; each token
is written when the wall clock reaches its time, and how far off that it actually left is
recorded as lag. If the host falls more than `resync_after_s` behind, simulated time pauses (the
wall-clock origin moves forward; counted and logged) rather than queueing ever more lateness, so a
host stall shows in the lag and resync metrics, never as a latency the modelled GPU would have
had. Tokens are written synchronously from this loop, one transport write per stream and step,
from frames rendered before the step's end, so hundreds of streams cost no task switches per
token and the burst at the deadline is writes alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from slotop.sim.apiserver import ApiServerQueue, ApiServerTiming, HeldRequest, api_server_timing
from slotop.sim.engine import Engine
from slotop.sim.metrics import LagRecorder, RequestFacts
from slotop.sim.openai import GenerationRequest
from slotop.sim.sse import DONE_EVENT, ChoiceStream, chunk, usage_event
from slotop.sim.types import EngineStats, StepOutcome

logger = logging.getLogger("slotop.sim")

PRECISE_WAIT_S = 0.0015
"""The last stretch before a step's end is slept with `time.sleep` (sub-millisecond accurate)
rather than on the event loop, whose epoll timeout rounds up to whole milliseconds."""

INITIAL_WRITE_COST_S = 4e-6
"""First guess of one token write's cost; then a running average of the measured bursts."""

WRITE_COST_SMOOTHING = 0.1

BURST_LEAD = 0.75
"""The share of a step's expected burst written before its tokens' time. A burst on a busy host
runs long (a preempted write, slower syscalls) far more often than short, so starting three
quarters of it early rather than half keeps its last writes on time: on bursts recorded at 256
streams on a shared 2-core host, p99 token lag 1.88 -> 1.55 ms for p50 0.26 -> 0.31 ms."""

MAX_UNSENT_BYTES = 8 * 2**20
"""A stream whose client leaves this much unread is dropped, as if it had disconnected."""

UNSENT_CHECK_MASK = 7
"""A stream's unread bytes are checked after its first token and every eighth after: a client
that reads nothing has a few hundred bytes more waiting at most, and the other tokens skip a call."""

LAG_LOG_INTERVAL_S = 5.0
"""At most one lag warning per this many seconds, summarising the late tokens since the last one."""


class Transport(Protocol):
    """The one thing the loop needs of a connection: write bytes now, and say when it has closed."""

    def write(self, data: bytes) -> None:
        """Queue ``data`` on the connection without waiting."""

    def is_closing(self) -> bool:
        """Whether the peer went away or the connection is shutting."""

    def close(self) -> None:
        """Close the connection (server shutdown)."""

    def get_write_buffer_size(self) -> int:
        """Bytes written but not yet taken by the peer."""


class ChoiceFrames(Protocol):
    """The server-sent events of one choice, in one API's shapes (`sse.ChoiceStream` is vLLM's)."""

    def frame(self, position: int) -> bytes:
        """Generated token `position` with no finish reason, as one HTTP chunk."""

    def token(self, position: int, finish_reason: str | None) -> bytes:
        """The event(s) carrying generated token `position` (not yet framed as a chunk)."""


class EngineMetrics(Protocol):
    """What the loop tells the replica's /metrics: each step, the gauges now, each token's lag."""

    lag: LagRecorder

    def record_step(
        self,
        outcome: StepOutcome,
        facts: Mapping[str, RequestFacts],
        last_token_s: Mapping[str, float],
    ) -> None:
        """Update every family from one step."""

    def record_stats(self, stats: EngineStats) -> None:
        """Note the engine's gauges as they stand now."""

    def record_aborted(self, count: int) -> None:
        """Note that `count` requests in the engine were aborted (their clients went away)."""


class Call:
    """One HTTP generation request in flight: its choices, its stream, and the future it ends with.

    Its events are vLLM's unless `streams` (one per choice) and `closer` (the events after the
    last token) give another API's.
    """

    __slots__ = (
        "_closer",
        "choice_ids",
        "created",
        "done",
        "fingerprint",
        "finish_reasons",
        "output_tokens",
        "remaining",
        "request",
        "request_id",
        "streams",
        "transport",
    )

    def __init__(
        self,
        request: GenerationRequest,
        request_id: str,
        created: int,
        fingerprint: str | None,
        transport: Transport | None,
        done: asyncio.Future[None],
        streams: list[ChoiceFrames] | None = None,
        closer: Callable[[Call], bytes] | None = None,
    ) -> None:
        self.request = request
        self.request_id = request_id
        self.created = created
        self.fingerprint = fingerprint
        self.transport = transport
        self.done = done
        count = request.num_choices
        self.output_tokens = [0] * count
        self.finish_reasons = ["length"] * count
        self.remaining = count
        self.choice_ids: list[str] = []
        self._closer = closer
        self.streams: list[ChoiceFrames] = []
        if streams is not None:
            self.streams = streams
        elif transport is not None:
            for index in range(count):
                self.streams.append(
                    ChoiceStream(
                        request.kind,
                        request_id,
                        created,
                        request.model_name,
                        index,
                        request.prompt_tokens[index // request.n],
                        request.continuous_usage,
                        None if request.include_usage else fingerprint,
                    )
                )

    @property
    def prompt_tokens_total(self) -> int:
        """Prompt tokens over every prompt of the call (each counted once, not once per choice)."""
        return sum(self.request.prompt_tokens)

    def closing_bytes(self) -> bytes:
        """The usage event (if asked for) and [DONE], sent with the last token."""
        if self._closer is not None:
            return self._closer(self)
        tail = DONE_EVENT
        if self.request.include_usage:
            usage = usage_event(
                self.request.kind,
                self.request_id,
                self.created,
                self.request.model_name,
                self.prompt_tokens_total,
                sum(self.output_tokens),
                self.fingerprint,
            )
            tail = usage + tail
        return tail


class RealtimeLoop:
    """Drives one Engine against the wall clock and delivers its tokens to the calls that wait."""

    def __init__(
        self,
        engine: Engine,
        metrics: EngineMetrics,
        resync_after_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        api_server: ApiServerTiming | None = None,
    ) -> None:
        self._engine = engine
        self._metrics = metrics
        self._resync_after_s = resync_after_s
        self._clock = clock
        self._api = api_server if api_server is not None else api_server_timing(engine.config.host)
        self._origin = clock()
        self._pending = ApiServerQueue(self._api.latency_s)
        self._choices: dict[str, tuple[Call, int]] = {}
        self._facts: dict[str, RequestFacts] = {}
        self._last_token_s: dict[str, float] = {}
        self._wake = asyncio.Event()
        self._busy = False
        self._idle = True
        self._ids = itertools.count()
        self._write_cost_s = INITIAL_WRITE_COST_S
        self._late_logged = 0
        self._next_lag_log = 0.0
        # One step's frames, reused from step to step: the call, its connection, its bytes.
        self._send_calls: list[Call] = []
        self._send_transports: list[Transport] = []
        self._send_frames: list[bytes] = []
        self._sent_at: list[float] = []

    def now_s(self) -> float:
        """Simulated time now: wall seconds since the loop's origin."""
        return self._clock() - self._origin

    @property
    def idle(self) -> bool:
        """Whether the loop has settled every step and waits for work."""
        return self._idle

    @property
    def open_calls(self) -> int:
        """Engine requests (choices) still in flight."""
        return len(self._choices)

    def submit(self, call: Call) -> None:
        """Take every choice of ``call``, arriving now; raises the engine's errors at once.

        Each prompt takes the API server's work for its kind and length, shared with the
        prompts being taken in beside it, then the host's latency (`ApiServerQueue`); vLLM's
        TTFT counts from the arrival, its queue time from the engine's scheduler.
        """
        request = call.request
        engine = self._engine
        for index in range(len(request.prompt_tokens)):
            engine.check(request.prompt_tokens[index], request.max_tokens[index])
        arrival_s = self.now_s()
        serial = next(self._ids)
        submitted: list[str] = []
        for prompt_index, prompt_tokens in enumerate(request.prompt_tokens):
            # Each prompt is rendered and tokenised once; its n choices reach the engine together.
            tokenized = prompt_tokens if request.prompt_is_text(prompt_index) else 0
            held: list[HeldRequest] = []
            for index in range(prompt_index * request.n, (prompt_index + 1) * request.n):
                choice_id = f"{serial}-{index}"
                held.append(
                    (
                        choice_id,
                        (
                            request.prompt_token_ids[prompt_index]
                            if request.prompt_token_ids
                            else prompt_tokens
                        ),
                        request.max_tokens[prompt_index],
                        request.ignore_eos,
                    )
                )
                submitted.append(choice_id)
                self._choices[choice_id] = (call, index)
                self._facts[choice_id] = RequestFacts(
                    arrival_s, prompt_tokens, request.stream, request.max_tokens[prompt_index]
                )
            work_s = self._api.request_work_s(request.kind, tokenized)
            self._pending.hold(arrival_s, work_s, tuple(held))
        call.choice_ids = submitted
        self._wake.set()

    def abort(self, call: Call) -> None:
        """Drop every unfinished choice of ``call`` (its client went away) and free its blocks."""
        at_s = max(self.now_s(), self._engine.end_s)
        aborted = 0
        for choice_id in call.choice_ids:
            if choice_id in self._choices:
                self._forget(choice_id)
                aborted += self._engine.abort(choice_id, at_s) is not None
        if aborted:
            self._metrics.record_aborted(aborted)
            self._metrics.record_stats(self._engine.stats())
        if not call.done.done():
            call.done.set_result(None)

    def _forget(self, choice_id: str) -> None:
        """Stop tracking one engine request (one still held by the API server is never admitted)."""
        self._choices.pop(choice_id, None)
        self._facts.pop(choice_id, None)
        self._last_token_s.pop(choice_id, None)

    async def run(self) -> None:
        """Step, wait for the step's tokens' time on the wall clock, deliver; forever (cancel to stop)."""
        engine = self._engine
        pending = self._pending
        response_s = self._api.response_s
        while True:
            if engine.has_work():
                start_s = self._busy_start_s()
            else:
                idle_start_s = await self._idle_start_s()
                if idle_start_s is None:
                    continue
                start_s = idle_start_s
            pending.admit(engine, start_s, self._choices)
            if not engine.has_work():
                continue
            self._idle = False
            outcome = engine.step(start_s)
            if engine.config.async_scheduling:
                # vLLM publishes the gauges a pass leaves as soon as the step before it ends.
                self._metrics.record_stats(outcome.scheduled_stats)
            self._busy = True
            deadline = self._origin + outcome.end_s + response_s
            completed = self._prepare(outcome)
            lead_s = self._write_cost_s * len(self._send_frames) * BURST_LEAD
            await self._wait_until(deadline - lead_s)
            self._send()
            self._settle(outcome, deadline, completed)

    def _busy_start_s(self) -> float:
        """The next step starts where the last one ended; pause simulated time if far behind."""
        end_s = self._engine.end_s
        if not self._busy:
            return max(end_s, self.now_s())
        behind_s = self.now_s() - end_s
        if behind_s > self._resync_after_s:
            self._origin += behind_s
            self._pending.pause(end_s, behind_s)
            for choice_id, fact in self._facts.items():
                if fact.arrival_s > end_s:
                    arrival_s = max(end_s, fact.arrival_s - behind_s)
                    self._facts[choice_id] = dataclasses.replace(fact, arrival_s=arrival_s)
            self._metrics.lag.count_resync()
            logger.warning(
                "simulated replica fell %.0f ms behind the wall clock; simulated time "
                "paused to catch up (clients saw the stall, the engine's latencies do not)",
                behind_s * 1000,
            )
        return end_s

    async def _idle_start_s(self) -> float | None:
        """With the engine empty: wait for the next request to reach it and return that time.

        None means "look again": new work came, or a wait on the event loop ended early.
        """
        self._busy = False
        ready_s = self._pending.next_ready_s()
        if ready_s is None:
            self._idle = True
            self._wake.clear()
            await self._wake.wait()
            return None
        self._idle = False
        at = self._origin + ready_s
        coarse = at - PRECISE_WAIT_S - self._clock()
        if coarse > 0:
            # A request submitted meanwhile may be due sooner: wake for it too.
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), coarse)
            return None
        remaining = at - self._clock()
        if remaining > 0:
            time.sleep(remaining)
        return max(self._engine.end_s, ready_s)

    async def _wait_until(self, deadline: float) -> None:
        """Sleep on the event loop until just before ``deadline``, then precisely up to it."""
        clock = self._clock
        coarse = deadline - PRECISE_WAIT_S - clock()
        await asyncio.sleep(coarse if coarse > 0 else 0)
        remaining = deadline - clock()
        if remaining > 0:
            time.sleep(remaining)

    def _prepare(self, outcome: StepOutcome) -> list[Call]:
        """Before the step's end: count this step's tokens per call and render their frames."""
        choices = self._choices
        finished = outcome.finished
        reasons = {f.request_id: f.finish_reason for f in finished} if finished else None
        calls = self._send_calls
        transports = self._send_transports
        frames = self._send_frames
        calls.clear()
        transports.clear()
        frames.clear()
        completed: list[Call] = []
        for choice_id in outcome.emitted_ids:
            entry = choices.get(choice_id)
            if entry is None:
                continue
            call, index = entry
            position = call.output_tokens[index]
            call.output_tokens[index] = position + 1
            reason = reasons.get(choice_id) if reasons is not None else None
            if reason is not None:
                call.finish_reasons[index] = reason
                call.remaining -= 1
                if call.remaining == 0:
                    completed.append(call)
            transport = call.transport
            if transport is None:
                continue
            if position & UNSENT_CHECK_MASK == 1 and (
                transport.get_write_buffer_size() > MAX_UNSENT_BYTES
            ):
                logger.warning(
                    "dropping stream %s: its client left %d bytes unread",
                    call.request_id,
                    transport.get_write_buffer_size(),
                )
                transport.close()
                self.abort(call)
                continue
            if reason is None:
                frame = call.streams[index].frame(position)
            else:
                payload = call.streams[index].token(position, reason)
                if call.remaining == 0:
                    payload += call.closing_bytes()
                frame = chunk(payload)
            calls.append(call)
            transports.append(transport)
            frames.append(frame)
        return completed

    def _send(self) -> None:
        """Around the tokens' time: write every frame, nothing else; stamp when each one left.

        The burst starts BURST_LEAD of its expected length before the deadline, so the tokens of
        a step straddle their time instead of all trailing it; each stream keeps its place in
        the burst from step to step, so its inter-token gaps are not skewed.
        """
        clock = self._clock
        sent_at = self._sent_at
        sent_at.clear()
        stamp = sent_at.append
        for call, transport, frame in zip(
            self._send_calls, self._send_transports, self._send_frames, strict=True
        ):
            if call.done.done() or transport.is_closing():
                stamp(-1.0)
                continue
            transport.write(frame)
            stamp(clock())

    def _settle(self, outcome: StepOutcome, deadline: float, completed: list[Call]) -> None:
        """After the writes: record lag and metrics, retire finished choices, close done calls."""
        lag = self._metrics.lag
        observe = lag.observe
        worst = 0.0
        first = last = -1.0
        written = 0
        broken: list[Call] = []
        for call, at in zip(self._send_calls, self._sent_at, strict=True):
            if at < 0.0:
                if not call.done.done():
                    broken.append(call)
                continue
            if first < 0.0:
                first = at
            last = at
            written += 1
            off = at - deadline if at >= deadline else deadline - at
            observe(off)
            if off > worst:
                worst = off
        if self._send_calls:
            lag.last_step_max_s = worst
        if written > 1:
            per_write = (last - first) / (written - 1)
            self._write_cost_s += (per_write - self._write_cost_s) * WRITE_COST_SMOOTHING
        self._metrics.record_step(outcome, self._facts, self._last_token_s)
        # Requests aborted while the step was in flight changed the engine since the outcome's
        # snapshot; the gauges say what holds now (arrivals count as waiting only once a step
        # has left them queued, as vLLM's do).
        self._metrics.record_stats(self._engine.stats())
        choices = self._choices
        end_s = outcome.end_s
        last_token_s = self._last_token_s
        for choice_id in outcome.emitted_ids:
            if choice_id in choices:
                last_token_s[choice_id] = end_s
        if outcome.finished:
            emitted = set(outcome.emitted_ids)
            for finished in outcome.finished:
                choice_id = finished.request_id
                entry = choices.get(choice_id)
                if entry is None:
                    continue
                self._forget(choice_id)
                if choice_id not in emitted:
                    call, index = entry
                    call.finish_reasons[index] = finished.finish_reason
                    call.remaining -= 1
                    if call.remaining == 0:
                        completed.append(call)
        for call in completed:
            if not call.done.done():
                call.done.set_result(None)
        for call in broken:
            self.abort(call)
        if worst > lag.late_threshold_s:
            self._log_lag(worst)

    def _log_lag(self, worst_s: float) -> None:
        """Warn, at most once per interval, that tokens leave later than their schedule."""
        now = self._clock()
        if now < self._next_lag_log:
            return
        late = self._metrics.lag.tokens_late
        logger.warning(
            "simulated replica running behind: %d tokens sent more than %.1f ms late since the "
            "last report (worst %.1f ms); client-side latencies include this lag",
            late - self._late_logged,
            self._metrics.lag.late_threshold_s * 1000,
            worst_s * 1000,
        )
        self._late_logged = late
        self._next_lag_log = now + LAG_LOG_INTERVAL_S
