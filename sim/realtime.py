"""The real-time loop: steps the engine in simulated time and sends each token at its wall-clock time.

Simulated time is wall time since the loop's origin. While the engine stays busy, steps run back
to back in simulated time (as a GPU's do), however long the host takes to process them; each
token is written when the wall clock reaches its step's end, and how far off that it actually left
is recorded as lag. If the host falls more than `resync_after_s` behind, simulated time pauses
(the wall-clock origin moves forward; counted and logged) rather than queueing ever more
lateness, so a host stall shows in the lag and resync metrics, never as a latency the modelled GPU
would have had. Tokens are written synchronously from this loop, one transport write per token,
so hundreds of streams cost no task switches per token.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Protocol

from slotop.sim.engine import Engine
from slotop.sim.metrics import RequestFacts, SimMetrics
from slotop.sim.openai import GenerationRequest
from slotop.sim.sse import DONE_EVENT, ChoiceStream, usage_event
from slotop.sim.types import StepOutcome

logger = logging.getLogger("slotop.sim")

PRECISE_WAIT_S = 0.0015
"""The last stretch before a step's end is slept with `time.sleep` (sub-millisecond accurate)
rather than on the event loop, whose epoll timeout rounds up to whole milliseconds."""

INITIAL_WRITE_COST_S = 4e-6
"""First guess of one token write's cost; then a running average of the measured bursts."""

WRITE_COST_SMOOTHING = 0.1

MAX_UNSENT_BYTES = 8 * 2**20
"""A stream whose client leaves this much unread is dropped, as if it had disconnected."""

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


class Call:
    """One HTTP generation request in flight: its choices, its stream, and the future it ends with."""

    __slots__ = (
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
        self.streams: list[ChoiceStream] = []
        if transport is not None:
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


_Send = tuple[Call, Transport, bytes]
"""One frame to write at a step's end: the call it belongs to, its connection, its bytes."""


class RealtimeLoop:
    """Drives one Engine against the wall clock and delivers its tokens to the calls that wait."""

    def __init__(
        self,
        engine: Engine,
        metrics: SimMetrics,
        resync_after_s: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._metrics = metrics
        self._resync_after_s = resync_after_s
        self._clock = clock
        self._origin = clock()
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
        """Queue every choice of ``call`` in the engine, arriving now; raises the engine's errors.

        While steps run back to back, a request that comes in after the last step's end (the
        host was busy, or stalled) arrives at that end: the next step starts there.
        """
        request = call.request
        arrival_s = self.now_s()
        if self._busy and arrival_s > self._engine.end_s:
            arrival_s = self._engine.end_s
        serial = next(self._ids)
        submitted: list[str] = []
        try:
            for index in range(request.num_choices):
                choice_id = f"{serial}-{index}"
                prompt_tokens = request.prompt_tokens[index // request.n]
                self._engine.submit(
                    choice_id,
                    (
                        request.prompt_token_ids[index // request.n]
                        if request.prompt_token_ids
                        else prompt_tokens
                    ),
                    request.max_tokens[index // request.n],
                    request.ignore_eos,
                    arrival_s,
                )
                submitted.append(choice_id)
                self._choices[choice_id] = (call, index)
                self._facts[choice_id] = RequestFacts(arrival_s, prompt_tokens)
        except Exception:
            for choice_id in submitted:
                self._forget(choice_id)
                self._engine.abort(choice_id, arrival_s)
            raise
        call.choice_ids = submitted
        self._wake.set()

    def abort(self, call: Call) -> None:
        """Drop every unfinished choice of ``call`` (its client went away) and free its blocks."""
        at_s = max(self.now_s(), self._engine.end_s)
        aborted = False
        for choice_id in call.choice_ids:
            if choice_id in self._choices:
                self._forget(choice_id)
                self._engine.abort(choice_id, at_s)
                aborted = True
        if aborted:
            self._metrics.record_stats(self._engine.stats())
        if not call.done.done():
            call.done.set_result(None)

    def _forget(self, choice_id: str) -> None:
        """Stop tracking one engine request."""
        self._choices.pop(choice_id, None)
        self._facts.pop(choice_id, None)
        self._last_token_s.pop(choice_id, None)

    async def run(self) -> None:
        """Step, wait for the step's end on the wall clock, deliver; forever (cancel to stop)."""
        engine = self._engine
        clock = self._clock
        while True:
            if not engine.has_work():
                self._busy = False
                self._idle = True
                self._wake.clear()
                await self._wake.wait()
                continue
            self._idle = False
            now_s = clock() - self._origin
            end_s = engine.end_s
            if not self._busy:
                start_s = max(end_s, now_s)
            else:
                start_s = end_s
                behind_s = now_s - end_s
                if behind_s > self._resync_after_s:
                    self._origin += behind_s
                    self._metrics.lag.count_resync()
                    logger.warning(
                        "simulated replica fell %.0f ms behind the wall clock; simulated time "
                        "paused to catch up (clients saw the stall, the engine's latencies do not)",
                        behind_s * 1000,
                    )
            outcome = engine.step(start_s)
            self._busy = True
            deadline = self._origin + outcome.end_s
            sends, completed = self._prepare(outcome)
            await self._wait_until(deadline - self._write_cost_s * len(sends) / 2)
            sent_at = self._send(sends)
            self._settle(outcome, deadline, sends, sent_at, completed)

    async def _wait_until(self, deadline: float) -> None:
        """Sleep on the event loop until just before ``deadline``, then precisely up to it."""
        clock = self._clock
        coarse = deadline - PRECISE_WAIT_S - clock()
        await asyncio.sleep(coarse if coarse > 0 else 0)
        remaining = deadline - clock()
        if remaining > 0:
            time.sleep(remaining)

    def _prepare(self, outcome: StepOutcome) -> tuple[list[_Send], list[Call]]:
        """Before the step's end: count this step's tokens per call and render their frames."""
        choices = self._choices
        reasons = {f.request_id: f.finish_reason for f in outcome.finished}
        sends: list[_Send] = []
        completed: list[Call] = []
        for choice_id in outcome.emitted_ids:
            entry = choices.get(choice_id)
            if entry is None:
                continue
            call, index = entry
            position = call.output_tokens[index]
            call.output_tokens[index] = position + 1
            reason = reasons.get(choice_id)
            if reason is not None:
                call.finish_reasons[index] = reason
                call.remaining -= 1
                if call.remaining == 0:
                    completed.append(call)
            transport = call.transport
            if transport is None:
                continue
            if transport.get_write_buffer_size() > MAX_UNSENT_BYTES:
                logger.warning(
                    "dropping stream %s: its client left %d bytes unread",
                    call.request_id,
                    transport.get_write_buffer_size(),
                )
                transport.close()
                self.abort(call)
                continue
            payload = call.streams[index].token(position, reason)
            if reason is not None and call.remaining == 0:
                payload += call.closing_bytes()
            sends.append((call, transport, b"%x\r\n%s\r\n" % (len(payload), payload)))
        return sends, completed

    def _send(self, sends: list[_Send]) -> list[float]:
        """Around the step's end: write every frame, nothing else; return when each one left.

        The burst starts half its expected length before the deadline, so the tokens of a
        step straddle their simulated time instead of all trailing it; each stream keeps its
        place in the burst from step to step, so its inter-token gaps are not skewed.
        """
        clock = self._clock
        sent_at: list[float] = []
        stamp = sent_at.append
        for call, transport, frame in sends:
            if call.done.done() or transport.is_closing():
                stamp(-1.0)
                continue
            transport.write(frame)
            stamp(clock())
        return sent_at

    def _settle(
        self,
        outcome: StepOutcome,
        deadline: float,
        sends: list[_Send],
        sent_at: list[float],
        completed: list[Call],
    ) -> None:
        """After the writes: record lag and metrics, retire finished choices, close done calls."""
        lag = self._metrics.lag
        worst = 0.0
        first = last = -1.0
        written = 0
        broken: list[Call] = []
        for (call, _transport, _frame), at in zip(sends, sent_at, strict=True):
            if at < 0.0:
                if not call.done.done():
                    broken.append(call)
                continue
            if first < 0.0:
                first = at
            last = at
            written += 1
            off = at - deadline if at >= deadline else deadline - at
            lag.observe(off)
            if off > worst:
                worst = off
        if sends:
            lag.last_step_max_s = worst
        if written > 1:
            per_write = (last - first) / (written - 1)
            self._write_cost_s += (per_write - self._write_cost_s) * WRITE_COST_SMOOTHING
        self._metrics.record_step(outcome, self._facts, self._last_token_s)
        # Requests aborted or submitted while the step was in flight changed the engine since
        # the outcome's snapshot; the gauges say what holds now.
        self._metrics.record_stats(self._engine.stats())
        choices = self._choices
        end_s = outcome.end_s
        last_token_s = self._last_token_s
        for choice_id in outcome.emitted_ids:
            if choice_id in choices:
                last_token_s[choice_id] = end_s
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
