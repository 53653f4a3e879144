"""What a flow needs from the app, and nothing more, so flows never import the app.

A flow plans on the UI thread, asks through a modal, applies in a worker, and puts what happened
on the timeline; the app gives it those means and routes keys and worker failures to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen

from slotop.actions.probe_control import ProbeControl
from slotop.actions.session.recorder import SessionRecorder
from slotop.config import Settings
from slotop.tui.views.inputs import Inputs

AnswerT = TypeVar("AnswerT")

NO_PROBE = (
    "no load probe here: slotop knows no URL of this replica's own to send load to; for a "
    "replica read through Prometheus, set [fleet] direct_from_instance = true "
    "(--direct-from-instance), or [replica] url to it"
)
"""Why `l`, `s` and the load keys do nothing in a session without a probe (the fleet's drill-in)."""


class FlowHost(Protocol):
    """The app as a flow sees it: settings and inputs to read, and ways to ask, tell, note and work."""

    @property
    def settings(self) -> Settings:
        """The session's settings."""
        ...

    @property
    def inputs(self) -> Inputs:
        """The newest data the panes are built from."""
        ...

    @property
    def recorder(self) -> SessionRecorder | None:
        """Where the session is recorded, when it is."""
        ...

    @property
    def probe_control(self) -> ProbeControl | None:
        """The load probe's controller, when this session has one."""
        ...

    def clock(self) -> float:
        """Wall-clock seconds, as the timeline stamps events."""
        ...

    def post_message(self, message: Message) -> bool:
        """Post a message to the app; safe from any thread."""
        ...

    def notify(
        self, message: str, *, title: str = "", severity: SeverityLevel = "information"
    ) -> None:
        """Tell the operator something in a toast."""
        ...

    def note(self, kind: str, text: str) -> None:
        """Put an entry on the timeline."""
        ...

    def ask(self, screen: Screen[AnswerT], answered: Callable[[AnswerT | None], None]) -> None:
        """Show a modal and call `answered` with what it returns."""
        ...

    def run_in_thread(
        self, work: Callable[[], object], *, name: str, group: str, exclusive: bool = False
    ) -> None:
        """Run `work` in a thread worker whose failure the app reports."""
        ...

    def render_views(self) -> None:
        """Rebuild the panes from the inputs (after a modal closes, the panes catch up)."""
        ...

    def update_inputs(self, **changes: object) -> None:
        """Replace some of the inputs and redraw."""
        ...

    def hold_records(self, held: bool) -> None:
        """Make the feed leave the probe's records alone (a sweep drains them itself), or not."""
        ...

    def forget_identity(self) -> None:
        """Ask the replica who it is again on the next poll (after a restart)."""
        ...
