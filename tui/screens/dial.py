"""The dial prompt: pick a KV dtype, or type a whole number for a batch limit; esc cancels."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static


class DialScreen(ModalScreen[str | None]):
    """Ask for a dial's new value; dismisses with the value as text, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, current: str, choices: tuple[str, ...] = ()) -> None:
        super().__init__()
        self._title = title
        self._current = current
        self._choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="dial-box"):
            yield Label(self._title, id="dial-title")
            yield Static(f"now: {self._current}", id="dial-current")
            if self._choices:
                yield OptionList(*self._choices, id="dial-choices")
            else:
                yield Input(
                    placeholder="a whole number, or 0 for the replica's default",
                    type="integer",
                    id="dial-input",
                )
            yield Static("enter applies the choice to a plan you confirm next; esc cancels")

    def on_mount(self) -> None:
        target = "#dial-choices" if self._choices else "#dial-input"
        self.query_one(target).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(str(event.option.prompt))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
