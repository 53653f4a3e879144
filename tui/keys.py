"""The key map: one table feeds the bindings, the footer, the help screen and the command palette.

An action that another part of slotop has not delivered yet stays in the table, marked with the
reason it is unavailable, so the operator sees it exists and why it does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KeyAction:
    """A key, the action it runs, its words, and why it is unavailable (empty when it works)."""

    key: str
    action: str
    label: str
    description: str
    unavailable: str = ""
    show: bool = True


KEY_ACTIONS: tuple[KeyAction, ...] = (
    KeyAction("l", "toggle_probe", "Probe", "Turn the load probe on (asks first) or off"),
    KeyAction("plus,equals_sign", "step(1)", "+conc", "Step probe concurrency up by one"),
    KeyAction("minus", "step(-1)", "-conc", "Step probe concurrency down by one"),
    KeyAction("s", "sweep", "Sweep", "Start (asks first) or stop a concurrency sweep"),
    KeyAction(
        "k", "dial('kv_cache_dtype')", "KV dtype", "Restart with another KV-cache dtype (asks)"
    ),
    KeyAction("n", "dial('max_num_seqs')", "Seqs", "Restart with another max_num_seqs (asks)"),
    KeyAction(
        "b",
        "dial('max_num_batched_tokens')",
        "Tokens",
        "Restart with another max_num_batched_tokens (asks)",
    ),
    KeyAction("w", "cycle_window", "Window", "Switch between the long and the short window"),
    KeyAction("c", "toggle_curve", "Curve", "Show the curve as a plot or as its numbers"),
    KeyAction(
        "x",
        "dismiss_change",
        "Hide b/a",
        "Hide the before/after panel until the next restart",
        show=False,
    ),
    KeyAction("p", "toggle_pause", "Pause", "Pause or resume the display (polling goes on)"),
    KeyAction("question_mark", "help", "Help", "Show every key"),
    KeyAction("q", "quit_slotop", "Quit", "Quit: stop the probe and any replica slotop started"),
)


def key_words(key: str) -> str:
    """Show a binding's keys as a person types them."""
    names = {"plus": "+", "equals_sign": "=", "minus": "-", "question_mark": "?"}
    return "/".join(names.get(k, k) for k in key.split(","))
