"""Load through the simulated replica in simulated time: clients, the API server and the engine,
with no wall clock, so a benchmark run replays the same on any host in a fraction of its length.

A request goes the way it goes in the real-time server: the API server's work and latency
(`apiserver.ApiServerQueue`), the engine's steps, and each token back `response_s` after its step.
Clients either keep a fixed number of requests in flight, sending the next the moment one has
its last token (`vllm bench serve --max-concurrency C --request-rate inf`), or send at given
times (a Poisson rate, a burst). The gauges are recorded when vLLM would publish them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slotop.sim.apiserver import ApiServerQueue, ApiServerTiming
from slotop.sim.engine import Engine
from slotop.sim.openai import RequestKind
from slotop.sim.types import EngineConfig, EngineStats, FinishedRequest


@dataclass(frozen=True, slots=True)
class VirtualRequest:
    """One request a client sends: its prompt (token ids, or only their count), how many tokens
    it asks for, and how the API server takes it (a chat, or a completion of text or ids)."""

    prompt: int | tuple[int, ...]
    max_tokens: int
    kind: RequestKind = "completion"
    text: bool = True

    @property
    def prompt_tokens(self) -> int:
        """Tokens in the prompt."""
        return self.prompt if isinstance(self.prompt, int) else len(self.prompt)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as its client saw it: when it was sent, when each token arrived, how it ended."""

    sent_s: float
    token_s: tuple[float, ...]
    finished: FinishedRequest

    @property
    def ttft_s(self) -> float:
        """From sending to the first token."""
        return self.token_s[0] - self.sent_s

    @property
    def gaps_s(self) -> tuple[float, ...]:
        """Every gap between two tokens (`vllm bench serve`'s inter-token latencies)."""
        return tuple(b - a for a, b in itertools.pairwise(self.token_s))

    @property
    def tpot_s(self) -> float | None:
        """(last token − first token) / (tokens − 1); None for a one-token answer."""
        if len(self.token_s) < 2:
            return None
        return (self.token_s[-1] - self.token_s[0]) / (len(self.token_s) - 1)


@dataclass(frozen=True, slots=True)
class VirtualRun:
    """Everything one run produced: each request's record, and the gauges as vLLM published them
    (time, stats), one entry per step."""

    records: tuple[RequestRecord, ...]
    published: tuple[tuple[float, EngineStats], ...]
    end_s: float


def run_closed_loop(
    config: EngineConfig,
    api: ApiServerTiming,
    request: Callable[[int], VirtualRequest],
    concurrency: int,
    total: int,
) -> VirtualRun:
    """`concurrency` clients each send `request(i)` in turn, the next when their last ends."""
    return _drive(config, api, request, [0.0] * min(concurrency, total), total)


def run_arrivals(
    config: EngineConfig,
    api: ApiServerTiming,
    request: Callable[[int], VirtualRequest],
    send_s: Sequence[float],
) -> VirtualRun:
    """Send `request(i)` at `send_s[i]` (nondecreasing), whatever the replica is doing."""
    return _drive(config, api, request, list(send_s), len(send_s), closed=False)


def _drive(
    config: EngineConfig,
    api: ApiServerTiming,
    request: Callable[[int], VirtualRequest],
    first_sends: list[float],
    total: int,
    closed: bool = True,
) -> VirtualRun:
    """Step the engine, feeding it through the API server, until every request has ended."""
    engine = Engine(config)
    queue = ApiServerQueue(api.latency_s)
    sent: dict[str, float] = {}
    tokens: dict[str, list[float]] = {}
    records: list[RequestRecord] = []
    published: list[tuple[float, EngineStats]] = []
    serial = 0

    def send(at_s: float) -> None:
        nonlocal serial
        request_id = f"r{serial}"
        wanted = request(serial)
        serial += 1
        sent[request_id] = at_s
        tokens[request_id] = []
        work_s = api.request_work_s(wanted.kind, wanted.prompt_tokens if wanted.text else 0)
        queue.hold(at_s, work_s, ((request_id, wanted.prompt, wanted.max_tokens, True),))

    for at_s in first_sends:
        send(at_s)
    while engine.has_work() or len(queue):
        if engine.has_work():
            start_s = engine.end_s
        else:
            ready_s = queue.next_ready_s()
            assert ready_s is not None
            start_s = max(engine.end_s, ready_s)
        queue.admit(engine, start_s, sent)
        if not engine.has_work():
            continue
        outcome = engine.step(start_s)
        if config.async_scheduling:
            published.append((outcome.start_s, outcome.scheduled_stats))
        else:
            published.append((outcome.end_s, outcome.stats))
        arrive_s = outcome.end_s + api.response_s
        for request_id in outcome.emitted_ids:
            tokens[request_id].append(arrive_s)
        for finished in outcome.finished:
            request_id = finished.request_id
            records.append(RequestRecord(sent[request_id], tuple(tokens[request_id]), finished))
            if closed and serial < total:
                send(arrive_s)
    return VirtualRun(tuple(records), tuple(published), engine.end_s)
