"""The method's rules in one home: within target, the operating point, what binds, KV full.

The dashboard, the sweep and the sweep's report call these same pure functions, with thresholds
built from the settings, so two screens never disagree about the same replica.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slotop.collectors.engines import engine_label, preemption_words, serves
from slotop.collectors.names import Engine

if TYPE_CHECKING:
    from slotop.collectors.histograms import QuantileEstimate
    from slotop.config import Settings


class Verdict(enum.Enum):
    """How a latency (or a set of them) stands against its target.

    UNDECIDED: there is a value, but the histogram bucket it came from (or the interval a sample
    gives it) straddles the target, so the data cannot say which side the true quantile lies on;
    UNKNOWN: there is no value at all.
    """

    PASS = "pass"
    BREACH = "breach"
    UNDECIDED = "undecided"
    UNKNOWN = "unknown"


def within_target(value_s: float | None, target_s: float) -> bool | None:
    """Met when the value is at or under the target; None when there is no value to judge."""
    return None if value_s is None else value_s <= target_s


def as_verdict(met: bool | None) -> Verdict:
    """A met / not met / unknown answer as a verdict."""
    if met is None:
        return Verdict.UNKNOWN
    return Verdict.PASS if met else Verdict.BREACH


def judge(value_s: float | None, target_s: float) -> Verdict:
    """Pass at or under the target, breach above it, unknown without a value."""
    return as_verdict(within_target(value_s, target_s))


def judge_interval(low_s: float | None, high_s: float | None, target_s: float) -> Verdict:
    """Judge a latency by an interval around it (a bootstrap's 95%): pass when all of it lies at
    or under the target, breach when all of it lies above, undecided when it straddles the
    target (the sample cannot yet say which side the true percentile lies on); unknown without
    one."""
    if low_s is None or high_s is None:
        return Verdict.UNKNOWN
    if high_s <= target_s:
        return Verdict.PASS
    if low_s > target_s:
        return Verdict.BREACH
    return Verdict.UNDECIDED


def judge_estimate(
    estimate: QuantileEstimate | None, target_s: float, client_s: float | None = None
) -> Verdict:
    """Judge a server quantile by its whole bucket, which the client's exact value may decide.

    Pass when the bucket (`le` inclusive) lies at or under the target, breach when it lies wholly
    above it (a clamped estimate's bucket runs to +Inf), and when the target falls inside it the
    client's value at the same percentile decides; without one the verdict is undecided. Without
    a server estimate the client's value is judged alone.
    """
    if estimate is None:
        return judge(client_s, target_s)
    within = estimate.bucket_within(target_s)
    if within is not None:
        return as_verdict(within)
    return Verdict.UNDECIDED if client_s is None else judge(client_s, target_s)


def failures_allow(percentile: float, requests_ok: int, requests_failed: int) -> bool:
    """Whether the failed requests leave a pXX target reachable: at most (100 − XX)% of those
    that ended failed, since a failed request (refused, cut, errored) met no target."""
    ended = requests_ok + requests_failed
    allowed = (100.0 - percentile) / 100.0 * ended
    return requests_failed <= allowed * (1 + 1e-9)


def counting_failures(
    verdict: Verdict, percentile: float, requests_ok: int, requests_failed: int
) -> Verdict:
    """A verdict with failed requests counted against the target, as goodput counts them."""
    return verdict if failures_allow(percentile, requests_ok, requests_failed) else Verdict.BREACH


def overall(verdicts: Iterable[Verdict]) -> Verdict:
    """Breach if any breaches, pass if all pass (and there is at least one); else undecided if
    any is undecided (it may breach), unknown otherwise."""
    seen = tuple(verdicts)
    if Verdict.BREACH in seen:
        return Verdict.BREACH
    if seen and all(v is Verdict.PASS for v in seen):
        return Verdict.PASS
    if Verdict.UNDECIDED in seen:
        return Verdict.UNDECIDED
    return Verdict.UNKNOWN


@dataclass(frozen=True, slots=True)
class OperatingPoint:
    """Where to run: the last level that met the SLO below the first that broke it.

    `concurrency` is None when no level met it before the first break; `first_break` is None
    while no level has broken it (p99 has not bent yet).
    """

    concurrency: int | None
    first_break: int | None

    @property
    def bent(self) -> bool:
        """Whether a level above the operating point broke the SLO."""
        return self.first_break is not None


def operating_point(levels: Iterable[tuple[int, Verdict]]) -> OperatingPoint:
    """Ramp until a level breaks, then back off one step; an unknown or undecided level neither
    meets nor breaks (it cannot be the operating point, and the ramp goes on past it).

    `levels` pairs each concurrency with the caller's verdict on it (the dashboard's curve: both
    targets; the sweep: no flag raised); their order does not matter.
    """
    best: int | None = None
    for concurrency, verdict in sorted(levels, key=lambda level: level[0]):
        if verdict is Verdict.BREACH:
            return OperatingPoint(best, concurrency)
        if verdict is Verdict.PASS:
            best = concurrency
    return OperatingPoint(best, None)


@dataclass(frozen=True, slots=True)
class SloThresholds:
    """The numbers the rules compare against.

    `kv_full_ratio`: KV usage at which the cache counts as full. `queue_waiting_requests`:
    requests waiting at which the queue counts as grown. `token_budget_share`: the share of
    max_num_batched_tokens a step must batch for the budget to bind. `seats_held_share`: the
    share of a measured span's samples running must sit at max_num_seqs for the cap to bind
    when any request waited, the mean queue short of `queue_waiting_requests`. `gpu_busy_pct`:
    GPU utilisation the litmus test asks for.
    """

    kv_full_ratio: float = 0.9
    queue_waiting_requests: float = 1.0
    token_budget_share: float = 0.95
    seats_held_share: float = 0.5
    gpu_busy_pct: float = 80.0

    @classmethod
    def from_settings(cls, settings: Settings) -> SloThresholds:
        """The thresholds the settings name ([sweep] kv_full_ratio, queue_waiting_requests)."""
        return cls(
            kv_full_ratio=settings.sweep.kv_full_ratio,
            queue_waiting_requests=settings.sweep.queue_waiting_requests,
        )


DEFAULT_THRESHOLDS = SloThresholds()
"""The thresholds of a settings file that sets none of them."""


def kv_full(usage_ratio: float | None, thresholds: SloThresholds) -> bool:
    """Whether KV usage is at or above the full mark (unknown usage is not full)."""
    return usage_ratio is not None and usage_ratio >= thresholds.kv_full_ratio


class Binding(enum.Enum):
    """What limits the replica; the sweep's JSON stores these values."""

    NO_DATA = "no_data"
    IDLE = "idle"
    KV_CAPACITY = "kv_capacity"
    SEQ_CAP = "seq_cap"
    TOKEN_BUDGET = "token_budget"
    QUEUEING = "queueing"
    TTFT = "ttft"
    ITL = "itl"
    NOTHING = "nothing"


@dataclass(frozen=True, slots=True)
class TargetReading:
    """One SLO target and the value measured at its percentile (None: no samples)."""

    binding: Binding
    name: str
    percentile: float
    value_s: float | None
    target_s: float

    @property
    def load_ratio(self) -> float:
        """Value over target; infinite without a value, so a missing one counts as nearest."""
        return math.inf if self.value_s is None else self.value_s / self.target_s


@dataclass(frozen=True, slots=True)
class EngineTerms:
    """The engine's words for what the rules name, and whether it reports tokens per step.

    The rules read the same evidence on either engine; only the words, and whether the token
    budget can be judged at all, differ: SGLang retracts where vLLM preempts, names its caps
    `max_running_requests` and `chunked_prefill_size`, and has no tokens-per-step histogram.
    """

    label: str = "vLLM"
    preemptions: str = "preemptions"
    preempt: str = "preempt"
    seq_cap: str = "max_num_seqs"
    token_budget: str = "max_num_batched_tokens"
    batch_tokens_served: bool = True

    @property
    def batch_tokens_missing(self) -> str:
        """Why the steps' batch size is unknown on an engine that does not report it."""
        return f"tokens per step: {self.label} has no such metric"


def engine_terms(engine: Engine) -> EngineTerms:
    """The terms of an engine: vLLM's names, or SGLang's."""
    if engine == "vllm":
        return EngineTerms()
    return EngineTerms(
        label=engine_label(engine),
        preemptions=preemption_words(engine)[1],
        preempt=preemption_words(engine)[0],
        seq_cap="max_running_requests",
        token_budget="chunked_prefill_size",
        batch_tokens_served=serves(engine, "iteration_tokens"),
    )


VLLM_TERMS = EngineTerms()


@dataclass(frozen=True, slots=True)
class BindingEvidence:
    """What the diagnosis looks at, from a live snapshot or a measured sweep step.

    `over_span`: the figures cover a measured span (KV usage is its peak, waiting its mean,
    running its maximum) rather than one reading now. `concurrency` is the load offered, when
    known. `batch_tokens` is how many tokens the busiest steps batched, taken as exact unless
    `batch_tokens_lower` is given: then it was interpolated in a histogram bucket and is only known
    to lie in (`batch_tokens_lower`, `batch_tokens_upper`], the upper bound None (or infinite)
    above the last finite bucket. `targets` (a sweep step's) let an SLO target bind when no
    resource does. Over a span, `running_peak_share` is the share of its samples at which running
    stood at its maximum (`running`), and `waiting_peak` the most that waited in one sample.
    """

    running: float | None
    waiting: float | None
    kv_usage_ratio: float | None
    preemptions: float | None = None
    preemptions_per_s: float | None = None
    concurrency: int | None = None
    batch_tokens: float | None = None
    batch_tokens_lower: float | None = None
    batch_tokens_upper: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    targets: tuple[TargetReading, ...] = ()
    over_span: bool = False
    running_peak_share: float | None = None
    waiting_peak: float | None = None
    waiting_band: float | None = None
    """The ± half-width of the 95% interval of `waiting` over a span (its mean's noise); None:
    unknown (a live reading, or a span too short to batch)."""
    terms: EngineTerms = VLLM_TERMS
    """The engine's words, and whether it reports the steps' batch size at all."""

    @property
    def preempting(self) -> bool:
        """Whether the replica preempted any request."""
        return (self.preemptions or 0) > 0 or (self.preemptions_per_s or 0) > 0


class Certainty(enum.Enum):
    """How sure a call of what binds is.

    CLEAR: every reading the call rests on clears its mark beyond that reading's noise (or is a
    count, or a share held most of the span). WITHIN_NOISE: a reading it rests on lies within its
    noise of the mark, so the call is the likelier reading, not a sure one. NOISE_UNKNOWN: a
    reading it rests on carries no noise estimate (a live reading, an older file).
    """

    CLEAR = "clear"
    WITHIN_NOISE = "within_noise"
    NOISE_UNKNOWN = "noise_unknown"


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """What binds, the evidence in words, and how sure the call is."""

    binding: Binding
    evidence: str
    certainty: Certainty = Certainty.CLEAR


class QueueStanding(enum.Enum):
    """Where the queue stands against its mark, its noise counted."""

    OVER = "over"
    UNDER = "under"
    WITHIN_NOISE = "within_noise"
    UNKNOWN = "unknown"


def queue_standing(e: BindingEvidence, thresholds: SloThresholds) -> QueueStanding:
    """Whether the waiting requests reached the queue's mark: over when the mean less its band
    reaches it, under when the mean plus its band stays short of it, within noise between.

    Without a band the mean is compared as it is (at the mark counts as over).
    """
    if e.waiting is None:
        return QueueStanding.UNKNOWN
    mark, band = thresholds.queue_waiting_requests, e.waiting_band
    if band is None:
        return QueueStanding.OVER if e.waiting >= mark else QueueStanding.UNDER
    if e.waiting - band >= mark:
        return QueueStanding.OVER
    if e.waiting + band < mark:
        return QueueStanding.UNDER
    return QueueStanding.WITHIN_NOISE


def _queue_words(e: BindingEvidence, thresholds: SloThresholds) -> str:
    """The mean queue with its noise against its mark, in words."""
    band = f" ± {e.waiting_band:.2f}" if e.waiting_band is not None else " (noise unknown)"
    return (
        f"{e.waiting or 0:.2f}{band} waiting on average against a mark of "
        f"{thresholds.queue_waiting_requests:g}"
    )


def _queue_certainty(standing: QueueStanding, e: BindingEvidence) -> Certainty:
    if standing is QueueStanding.WITHIN_NOISE:
        return Certainty.WITHIN_NOISE
    if e.over_span and e.waiting_band is None:
        return Certainty.NOISE_UNKNOWN
    return Certainty.CLEAR


def _percent(ratio: float | None) -> str:
    return "N/A" if ratio is None else f"{ratio * 100:.0f}%"


def _kv_words(e: BindingEvidence) -> str:
    if e.over_span:
        usage = (
            f"KV usage peaked at {e.kv_usage_ratio:.0%}"
            if e.kv_usage_ratio is not None
            else "KV usage unknown"
        )
        return f"{usage}, {e.preemptions or 0:g} {e.terms.preemptions}"
    return (
        f"KV {_percent(e.kv_usage_ratio)} used, {e.waiting or 0:.0f} waiting, "
        f"{e.preemptions_per_s or 0:.2f} {e.terms.preemptions}/s"
    )


def seats_held(e: BindingEvidence, thresholds: SloThresholds) -> bool:
    """Whether running sat at a known max_num_seqs for most of a measured span while some
    request waited.

    At a knee the seats can be full with under one request waiting on average: each request's
    turnaround in the client leaves its successor unsent for a moment, which pulls the span's
    mean below the queue mark though every request that came waited for a seat.
    """
    share, cap = e.running_peak_share, e.max_num_seqs
    return (
        e.over_span
        and share is not None
        and cap is not None
        and e.running is not None
        and e.running >= cap
        and share >= thresholds.seats_held_share
        and (e.waiting_peak or 0) > 0
    )


def _seq_cap_words(
    e: BindingEvidence, running: float, thresholds: SloThresholds, seats_full: bool
) -> str:
    if e.over_span:
        cap = f" ({e.terms.seq_cap} {e.max_num_seqs})" if e.max_num_seqs else ""
        held = (
            f" for {e.running_peak_share:.0%} of the span"
            if e.running_peak_share is not None
            else ""
        )
        waited = (
            f"{e.waiting or 0:.1f} waited on average"
            if seats_full or e.waiting_band is None
            else _queue_words(e, thresholds)
        )
        return f"running held at {running:g}{cap}{held} while {waited}"
    return f"{running:.0f} running = {e.terms.seq_cap}, {e.waiting or 0:.0f} waiting"


def _target_words(reading: TargetReading) -> str:
    if reading.value_s is None:
        return f"no {reading.name} samples"
    return (
        f"{reading.name} p{reading.percentile:g} {reading.value_s * 1000:.1f} ms "
        f"vs {reading.target_s * 1000:g} ms"
    )


def _bucket_words(lower: float, upper: float) -> str:
    top = "+Inf" if math.isinf(upper) else f"{upper:,.0f}"
    return f"bucket {lower:,.0f}–{top}"


def token_budget_binds(e: BindingEvidence, budget: int, thresholds: SloThresholds) -> bool | None:
    """Whether the busiest steps batched the budget's share; None when their bucket straddles it.

    A histogram's bucket holds the values in (lower, upper]: all of them reach the share when the
    lower bound does, none when the upper bound falls short, and the bucket cannot tell otherwise.
    An exact count (no bounds) is compared as it is; no count at all is None as well.
    """
    share_tokens = thresholds.token_budget_share * budget
    if e.batch_tokens_lower is None:
        return None if e.batch_tokens is None else e.batch_tokens >= share_tokens
    upper = math.inf if e.batch_tokens_upper is None else e.batch_tokens_upper
    if e.batch_tokens_lower >= share_tokens:
        return True
    if upper < share_tokens:
        return False
    return None


def _token_budget_words(e: BindingEvidence, budget: int, binds: bool | None) -> str:
    lower = e.batch_tokens_lower
    if lower is None:
        return f"steps batched up to {e.batch_tokens or 0:,.0f} tokens of a {budget:,} budget"
    upper = math.inf if e.batch_tokens_upper is None else e.batch_tokens_upper
    bucket = _bucket_words(lower, upper)
    if binds:
        return f"steps batched at least {lower:,.0f} tokens ({bucket}) of a {budget:,} budget"
    most = f"over {lower:,.0f}" if math.isinf(upper) else f"at most {upper:,.0f}"
    return (
        f"steps batched {most} tokens ({bucket}) against a {budget:,} budget: "
        "the buckets cannot tell whether it binds"
    )


def _budget_unread_words(e: BindingEvidence) -> str:
    """Why the token budget is not judged on an engine that does not report tokens per step."""
    budget = e.max_num_batched_tokens
    dial = f"{e.terms.token_budget} {budget:,}" if budget else e.terms.token_budget
    return f"whether {dial} binds cannot be read ({e.terms.batch_tokens_missing})"


def what_binds(e: BindingEvidence, thresholds: SloThresholds) -> Diagnosis:
    """Name what limits the replica, checking in this order, and say how sure the call is.

    No data: neither running nor KV usage known, and no SLO reading. KV capacity: the replica
    preempts, or KV usage is at the full mark while requests queue. The sequence cap: requests
    queue while running is at max_num_seqs (or, that unknown, below the offered concurrency), or
    over a measured span running sat at max_num_seqs most of the time while any request waited
    (`seats_held`).
    The token budget: steps batch at least its share of max_num_batched_tokens
    (`token_budget_binds`; a bucket that straddles the share binds nothing, and the evidence
    says so), or (batch size unknown) requests queue with a budget set and the cache not full.
    On an engine that reports no tokens per step (SGLang) the token budget is never named, and
    the evidence says it could not be read. Then, given SLO readings, the target nearest its
    limit; else queueing, idle, or nothing.

    The queue is read with its noise (`queue_standing`): a mean within its band of the mark
    counts as a queue for the resources, the call then WITHIN_NOISE, and a call past the
    resources says the queue could not be told from its mark.
    """
    running, waiting, usage = e.running, e.waiting, e.kv_usage_ratio
    if running is None and usage is None and not e.targets:
        return Diagnosis(Binding.NO_DATA, "the replica reports neither running requests nor KV use")
    standing = queue_standing(e, thresholds)
    queued = standing is QueueStanding.OVER
    maybe_queued = queued or standing is QueueStanding.WITHIN_NOISE
    if e.preempting:
        return Diagnosis(Binding.KV_CAPACITY, _kv_words(e))
    if maybe_queued and kv_full(usage, thresholds):
        words = _kv_words(e)
        if e.waiting_band is not None:
            words += f"; {_queue_words(e, thresholds)}"
        return Diagnosis(Binding.KV_CAPACITY, words, _queue_certainty(standing, e))
    held = seats_held(e, thresholds)
    if (maybe_queued or held) and running is not None:
        at_cap = (
            running >= e.max_num_seqs
            if e.max_num_seqs is not None
            else e.concurrency is not None and running < e.concurrency
        )
        if at_cap:
            certainty = Certainty.CLEAR if held else _queue_certainty(standing, e)
            return Diagnosis(
                Binding.SEQ_CAP, _seq_cap_words(e, running, thresholds, held), certainty
            )
    budget = e.max_num_batched_tokens
    batch_known = e.batch_tokens is not None or e.batch_tokens_lower is not None
    if not e.terms.batch_tokens_served:
        found = _past_the_resources(e, standing, thresholds)
        return Diagnosis(
            found.binding, f"{found.evidence}; {_budget_unread_words(e)}", found.certainty
        )
    if budget and batch_known:
        binds = token_budget_binds(e, budget, thresholds)
        if binds:
            return Diagnosis(Binding.TOKEN_BUDGET, _token_budget_words(e, budget, binds))
        if binds is None:
            found = _past_the_resources(e, standing, thresholds)
            undecided = _token_budget_words(e, budget, binds)
            return Diagnosis(found.binding, f"{found.evidence}; {undecided}", found.certainty)
    elif budget and queued and usage is not None:
        return Diagnosis(
            Binding.TOKEN_BUDGET,
            f"{waiting or 0:.0f} waiting with KV {_percent(usage)} used: prefill is chunked at "
            f"{budget:,} tokens per step",
        )
    return _past_the_resources(e, standing, thresholds)


def _past_the_resources(
    e: BindingEvidence, standing: QueueStanding, thresholds: SloThresholds
) -> Diagnosis:
    """What binds when no resource does: the SLO target nearest its limit, a queue, or nothing."""
    running, waiting, usage = e.running, e.waiting, e.kv_usage_ratio
    if e.targets:
        nearest = max(e.targets, key=lambda reading: reading.load_ratio)
        if standing is QueueStanding.WITHIN_NOISE:
            return Diagnosis(
                nearest.binding,
                f"{_target_words(nearest)}; the queue ({_queue_words(e, thresholds)}) cannot be "
                "told from its mark, so a resource may bind as well",
                Certainty.WITHIN_NOISE,
            )
        return Diagnosis(nearest.binding, _target_words(nearest))
    if standing is QueueStanding.OVER:
        return Diagnosis(
            Binding.QUEUEING,
            f"{waiting or 0:.0f} waiting with KV {_percent(usage)} used"
            + ("" if e.max_num_seqs is not None else f"; {e.terms.seq_cap} unknown"),
        )
    if not running:
        return Diagnosis(Binding.IDLE, "no request running or waiting")
    return Diagnosis(
        Binding.NOTHING, f"{running:.0f} running, none waiting, KV {_percent(usage)} used"
    )
