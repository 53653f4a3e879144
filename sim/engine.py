"""The simulated vLLM V1 engine: a pure scheduler loop over paged KV blocks in simulated time.

It follows vLLM 0.32's `Scheduler.schedule()` for the default FCFS policy with chunked prefill:
running requests first, in admission order, each taking what it still has to compute (one token for
a decode) out of the step's token budget; when blocks run out the newest running request is
preempted (its blocks freed, its progress dropped for recompute) and put at the head of the waiting
queue; only if nothing was preempted are waiting requests admitted, while seats (`max_num_seqs`),
budget and blocks for their whole prompt last. A request emits a token at the end of the step in
which its computed tokens catch up with its tokens. The step's length comes from `timing`.

With prefix caching on (vLLM V1's default), a request admitted from the queue first reuses the
longest run of its prompt's full blocks already cached (`prefix_cache`): those tokens count as
computed, take no new blocks and cost no prefill; queries and hits are counted at that admission.

Requests reach the scheduler the way vLLM's engine core takes them in: a submitted request waits
in an inbox (vLLM's input queue, not counted anywhere) until the next scheduling pass, which first
moves into the waiting queue everything that has arrived by then (vLLM stamps it QUEUED there),
then schedules. So `num_waiting` counts only what a pass has seen and left out, and the queue time
runs from that pass to the one that admits the request: a request that arrives during a step and
finds a seat, budget and blocks at the next pass never waits at all.

With async scheduling (vLLM's default on GPUs) the pass for a step runs while the step before it
is still on the GPU: it sees what arrived by that earlier step's start, and the seats and blocks of
requests that earlier step finishes are free only from the pass after. The gauges vLLM publishes
with a step's outputs are the ones that pass left (`StepOutcome.scheduled_stats`); without async
scheduling a pass runs at its own step's start and the gauges go out at its end
(`StepOutcome.stats`).
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Sequence

from slotop.sim.capacity import kv_capacity
from slotop.sim.errors import DuplicateRequestError, RequestRejectedError
from slotop.sim.gpu import GpuActivity
from slotop.sim.prefix_cache import BlockPool, block_hashes
from slotop.sim.timing import StepTimeModel
from slotop.sim.types import (
    EngineConfig,
    EngineStats,
    FinishedRequest,
    FinishReason,
    FirstScheduled,
    KvCapacity,
    RequestTiming,
    StepOutcome,
)

_NULL_BLOCKS = 1
"""vLLM's block pool keeps one block back as the null block; usage is reported over the rest."""


class _Request:
    """One request's mutable scheduling state (internal; the outside sees frozen types only)."""

    __slots__ = (
        "arrival_s",
        "block_hashes",
        "blocks",
        "cached_tokens",
        "computed_tokens",
        "first_scheduled_s",
        "first_token_s",
        "hashed_blocks",
        "held",
        "max_tokens",
        "num_preemptions",
        "num_tokens",
        "output_tokens",
        "prompt_tokens",
        "queued_s",
        "request_id",
        "stop_reason",
        "target_output_tokens",
    )

    def __init__(
        self,
        request_id: str,
        prompt_tokens: int,
        max_tokens: int,
        target_output_tokens: int,
        stop_reason: FinishReason,
        arrival_s: float,
        hashes: tuple[int, ...],
    ) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.block_hashes = hashes  # the prompt's full blocks, for the prefix cache
        self.held: list[int] = []  # hashes of the cached blocks this request holds a reference on
        self.hashed_blocks = 0  # leading prompt blocks already shared or offered to the cache
        self.cached_tokens = 0  # prompt tokens its first admission found in the cache
        self.max_tokens = max_tokens
        self.target_output_tokens = target_output_tokens
        self.stop_reason: FinishReason = stop_reason
        self.arrival_s = arrival_s
        self.num_tokens = prompt_tokens
        self.computed_tokens = 0
        self.output_tokens = 0
        self.blocks = 0
        self.num_preemptions = 0
        self.queued_s: float | None = None
        self.first_scheduled_s: float | None = None
        self.first_token_s: float | None = None

    def finished(self, reason: FinishReason, at_s: float) -> FinishedRequest:
        """Freeze this request's record as it leaves the engine."""
        return FinishedRequest(
            request_id=self.request_id,
            finish_reason=reason,
            prompt_tokens=self.prompt_tokens,
            output_tokens=self.output_tokens,
            max_tokens=self.max_tokens,
            num_preemptions=self.num_preemptions,
            cached_prompt_tokens=self.cached_tokens,
            timing=RequestTiming(
                arrival_s=self.arrival_s,
                queued_s=self.queued_s,
                first_scheduled_s=self.first_scheduled_s,
                first_token_s=self.first_token_s,
                finished_s=at_s,
            ),
        )


class Engine:
    """A deterministic, HTTP-free model of one vLLM replica stepping in simulated seconds."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.capacity: KvCapacity = kv_capacity(config)
        self.timing = StepTimeModel(config)
        self.gpu_activity = GpuActivity(config)
        self._rng = random.Random(config.seed)
        self._block_size = config.block_size
        self._usable_blocks = self.capacity.num_gpu_blocks - _NULL_BLOCKS
        self._pool = BlockPool(self._usable_blocks, config.enable_prefix_caching)
        self._running: list[_Request] = []
        self._inbox: deque[_Request] = deque()  # submitted, not yet taken in by a pass
        self._waiting: deque[_Request] = deque()  # taken in, not admitted (or preempted)
        self._retiring: list[_Request] = []  # finished; seats and blocks held through one pass
        self._requests: dict[str, _Request] = {}
        self._async = config.async_scheduling
        # The last step's start, while the next step's pass has already run during it.
        self._in_flight_start_s: float | None = None
        self._end_s = 0.0
        self._preemptions_total = 0
        self._prompt_tokens_total = 0
        self._generation_tokens_total = 0
        self._prefix_cache_queries_total = 0
        self._prefix_cache_hits_total = 0
        self._prompt_tokens_cached_total = 0

    # --- the outside's verbs -------------------------------------------------------------

    def submit(
        self,
        request_id: str,
        prompt: int | Sequence[int],
        max_tokens: int,
        ignore_eos: bool,
        arrival_s: float,
    ) -> None:
        """Queue a request, given its prompt's token ids or only their count (then it never hits).

        Raise RequestRejectedError if it can never be served.
        """
        prompt_tokens = prompt if isinstance(prompt, int) else len(prompt)
        if request_id in self._requests:
            raise DuplicateRequestError(f"request id {request_id!r} is already in the engine")
        self.check(prompt_tokens, max_tokens)
        target, reason = self._draw_output_length(max_tokens, ignore_eos)
        hashes = (
            block_hashes(prompt, self._block_size)
            if self._pool.enabled and not isinstance(prompt, int)
            else ()
        )
        request = _Request(
            request_id,
            prompt_tokens,
            max_tokens,
            target,
            reason,
            arrival_s,
            hashes,
        )
        self._requests[request_id] = request
        self._inbox.append(request)

    def check(self, prompt_tokens: int, max_tokens: int) -> None:
        """Raise RequestRejectedError if a request of these lengths could never be served."""
        max_model_len = self.config.max_model_len
        if prompt_tokens < 1:
            raise RequestRejectedError("a prompt must hold at least one token")
        if max_tokens < 1:
            raise RequestRejectedError(f"max_tokens must be at least 1, got {max_tokens}")
        if prompt_tokens + max_tokens > max_model_len:
            raise RequestRejectedError(
                f"this model's maximum context length is {max_model_len} tokens, but the request "
                f"asks for {prompt_tokens + max_tokens} ({prompt_tokens} in the prompt, "
                f"{max_tokens} to generate); shorten the prompt or lower max_tokens"
            )

    def abort(self, request_id: str, at_s: float | None = None) -> FinishedRequest | None:
        """Drop a request (its client went away), free its blocks; None if it is not held."""
        request = self._requests.pop(request_id, None)
        if request is None:
            return None
        if request in self._inbox:
            self._inbox.remove(request)
        elif request in self._waiting:
            self._waiting.remove(request)
        else:
            self._running.remove(request)
        self._release(request)
        self._settle_if_idle()  # else an idle engine would show the retiring requests' blocks
        return request.finished("abort", self._end_s if at_s is None else at_s)

    def has_work(self) -> bool:
        """Whether any request is running, waiting or on its way in."""
        return bool(self._running) or bool(self._waiting) or bool(self._inbox)

    @property
    def end_s(self) -> float:
        """Simulated time at which the last step ended (0.0 before the first)."""
        return self._end_s

    def stats(self) -> EngineStats:
        """The engine's gauges and totals now; waiting counts what the last pass left queued."""
        used = self._usable_blocks - self._pool.free_blocks
        return EngineStats(
            num_running=len(self._running),
            num_waiting=len(self._waiting),
            kv_blocks_used=used,
            kv_blocks_total=self._usable_blocks,
            kv_usage_ratio=used / self._usable_blocks if self._usable_blocks else 0.0,
            preemptions_total=self._preemptions_total,
            prompt_tokens_total=self._prompt_tokens_total,
            generation_tokens_total=self._generation_tokens_total,
            prefix_cache_queries_total=self._prefix_cache_queries_total,
            prefix_cache_hits_total=self._prefix_cache_hits_total,
            prompt_tokens_cached_total=self._prompt_tokens_cached_total,
            kv_blocks_cached_free=self._pool.cached_free_blocks,
        )

    # --- one scheduler step --------------------------------------------------------------

    def step(self, start_s: float) -> StepOutcome:
        """Schedule, run and retire one step that starts at simulated time `start_s`."""
        if start_s < self._end_s:
            start_s = self._end_s
        pass_s = self._pass_s(start_s)
        if pass_s == start_s:
            self._release_retiring()
        self._take_in(pass_s)
        block_size = self._block_size
        budget = self.config.max_num_batched_tokens
        pool = self._pool
        running = self._running
        preempted: list[_Request] = []
        completed: list[_Request] = []  # computed tokens caught up: a token comes out at the end
        first_scheduled: list[FirstScheduled] = []
        num_scheduled = 0
        decode_tokens = decode_context = 0
        prefill_tokens = prefill_context = prefill_pairs = 0

        # Running requests first, in admission order; the newest is preempted when blocks run out.
        index = 0
        while index < len(running) and budget > 0:
            request = running[index]
            computed = request.computed_tokens
            new_tokens = request.num_tokens - computed
            if new_tokens > budget:
                new_tokens = budget
            total = computed + new_tokens
            need = -(-total // block_size) - request.blocks
            if need > 0:
                if need > pool.free_blocks:
                    while need > pool.free_blocks:
                        victim = running.pop()
                        self._preempt(victim)
                        preempted.append(victim)
                        if victim is request:
                            break
                    if preempted[-1] is request:
                        break
                pool.allocate(need)
                request.blocks += need
            budget -= new_tokens
            num_scheduled += 1
            if new_tokens == 1 and request.output_tokens and computed:
                decode_tokens += 1
                decode_context += total
            else:
                prefill_tokens += new_tokens
                prefill_context += total
                prefill_pairs += new_tokens * computed + new_tokens * (new_tokens + 1) // 2
                if request.hashed_blocks < len(request.block_hashes):
                    self._cache_full_blocks(request, total)
            request.computed_tokens = total
            if total == request.num_tokens:
                completed.append(request)
            index += 1

        # Waiting requests only when nothing was preempted, while seats, budget and blocks last.
        if not preempted:
            waiting = self._waiting
            seats = self.config.max_num_seqs - len(self._retiring)
            while waiting and budget > 0 and len(running) < seats:
                request = waiting[0]
                total_tokens = request.num_tokens
                hit_blocks = evictable = 0
                if request.block_hashes:
                    max_blocks = (total_tokens - 1) // block_size  # the last token is recomputed
                    hit_blocks, evictable = pool.longest_hit(request.block_hashes, max_blocks)
                if -(-total_tokens // block_size) - hit_blocks + evictable > pool.free_blocks:
                    break
                hit_tokens = hit_blocks * block_size
                left = total_tokens - hit_tokens
                new_tokens = left if left <= budget else budget
                total = hit_tokens + new_tokens
                waiting.popleft()
                if hit_blocks:
                    hits = request.block_hashes[:hit_blocks]
                    pool.touch(hits)
                    request.held.extend(hits)
                    request.hashed_blocks = hit_blocks
                need = -(-total // block_size) - hit_blocks
                pool.allocate(need)
                request.blocks = hit_blocks + need
                if request.first_scheduled_s is None:
                    request.first_scheduled_s = pass_s
                    first_scheduled.append(
                        FirstScheduled(
                            request.request_id,
                            request.arrival_s,
                            pass_s if request.queued_s is None else request.queued_s,
                            pass_s,
                        )
                    )
                    request.cached_tokens = hit_tokens
                    if pool.enabled:
                        self._prefix_cache_queries_total += total_tokens
                        self._prefix_cache_hits_total += hit_tokens
                running.append(request)
                budget -= new_tokens
                num_scheduled += 1
                prefill_tokens += new_tokens
                prefill_context += total
                prefill_pairs += new_tokens * hit_tokens + new_tokens * (new_tokens + 1) // 2
                if request.hashed_blocks < len(request.block_hashes):
                    self._cache_full_blocks(request, total)
                request.computed_tokens = total
                if total == total_tokens:
                    completed.append(request)

        self._release_retiring()
        scheduled_stats = self.stats()
        price = self.timing.price(
            num_scheduled,
            decode_tokens,
            decode_context,
            prefill_tokens,
            prefill_context,
            prefill_pairs,
        )
        end_s = start_s + price.step_s
        self.gpu_activity.record(
            start_s,
            start_s + price.gpu_s,
            num_scheduled,
            decode_tokens,
            decode_context,
            prefill_tokens,
            prefill_context,
            prefill_pairs,
        )
        outcome = self._emit(
            start_s,
            end_s,
            price.gpu_s,
            completed,
            preempted,
            prefill_tokens,
            decode_tokens,
            scheduled_stats,
            tuple(first_scheduled),
            decode_context,
        )
        return outcome

    def _pass_s(self, start_s: float) -> float:
        """When the scheduling pass for a step starting at `start_s` ran.

        With async scheduling, a step that follows another back to back was scheduled while that
        one ran, as soon as it started; a step after an idle engine, or one the previous pass had
        nothing for, is scheduled at its own start.
        """
        if self._async and self._in_flight_start_s is not None and start_s <= self._end_s:
            return self._in_flight_start_s
        return start_s

    def _take_in(self, pass_s: float) -> None:
        """Move the requests that reached the engine core by `pass_s` into the waiting queue."""
        inbox = self._inbox
        waiting = self._waiting
        while inbox and inbox[0].arrival_s <= pass_s:
            request = inbox.popleft()
            request.queued_s = pass_s
            waiting.append(request)

    def _settle_if_idle(self) -> bool:
        """With nothing running or waiting, leave no pass in flight (the next step is scheduled
        afresh) and give the blocks of the requests that finished back; whether it was idle."""
        if self._running or self._waiting:
            return False
        self._in_flight_start_s = None
        self._release_retiring()
        return True

    def _release_retiring(self) -> None:
        """Give the seats and blocks of the requests that finished before this pass back."""
        for request in self._retiring:
            self._release(request)
        self._retiring.clear()

    def _emit(
        self,
        start_s: float,
        end_s: float,
        gpu_s: float,
        completed: list[_Request],
        preempted: list[_Request],
        prefill_tokens: int,
        decode_tokens: int,
        scheduled_stats: EngineStats,
        first_scheduled: tuple[FirstScheduled, ...] = (),
        decode_context_tokens: int = 0,
    ) -> StepOutcome:
        """Hand out the step's tokens at `end_s` and retire the requests that are done."""
        emitted: list[str] = []
        first: list[str] = []
        finished: list[FinishedRequest] = []
        for request in completed:
            request.output_tokens += 1
            request.num_tokens += 1
            emitted.append(request.request_id)
            if request.first_token_s is None:
                request.first_token_s = end_s
                first.append(request.request_id)
                self._prompt_tokens_total += request.prompt_tokens
                self._prompt_tokens_cached_total += request.cached_tokens
            if request.output_tokens >= request.target_output_tokens:
                self._running.remove(request)
                del self._requests[request.request_id]
                if self._async:
                    self._retiring.append(request)
                else:
                    self._release(request)
                reason: FinishReason = (
                    "length" if request.output_tokens >= request.max_tokens else request.stop_reason
                )
                finished.append(request.finished(reason, end_s))
        self._generation_tokens_total += len(emitted)
        self._end_s = end_s
        # With async scheduling the next pass runs during this step, from its start, if there is
        # anything for it; otherwise the next step is scheduled afresh and nothing is held over.
        if not self._settle_if_idle():
            self._in_flight_start_s = start_s
        return StepOutcome(
            start_s=start_s,
            end_s=end_s,
            gpu_s=gpu_s,
            emitted_ids=tuple(emitted),
            first_token_ids=tuple(first),
            finished=tuple(finished),
            preempted_ids=tuple(r.request_id for r in preempted),
            prefill_tokens=prefill_tokens,
            decode_tokens=decode_tokens,
            stats=self.stats(),
            scheduled_stats=scheduled_stats,
            first_scheduled=first_scheduled,
            decode_context_tokens=decode_context_tokens,
        )

    # --- helpers -------------------------------------------------------------------------

    def _preempt(self, victim: _Request) -> None:
        """Drop a running request's blocks and progress and send it back to the head of the queue."""
        self._release(victim)
        victim.computed_tokens = 0
        victim.num_preemptions += 1
        self._preemptions_total += 1
        self._waiting.appendleft(victim)

    def _release(self, request: _Request) -> None:
        """Give a request's blocks back to the pool; its cached ones stay cached until evicted."""
        held = request.held
        self._pool.release(request.blocks - len(held), held)
        request.blocks = 0
        request.held = []
        request.hashed_blocks = 0

    def _cache_full_blocks(self, request: _Request, computed_tokens: int) -> None:
        """Offer the prompt blocks that `computed_tokens` has just filled to the cache."""
        full = computed_tokens // self._block_size
        request.held += self._pool.cache(request.block_hashes[request.hashed_blocks : full])
        request.hashed_blocks = min(full, len(request.block_hashes))

    def _draw_output_length(self, max_tokens: int, ignore_eos: bool) -> tuple[int, FinishReason]:
        """How many tokens this request will generate, and why it will stop."""
        lengths = self.config.output_lengths
        if ignore_eos or lengths.kind == "never":
            return max_tokens, "length"
        draw = math.exp(self._rng.gauss(math.log(lengths.median_tokens), lengths.sigma))
        eos_at = max(1, round(draw))
        if eos_at >= max_tokens:
            return max_tokens, "length"
        return eos_at, "stop"
