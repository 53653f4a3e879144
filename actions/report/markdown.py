"""Markdown pieces for the report: tables, escaped cells, and times said one way (pure)."""

from __future__ import annotations

import time
from collections.abc import Sequence


def cell(text: object) -> str:
    """A table cell: pipes escaped and line breaks folded, so a cell never breaks its row."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def table(
    header: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None
) -> list[str]:
    """A GitHub-flavoured table; `align` holds an `l` or `r` per column (default: the first
    column left, the others right, as numbers read)."""
    shape = align or "l" + "r" * (len(header) - 1)
    marks = ["---:" if shape[i : i + 1] == "r" else "---" for i in range(len(header))]
    lines = [
        "| " + " | ".join(cell(h) for h in header) + " |",
        "| " + " | ".join(marks) + " |",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def utc(t_s: float) -> str:
    """A Unix time as a UTC date and time to the second, the same wherever the report is made."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t_s))


def offset(t_s: float, start_s: float) -> str:
    """A time as seconds after the session's start: +12.3 s, +75 s."""
    seconds = t_s - start_s
    return f"+{seconds:.1f} s" if abs(seconds) < 100 else f"+{seconds:,.0f} s"


def code_block(lines: Sequence[str]) -> list[str]:
    """Lines kept as they are (a plan, a verification), in a fenced block."""
    return ["```text", *lines, "```"]
