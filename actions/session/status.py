"""The probe's status as a `probe_poll` line keeps it: a row of values under named columns (pure).

A status goes out once a second, so it is kept as compactly as a probe record: values in the
order of `status_columns()` (a row per worker for its lag, in its own columns), floats to the
microsecond and its times in seconds after the poll's. The columns go out once, on the first
line that holds a status, and a reader keeps them; a column this slotop does not know is left
out, one it knows and the row lacks is None. The send times of the requests still streaming are
left out: no pane shows them, and they grow with the load; so is the time the probe is settled
to, which only the merge of its workers' records reads.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from slotop.collectors.probe.records import ProbeStatus

LEFT_OUT = ("streaming_sent_at_s", "settled_at_s")
"""Status fields a recording does not keep (see the module docstring)."""
Columns = Mapping[str, Sequence[str]]
"""`status`: the status's columns; and for each field that holds rows (a worker's lag), theirs."""


def _names(cls: Any) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.name not in LEFT_OUT]


@functools.cache
def _nested() -> dict[str, Any]:
    """The status fields that hold a tuple of dataclasses, with that dataclass."""
    found: dict[str, Any] = {}
    for name, hint in typing.get_type_hints(ProbeStatus).items():
        args = typing.get_args(hint)
        if typing.get_origin(hint) is tuple and args and dataclasses.is_dataclass(args[0]):
            found[name] = args[0]
    return found


@functools.cache
def status_columns() -> dict[str, list[str]]:
    """The columns this slotop writes a status in."""
    columns = {"status": _names(ProbeStatus)}
    for name, item in _nested().items():
        columns[name] = _names(item)
    return columns


def _out(value: Any, name: str, at_s: float) -> Any:
    if isinstance(value, float):
        return round(value - at_s if name.endswith("at_s") else value, 6)
    if isinstance(value, tuple):
        return [_out(item, name, at_s) for item in value]
    return value


def status_row(status: ProbeStatus, at_s: float) -> list[Any]:
    """A status as a row in `status_columns()` order, times after `at_s`."""
    nested, columns = _nested(), status_columns()
    row: list[Any] = []
    for name in columns["status"]:
        value = getattr(status, name)
        if name in nested:
            row.append([[_out(getattr(i, n), n, at_s) for n in columns[name]] for i in value])
        else:
            row.append(_out(value, name, at_s))
    return row


def _in(value: Any, name: str, at_s: float) -> Any:
    if isinstance(value, list):
        return tuple(_in(item, name, at_s) for item in value)
    if name.endswith("at_s") and isinstance(value, int | float) and not isinstance(value, bool):
        return at_s + value
    return value


def _instance(cls: Any, names: Sequence[str], row: Sequence[Any], at_s: float) -> Any:
    """A dataclass from a row under `names`: unknown columns left out, missing ones None (or
    their default)."""
    known = {f.name: f for f in dataclasses.fields(cls)}
    values = {n: _in(v, n, at_s) for n, v in zip(names, row, strict=False) if n in known}
    for name, field in known.items():
        required = (
            field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        )
        if name not in values and required:
            values[name] = None
    return cls(**values)


def status_from_row(row: Sequence[Any], columns: Columns, at_s: float) -> ProbeStatus:
    """The status a row under `columns` holds, its times back after `at_s`."""
    names = list(columns["status"])
    nested = _nested()
    for index, name in enumerate(names):
        if name in nested and index < len(row) and isinstance(row[index], list):
            item_names = columns.get(name, ())
            row = [*row]
            row[index] = [_instance(nested[name], item_names, r, at_s) for r in row[index]]
    status: ProbeStatus = _instance(ProbeStatus, names, row, at_s)
    return status
