"""What SGLang's scheduler reports of the engine: its gauges, token counters, retractions and
queue times, valued from the sim's step outcomes.

SGLang publishes its gauges (`num_running_reqs`, `num_queue_reqs`, `token_usage`, the pool's token
counts, `gen_throughput`, `cache_hit_rate`, `num_retracted_reqs`, ...) at every prefill batch,
every `DECODE_LOG_INTERVAL`-th decode batch, and when it falls idle; between reports they hold.
The engine model mixes prefill chunks and decodes in one step, where SGLang runs them as separate
batches: a step that prefills counts as a prefill batch, and, if it also decodes, as a decode
batch too. The counters (`realtime_tokens`, `prefill_effective_tokens`, `cuda_graph_passes`, the
retraction counters) and the queue-time and per-stage histograms move as the work happens. The
sim's preemptions (recompute) are SGLang's retractions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from slotop.sim.metrics import RequestFacts
from slotop.sim.sglang.config import SglangReplica
from slotop.sim.sglang.defaults import (
    DECODE_LOG_INTERVAL,
    INIT_NEW_TOKEN_RATIO,
    MIN_NEW_TOKEN_RATIO,
    NEW_TOKEN_RATIO_DECAY,
    RETRACT_DECODE_STEPS,
    prefill_graph_sizes,
)
from slotop.sim.sglang.exposition import Histogram
from slotop.sim.sglang.families import (
    PER_STAGE_LATENCY_BUCKETS,
    PREFILL_EFFECTIVE_MODES,
    QUEUE_TIME_BUCKETS,
)
from slotop.sim.types import EngineStats, StepOutcome

_STALE_MARGIN = 64
"""Requests tracked beyond the live ones before those that left unseen (aborted) are dropped."""

GEN_THROUGHPUT_STALE_S = 30.0
"""A prefill report shows the last decode throughput only this long; then 0 (SGLang's rule)."""


class SchedulerStats:
    """The scheduler's published gauges and running counters."""

    def __init__(self, replica: SglangReplica) -> None:
        self.replica = replica
        self.gauges: dict[str, float] = {}
        """Each gauge as the last report left it (empty before the first report)."""
        self.realtime: dict[str, float] = {}
        self.effective = dict.fromkeys(PREFILL_EFFECTIVE_MODES, 0.0)
        self.graph_passes: dict[str, float] = {}
        self.retracted: dict[str, float] = {}
        """The retraction counters, by family; SGLang shows none before the first retraction."""
        self.queue_time = Histogram(QUEUE_TIME_BUCKETS)
        self.stages: dict[str, Histogram] = {}
        self.last_gen_throughput = 0.0
        sizes = prefill_graph_sizes(replica.chunked_prefill_size)
        self._prefill_graph_max = sizes[-1] if sizes else 0
        self._scheduled_s: dict[str, float] = {}
        self._hits_seen = 0
        self._prompt_seen = 0
        self._cached_seen = 0
        self._decode_batches = 0
        self._decoded_since_report = 0
        self._last_decode_report_s = 0.0
        self._retracted_since_report = 0
        self._new_token_ratio = INIT_NEW_TOKEN_RATIO
        self._published_running = 0

    def now(self, stats: EngineStats) -> None:
        """The engine's state now: an engine fallen idle publishes idle gauges at once."""
        if stats.num_running == 0 and stats.num_waiting == 0 and self._published_running:
            self._new_token_ratio = INIT_NEW_TOKEN_RATIO
            self._publish(stats, gen_throughput=0.0)

    def step(
        self,
        outcome: StepOutcome,
        facts: Mapping[str, RequestFacts],
        decoded: Callable[[str], int],
    ) -> None:
        """Count one step; `decoded` tells how many tokens a request has generated so far."""
        for first in outcome.first_scheduled:
            self.queue_time.observe(first.scheduled_s - first.queued_s)
            self._stage("request_process").observe(first.queued_s - first.arrival_s)
            self._scheduled_s[first.request_id] = first.scheduled_s
        for request_id in outcome.first_token_ids:
            scheduled_s = self._scheduled_s.pop(request_id, None)
            if scheduled_s is not None:
                self._stage("prefill_forward").observe(outcome.end_s - scheduled_s)
        if outcome.preempted_ids:
            self._retract(outcome.preempted_ids, facts, decoded)
        self._count_work(outcome)
        for finished in outcome.finished:
            self._scheduled_s.pop(finished.request_id, None)
        if len(self._scheduled_s) > len(facts) + _STALE_MARGIN:
            for gone in [rid for rid in self._scheduled_s if rid not in facts]:
                del self._scheduled_s[gone]

    def _count_work(self, outcome: StepOutcome) -> None:
        """Count the step's tokens and forward passes; publish the gauges when SGLang would."""
        stats = outcome.stats
        hits = stats.prefix_cache_hits_total - self._hits_seen
        self._hits_seen = stats.prefix_cache_hits_total
        prompted = stats.prompt_tokens_total - self._prompt_seen
        cached = stats.prompt_tokens_cached_total - self._cached_seen
        self._prompt_seen = stats.prompt_tokens_total
        self._cached_seen = stats.prompt_tokens_cached_total
        # Counted when a prompt is done, so a retracted request's recompute never counts again.
        if prompted > cached:
            self.effective["input"] += prompted - cached
        if hits:
            self.effective["device_hit"] += hits
        prefill = outcome.prefill_tokens
        decode = outcome.decode_tokens
        if prefill or hits:
            _add(self.realtime, "prefill_compute", prefill)
            _add(self.realtime, "prefill_cache", hits)
            graph = prefill <= self._prefill_graph_max
            _add(self.graph_passes, "prefill_cuda_graph" if graph else "prefill_none", 1)
        if decode:
            _add(self.realtime, "decode", decode)
            self._decoded_since_report += decode
            self._decode_batches += 1
            graph = decode <= self.replica.decode_graph_max_bs
            _add(self.graph_passes, "decode_cuda_graph" if graph else "decode_none", 1)
            if not outcome.preempted_ids:
                self._new_token_ratio = max(
                    self._new_token_ratio - NEW_TOKEN_RATIO_DECAY, MIN_NEW_TOKEN_RATIO
                )
        end_s = outcome.end_s
        if decode and self._decode_batches % DECODE_LOG_INTERVAL == 0:
            gap_s = end_s - self._last_decode_report_s
            self.last_gen_throughput = self._decoded_since_report / gap_s if gap_s > 0 else 0.0
            self._decoded_since_report = 0
            self._last_decode_report_s = end_s
            self.gauges["sglang:decode_sum_seq_lens"] = float(outcome.decode_context_tokens)
            self._publish(stats, gen_throughput=self.last_gen_throughput)
        if prefill or hits:
            stale = end_s - self._last_decode_report_s > GEN_THROUGHPUT_STALE_S
            self.gauges["sglang:cache_hit_rate"] = hits / (hits + prefill) if hits else 0.0
            self.gauges["sglang:new_token_ratio"] = self._new_token_ratio
            self._publish(stats, gen_throughput=0.0 if stale else self.last_gen_throughput)

    def _retract(
        self,
        request_ids: tuple[str, ...],
        facts: Mapping[str, RequestFacts],
        decoded: Callable[[str], int],
    ) -> None:
        """Count a retraction as SGLang counts one, and re-estimate the new-token ratio."""
        known = [facts[rid] for rid in request_ids if rid in facts]
        outputs = sum(decoded(rid) for rid in request_ids)
        self._retracted_since_report = len(request_ids)
        for name, value in (
            ("sglang:num_retracted_requests", len(request_ids)),
            ("sglang:num_retracted_input_tokens", sum(fact.prompt_tokens for fact in known)),
            ("sglang:num_retracted_output_tokens", outputs),
        ):
            _add(self.retracted, name, value, keep_zero=True)
        budget = sum(fact.max_tokens for fact in known)
        estimate = (outputs + RETRACT_DECODE_STEPS * len(request_ids)) / (budget + 1)
        self._new_token_ratio = min(1.0, estimate)

    def _publish(self, stats: EngineStats, *, gen_throughput: float) -> None:
        """One report: every gauge SGLang's `log_stats` sets, from the engine's state."""
        page = self.replica.page_size
        total = self.replica.max_total_num_tokens
        evictable = stats.kv_blocks_cached_free * page
        used = stats.kv_blocks_used * page
        usage = used / total if total else 0.0
        gauges = self.gauges
        gauges["sglang:num_running_reqs"] = float(stats.num_running)
        gauges["sglang:num_queue_reqs"] = float(stats.num_waiting)
        gauges["sglang:gen_throughput"] = gen_throughput
        gauges.setdefault("sglang:cache_hit_rate", 0.0)
        gauges.setdefault("sglang:decode_sum_seq_lens", 0.0)
        gauges["sglang:token_usage"] = round(usage, 2)
        gauges["sglang:full_token_usage"] = usage
        gauges["sglang:num_used_tokens"] = float(used)
        gauges["sglang:kv_available_tokens"] = float(total - used - evictable)
        gauges["sglang:kv_evictable_tokens"] = float(evictable)
        gauges["sglang:kv_used_tokens"] = float(used)
        gauges.setdefault("sglang:new_token_ratio", self._new_token_ratio)
        gauges["sglang:num_retracted_reqs"] = float(self._retracted_since_report)
        gauges["sglang:num_paused_reqs"] = 0.0
        self._retracted_since_report = 0
        self._published_running = stats.num_running

    def _stage(self, stage: str) -> Histogram:
        histogram = self.stages.get(stage)
        if histogram is None:
            histogram = self.stages[stage] = Histogram(PER_STAGE_LATENCY_BUCKETS)
        return histogram


def _add(into: dict[str, float], key: str, value: float, *, keep_zero: bool = False) -> None:
    """Add to a counter, which SGLang creates only when something is added (or zero, if kept)."""
    if value or keep_zero:
        into[key] = into.get(key, 0.0) + value
