"""What vLLM's API server adds around the engine, in simulated time: the work and the wait between a
request's arrival over HTTP and the engine core, and the way back for every token.

A request's way in has two parts. Its work (parsing, the chat template, tokenising, building the
engine request) runs on the API server's one process, shared with every other request being
taken in at the same moment: the server interleaves them (asyncio), so requests that arrive
together advance together and reach the engine together, each after the sum of their work
(`ApiServerQueue`, a processor-sharing queue). Its wait (sockets, process hand-offs, wake-ups)
is the host's `request_latency_s`, the same however busy the server is. Each token then reaches
the client `response_s` after the end of the step that made it.

The work is measured on vLLM 0.32 itself (`API_SERVER_MEASURED_S`, on a box as fast as a
datacenter host's core) and scaled by the host's `cpu_scale`, the same factor that scales the
engine core's CPU time; the host table (`tables.HOSTS`) says where each host's figures come from.
The server's own work on the tokens it streams is not queued here: at the loads of the
published runs it delays a new request by less than a step.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Container
from dataclasses import dataclass
from typing import Protocol

from slotop.sim.openai import RequestKind
from slotop.sim.types import HostSpec

API_SERVER_MEASURED_S: dict[str, float] = {
    "completion_request": 1.4e-3,
    "chat_request": 2.07e-3,
    "tokenize_per_token": 1.22e-6,
    "response": 1.36e-3,
}
"""The API server's time outside the engine, measured on vLLM 0.32 itself (seconds).

`bench/bench_vllm_first_token.py` times the tiny vLLM CPU replica one request at a time, medians
of per-request figures with the kinds taken in turn. vLLM's own `time_to_first_token` less its
queue and prefill times is the frontend's work inside vLLM's TTFT (request: parsing, the chat
template, tokenising, handing the request to the engine core), a raw client's TTFT less vLLM's
TTFT the work outside it (response: detokenising, the SSE chunk, the socket). Figures from the
run on a quiet 2-vCPU box (load average 0.9): request 1.20 ms for 16 token ids, 1.60 for a
17-token text prompt (taken together as 1.4), 1.94 for a 27-token chat; response 1.30-1.46 ms
for completions (1.36), 1.52 for chat; tokenising the slope between a 601-token and a 17-token
text prompt, 1.22 us a token. A chat's extra response time (the role chunk) is counted on its
request side, so every token of every kind leaves `response` after its step.
"""


@dataclass(frozen=True, slots=True)
class ApiServerTiming:
    """What vLLM's API server adds to a request outside the engine's steps, in seconds.

    `request_work_s` is the server's CPU work to take a request in (shared with the requests
    arriving alongside it, `ApiServerQueue`); `latency_s` the rest of its way to the engine
    core; `response_s` the way back for every token, from its step's end to the client (a
    constant, so inter-token gaps keep the steps' rhythm).
    """

    completion_request_s: float
    chat_request_s: float
    tokenize_s_per_token: float
    latency_s: float
    response_s: float

    def request_work_s(self, kind: RequestKind, tokenized_prompt_tokens: int) -> float:
        """The server's CPU work to take one request in (text prompts are tokenised)."""
        base = self.chat_request_s if kind == "chat" else self.completion_request_s
        return base + self.tokenize_s_per_token * tokenized_prompt_tokens

    def alone_s(self, kind: RequestKind, tokenized_prompt_tokens: int) -> float:
        """From arrival to the engine core for a request that arrives alone."""
        return self.request_work_s(kind, tokenized_prompt_tokens) + self.latency_s


def api_server_timing(host: HostSpec) -> ApiServerTiming:
    """The API server of `host`: the measured work scaled by its CPU, and its own latency."""
    scale = host.cpu_scale
    return ApiServerTiming(
        completion_request_s=API_SERVER_MEASURED_S["completion_request"] * scale,
        chat_request_s=API_SERVER_MEASURED_S["chat_request"] * scale,
        tokenize_s_per_token=API_SERVER_MEASURED_S["tokenize_per_token"] * scale,
        latency_s=host.request_latency_s,
        response_s=API_SERVER_MEASURED_S["response"] * scale,
    )


NO_API_SERVER = ApiServerTiming(0.0, 0.0, 0.0, 0.0, 0.0)
"""An API server that takes no time: the engine's view."""


class Submits(Protocol):
    """The one verb the queue needs of an engine: take a request that has reached it."""

    def submit(
        self,
        request_id: str,
        prompt: int | tuple[int, ...],
        max_tokens: int,
        ignore_eos: bool,
        arrival_s: float,
    ) -> None:
        """Queue a request that reached the engine at `arrival_s`."""


HeldRequest = tuple[str, int | tuple[int, ...], int, bool]
"""An engine request on its way: its id, prompt (token ids, or their count), max_tokens and
ignore_eos."""

_Job = tuple[HeldRequest, ...]
"""What one piece of the server's work hands the engine: a prompt's requests (its n choices)."""


SHARED_REQUESTS = 32
"""Requests the API server takes in at once: vLLM tokenises concurrent requests in batches of up to
32 (its `AsyncMicrobatchTokenizer`), so a burst moves through in groups of 32, one after another."""


class ApiServerQueue:
    """vLLM's API server between a request's arrival and the engine, in simulated time.

    The server's one process shares its CPU among the requests it is taking in (processor
    sharing) up to `shared` of them; more wait in line for a place. With n in hand each advances
    at 1/n of the CPU, so n requests that arrive together finish their work together, after n
    times one's work. A request then waits `latency_s` more and reaches the engine (`admit`
    hands the engine what has arrived by a given time). Arrivals must come in time order; an
    arrival may be dated after the last `admit`.
    """

    __slots__ = (
        "_arrivals",
        "_clock_s",
        "_done",
        "_jobs",
        "_latency_s",
        "_lined_up",
        "_serial",
        "_shared",
    )

    def __init__(self, latency_s: float = 0.0, shared: int = SHARED_REQUESTS) -> None:
        self._latency_s = latency_s
        self._shared = shared
        self._serial = itertools.count()
        self._clock_s = 0.0
        # Arrivals not yet reached by the clock: (arrival, serial, work, job).
        self._arrivals: list[tuple[float, int, float, _Job]] = []
        # Arrived, waiting for a place: (serial, work, job), first come first served.
        self._lined_up: deque[tuple[int, float, _Job]] = deque()
        # Work in hand: serial -> (remaining work, job).
        self._jobs: dict[int, tuple[float, _Job]] = {}
        # Work done, on the way to the engine: (ready, serial, job).
        self._done: list[tuple[float, int, _Job]] = []

    def __len__(self) -> int:
        return len(self._arrivals) + len(self._lined_up) + len(self._jobs) + len(self._done)

    def hold(self, arrival_s: float, work_s: float, requests: _Job) -> None:
        """Take a prompt arriving at `arrival_s` that needs `work_s` of the server's CPU; its
        engine requests (one per choice) reach the engine together."""
        heapq.heappush(self._arrivals, (arrival_s, next(self._serial), work_s, requests))

    def _run_until(self, until_s: float) -> None:
        """Advance the shared work to `until_s`, taking arrivals in as they come."""
        arrivals = self._arrivals
        while True:
            next_arrival = arrivals[0][0] if arrivals else None
            horizon = until_s if next_arrival is None or next_arrival > until_s else next_arrival
            self._share_until(horizon)
            if next_arrival is None or next_arrival > until_s:
                return
            _arrival_s, serial, work_s, job = heapq.heappop(arrivals)
            self._lined_up.append((serial, work_s, job))
            self._fill_places()

    def _fill_places(self) -> None:
        """Move waiting requests into the shared work while there are places."""
        lined_up = self._lined_up
        while lined_up and len(self._jobs) < self._shared:
            serial, work_s, job = lined_up.popleft()
            if work_s <= 0.0:
                heapq.heappush(self._done, (self._clock_s + self._latency_s, serial, job))
            else:
                self._jobs[serial] = (work_s, job)

    def _share_until(self, until_s: float) -> None:
        """Let the jobs in hand share the CPU from the clock to `until_s`, finishing those that end."""
        jobs = self._jobs
        while jobs and self._clock_s < until_s:
            count = len(jobs)
            least = min(remaining for remaining, _ in jobs.values())
            finish_s = self._clock_s + least * count
            if finish_s > until_s:
                spent = (until_s - self._clock_s) / count
                self._clock_s = until_s
                for serial, (remaining, job) in jobs.items():
                    jobs[serial] = (remaining - spent, job)
                return
            self._clock_s = finish_s
            ends = least * (1.0 + 1e-9)
            for serial, (remaining, job) in list(jobs.items()):
                if remaining <= ends:
                    del jobs[serial]
                    heapq.heappush(self._done, (finish_s + self._latency_s, serial, job))
                else:
                    jobs[serial] = (remaining - least, job)
            self._fill_places()
        if until_s > self._clock_s:
            self._clock_s = until_s

    def next_ready_s(self) -> float | None:
        """When the next request reaches the engine if no other arrives first; None if none is held."""
        if self._done:
            return self._done[0][0]
        if not self._jobs and not self._arrivals and not self._lined_up:
            return None
        # Look ahead on a copy: the next completion, taking in the arrivals already known.
        probe = ApiServerQueue(self._latency_s, self._shared)
        probe._clock_s = self._clock_s
        probe._arrivals = list(self._arrivals)
        probe._lined_up = deque(self._lined_up)
        probe._jobs = dict(self._jobs)
        while not probe._done:
            candidates = [probe._clock_s + r * len(probe._jobs) for r, _ in probe._jobs.values()]
            if probe._arrivals:
                candidates.append(probe._arrivals[0][0])
            probe._run_until(max(probe._clock_s, min(candidates)))
        return probe._done[0][0]

    def admit(self, engine: Submits, until_s: float, live: Container[str]) -> None:
        """Hand the engine every request ready by `until_s` and still `live`, in ready order.

        Each arrives in the engine at its ready time, which is what vLLM's queue time counts from.
        """
        self._run_until(until_s)
        done = self._done
        while done and done[0][0] <= until_s:
            ready_s, _serial, requests = heapq.heappop(done)
            for request_id, prompt, max_tokens, ignore_eos in requests:
                if request_id in live:
                    engine.submit(request_id, prompt, max_tokens, ignore_eos, ready_s)

    def pause(self, paused_at_s: float, paused_for_s: float) -> None:
        """Simulated time paused at `paused_at_s`: what fell due in the pause is due then."""

        def moved(at_s: float) -> float:
            return max(paused_at_s, at_s - paused_for_s) if at_s > paused_at_s else at_s

        self._arrivals = [(moved(a), n, w, job) for a, n, w, job in self._arrivals]
        heapq.heapify(self._arrivals)
        self._done = [(moved(r), n, job) for r, n, job in self._done]
        heapq.heapify(self._done)
        self._clock_s = moved(self._clock_s)
