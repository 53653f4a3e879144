"""The fleet screen: one row per replica, worst first, a row per model, refreshed in place.

A poll loop (one thread, never overlapping itself) asks the fleet watch for a table every
refresh interval and posts it; the app changes only the cells whose text changed, adds and
removes rows as replicas come and go, and re-sorts only when the order changed. Enter on a
replica ends the app with that replica chosen, so the runner can open its dashboard; a poll
then in flight is not waited for, but the watch runs one refresh at a time, so the next fleet
screen's first poll begins only once it ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.message import Message
from textual.widgets import DataTable, Static

from slotop.actions.fleet.table import FleetTable, ReplicaRow
from slotop.collectors.fleet import ReplicaKey
from slotop.collectors.poller import Poller, PollResult
from slotop.config import Settings
from slotop.tui.driver import slotop_driver
from slotop.tui.fleet.view import (
    NARROW_BELOW,
    Column,
    columns,
    model_cells,
    notes,
    replica_cells,
    short_names,
    title_line,
)
from slotop.tui.textual_internals import PrunedFooter


@dataclass(frozen=True, slots=True)
class DrillIn:
    """The replica the operator chose with Enter."""

    key: ReplicaKey
    name: str
    model: str


class FleetUpdated(Message):
    """A new fleet table; a newer one replaces one still queued."""

    def __init__(self, table: FleetTable) -> None:
        super().__init__()
        self.table = table

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FleetUpdated)


def row_key(key: ReplicaKey) -> str:
    """A replica's row key in the table: its labels, stable across polls."""
    return "\x1f".join(f"{name}={value}" for name, value in key.labels)


class TableKeeper:
    """Keeps one DataTable equal to a list of rows, changing only what changed."""

    def __init__(self, table: DataTable[Text]) -> None:
        self.table = table
        self.cells: dict[str, dict[str, Text]] = {}
        self.order: list[str] = []
        self.shown: tuple[Column, ...] = ()

    def set_columns(self, shown: tuple[Column, ...]) -> None:
        """Lay the columns out anew (a resize across the breakpoint): the rows are re-added."""
        if shown == self.shown:
            return
        self.shown = shown
        self.table.clear(columns=True)
        for column in shown:
            self.table.add_column(column.heading, key=column.key)
        rows = dict(self.cells)
        self.cells, self.order = {}, []
        self.show(list(rows.items()))

    def show(self, rows: list[tuple[str, dict[str, Text]]]) -> None:
        """Make the table hold these rows, in this order."""
        wanted = [key for key, _ in rows]
        for key in set(self.cells) - set(wanted):
            self.table.remove_row(key)
            del self.cells[key]
        for key, cells in rows:
            before = self.cells.get(key)
            if before is None:
                self.table.add_row(*(cells[c.key] for c in self.shown), key=key)
            else:
                for column in self.shown:
                    if before.get(column.key) != cells[column.key]:
                        self.table.update_cell(
                            key, column.key, cells[column.key], update_width=True
                        )  # N/A at first, BREACH later: the column grows to hold it
            self.cells[key] = cells
        if wanted != self.order:
            self.order = wanted
            # Names are unique in a table (rows of replicas, or of models), so they sort it.
            position = {str(cells["name"]): index for index, (_, cells) in enumerate(rows)}
            self.table.sort("name", key=lambda name: position.get(str(name), len(position)))


class FleetApp(App[DrillIn | None]):
    """Every replica of a fleet at a glance; Enter opens one replica's dashboard."""

    CSS_PATH = Path(__file__).parents[1] / "app.tcss"  # the dashboard's one stylesheet
    TITLE = "slotop fleet"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "enter",
            "drill_in",
            "Dashboard",
            tooltip="Open the chosen replica's dashboard",
            priority=True,
        ),
        Binding("q", "quit_fleet", "Quit"),
    ]

    def get_driver_class(self) -> type[Driver]:
        return slotop_driver(super().get_driver_class())

    def __init__(
        self,
        settings: Settings,
        refresh: Callable[[], FleetTable] | None,
        *,
        clock: Callable[[], float] = time.time,
        first: FleetTable | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self._refresh = refresh
        self._clock = clock
        self.fleet: FleetTable | None = first
        self._poller: Poller[FleetTable] | None = None
        self._replicas: TableKeeper | None = None
        self._models: TableKeeper | None = None
        self._keys: dict[str, ReplicaRow] = {}

    def compose(self) -> ComposeResult:
        yield Static("slotop fleet", id="fleet-title")
        yield Static("waiting for the first answer…", id="fleet-state")
        yield DataTable(id="fleet-replicas", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="fleet-models", cursor_type="none", show_cursor=False)
        yield Static("", id="fleet-notes")
        yield PrunedFooter()

    def on_mount(self) -> None:
        self._replicas = TableKeeper(self.query_one("#fleet-replicas", DataTable))
        self._models = TableKeeper(self.query_one("#fleet-models", DataTable))
        self._lay_out()
        if self.fleet is not None:
            self.show(self.fleet)
        if self._refresh is not None:
            self._poller = Poller(
                self._refresh,
                self._posted,
                interval_s=self.settings.tui.refresh_s,
                name="slotop-fleet",
            )
            self._poller.start()
        self.set_interval(1.0, self._tick)

    def _posted(self, result: PollResult[FleetTable]) -> None:
        table = result.value
        if table is not None and result.error is not None:
            # A fault of slotop's own, not the source's: the last table, saying so.
            table = replace(table, error=f"refresh failed: {result.error}")
        if table is not None:
            self.post_message(FleetUpdated(table))

    def _lay_out(self, width: int | None = None) -> None:
        slo = self.settings.slo
        narrow = (self.size.width if width is None else width) < NARROW_BELOW
        percentiles = (slo.ttft_percentile, slo.itl_percentile)
        for keeper, models in ((self._replicas, False), (self._models, True)):
            if keeper is not None:
                keeper.set_columns(columns(percentiles, narrow=narrow, models=models))

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out(event.size.width)

    def on_fleet_updated(self, message: FleetUpdated) -> None:
        self.show(message.table)

    def show(self, table: FleetTable) -> None:
        """Bring every widget up to this table, changing only what changed."""
        self.fleet = table
        if self._replicas is None or self._models is None:
            return
        with self.batch_update():
            self._keys = {row_key(row.key): row for row in table.rows}
            names = short_names(row.name for row in table.rows)
            self._replicas.show(
                [(row_key(r.key), replica_cells(r, names[r.name])) for r in table.rows]
            )
            self._models.show(
                [(f"model={m.engine}:{m.model}", model_cells(m)) for m in table.models]
            )
            self._tick()
            lines = notes(table)
            self.query_one("#fleet-notes", Static).update("\n".join(lines))

    def _tick(self) -> None:
        title, state = title_line(self.fleet, self._clock())
        self.query_one("#fleet-title", Static).update(title)
        widget = self.query_one("#fleet-state", Static)
        widget.update(state)
        widget.set_class(state.startswith("STALE"), "-stale")

    def action_drill_in(self) -> None:
        table = self.query_one("#fleet-replicas", DataTable)
        if table.row_count == 0:
            self.notify("no replica to open yet", severity="warning")
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        row = self._keys.get(key or "")
        if row is None:
            return
        self._stop()
        self.exit(DrillIn(row.key, row.name, row.model))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_drill_in()

    def action_quit_fleet(self) -> None:
        self._stop()
        self.exit(None)

    def _stop(self) -> None:
        if self._poller is not None:
            self._poller.stop(timeout_s=0)
            self._poller = None

    def on_unmount(self) -> None:
        self._stop()
