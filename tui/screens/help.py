"""The help screen: every key, what it does, and whether it is available yet."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

HELP_INTRO = """\
slotop shows whether the replica holds its SLO (TTFT and ITL at named percentiles), what binds
it, and lets you step load and limits and watch the answer. Server percentiles are interpolated
inside histogram buckets; the bucket is shown beside each. Client percentiles come from slotop's
own probe and are exact. N/A means the replica did not say; STALE means the last poll failed.
"""


class HelpScreen(ModalScreen[None]):
    """Keys and their actions; any of ?, q or escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss_help", "Close")
    ]

    def __init__(self, keys: tuple[tuple[str, str, str], ...]) -> None:
        super().__init__()
        self._keys = keys

    def compose(self) -> ComposeResult:
        rows = "\n".join(f"  {key:<8} {words:<40} {state}" for key, words, state in self._keys)
        with VerticalScroll(id="help-box"):
            yield Static(HELP_INTRO + "\nkeys:\n" + rows, id="help-text")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
