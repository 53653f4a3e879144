"""The replay's go-to prompt: type a time in the recording; enter goes there, esc cancels."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static

from slotop.tui.replay.clock import POSITION_WORDS


class GoToScreen(ModalScreen[str | None]):
    """Ask for a time in the recording; dismisses with the text typed, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, span: str) -> None:
        super().__init__()
        self._span = span

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box"):
            yield Label("Go to a time in the recording", id="goto-title")
            yield Static(self._span, id="goto-span")
            yield Input(placeholder="+5:00, 10:15:30, -30, start, end", id="goto-input")
            yield Static(f"Give {POSITION_WORDS}. Enter goes there; esc cancels.")

    def on_mount(self) -> None:
        self.query_one("#goto-input").focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
