"""Number formatting for the screen and the text reports: None is N/A, units are always said.

One home for how slotop writes a missing value, milliseconds, percentages, GiB and spans, so
the dashboard, `slotop snapshot`, the sweep's table and the before/after table agree.
"""

from __future__ import annotations

import math
from typing import TypeVar

NA = "N/A"
_SPARK = "▁▂▃▄▅▆▇█"

T = TypeVar("T")


def finite(value: T) -> T | None:
    """The value, or None where it is a NaN or an infinity (JSON has neither; a screen says N/A)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def fixed(value: float | None, spec: str, suffix: str = "") -> str:
    """Format a number with a format spec (`.1f`, `+.4f`, `.0%`), N/A when missing or not finite."""
    present = finite(value)
    return NA if present is None else format(present, spec) + suffix


def millis(seconds: float | None, spec: str = ".1f", suffix: str = "") -> str:
    """Format seconds as milliseconds with a fixed format spec, for columns of a table."""
    present = finite(seconds)
    return NA if present is None else format(present * 1e3, spec) + suffix


def ms(seconds: float | None) -> str:
    """Format seconds as milliseconds, three significant figures at most."""
    value = finite(seconds)
    if value is None:
        return NA
    millis = value * 1e3
    if millis >= 100:
        return f"{millis:,.0f} ms"
    if millis >= 10:
        return f"{millis:.1f} ms"
    return f"{millis:.2f} ms"


def number(value: float | None, digits: int = 0, suffix: str = "") -> str:
    """Format a number with thousands separators, N/A when missing."""
    return fixed(value, f",.{digits}f", suffix)


def percent(ratio: float | None, digits: int = 1) -> str:
    """Format a 0..1 ratio as a percentage."""
    present = finite(ratio)
    return NA if present is None else f"{present * 100:.{digits}f}%"


def duration(seconds: float | None) -> str:
    """Format a span as 45s, 12m 03s or 3h 07m."""
    value = finite(seconds)
    if value is None or value < 0:
        return NA
    whole = int(value)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def coarse_duration(seconds: float | None) -> str:
    """Format a long span to the minute (under a minute: "<1m"), so it changes rarely."""
    value = finite(seconds)
    if value is None or value < 0:
        return NA
    if value < 60:
        return "<1m"
    whole = int(value) // 60
    return f"{whole}m" if whole < 60 else f"{whole // 60}h {whole % 60:02d}m"


def clock_span(seconds: float) -> str:
    """Format a span as a clock reads it: 4:05, 1:02:03 (a replay's position and length)."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def uptime(seconds: float | None) -> str:
    """Format how long a replica has been up, to the minute: up 42m, up 3h12m, up 5d03h."""
    value = finite(seconds)
    if value is None or value < 0:
        return f"up {NA}"
    minutes = int(value) // 60
    if minutes < 1:
        return "up <1m"
    if minutes < 60:
        return f"up {minutes}m"
    hours = minutes // 60
    if hours < 24:
        return f"up {hours}h{minutes % 60:02d}m"
    return f"up {hours // 24}d{hours % 24:02d}h"


def gib(value_bytes: int | None, suffix: str = " GiB") -> str:
    """Format bytes as GiB to one decimal."""
    return NA if value_bytes is None else f"{value_bytes / 2**30:.1f}{suffix}"


def percentile_name(percentile: float) -> str:
    """Name a percentile as p99 or p99.9."""
    return f"p{percentile:g}"


def bar(ratio: float | None, width: int) -> str:
    """Draw a 0..1 ratio as a bar of full blocks and light shade, width cells wide."""
    if width <= 0:
        return ""
    present = finite(ratio)
    if present is None:
        return "·" * width
    filled = round(min(max(present, 0.0), 1.0) * width)
    return "█" * filled + "░" * (width - filled)


def spark(values: tuple[float | None, ...], width: int, top: float | None = None) -> str:
    """Draw the last `width` values as a sparkline scaled to `top` (or their max); gaps as spaces."""
    shown = values[-width:] if width > 0 else ()
    present = [v for v in shown if v is not None and math.isfinite(v)]
    ceiling = top if top is not None and top > 0 else (max(present) if present else 0.0)
    cells = []
    for value in shown:
        if value is None or not math.isfinite(value):
            cells.append(" ")
        elif ceiling <= 0:
            cells.append(_SPARK[0])
        else:
            level = min(value / ceiling, 1.0)
            cells.append(_SPARK[min(int(level * len(_SPARK)), len(_SPARK) - 1)])
    return "".join(cells).rjust(width)


def printable(text: str) -> str:
    """Text from outside (a replica's answer, a log line) with its control characters written as
    escapes, so what a screen shows of it can never move the cursor or change the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
