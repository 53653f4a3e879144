"""What subcommands share: exit codes, the handler type, --config, the SLO and sweep step flags,
remote load and recording flags."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from slotop.config import Settings
from slotop.redact import Scrubber

if TYPE_CHECKING:
    from slotop.actions.session.recorder import RecordChoice

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace, Settings], int]


class _Scrubbed:
    """A text stream that hides known secrets in everything written to it."""

    def __init__(self, stream: TextIO, scrub: Scrubber) -> None:
        self._stream = stream
        self._scrub = scrub

    def write(self, text: str) -> int:
        self._stream.write(self._scrub(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def scrubbed_output(scrub: Scrubber) -> Iterator[None]:
    """Hide the secrets `scrub` knows in what the command prints to stdout and stderr, the
    last guard behind the code that never prints them (a replica's log, an error's words)."""
    if not scrub:
        yield
        return
    out, err = sys.stdout, sys.stderr
    sys.stdout = _Scrubbed(out, scrub)
    sys.stderr = _Scrubbed(err, scrub)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def add_common(parser: argparse.ArgumentParser) -> None:
    """Add --config, which every subcommand takes."""
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings file (TOML); without it, $SLOTOP_CONFIG, else the first of "
        "./slotop.toml and $XDG_CONFIG_HOME/slotop/slotop.toml (~/.config when unset) that exists",
    )


def add_slo_flags(parser: argparse.ArgumentParser) -> None:
    """Add --ttft-ms, --itl-ms and --percentile, for the commands that judge load by the SLO."""
    group = parser.add_argument_group(
        "the SLO",
        "what a step must hold to count as met, both targets at once; each flag replaces its\n"
        "key in [slo] of the settings file (`slotop sample-config` shows the defaults)",
    )
    group.add_argument(
        "--ttft-ms",
        type=float,
        metavar="MS",
        help="time to first token: its percentile must stay under MS milliseconds "
        "(default: [slo] ttft_ms)",
    )
    group.add_argument(
        "--itl-ms",
        type=float,
        metavar="MS",
        help="inter-token latency, each gap between streamed tokens: its percentile must stay "
        "under MS milliseconds (default: [slo] itl_ms)",
    )
    group.add_argument(
        "--percentile",
        type=float,
        metavar="P",
        help="the percentile both targets hold at, above 0 and below 100: 99 judges p99 "
        "(default: [slo] ttft_percentile and itl_percentile)",
    )


def slo_overrides(args: argparse.Namespace) -> dict[str, float | None]:
    """The [slo] keys that --ttft-ms, --itl-ms and --percentile set, as `with_overrides` takes
    them (None where a flag was not given)."""
    return {
        "slo.ttft_ms": args.ttft_ms,
        "slo.itl_ms": args.itl_ms,
        "slo.ttft_percentile": args.percentile,
        "slo.itl_percentile": args.percentile,
    }


def add_sweep_step_flags(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """Add --max-concurrency and --dwell-s, for the commands that sweep; the group is returned
    for a command's own step flags."""
    group = parser.add_argument_group(
        "sweep steps",
        "how far a sweep ramps and how long each step is measured; each flag replaces its key\n"
        "in [sweep] of the settings file",
    )
    group.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="the highest concurrency a sweep visits: the ramp 1, 2, 4, ... ends on N, never "
        "above [load] max_concurrency (default: [sweep] max_concurrency)",
    )
    group.add_argument(
        "--dwell-s",
        type=float,
        metavar="S",
        help="seconds each step is measured, at least; a step goes on while it is undecided "
        "(the 95%% interval of a percentile straddles its target) or under [sweep] "
        "min_requests, up to [sweep] max_dwell_s, which S lifts when longer "
        "(default: [sweep] dwell_s)",
    )
    return group


def sweep_step_overrides(args: argparse.Namespace, settings: Settings) -> dict[str, float | None]:
    """The [sweep] keys that --max-concurrency and --dwell-s set, as `with_overrides` takes them;
    a dwell longer than max_dwell_s lifts max_dwell_s with it, so the two stay consistent."""
    dwell_s: float | None = args.dwell_s
    return {
        "sweep.max_concurrency": args.max_concurrency,
        "sweep.dwell_s": dwell_s,
        "sweep.max_dwell_s": max(dwell_s, settings.sweep.max_dwell_s) if dwell_s else None,
    }


def add_allow_remote_load(parser: argparse.ArgumentParser) -> None:
    """Add --allow-remote-load, for the commands that may send load."""
    parser.add_argument(
        "--allow-remote-load",
        action="store_true",
        default=None,
        help="allow load on a replica that is not on this machine ([load] allow_remote_load)",
    )


def add_record_flags(parser: argparse.ArgumentParser) -> None:
    """Add --record FILE and --no-record, for the commands that record their session."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="record this session to FILE, a new file (JSONL, mode 0600). By default every "
        "session is recorded to a file named by start time, replica host-port and command in "
        "$XDG_STATE_HOME/slotop/sessions (~/.local/state/slotop/sessions when unset; "
        "[session] folder moves it)",
    )
    group.add_argument(
        "--no-record",
        action="store_true",
        help="do not record this session ([session] record = false does the same for all)",
    )


def record_choice(args: argparse.Namespace, settings: Settings) -> RecordChoice:
    """Whether and where to record, from --record / --no-record and [session]."""
    from slotop.actions.session.recorder import record_choice as choose

    return choose(settings, args.record, args.no_record)


def add_engine(parser: argparse.ArgumentParser) -> None:
    """The `--engine` flag: which engine the replica runs, when telling it from /metrics fails."""
    parser.add_argument(
        "--engine",
        choices=("auto", "vllm", "sglang"),
        help="the replica's engine (default: [replica] engine, auto: told from the vllm: or "
        "sglang: families /metrics serves)",
    )
