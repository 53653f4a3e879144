"""The load loop of one probe worker: keeps its share of the load at its level, and collects what ends.

Each command is applied at once (stepping up launches requests immediately, stepping down lets
in-flight ones finish and launches fewer) and stamped as an event. With several workers each
holds a share (`Share`): its part of the concurrency, every n-th arrival of one open-loop schedule
that all of them draw alike, and request and stream ids of its own, so together they send what
one would.

A closed loop has no phase memory: a stream the load adds opens with a request cut to a random
share of its length (`loadshape.opening_output_tokens`), and every request's output length is
dithered around its drawn value (`loadshape.dithered_output_tokens`), so however the streams were
started they do not prefill in step, and they never fall into step later. And a stream rests a
random part of one engine step before its next request (`rest_s`), so its requests reach the
replica at any point of the step in progress, as a crowd of clients' would, rather than at the
one offset the probe's own turnaround sets. Without the rest that offset shows in TTFT: on the
simulated H100 at 5 in flight (512/128 tokens, in virtual time, three seeds each) TTFT p50 read
33.2, 32.3, 30.9 and 29.3 ms for a turnaround of 0.5, 1.5, 3 and 6 ms; with it, 30.2 to 30.8 ms
for all four (`python -m bench.bench_rest`), so the probe's speed no longer decides the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import httpx
import numpy as np

from slotop.collectors.probe.loadshape import (
    LoadShape,
    PlannedRequest,
    PromptSource,
    dithered_output_tokens,
    gamma_gaps_s,
    opening_output_tokens,
)
from slotop.collectors.probe.records import (
    ErrorClass,
    EventKind,
    LoadMode,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
)
from slotop.collectors.probe.stream import (
    ProbeTarget,
    StreamMeter,
    StreamOutcome,
    request_body,
    stream_request,
)

ERROR_BACKOFF_S = 0.1
"""A failed request holds its slot this long before it is replaced, so a dead replica is not
hammered by a closed loop that would otherwise retry as fast as connections are refused."""
_GAP_BATCH = 256
_GAP_STREAM = 0x6A9
"""Seeds each open-loop step's arrival gaps with (seed, this, step): every worker draws the same."""

Streamer = Callable[[str, bytes, Mapping[str, str], StreamMeter, StreamOutcome], Awaitable[None]]
"""Posts one streaming request (url, body, headers), feeding the meter and filling the outcome."""


@dataclass(frozen=True, slots=True)
class Share:
    """Which of `count` workers this is; it takes `index`, `index + count`, … of everything."""

    index: int = 0
    count: int = 1

    def of(self, total: int) -> int:
        """This worker's part of `total` (the parts differ by at most one and add up to it)."""
        return total // self.count + (1 if self.index < total % self.count else 0)


ONE_WORKER = Share()
"""The share of a probe with one worker: everything."""


@dataclass(frozen=True, slots=True)
class SetConcurrency:
    """Closed loop: keep this many requests in flight (0 sends nothing new)."""

    concurrency: int


@dataclass(frozen=True, slots=True)
class SetRate:
    """Open loop: send at this many requests per second with gamma gaps (0 sends nothing new)."""

    rate_rps: float
    burstiness: float | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    """Cancel every in-flight request, report them, and end the process."""


def stopped_detail(cancelled: int) -> str:
    """The words of a STOPPED event."""
    return f"{cancelled} in-flight requests cancelled"


def cancelled_in(detail: str) -> int:
    """How many requests a STOPPED event's words say were cancelled (0 when they say none)."""
    first = detail.split(" ", 1)[0]
    return int(first) if first.isdigit() else 0


Command = SetConcurrency | SetRate | Stop


def rest_s(rng: np.random.Generator, gaps_s: Sequence[float]) -> float:
    """How long a stream rests before its next request: a uniform share of one engine step, the
    median gap between the tokens of the request that just ended (0 without gaps)."""
    if not len(gaps_s):
        return 0.0
    return float(rng.uniform(0.0, float(np.median(gaps_s))))


class EpochClock:
    """Wall-clock seconds derived from the monotonic performance counter, so they never jump."""

    def __init__(self) -> None:
        self._offset_s = time.time() - time.perf_counter()

    def epoch_s(self, perf_s: float) -> float:
        """The wall-clock time of a performance-counter reading."""
        return self._offset_s + perf_s


async def resolve_model(client: httpx.AsyncClient, target: ProbeTarget) -> str | None:
    """The target's model, else the first one the replica lists; None when it cannot say."""
    if target.model:
        return target.model
    try:
        response = await client.get(target.base_url.rstrip("/") + "/v1/models")
        models = response.json().get("data") or []
        model_id = models[0].get("id") if models else None
        return model_id if isinstance(model_id, str) else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


def settled_s(open_streams: Iterable[StreamMeter], now_s: float) -> float:
    """The time no request still open can end before: a request ends at its last token, so one
    whose stream has said it is done (a finish reason, or [DONE]) but is still open ends at its
    last token, perhaps before now; any other ends at a token still to come, or at a failure,
    after now."""
    ended = [
        meter.last_at_s
        for meter in open_streams
        if meter.last_at_s is not None and (meter.finish_reason is not None or meter.done)
    ]
    return min([now_s, *ended])


class LoadRunner:
    """Keeps its share of the load at the commanded level on one event loop; collects what ends.

    Requests go through `streamer` where one is given (the worker's own client), else through
    `client` (httpx; what https replicas and the tests' mock transports use).
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        target: ProbeTarget,
        shape: LoadShape,
        model: str | None,
        emit: Callable[[ProbeRecord | ProbeEvent], None],
        clock: EpochClock,
        *,
        share: Share = ONE_WORKER,
        streamer: Streamer | None = None,
    ) -> None:
        self._client = client
        self._target = target
        self._shape = shape
        self._model = model
        self._emit = emit
        self._clock = clock
        self._share = share
        self._stream: Streamer = streamer or self._stream_with_client
        base = shape.seed or 0  # the probe draws a seed at its start (`LoadShape.with_seed`)
        seed = base if share.index == 0 else [base, share.index]
        self._rng = np.random.default_rng(seed)
        self._prompts = PromptSource(shape, self._rng, share.index, share.count)
        self._max_in_flight = max(1, share.of(shape.max_concurrency))
        self._headers = target.headers()
        self._url = target.url(shape.endpoint)
        self._in_flight: dict[asyncio.Task[None], tuple[int, int | None]] = {}
        """Each request in flight: its id, and its stream (None in an open loop)."""
        self._free_streams: list[int] = []
        self._next_stream = share.index
        self._openings: set[int] = set()
        self._rests: dict[int, float] = {}
        """How long each stream whose request just ended rests before its next (by request id)."""
        self._resting: dict[int, asyncio.TimerHandle] = {}
        """The streams resting now, each with the timer that sends its next request."""
        self._expired: set[int] = set()
        self._meters: dict[int, StreamMeter] = {}
        """Each request still streaming, by id: when it was sent, and what it has had so far."""
        self._slot_freed = asyncio.Event()
        self._arrivals: asyncio.Task[None] | None = None
        self._mode: LoadMode = "closed"
        self._concurrency = 0
        self._own_concurrency = 0
        self._rate_rps = 0.0
        self._burstiness = shape.burstiness
        self._step = -1
        self._next_id = share.index
        self._stopping = False
        self.sent_total = 0
        self.done_total = 0
        self.failed_total = 0

    def status(self) -> ProbeStatus:
        """The counters now."""
        closed = self._mode == "closed"
        now = time.perf_counter()
        return ProbeStatus(
            at_s=self._clock.epoch_s(now),
            step=self._step,
            mode=self._mode,
            target_concurrency=self._concurrency if closed else None,
            rate_rps=None if closed else self._rate_rps,
            in_flight=len(self._in_flight),
            sent_total=self.sent_total,
            done_total=self.done_total,
            failed_total=self.failed_total,
            streaming_sent_at_s=tuple(
                sorted(self._clock.epoch_s(meter.sent_at_s) for meter in self._meters.values())
            ),
            openings_streaming=len(self._openings),
            settled_at_s=self._clock.epoch_s(settled_s(self._meters.values(), now)),
        )

    def apply(self, command: Command, kind: EventKind | None = None) -> None:
        """Change the load now, and emit the event that says so."""
        if self._stopping or isinstance(command, Stop):
            return
        self._step += 1
        if isinstance(command, SetConcurrency):
            self._mode = "closed"
            self._concurrency = max(0, min(command.concurrency, self._shape.max_concurrency))
            self._own_concurrency = self._share.of(self._concurrency)
            self._cancel_arrivals()
            event_kind = kind or EventKind.CONCURRENCY_SET
        else:
            self._mode = "open"
            self._rate_rps = max(0.0, min(command.rate_rps, self._shape.max_rate_rps))
            if command.burstiness is not None:
                self._burstiness = command.burstiness
            self._cancel_arrivals()
            if self._rate_rps > 0:
                self._arrivals = asyncio.get_running_loop().create_task(self._arrive(self._step))
            event_kind = kind or EventKind.RATE_SET
        closed = self._mode == "closed"
        self._emit(
            ProbeEvent(
                at_s=self._clock.epoch_s(time.perf_counter()),
                kind=event_kind,
                step=self._step,
                mode=self._mode,
                concurrency=self._concurrency if closed else None,
                rate_rps=None if closed else self._rate_rps,
                burstiness=None if closed else self._burstiness,
            )
        )
        self._fill(opening=True)

    async def stop(self) -> None:
        """Cancel the arrivals and every in-flight request, wait for their records, emit STOPPED."""
        self._stopping = True
        self._cancel_arrivals()
        for timer in self._resting.values():
            timer.cancel()
        self._resting.clear()
        tasks = list(self._in_flight)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._emit(
            ProbeEvent(
                at_s=self._clock.epoch_s(time.perf_counter()),
                kind=EventKind.STOPPED,
                step=self._step,
                detail=stopped_detail(len(tasks)),
            )
        )

    def _cancel_arrivals(self) -> None:
        if self._arrivals is not None:
            self._arrivals.cancel()
            self._arrivals = None

    def _fill(self, *, opening: bool) -> None:
        """Launch requests until the closed loop's share is in flight: new streams when the load
        rose (`opening`), else the next request of a stream whose last one ended."""
        if self._mode != "closed":
            return
        while not self._stopping and self._streams() < self._own_concurrency:
            self._launch(self._take_stream(), opening=opening)

    def _streams(self) -> int:
        """The closed loop's streams now: those with a request in flight and those resting."""
        return len(self._in_flight) + len(self._resting)

    def _take_stream(self) -> int:
        """The stream the next closed-loop request belongs to: the one freed last, else a new one."""
        if self._free_streams:
            return self._free_streams.pop()
        stream = self._next_stream
        self._next_stream += self._share.count
        return stream

    async def _arrive(self, step: int) -> None:
        loop = asyncio.get_running_loop()
        rate, burstiness = self._rate_rps, self._burstiness
        rng = np.random.default_rng([self._shape.seed or 0, _GAP_STREAM, step])
        next_at = loop.time()
        gaps: list[float] = []
        arrival = -1
        while not self._stopping:
            if not gaps:
                gaps = gamma_gaps_s(rng, rate, burstiness, _GAP_BATCH).tolist()
            next_at += gaps.pop()
            arrival += 1
            if arrival % self._share.count != self._share.index:
                continue  # another worker's arrival
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            while len(self._in_flight) >= self._max_in_flight:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                next_at = loop.time()
            self._launch(None, opening=False)

    def _launch(self, stream: int | None, *, opening: bool) -> None:
        planned = self._prompts.next_request()
        if stream is not None:
            output = dithered_output_tokens(
                self._rng, planned.output_tokens, self._shape.output_dither_ratio
            )
            if opening:
                output = opening_output_tokens(self._rng, output)
            planned = dataclasses.replace(planned, output_tokens=output)
        request_id = self._next_id
        self._next_id += self._share.count
        opening = opening and stream is not None
        if opening:  # counted from the launch: a status sent before the task first runs sees it
            self._openings.add(request_id)
        task = asyncio.get_running_loop().create_task(
            self._request(request_id, planned, stream, opening)
        )
        self._in_flight[task] = (request_id, stream)
        task.add_done_callback(self._ended)
        self.sent_total += 1

    def _ended(self, task: asyncio.Task[None]) -> None:
        request_id, stream = self._in_flight.pop(task, (-1, None))
        self._openings.discard(request_id)
        rest = self._rests.pop(request_id, 0.0)
        self._slot_freed.set()
        if stream is None:
            self._fill(opening=False)
            return
        wanted = self._mode == "closed" and not self._stopping
        if wanted and rest > 0 and self._streams() < self._own_concurrency:
            loop = asyncio.get_running_loop()
            self._resting[stream] = loop.call_later(rest, self._rested, stream)
            return
        self._free_streams.append(stream)
        self._fill(opening=False)

    def _rested(self, stream: int) -> None:
        """A stream's rest is over: its next request, unless the load went down meanwhile."""
        del self._resting[stream]
        if (
            self._mode == "closed"
            and not self._stopping
            and self._streams() < self._own_concurrency
        ):
            self._launch(stream, opening=False)
            return
        self._free_streams.append(stream)

    def _expire(self, request_id: int, task: asyncio.Task[None]) -> None:
        self._expired.add(request_id)
        task.cancel()

    async def _request(
        self, request_id: int, planned: PlannedRequest, stream: int | None, opening: bool
    ) -> None:
        body = request_body(self._shape.endpoint, self._model, planned, self._shape.ignore_eos)
        content = json.dumps(body, separators=(",", ":")).encode()
        step, in_flight = self._step, len(self._in_flight)
        task = asyncio.current_task()
        assert task is not None
        deadline = asyncio.get_running_loop().call_later(
            self._target.request_timeout_s, self._expire, request_id, task
        )
        sent_at = time.perf_counter()
        meter, outcome = StreamMeter(sent_at), StreamOutcome()
        self._meters[request_id] = meter
        try:
            await self._stream(self._url, content, self._headers, meter, outcome)
        except asyncio.CancelledError:
            if request_id in self._expired:
                self._expired.discard(request_id)
                outcome.error = ErrorClass.TIMEOUT
                outcome.detail = f"past the {self._target.request_timeout_s:g} s request timeout"
            else:
                outcome.error, outcome.detail = ErrorClass.CANCELLED, "the probe was stopped"
            if sys.version_info >= (3, 11):
                task.uncancel()
        finally:
            deadline.cancel()
            del self._meters[request_id]
        if stream is not None and len(meter.gaps_s) > 0:
            self._rests[request_id] = rest_s(self._rng, meter.gaps_s)
        done_at = meter.last_at_s if outcome.error is None else time.perf_counter()
        self.done_total += 1
        if outcome.error is not None and outcome.error is not ErrorClass.CANCELLED:
            self.failed_total += 1
        self._emit(
            ProbeRecord(
                request_id=request_id,
                step=step,
                sent_at_s=self._clock.epoch_s(sent_at),
                done_at_s=self._clock.epoch_s(done_at or time.perf_counter()),
                in_flight_at_send=in_flight,
                planned_prompt_tokens=planned.prompt_tokens,
                planned_output_tokens=planned.output_tokens,
                ttft_s=meter.ttft_s,
                itl_s=tuple(meter.gaps_s),
                e2e_s=meter.e2e_s,
                chunk_count=meter.chunk_count,
                prompt_tokens=meter.prompt_tokens,
                output_tokens=meter.output_tokens,
                finish_reason=meter.finish_reason,
                error=outcome.error,
                error_detail=outcome.detail,
                http_status=outcome.http_status,
                lag_s=tuple(meter.lags_s) if meter.lags_s is not None else None,
                stream=stream,
                opening=opening,
            )
        )
        if outcome.error is not None and outcome.error is not ErrorClass.CANCELLED:
            await asyncio.sleep(ERROR_BACKOFF_S)  # a stop cancels this wait; the record is out

    async def _stream_with_client(
        self,
        url: str,
        content: bytes,
        headers: Mapping[str, str],
        meter: StreamMeter,
        outcome: StreamOutcome,
    ) -> None:
        await stream_request(self._client, url, content, headers, meter, outcome)
