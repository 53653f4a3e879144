"""One probe worker process: its event loop, its own lag, and the batches it sends home.

The parent sends commands over one pipe; the loop applies each at once. Ended requests and events
are batched every flush interval, with the worker's status and its lag over the last second, and
handed to a sender thread, so a slow reader in the parent never stalls the clocks here. Plain-HTTP
replicas are read by the worker's own client (`wire.py`), which stamps each read as it lands and
knows its lag; https ones through httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import queue
import signal
import threading
from collections.abc import Coroutine
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import urlsplit

import httpx

from slotop.collectors.probe.lag import LagMeter, TimedSelector
from slotop.collectors.probe.loadshape import LoadShape
from slotop.collectors.probe.records import (
    EventKind,
    ProbeBatch,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
)
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.probe.wire import WireClient
from slotop.collectors.probe.worker import (
    ONE_WORKER,
    Command,
    EpochClock,
    LoadRunner,
    Share,
    Stop,
    resolve_model,
)

FLUSH_INTERVAL_S = 0.1


def make_client(target: ProbeTarget, shape: LoadShape) -> httpx.AsyncClient:
    """An httpx client over aiohttp, with a connection for every request the caps allow."""
    # Imported here, in the probe's process: the dashboard that spawns it never sends through
    # aiohttp, and importing it (an SSL context among the rest) costs its first paint ~0.1 s.
    from slotop.collectors.probe.transport import AiohttpTransport

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
    share: Share,
    lag: LagMeter,
) -> None:
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    clock = EpochClock()
    wire = (
        WireClient(target.request_timeout_s, lags=lag.chunk_lags)
        if urlsplit(target.base_url).scheme == "http"
        else None
    )

    def emit(item: ProbeRecord | ProbeEvent) -> None:
        outbox.emit(item)
        if isinstance(item, ProbeRecord):
            lag.add(item)

    async with make_client(target, shape) as client:
        model = await resolve_model(client, target)
        runner = LoadRunner(
            client,
            target,
            shape,
            model,
            emit,
            clock,
            share=share,
            streamer=wire.stream if wire is not None else None,
        )

        def status() -> ProbeStatus:
            summary = lag.summary()
            return dataclasses.replace(
                runner.status(), lag=(summary,) if summary is not None else ()
            )

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
            outbox.flush(status())

        runner.apply(first, EventKind.STARTED)
        lag.start()  # from here: the start-up's one-off work is not the loop falling behind
        outbox.flush(status())
        loop.add_reader(commands.fileno(), on_readable)
        try:
            while not stop_requested.is_set() and not outbox.broken:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop_requested.wait(), flush_interval_s)
                outbox.flush(status())
        finally:
            loop.remove_reader(commands.fileno())
            await runner.stop()
            lag.stop()
            if wire is not None:
                await wire.aclose()
            outbox.flush(status())


def run_on_timed_loop(main: Coroutine[Any, Any, None], selector: TimedSelector) -> None:
    """Run `main` to its end on a fresh loop over `selector`, then close the loop cleanly."""
    loop = asyncio.SelectorEventLoop(selector)
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(main)
    finally:
        try:
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def run_worker(
    target: ProbeTarget,
    shape: LoadShape,
    first: Command,
    commands: Connection,
    batches: Connection,
    flush_interval_s: float = FLUSH_INTERVAL_S,
    share: Share = ONE_WORKER,
) -> None:
    """A probe worker's entry point; returns when told to stop or when the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when the load stops
    gc.collect()
    gc.freeze()  # what the imports left is never scanned again: shorter collector pauses
    outbox = _Outbox(batches)
    selector = TimedSelector()
    lag = LagMeter(share.index, selector)
    try:
        run_on_timed_loop(
            _serve(target, shape, first, commands, outbox, flush_interval_s, share, lag), selector
        )
    finally:
        outbox.close()
        batches.close()
        commands.close()
