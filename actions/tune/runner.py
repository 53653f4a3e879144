"""The tune's loop: baseline, then one diagnosed candidate after another, then the replica restored.

The replica's parts (restart with verify, a refined sweep, the greedy quality check) and the
clock are injected, so the loop runs against fakes in tests and against a real replica in the
command and the dashboard. A cancel (Ctrl-C, SIGTERM, the dashboard's key) and the time budget
are checked between phases and at every tick of a sweep; either way the loop ends the same: the
replica goes back to its original dials (or, with `keep` and a whole run, the chosen ones),
verified, and the result holds every trial so far.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.noise import SideSpread, side_spread
from slotop.actions.sweep.decide import ReplicaLimits, StopReason
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import StepMeasured, SweepProgress, SweepResult
from slotop.actions.tune.capacity import Capacity
from slotop.actions.tune.diagnose import choose, next_decision
from slotop.actions.tune.model import (
    Choice,
    Decision,
    Move,
    Trial,
    TuneSpec,
    operating_step,
)
from slotop.collectors.probe.records import ProbeRecord


@dataclass(frozen=True, slots=True)
class Applied:
    """How a restart to new dials ended: its outcome, the dials it runs now (None: down), its
    lines as `slotop restart` prints them, its downtime, and the KV budget it sized."""

    outcome: str
    dials: Dials | None
    lines: tuple[str, ...] = ()
    downtime_s: float | None = None
    capacity: Capacity | None = None
    """The KV budget the replica sized at its new dials (None: not read)."""


@dataclass(frozen=True, slots=True)
class QualityResult:
    """The greedy quality check after a KV dtype change: its JSON, and the share of output tokens
    identical position by position (None: it did not run, and `data` says why)."""

    data: Mapping[str, Any]
    match_ratio: float | None


class TuneReplica(Protocol):
    """The replica a tune turns: restart with verify, verify alone, sweep, quality check."""

    def apply(self, before: Dials, after: Dials) -> Applied: ...
    def verify(self, dials: Dials) -> tuple[bool, tuple[str, ...]]: ...
    def sweep(
        self,
        spec: SweepSpec,
        resume: SweepResult | None,
        cancel: threading.Event,
        on_progress: Callable[[SweepProgress], None],
        on_measured: StepMeasured,
    ) -> SweepResult: ...
    def quality_baseline(self) -> object: ...
    def quality_check(self, baseline: object, outcome: str) -> QualityResult: ...


@dataclass(frozen=True, slots=True)
class TuneState:
    """A tune so far (from a recording): its trials, the last perhaps cut short, its decisions."""

    trials: tuple[Trial, ...] = ()
    decisions: tuple[Decision, ...] = ()


@dataclass(frozen=True, slots=True)
class TuneResult:
    """A tune at its end: every trial and decision, the choice, and where the replica was left.

    `ended` is what the replica runs now (None: down), `verified` whether that was verified;
    `stop_words` why the loop ended; `interrupted` whether a cancel ended it (resumable).
    """

    url: str
    spec: TuneSpec
    capacity: Capacity | None
    original: Dials
    trials: tuple[Trial, ...]
    decisions: tuple[Decision, ...]
    choice: Choice
    ended: Dials | None
    verified: bool
    end_lines: tuple[str, ...]
    stop_words: str
    interrupted: bool
    took_s: float
    resumable: bool = False
    """Whether a cancel or the time budget cut it short (what `--resume` goes on with)."""


class _Cut(Exception):
    """A phase saw the cancel or the deadline; the loop ends there."""


class TuneRunner:
    """Runs one tune against one replica; build it, then call `run` once."""

    def __init__(
        self,
        replica: TuneReplica,
        spec: TuneSpec,
        capacity: Capacity | None,
        original: Dials,
        url: str,
        *,
        current: Dials | None = None,
        clock: Callable[[], float] = time.monotonic,
        cancel: threading.Event | None = None,
        on_note: Callable[[str], None] | None = None,
        on_record: Callable[[str, Mapping[str, Any]], None] | None = None,
        on_progress: Callable[[SweepProgress], None] | None = None,
    ) -> None:
        self._replica = replica
        self._spec = spec
        self._capacity = capacity
        self._original = original
        self._url = url
        self._clock = clock
        self.cancel = cancel or threading.Event()
        self._note = on_note or (lambda _text: None)
        self._record = on_record or (lambda _kind, _data: None)
        self._on_progress = on_progress
        self._current: Dials | None = current if current is not None else original
        self._trials: list[Trial] = []
        self._deadline = 0.0
        self._budget_hit = False
        self._quality_baseline: object | None = None

    def run(self, resume: TuneState | None = None) -> TuneResult:
        """Tune until a decision stops it, the budget or a cancel; then restore and choose."""
        started = self._clock()
        self._deadline = started + self._spec.budget_s
        trials = self._trials
        trials.extend(resume.trials if resume is not None else ())
        decisions = list(resume.decisions) if resume is not None else []
        pending = trials.pop() if trials and not trials[-1].complete else None
        stop_words = ""
        cut = False
        try:
            if not trials:
                self._baseline(pending.sweep if pending is not None else None)
            elif pending is not None:  # the candidate a cancel cut short, where it was
                self._try(
                    pending.number, pending.dials, pending.move, pending.reason, pending.sweep
                )
            while True:
                decision = next_decision(trials, self._capacity, self._spec)
                if decision.move is not Move.STOP:
                    decision = self._within_limits(decision, trials)
                decisions.append(decision)
                self._record("tune_decision", {"decision": decision.to_json()})
                self._note(f"decision after #{decision.after}: {decision.words}")
                if decision.move is Move.STOP or decision.dials is None:
                    stop_words = decision.words
                    break
                self._try(len(trials), decision.dials, decision.move, decision.words, None)
        except _Cut:
            cut = self._current is not None
            stop_words = (
                "the time budget ran out"
                if self._budget_hit
                else "the replica went down"
                if self._current is None
                else "interrupted: resume with --resume"
            )
        choice = choose(trials, self._spec.start_spread)
        interrupted = self.cancel.is_set() and not self._budget_hit
        ended, verified, lines = self._restore(choice, interrupted)
        return TuneResult(
            url=self._url,
            spec=self._spec,
            capacity=self._capacity,
            original=self._original,
            trials=tuple(trials),
            decisions=tuple(decisions),
            choice=choice,
            ended=ended,
            verified=verified,
            end_lines=lines,
            stop_words=stop_words,
            interrupted=interrupted,
            took_s=self._clock() - started,
            resumable=cut,
        )

    def _within_limits(self, decision: Decision, trials: Sequence[Trial]) -> Decision:
        """The decision, or a stop when the candidate count or the time budget would be passed."""
        spec = self._spec
        if len(trials) - 1 >= spec.max_candidates:
            count = spec.max_candidates
            tried = f"{count} candidate{'s' if count != 1 else ''} tried"
            words = f"{tried} ([tune] max_candidates); next was: "
            return replace(decision, move=Move.STOP, dials=None, words=words + decision.words)
        longest = max((t.took_s or 0.0 for t in trials), default=0.0)
        left = self._deadline - self._clock()
        if longest > left:
            return replace(
                decision,
                move=Move.STOP,
                dials=None,
                words=f"the time budget has {left / 60:.1f} min left, and a configuration took "
                f"up to {longest / 60:.1f} min; next was: {decision.words}",
            )
        return decision

    def _check(self) -> None:
        if self._clock() > self._deadline:
            self._budget_hit = True
        if self._budget_hit or self.cancel.is_set():
            raise _Cut

    def _baseline(self, resume: SweepResult | None) -> None:
        dials = self._original
        self._note(f"baseline: a sweep at the replica's own dials ({' '.join(dials.flag_args())})")
        trial = Trial(
            0, dials, Move.BASELINE, "the replica's own dials", None, capacity=self._capacity
        )
        self._measured(trial, resume, self._clock())

    def _try(
        self, number: int, dials: Dials, move: Move, reason: str, resume: SweepResult | None
    ) -> None:
        """Restart into a candidate's dials, check quality where the KV dtype changed, sweep."""
        began = self._clock()
        self._check()
        self._note(f"#{number}: {' '.join(dials.flag_args())}")
        self._record("tune_candidate", {"number": number, "dials": dials.to_json()})
        before = self._current or self._original
        checks_quality = self._spec.check_quality and dials.kv_cache_dtype not in (
            before.kv_cache_dtype,
            self._original.kv_cache_dtype,
        )
        if checks_quality and self._quality_baseline is None:
            self._note("quality check: greedy prompts on the original KV dtype, before the restart")
            self._quality_baseline = self._replica.quality_baseline()
        applied = self._replica.apply(before, dials)
        self._current = applied.dials
        trial = Trial(
            number,
            dials,
            move,
            reason,
            None,
            restart=applied.outcome,
            restart_lines=applied.lines,
            capacity=applied.capacity,
        )
        if applied.outcome != "applied":
            why = "the replica is DOWN" if applied.dials is None else "it rolled back"
            self._done(replace(trial, rejected=f"the restart failed: {why}"), began)
            if applied.dials is None:
                raise _Cut
            return
        if checks_quality:
            self._note("quality check: the same prompts after the restart")
            checked = self._replica.quality_check(self._quality_baseline, applied.outcome)
            trial = replace(trial, quality=checked.data)
            floor = self._spec.quality_min_match_ratio
            if checked.match_ratio is None:
                why = "the quality check did not run, so the KV dtype change is unconfirmed"
                trial = replace(trial, rejected=why)
            elif checked.match_ratio < floor:
                why = (
                    f"the quality check kept {checked.match_ratio:.0%} of output tokens "
                    f"identical, under the {floor:.0%} required"
                )
                trial = replace(trial, rejected=why)
        if trial.rejected is not None:
            self._done(trial, began)
            return
        self._measured(trial, resume, began)

    def _measured(self, trial: Trial, resume: SweepResult | None, began: float) -> None:
        """Sweep the replica as it runs now; the trial with its sweep, goodput and its error."""
        self._check()
        spec = self._spec.sweep
        limits = ReplicaLimits(
            trial.dials.max_num_seqs, trial.dials.max_num_batched_tokens, trial.dials.engine
        )
        sweep_spec = replace(spec, refine=True, limits=limits)
        errors: dict[int, SideSpread] = {}
        targets = spec.slo.goodput_targets

        def measured(step: StepResult, records: Sequence[ProbeRecord]) -> None:
            # the goodput rate's error from its batch means, as the before/after estimates it
            # (no percentiles asked; the share's bootstrap is not used here)
            end = step.started_at_s + step.measured_s
            errors[step.concurrency] = side_spread(
                records, step.started_at_s, end, (), targets, replicates=2
            )

        cancel = threading.Event()

        def progress(update: SweepProgress) -> None:
            if self._clock() > self._deadline:
                self._budget_hit = True
            if self._budget_hit or self.cancel.is_set():
                cancel.set()
            if self._on_progress is not None:
                self._on_progress(update)

        sweep = self._replica.sweep(sweep_spec, resume, cancel, progress, measured)
        point = operating_step(sweep)
        spread = errors.get(point.concurrency) if point is not None else None
        complete = sweep.stop is not StopReason.INTERRUPTED
        trial = replace(
            trial,
            sweep=sweep,
            goodput_rps=point.goodput_rps if point is not None else None,
            goodput_se_rps=spread.goodput_rps if spread is not None else None,
            goodput_batches=spread.batches if spread is not None else None,
            complete=complete,
            rejected=trial.rejected or (None if complete else "its sweep was cut short"),
        )
        self._done(trial, began)
        if not complete:
            raise _Cut

    def _done(self, trial: Trial, began: float) -> None:
        trial = replace(trial, took_s=self._clock() - began)
        self._trials.append(trial)
        self._record("tune_trial", {"trial": trial.to_json()})
        point = f"concurrency {trial.concurrency}" if trial.concurrency else "no operating point"
        goodput = f", goodput {trial.goodput_rps:.2f} req/s" if trial.goodput_rps else ""
        rejected = f"; not a choice: {trial.rejected}" if trial.rejected else ""
        self._note(f"#{trial.number}: {point}{goodput}{rejected}")

    def _restore(
        self, choice: Choice, interrupted: bool
    ) -> tuple[Dials | None, bool, tuple[str, ...]]:
        """Put the replica on its original dials (or the chosen ones with `keep`), verified."""
        keep = self._spec.keep and not interrupted and choice.dials is not None
        target = choice.dials if keep and choice.dials is not None else self._original
        now = self._current
        if now is None:
            return None, False, ("the replica is DOWN: a restart and its rollback failed",)
        if now == target:
            ok, lines = self._replica.verify(target)
            self._record("tune_restored", {"dials": target.to_json(), "verified": ok})
            return target, ok, lines
        self._note(f"restoring: {' '.join(target.flag_args())}")
        applied = self._replica.apply(now, target)
        self._current = applied.dials
        ok = applied.outcome == "applied"
        self._record(
            "tune_restored", {"dials": (applied.dials or target).to_json(), "verified": ok}
        )
        return applied.dials, ok, applied.lines
