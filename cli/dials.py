"""The dial flags `slotop launch` and `slotop restart` share: KV-cache dtype and batch limits."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slotop.actions.restart.command import DialOverrides


def dial_count(value: str) -> int:
    """A batch-limit flag: a whole number ≥ 1, or `default` (0) for the replica's own default."""
    if value.strip().lower() == "default":
        return 0
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number or 'default'") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} must be at least 1 (or 'default')")
    return number


def add_dial_flags(parser: argparse.ArgumentParser) -> None:
    """Add the flags of the dials a restart turns."""
    parser.add_argument(
        "--kv-cache-dtype",
        metavar="DTYPE",
        help="KV-cache element type: auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16, ... "
        "(fp8 holds about twice the tokens of 16-bit)",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=dial_count,
        metavar="N",
        help="most sequences in one batch, or 'default' for the replica's own",
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=dial_count,
        metavar="M",
        help="token budget of one step (chunked prefill), or 'default'",
    )


def dial_overrides(args: argparse.Namespace) -> DialOverrides:
    """The dials the flags gave; those not given stay as they are."""
    from slotop.actions.restart.command import DialOverrides

    return DialOverrides(args.kv_cache_dtype, args.max_num_seqs, args.max_num_batched_tokens)
