"""The probe process: an asyncio loop that keeps the load at its level and streams records home.

The parent sends commands over one pipe; the loop applies each at once (stepping up launches
requests immediately, stepping down lets in-flight ones finish and launches fewer) and stamps it
as an event. Ended requests are batched every flush interval and handed to a sender thread, so a
slow reader in the parent never stalls the clocks here.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import httpx
import numpy as np

from slotop.collectors.probe.loadshape import LoadShape, PlannedRequest, PromptSource, gamma_gaps_s
from slotop.collectors.probe.records import (
    ErrorClass,
    EventKind,
    LoadMode,
    ProbeBatch,
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
from slotop.collectors.probe.transport import AiohttpTransport

FLUSH_INTERVAL_S = 0.1
ERROR_BACKOFF_S = 0.1
"""A failed request holds its slot this long before it is replaced, so a dead replica is not
hammered by a closed loop that would otherwise retry as fast as connections are refused."""
_GAP_BATCH = 256


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


Command = SetConcurrency | SetRate | Stop


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


class LoadRunner:
    """Keeps the load at its commanded level on one event loop, and collects what ends."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        target: ProbeTarget,
        shape: LoadShape,
        model: str | None,
        emit: Callable[[ProbeRecord | ProbeEvent], None],
        clock: EpochClock,
    ) -> None:
        self._client = client
        self._target = target
        self._shape = shape
        self._model = model
        self._emit = emit
        self._clock = clock
        self._rng = np.random.default_rng(shape.seed)
        self._prompts = PromptSource(shape, self._rng)
        self._headers = target.headers()
        self._url = target.url(shape.endpoint)
        self._in_flight: set[asyncio.Task[None]] = set()
        self._expired: set[int] = set()
        self._streaming: dict[int, float] = {}
        self._slot_freed = asyncio.Event()
        self._arrivals: asyncio.Task[None] | None = None
        self._mode: LoadMode = "closed"
        self._concurrency = 0
        self._rate_rps = 0.0
        self._burstiness = shape.burstiness
        self._step = -1
        self._next_id = 0
        self._stopping = False
        self.sent_total = 0
        self.done_total = 0
        self.failed_total = 0

    def status(self) -> ProbeStatus:
        """The counters now."""
        closed = self._mode == "closed"
        return ProbeStatus(
            at_s=self._clock.epoch_s(time.perf_counter()),
            step=self._step,
            mode=self._mode,
            target_concurrency=self._concurrency if closed else None,
            rate_rps=None if closed else self._rate_rps,
            in_flight=len(self._in_flight),
            sent_total=self.sent_total,
            done_total=self.done_total,
            failed_total=self.failed_total,
            streaming_sent_at_s=tuple(sorted(self._streaming.values())),
        )

    def apply(self, command: Command, kind: EventKind | None = None) -> None:
        """Change the load now, and emit the event that says so."""
        if self._stopping or isinstance(command, Stop):
            return
        self._step += 1
        if isinstance(command, SetConcurrency):
            self._mode = "closed"
            self._concurrency = max(0, min(command.concurrency, self._shape.max_concurrency))
            self._cancel_arrivals()
            event_kind = kind or EventKind.CONCURRENCY_SET
        else:
            self._mode = "open"
            self._rate_rps = max(0.0, min(command.rate_rps, self._shape.max_rate_rps))
            if command.burstiness is not None:
                self._burstiness = command.burstiness
            self._cancel_arrivals()
            if self._rate_rps > 0:
                self._arrivals = asyncio.get_running_loop().create_task(self._arrive())
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
        self._fill()

    async def stop(self) -> None:
        """Cancel the arrivals and every in-flight request, wait for their records, emit STOPPED."""
        self._stopping = True
        self._cancel_arrivals()
        tasks = list(self._in_flight)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._emit(
            ProbeEvent(
                at_s=self._clock.epoch_s(time.perf_counter()),
                kind=EventKind.STOPPED,
                step=self._step,
                detail=f"{len(tasks)} in-flight requests cancelled",
            )
        )

    def _cancel_arrivals(self) -> None:
        if self._arrivals is not None:
            self._arrivals.cancel()
            self._arrivals = None

    def _fill(self) -> None:
        if self._mode != "closed":
            return
        while not self._stopping and len(self._in_flight) < self._concurrency:
            self._launch()

    async def _arrive(self) -> None:
        loop = asyncio.get_running_loop()
        rate, burstiness = self._rate_rps, self._burstiness
        next_at = loop.time()
        gaps: list[float] = []
        while not self._stopping:
            if not gaps:
                gaps = gamma_gaps_s(self._rng, rate, burstiness, _GAP_BATCH).tolist()
            next_at += gaps.pop()
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            while len(self._in_flight) >= self._shape.max_concurrency:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                next_at = loop.time()
            self._launch()

    def _launch(self) -> None:
        planned = self._prompts.next_request()
        request_id = self._next_id
        self._next_id += 1
        task = asyncio.get_running_loop().create_task(self._request(request_id, planned))
        self._in_flight.add(task)
        task.add_done_callback(self._ended)
        self.sent_total += 1

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self._slot_freed.set()
        self._fill()

    def _expire(self, request_id: int, task: asyncio.Task[None]) -> None:
        self._expired.add(request_id)
        task.cancel()

    async def _request(self, request_id: int, planned: PlannedRequest) -> None:
        body = request_body(self._shape.endpoint, self._model, planned, self._shape.ignore_eos)
        content = json.dumps(body, separators=(",", ":")).encode()
        step, in_flight = self._step, len(self._in_flight)
        task = asyncio.current_task()
        assert task is not None
        deadline = asyncio.get_running_loop().call_later(
            self._target.request_timeout_s, self._expire, request_id, task
        )
        sent_at = time.perf_counter()
        self._streaming[request_id] = self._clock.epoch_s(sent_at)
        meter, outcome = StreamMeter(sent_at), StreamOutcome()
        try:
            await stream_request(self._client, self._url, content, self._headers, meter, outcome)
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
            del self._streaming[request_id]
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
            )
        )
        if outcome.error is not None and outcome.error is not ErrorClass.CANCELLED:
            await asyncio.sleep(ERROR_BACKOFF_S)  # a stop cancels this wait; the record is out


def make_client(target: ProbeTarget, shape: LoadShape) -> httpx.AsyncClient:
    """An httpx client over aiohttp, with a connection for every request the caps allow."""
    return httpx.AsyncClient(
        transport=AiohttpTransport(shape.max_concurrency + 1, target.request_timeout_s),
        timeout=httpx.Timeout(target.request_timeout_s),
        trust_env=False,
    )


class _Outbox:
    """Collects records and events and ships them as batches from a sender thread."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self._records: list[ProbeRecord] = []
        self._events: list[ProbeEvent] = []
        self._queue: queue.SimpleQueue[ProbeBatch | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._send_all, name="probe-sender", daemon=True)
        self._thread.start()
        self.broken = False

    def emit(self, item: ProbeRecord | ProbeEvent) -> None:
        if isinstance(item, ProbeRecord):
            self._records.append(item)
        else:
            self._events.append(item)

    def flush(self, status: ProbeStatus | None) -> None:
        batch = ProbeBatch(tuple(self._records), tuple(self._events), status)
        self._records, self._events = [], []
        self._queue.put(batch)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5.0)

    def _send_all(self) -> None:
        while (batch := self._queue.get()) is not None:
            try:
                self._connection.send(batch)
            except (OSError, EOFError):
                self.broken = True
                return


async def _serve(
    target: ProbeTarget,
    shape: LoadShape,
    first: Command,
    commands: Connection,
    outbox: _Outbox,
    flush_interval_s: float,
) -> None:
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    clock = EpochClock()
    async with make_client(target, shape) as client:
        model = await resolve_model(client, target)
        runner = LoadRunner(client, target, shape, model, outbox.emit, clock)

        def on_readable() -> None:
            try:
                while commands.poll():
                    command = commands.recv()
                    if isinstance(command, Stop):
                        stop_requested.set()
                    else:
                        runner.apply(command)
            except (EOFError, OSError):
                stop_requested.set()  # the parent is gone: no load without an operator
                loop.remove_reader(commands.fileno())
            outbox.flush(runner.status())

        runner.apply(first, EventKind.STARTED)
        outbox.flush(runner.status())
        loop.add_reader(commands.fileno(), on_readable)
        try:
            while not stop_requested.is_set() and not outbox.broken:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop_requested.wait(), flush_interval_s)
                outbox.flush(runner.status())
        finally:
            loop.remove_reader(commands.fileno())
            await runner.stop()
            outbox.flush(runner.status())


def run_worker(
    target: ProbeTarget,
    shape: LoadShape,
    first: Command,
    commands: Connection,
    batches: Connection,
    flush_interval_s: float = FLUSH_INTERVAL_S,
) -> None:
    """The probe process's entry point; returns when told to stop or when the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the load stops
    gc.collect()
    gc.freeze()  # what the imports left is never scanned again: shorter collector pauses
    outbox = _Outbox(batches)
    try:
        asyncio.run(_serve(target, shape, first, commands, outbox, flush_interval_s))
    finally:
        outbox.close()
        batches.close()
        commands.close()
