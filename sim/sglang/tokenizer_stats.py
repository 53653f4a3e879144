"""What SGLang's tokenizer manager observes of each request, valued from the sim's step outcomes.

It observes a request when its output reaches it: a streaming request's every token
(`--stream-interval 1`), a non-streaming one's every `FORCE_STREAM_INTERVAL` tokens and its last.
The first such output observes time to first token (a non-streaming request's first token time is
the scheduler's, when its prefill ended); each later one of n new tokens over an interval observes
n inter-token latencies of interval/n, adding the interval to the sum. A finished request counts
its tokens and observes e2e latency, TPOT and the token histograms, by `is_streaming`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from slotop.sim.metrics import RequestFacts
from slotop.sim.sglang.defaults import FORCE_STREAM_INTERVAL
from slotop.sim.sglang.exposition import Histogram
from slotop.sim.sglang.families import (
    E2E_REQUEST_LATENCY_BUCKETS,
    INTER_TOKEN_LATENCY_BUCKETS,
    TIME_TO_FIRST_TOKEN_BUCKETS,
    TOKEN_COUNT_BUCKETS,
)
from slotop.sim.types import FinishedRequest, StepOutcome

_BOUNDS = {
    "sglang:time_to_first_token_seconds": TIME_TO_FIRST_TOKEN_BUCKETS,
    "sglang:e2e_request_latency_seconds": E2E_REQUEST_LATENCY_BUCKETS,
    "sglang:request_time_per_output_token_seconds": INTER_TOKEN_LATENCY_BUCKETS,
}

_STALE_MARGIN = 64
"""Requests the tracker may hold beyond the live ones before it drops those that left unseen
(aborted ones: an abort reaches the metrics as no outcome)."""


@dataclass(slots=True)
class _Request:
    """What the tokenizer side tracks of one live request."""

    stream: bool
    arrival_s: float
    prompt_tokens: int
    output_tokens: int = 0
    first_token_s: float | None = None
    sent_tokens: int = 0
    sent_s: float = 0.0
    observed_first: bool = False


def streaming_label(stream: bool) -> str:
    """The `is_streaming` label value."""
    return "true" if stream else "false"


class TokenizerStats:
    """The tokenizer's counters and histograms, and the live requests they follow."""

    def __init__(self) -> None:
        self.by_stream: dict[str, dict[str, Histogram]] = {}
        """TTFT, e2e and TPOT histograms, by family and `is_streaming`, in first-seen order."""
        self.counts: dict[str, dict[str, float]] = {}
        """Prompt, generation and request counters, by `is_streaming` and family."""
        self.prompt_tokens = Histogram(TOKEN_COUNT_BUCKETS)
        self.uncached_prompt_tokens = Histogram(TOKEN_COUNT_BUCKETS)
        self.generation_tokens = Histogram(TOKEN_COUNT_BUCKETS)
        self.inter_token_latency = Histogram(INTER_TOKEN_LATENCY_BUCKETS)
        self.cached_tokens = 0
        self.aborted = 0
        self._requests: dict[str, _Request] = {}

    def decoded(self, request_id: str) -> int:
        """Tokens a live request has generated so far (0 if unknown)."""
        state = self._requests.get(request_id)
        return state.output_tokens if state is not None else 0

    def step(self, outcome: StepOutcome, facts: Mapping[str, RequestFacts]) -> None:
        """Each token the step emitted, as the tokenizer sees its request's outputs."""
        end_s = outcome.end_s
        finished = {f.request_id: f for f in outcome.finished} if outcome.finished else {}
        requests = self._requests
        for request_id in outcome.emitted_ids:
            state = requests.get(request_id)
            if state is None:
                fact = facts.get(request_id)
                if fact is None:
                    continue
                state = requests[request_id] = _Request(
                    fact.stream, fact.arrival_s, fact.prompt_tokens
                )
            state.output_tokens += 1
            if state.first_token_s is None:
                state.first_token_s = end_s
            done = finished.get(request_id)
            if state.stream or done is not None or state.output_tokens % FORCE_STREAM_INTERVAL == 0:
                self._output_reached(state, end_s)
            if done is not None:
                self._finished(state, done, end_s)
                del requests[request_id]
        if len(requests) > len(facts) + _STALE_MARGIN:
            for gone in [rid for rid in requests if rid not in facts]:
                del requests[gone]

    def _output_reached(self, state: _Request, at_s: float) -> None:
        """A batch of the request's output reached the tokenizer at `at_s`."""
        if not state.observed_first:
            state.observed_first = True
            first_token_s = state.first_token_s if state.first_token_s is not None else at_s
            self._histogram("sglang:time_to_first_token_seconds", state.stream).observe(
                first_token_s - state.arrival_s
            )
        else:
            new_tokens = state.output_tokens - state.sent_tokens
            if new_tokens > 0:
                interval = at_s - state.sent_s
                self.inter_token_latency.observe_many(interval / new_tokens, new_tokens, interval)
        state.sent_tokens = state.output_tokens
        state.sent_s = at_s

    def _finished(self, state: _Request, done: FinishedRequest, at_s: float) -> None:
        """Count a finished request and observe its per-request histograms."""
        counts = self.counts.setdefault(streaming_label(state.stream), {})
        for name, value in (
            ("sglang:prompt_tokens", state.prompt_tokens),
            ("sglang:generation_tokens", state.output_tokens),
            ("sglang:num_requests", 1),
        ):
            counts[name] = counts.get(name, 0.0) + value
        cached = done.cached_prompt_tokens
        self.cached_tokens += cached
        self._histogram("sglang:e2e_request_latency_seconds", state.stream).observe(
            at_s - state.arrival_s
        )
        first_token_s = state.first_token_s
        if (
            done.finish_reason in ("stop", "length")
            and state.output_tokens > 1
            and first_token_s is not None
            and at_s > first_token_s
        ):
            tpot = (at_s - first_token_s) / (state.output_tokens - 1)
            name = "sglang:request_time_per_output_token_seconds"
            self._histogram(name, state.stream).observe(tpot)
        self.prompt_tokens.observe(state.prompt_tokens)
        self.uncached_prompt_tokens.observe(state.prompt_tokens - cached)
        self.generation_tokens.observe(state.output_tokens)

    def _histogram(self, name: str, stream: bool) -> Histogram:
        series = self.by_stream.setdefault(name, {})
        key = streaming_label(stream)
        histogram = series.get(key)
        if histogram is None:
            histogram = series[key] = Histogram(_BOUNDS[name])
        return histogram
