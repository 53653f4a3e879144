"""The key map: one table feeds the bindings, the footer, the help screen and the command palette.

An action that another part of slotop has not delivered yet stays in the table, marked with the
reason it is unavailable, so the operator sees it exists and why it does nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KeyAction:
    """A key, the action it runs, its words, and why it is unavailable (empty when it works);
    `changes_replica` marks the keys a replay turns off; `priority` keys win over a focused
    pane's own (the body scrolls with the arrows, home and end)."""

    key: str
    action: str
    label: str
    description: str
    unavailable: str = ""
    show: bool = True
    changes_replica: bool = False
    priority: bool = False


KEY_ACTIONS: tuple[KeyAction, ...] = (
    KeyAction(
        "l",
        "toggle_probe",
        "Probe",
        "Turn the load probe on (asks first) or off",
        changes_replica=True,
    ),
    KeyAction(
        "plus,equals_sign",
        "step(1)",
        "+conc",
        "Step probe concurrency up by one",
        changes_replica=True,
    ),
    KeyAction(
        "minus", "step(-1)", "-conc", "Step probe concurrency down by one", changes_replica=True
    ),
    KeyAction(
        "s",
        "sweep",
        "Sweep",
        "Start (asks first) or stop a concurrency sweep",
        changes_replica=True,
    ),
    KeyAction(
        "t",
        "tune",
        "Tune",
        "Tune the replica: baseline sweep, the dial what binds names, restart and sweep each "
        "(asks first); t again stops it and puts the replica back",
        changes_replica=True,
    ),
    KeyAction(
        "k",
        "dial('kv_cache_dtype')",
        "KV dtype",
        "Restart with another KV-cache dtype (asks)",
        changes_replica=True,
    ),
    KeyAction(
        "n",
        "dial('max_num_seqs')",
        "Seqs",
        "Restart with another max_num_seqs (asks)",
        changes_replica=True,
    ),
    KeyAction(
        "b",
        "dial('max_num_batched_tokens')",
        "Tokens",
        "Restart with another max_num_batched_tokens (asks)",
        changes_replica=True,
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


REPLAY_OFF = "replay: a recording cannot change the replica"
"""Why a replay turns off the keys that would change the replica."""

TRANSPORT_KEYS: tuple[KeyAction, ...] = (
    KeyAction("space,p", "toggle_play", "Play/pause", "Play or pause the recording"),
    KeyAction(
        "right",
        "step_poll(1)",
        "Step",
        "Pause, and step one poll of the replica forward",
        priority=True,
    ),
    KeyAction(
        "left",
        "step_poll(-1)",
        "Back",
        "Pause, and step one poll of the replica back",
        priority=True,
    ),
    KeyAction(
        "right_square_bracket",
        "jump_mark(1)",
        "Next",
        "Pause at the next timeline entry or action (a restart, a load step)",
    ),
    KeyAction(
        "left_square_bracket",
        "jump_mark(-1)",
        "Prev",
        "Pause at the previous timeline entry or action",
    ),
    KeyAction(
        "greater_than_sign", "speed(1)", "Faster", "Play faster: 1×, 2×, 5×, 10×, 60× the recording"
    ),
    KeyAction("less_than_sign", "speed(-1)", "Slower", "Play slower"),
    KeyAction("home", "seek_edge('start')", "Start", "Go to the start", show=False, priority=True),
    KeyAction("end", "seek_edge('end')", "End", "Go to the end", show=False, priority=True),
    KeyAction(
        "g",
        "go_to",
        "Go to",
        "Go to a time: 10:15:30 (the recording's clock), +5:00 from the start, -30 before the end",
    ),
)
"""The replay's own keys: play, pause, step, seek and speed."""


def replay_key_actions() -> tuple[KeyAction, ...]:
    """A replay's keys: the transport, then the dashboard's own, those that would change the
    replica kept (so they are found) but unavailable and off the footer."""
    kept = tuple(
        dataclasses.replace(k, unavailable=REPLAY_OFF, show=False) if k.changes_replica else k
        for k in KEY_ACTIONS
        if k.action not in ("toggle_pause", "quit_slotop")
    )
    leave = KeyAction("q", "quit_slotop", "Quit", "Quit the replay")
    return (*TRANSPORT_KEYS, *kept, leave)


def key_words(key: str) -> str:
    """Show a binding's keys as a person types them."""
    names = {
        "plus": "+",
        "equals_sign": "=",
        "minus": "-",
        "question_mark": "?",
        "greater_than_sign": ">",
        "less_than_sign": "<",
        "left_square_bracket": "[",
        "right_square_bracket": "]",
        "right": "→",
        "left": "←",
    }
    return "/".join(names.get(k, k) for k in key.split(","))
