"""What a tune is made of: its plan, each configuration it tried, each decision, and the choice.

Every part reads back from its own JSON, so a recorded tune can be reported and resumed; a sweep
inside a trial is kept in `slotop sweep --json`'s form and read back through the sweep's code.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slotop.actions.errors import ActionError
from slotop.actions.replica.spec import Dials
from slotop.actions.restart.starts import StartSpread
from slotop.actions.slo import Binding, Certainty
from slotop.actions.sweep.codec import sweep_from_json, sweep_to_json
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult
from slotop.actions.tune.capacity import Capacity

JSON_SCHEMA = "slotop.tune/1"


class TuneError(ActionError):
    """A tune cannot start, go on or be resumed; the message says why and what to do."""


class Move(enum.Enum):
    """What a decision does: the baseline, one dial the diagnosis names, or stop."""

    BASELINE = "baseline"
    SMALLER_KV_DTYPE = "smaller_kv_dtype"
    MORE_SEQS = "more_seqs"
    FEWER_BATCHED_TOKENS = "fewer_batched_tokens"
    MORE_BATCHED_TOKENS = "more_batched_tokens"
    STOP = "stop"


MOVE_DIAL: Mapping[Move, str] = {
    Move.SMALLER_KV_DTYPE: "kv_cache_dtype",
    Move.MORE_SEQS: "max_num_seqs",
    Move.FEWER_BATCHED_TOKENS: "max_num_batched_tokens",
    Move.MORE_BATCHED_TOKENS: "max_num_batched_tokens",
}
"""The dial each move turns, in `[tune] dials`'s names."""


@dataclass(frozen=True, slots=True)
class TuneSpec:
    """How a tune runs: the sweep every configuration gets (refined), the dials it may turn, its
    time budget, how many candidates, and the token match a smaller KV dtype must keep."""

    sweep: SweepSpec
    dials: frozenset[str]
    budget_s: float
    max_candidates: int
    quality_min_match_ratio: float
    check_quality: bool = True
    keep: bool = False
    start_spread: StartSpread | None = None
    """The replica's start-to-start spread (`slotop restart --starts`): each candidate is a new
    start, so its goodput differs from the baseline's by that much before any dial moves it."""


@dataclass(frozen=True, slots=True)
class Trial:
    """One configuration measured: its dials, why it was tried, its sweep, its goodput at the
    operating point with that figure's standard error, how its restart and quality check went,
    and why it cannot be chosen (None: it can).

    `number` 0 is the baseline (the replica's own dials, no restart). `complete` is False for a
    sweep cut short (an interrupt, the time budget): what it measured stands, but not as a choice.
    """

    number: int
    dials: Dials
    move: Move
    reason: str
    sweep: SweepResult | None
    goodput_rps: float | None = None
    goodput_se_rps: float | None = None
    goodput_batches: int | None = None
    """How many batches `goodput_se_rps` came from (its degrees of freedom are one fewer)."""
    restart: str = "none"
    restart_lines: tuple[str, ...] = ()
    quality: Mapping[str, Any] | None = None
    rejected: str | None = None
    complete: bool = True
    took_s: float | None = None
    capacity: Capacity | None = None
    """The KV budget the replica sized at these dials, read after its restart (None: unread);
    a lower max_num_batched_tokens leaves vLLM's profile run less to reserve, and it shows here."""

    @property
    def kv_tokens(self) -> int | None:
        """KV tokens the cache holds at this trial's dtype (None: unknown)."""
        row = self.capacity.at(self.dials.kv_cache_dtype) if self.capacity is not None else None
        return row.kv_tokens if row is not None else None

    @property
    def concurrency(self) -> int | None:
        """The operating point's concurrency, None when no step met the SLO."""
        return self.sweep.recommendation.concurrency if self.sweep is not None else None

    @property
    def eligible(self) -> bool:
        """Whether the trial can be chosen: complete, not rejected, and an operating point."""
        return (
            self.complete
            and self.rejected is None
            and self.goodput_rps is not None
            and self.concurrency is not None
        )

    def to_json(self) -> dict[str, Any]:
        """The trial as JSON-ready data (its sweep in `slotop sweep --json`'s form)."""
        return {
            "number": self.number,
            "dials": self.dials.to_json(),
            "flags": list(self.dials.flag_args()),
            "move": self.move.value,
            "reason": self.reason,
            "concurrency": self.concurrency,
            "goodput_rps": self.goodput_rps,
            "goodput_se_rps": self.goodput_se_rps,
            "goodput_batches": self.goodput_batches,
            "restart": self.restart,
            "restart_lines": list(self.restart_lines),
            "quality": dict(self.quality) if self.quality is not None else None,
            "rejected": self.rejected,
            "complete": self.complete,
            "took_s": self.took_s,
            "capacity": self.capacity.to_json() if self.capacity is not None else None,
            "sweep": sweep_to_json(self.sweep) if self.sweep is not None else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> Trial:
        """A trial back from `to_json`'s data; TuneError naming `where` when it is not one."""
        try:
            sweep = data.get("sweep")
            capacity = data.get("capacity")
            return cls(
                number=int(data["number"]),
                dials=Dials.from_json(data["dials"]),
                move=Move(data["move"]),
                reason=str(data.get("reason", "")),
                sweep=sweep_from_json(sweep, where) if sweep is not None else None,
                goodput_rps=_number(data.get("goodput_rps")),
                goodput_se_rps=_number(data.get("goodput_se_rps")),
                goodput_batches=_whole(data.get("goodput_batches")),
                restart=str(data.get("restart", "none")),
                restart_lines=tuple(str(line) for line in data.get("restart_lines") or ()),
                quality=data.get("quality"),
                rejected=data.get("rejected"),
                complete=bool(data.get("complete", True)),
                took_s=_number(data.get("took_s")),
                capacity=Capacity.from_json(capacity) if capacity is not None else None,
            )
        except (KeyError, TypeError, ValueError, ActionError) as exc:
            raise TuneError(f"{where}: a tune trial does not read back ({exc})") from None


def _whole(value: Any) -> int | None:
    return int(value) if value is not None else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class DialNote:
    """Why one dial was tried after a trial, or why it was left as it was."""

    dial: str
    tried: bool
    words: str

    def to_json(self) -> dict[str, Any]:
        """The note as JSON-ready data."""
        return {"dial": self.dial, "tried": self.tried, "words": self.words}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DialNote:
        """A note back from `to_json`'s data (KeyError or TypeError if it is not one)."""
        return cls(str(data["dial"]), bool(data["tried"]), str(data["words"]))


@dataclass(frozen=True, slots=True)
class Decision:
    """What the diagnosis of one trial said to do next: a candidate's dials, or stop, and why.

    `binding` and `evidence` are what binds at the step the diagnosis read, `certainty` how sure
    that call is (None: a decision from before it was said), and `considered` why each dial was
    tried or left alone.
    """

    after: int
    binding: Binding | None
    evidence: str
    move: Move
    dials: Dials | None
    words: str
    certainty: Certainty | None = None
    considered: tuple[DialNote, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The decision as JSON-ready data."""
        return {
            "after": self.after,
            "binding": self.binding.value if self.binding is not None else None,
            "certainty": self.certainty.value if self.certainty is not None else None,
            "evidence": self.evidence,
            "move": self.move.value,
            "dials": self.dials.to_json() if self.dials is not None else None,
            "words": self.words,
            "considered": [note.to_json() for note in self.considered],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> Decision:
        """A decision back from `to_json`'s data; TuneError naming `where` when it is not one."""
        try:
            binding = data.get("binding")
            dials = data.get("dials")
            certainty = data.get("certainty")
            return cls(
                after=int(data["after"]),
                binding=Binding(binding) if binding is not None else None,
                evidence=str(data.get("evidence", "")),
                move=Move(data["move"]),
                dials=Dials.from_json(dials) if dials is not None else None,
                words=str(data.get("words", "")),
                certainty=Certainty(certainty) if certainty is not None else None,
                considered=tuple(DialNote.from_json(n) for n in data.get("considered") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TuneError(f"{where}: a tune decision does not read back ({exc})") from None


@dataclass(frozen=True, slots=True)
class Choice:
    """The configuration and concurrency with the highest goodput under both SLOs, how far it is
    from the baseline's against the run-to-run noise of the two, and what binds it next.

    `trial` is None when no configuration met both SLOs at any concurrency.
    """

    trial: int | None
    dials: Dials | None
    concurrency: int | None
    goodput_rps: float | None
    baseline_rps: float | None
    gain_rps: float | None
    noise_rps: float | None
    beyond_noise: bool | None
    binding: Binding | None
    binding_detail: str
    words: str

    def to_json(self) -> dict[str, Any]:
        """The choice as JSON-ready data."""
        return {
            "trial": self.trial,
            "dials": self.dials.to_json() if self.dials is not None else None,
            "flags": list(self.dials.flag_args()) if self.dials is not None else None,
            "concurrency": self.concurrency,
            "goodput_rps": self.goodput_rps,
            "baseline_goodput_rps": self.baseline_rps,
            "gain_rps": self.gain_rps,
            "noise_rps": self.noise_rps,
            "beyond_noise": self.beyond_noise,
            "binds_next": self.binding.value if self.binding is not None else None,
            "binds_next_detail": self.binding_detail,
            "words": self.words,
        }


def operating_step(sweep: SweepResult | None) -> StepResult | None:
    """The measured step at a sweep's operating point (the latest, should one be measured twice)."""
    if sweep is None or sweep.recommendation.concurrency is None:
        return None
    wanted = sweep.recommendation.concurrency
    return next((s for s in reversed(sweep.steps) if s.concurrency == wanted), None)


def break_step(sweep: SweepResult | None) -> StepResult | None:
    """The measured step where the sweep first broke, in concurrency order (None: none broke)."""
    if sweep is None or sweep.recommendation.next_concurrency is None:
        return None
    wanted = sweep.recommendation.next_concurrency
    return next((s for s in reversed(sweep.steps) if s.concurrency == wanted), None)
