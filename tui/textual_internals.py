"""Every use of Textual's internals, each checked at import, each with a way back to Textual's own path.

The dashboard draws less than Textual would in three places, and each reaches below Textual's
public API:

- Kept lines (`KeptLines`). Each frame Textual's compositor asks every widget whose clip meets
  the frame's changed area for all its lines; in the dashboard that clip is the scrolling body,
  so one ticking number made every pane and container below the header work out its colours,
  region, line filters and lines again. A `KeptLines` widget hands back its last answer while
  Textual's line cache for it holds what it held then. Relies on `Widget._styles_cache` (a
  `textual._styles_cache.StylesCache`), its `_cache` of lines and its `_dirty_lines`, filled by
  `Widget.render_lines` and marked by `Widget._set_dirty` on every change of look. Without it:
  `Widget.render_lines`.
- Fitted rows (`fitted_row`). A pane's row that fits its line is drawn straight into its cells,
  as Textual's renderer draws a line (`Content.render` with the widget's style parser
  `Widget._get_style`, each part styled with its offset), without the wrapping pass and the empty
  rows above it that the renderer needs to give each cell its place in the text. Without it: the
  pane's own `textual_way`, Textual's renderer. The first `VERIFIED_ROWS` rows are drawn both ways
  and compared; a difference turns the short way off for the process.
- A quiet input thread (`QuietInputDriver`). Textual's Linux driver reads keys in a thread that
  wakes ten times a second for as long as the app runs; this one waits with no timeout while no
  key comes. Relies on `LinuxDriver.run_input_thread` being that thread's body (started in
  `start_application_mode`, ended through `exit_event` in `disable_input`), `LinuxDriver.fileno`,
  and the key parser `textual._xterm_parser.XTermParser` (`feed`, `tick`). Without it: Textual's
  `LinuxDriver`.

And two mend leaks:

- A footer that lets go (`PrunedFooter`). Textual's `Footer` draws its keys anew whenever the
  bindings change (a dialog opens or closes, a key's words change), and each `FooterKey` it drew
  binds itself to the footer's `compact` (`data_bind`): that leaves a watcher on the footer which
  Textual drops only when `compact` itself changes, so every key ever drawn stays in memory, with
  its styles and its compose (a dashboard restarting its replica every few minutes grew some
  0.6 MB a minute, Textual issue 6666). `PrunedFooter`, after each redraw, drops the watchers
  whose widget was removed, as Textual drops them when the value changes. Relies on
  `textual.reactive._watch` keeping watchers in the watched object's `__watchers` and on
  `Reactive._check_watchers` dropping those whose node is `_closing`. Without it: Textual's
  `Footer`, which keeps them.
- Colours cached by colour (`colour_cache`). Textual works out a widget's inner and outer
  background styles in `StylesCache.get_inner_outer`, a `functools.lru_cache` over the method,
  so each answer's key holds the widget's `StylesCache`, and with it every line the widget last
  drew: up to 1024 widgets since removed (a dialog and its options, each footer key, each toast)
  stay in memory with their lines (Textual issue 6665). The dashboard sets its own in its place:
  Textual's function, whose answer depends on the two colours alone, cached by them alone. Relies
  on `StylesCache.get_inner_outer` being an `lru_cache` over a function that never reads its first
  argument, and on `StylesCache.render_line` asking it. Without it: Textual's cache, which keeps
  them.

At import each reliance is checked: that the name exists and, where a look at Textual's own code
can tell, that Textual still uses it as the trick takes it to (the code that fills, reads or
marks it still names it). A trick with anything missing is off for the process, and one warning
in the log names what was missing. `SLOTOP_PLAIN_RENDER=1` turns every trick off (one line in the
log, at info level). Either way the screen is the same: the screen-truth and snapshot tests run in
both modes. What differs is what drawing costs: `python -m bench.bench_tui_load` measures both
side by side (docs/performance.md). The rest of slotop uses Textual's public API and this module; a test
(tests/tui/test_textual_internals.py) keeps it so.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import dis
import functools
import importlib
import inspect
import logging
import os
import selectors
import sys
import threading
import time
from codecs import getincrementaldecoder
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

from rich.segment import Segment
from rich.text import Text
from textual import constants
from textual.color import Color
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.drivers.linux_driver import LinuxDriver
from textual.filter import LineFilter
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual
from textual.widget import Widget
from textual.widgets import Footer

PLAIN_RENDER_ENV = "SLOTOP_PLAIN_RENDER"
"""Set to 1, every trick here is off and Textual draws its own way."""
VERIFIED_ROWS = 32
"""How many fitted rows are drawn both ways and compared before the short way is trusted."""

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Tricks:
    """Which of the speed-ups below Textual's public API are on."""

    kept_lines: bool
    fitted_rows: bool
    quiet_input: bool
    pruned_footer: bool
    colour_cache: bool

    def without(self, other: Tricks) -> Tricks:
        """These tricks, less any that `other` has off."""
        return Tricks(
            self.kept_lines and other.kept_lines,
            self.fitted_rows and other.fitted_rows,
            self.quiet_input and other.quiet_input,
            self.pruned_footer and other.pruned_footer,
            self.colour_cache and other.colour_cache,
        )


ALL = Tricks(
    kept_lines=True, fitted_rows=True, quiet_input=True, pruned_footer=True, colour_cache=True
)
PLAIN = Tricks(
    kept_lines=False, fitted_rows=False, quiet_input=False, pruned_footer=False, colour_cache=False
)
FALLBACKS: Mapping[str, str] = {
    "kept_lines": "every widget draws its lines through Widget.render_lines",
    "fitted_rows": "pane rows are drawn by Textual's renderer",
    "quiet_input": "Textual's Linux driver reads the keys",
    "pruned_footer": "the footer keeps every key it drew, as Textual's Footer does",
    "colour_cache": "each widget's colours are cached with its lines, as Textual caches them, "
    "keeping up to 1024 removed widgets' lines",
}
"""Each trick's way back, in the words the log uses."""


# What each trick relies on, checked.


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _codes(function: object) -> list[Any]:
    """A function's code and the code of what it holds (its comprehensions are code objects of
    their own before Python 3.12); none for what is not a function (a classmethod: its function)."""
    codes = [getattr(getattr(function, "__func__", function), "__code__", None)]
    found = []
    while codes:
        code = codes.pop()
        if code is not None:
            found.append(code)
            codes += [c for c in code.co_consts if hasattr(c, "co_names")]
    return found


def _names_used(function: object) -> frozenset[str]:
    """The attribute and global names a function's code uses; none for what is not a function."""
    return frozenset(name for code in _codes(function) for name in code.co_names)


def _constants_used(function: object) -> frozenset[str]:
    """The strings a function's code names as constants; none for what is not a function."""
    return frozenset(c for code in _codes(function) for c in code.co_consts if isinstance(c, str))


def _kept_lines_lacks() -> list[str]:
    cache_class = getattr(_module("textual._styles_cache"), "StylesCache", None)
    if cache_class is None:
        return ["textual._styles_cache.StylesCache"]
    lacks: list[str] = []
    try:
        cache = cache_class()
    except Exception:
        return ["StylesCache() with no arguments"]
    if not isinstance(getattr(cache, "_cache", None), dict):
        lacks.append("StylesCache._cache (a dict of lines)")
    if not isinstance(getattr(cache, "_dirty_lines", None), set):
        lacks.append("StylesCache._dirty_lines (a set of line numbers)")
    if not {"_cache", "_dirty_lines"} <= _names_used(getattr(cache_class, "render", None)):
        lacks.append("StylesCache.render keeping lines in _cache and marks in _dirty_lines")
    if not {"_styles_cache", "render_widget"} <= _names_used(Widget.render_lines):
        lacks.append("Widget.render_lines drawing through Widget._styles_cache")
    if "_styles_cache" not in _names_used(getattr(Widget, "_set_dirty", None)):
        lacks.append("Widget._set_dirty marking Widget._styles_cache")
    for kind in (Screen, Horizontal, Vertical, VerticalScroll):
        if kind.render_lines is not Widget.render_lines:
            lacks.append(f"{kind.__name__}.render_lines being Widget.render_lines")
    return lacks


def _fitted_rows_lacks() -> list[str]:
    lacks: list[str] = []
    if not callable(getattr(Widget, "_get_style", None)):
        lacks.append("Widget._get_style")
    elif "_get_style" not in _names_used(Visual.to_strips):
        lacks.append("Visual.to_strips parsing styles with Widget._get_style")
    parameters = inspect.signature(Content.render).parameters
    if not {"base_style", "end", "parse_style"} <= set(parameters):
        lacks.append("Content.render(base_style, end, parse_style)")
    if not callable(getattr(VisualStyle, "rich_style_with_offset", None)):
        lacks.append("Style.rich_style_with_offset")
    return lacks


def _quiet_input_lacks() -> list[str]:
    lacks: list[str] = []
    parser = getattr(_module("textual._xterm_parser"), "XTermParser", None)
    if parser is None:
        lacks.append("textual._xterm_parser.XTermParser")
    else:
        if not all(callable(getattr(parser, method, None)) for method in ("feed", "tick")):
            lacks.append("XTermParser.feed and XTermParser.tick")
        try:
            inspect.signature(parser).bind(False)
        except (TypeError, ValueError):
            lacks.append("XTermParser(debug)")
    if not callable(getattr(LinuxDriver, "run_input_thread", None)):
        lacks.append("LinuxDriver.run_input_thread")
    elif "run_input_thread" not in _names_used(getattr(LinuxDriver, "_run_input_thread", None)):
        lacks.append("LinuxDriver's input thread running LinuxDriver.run_input_thread")
    if "_run_input_thread" not in _names_used(LinuxDriver.start_application_mode):
        lacks.append("LinuxDriver.start_application_mode starting the input thread")
    if not {"fileno", "exit_event"} <= _names_used(LinuxDriver.__init__):
        lacks.append("LinuxDriver.fileno and LinuxDriver.exit_event")
    if not {"exit_event", "set", "join"} <= _names_used(LinuxDriver.disable_input):
        lacks.append("LinuxDriver.disable_input ending the input thread by its exit_event")
    return lacks


def _pruned_footer_lacks() -> list[str]:
    lacks: list[str] = []
    reactive = _module("textual.reactive")
    if "__watchers" not in _constants_used(getattr(reactive, "_watch", None)):
        lacks.append("textual.reactive._watch keeping watchers in the object's __watchers")
    check = getattr(getattr(reactive, "Reactive", None), "_check_watchers", None)
    if "_closing" not in _names_used(check):
        lacks.append("Reactive._check_watchers dropping the watchers of nodes _closing")
    return lacks


def _textual_inner_outer(cache_class: type) -> Any:
    """Textual's own `get_inner_outer`, whether or not the dashboard's stands in its place."""
    found = vars(cache_class).get("get_inner_outer")
    return _inner_outer_by_widget if found is _get_inner_outer else found


def _reads_first_argument(function: Any) -> bool:
    """Whether a function's code (its comprehensions and inner functions too) reads its first
    argument."""
    first = function.__code__.co_varnames[:1]
    for code in _codes(function):
        for instruction in dis.get_instructions(code):
            names = (
                instruction.argval
                if isinstance(instruction.argval, tuple)
                else (instruction.argval,)
            )
            if instruction.opname.startswith("LOAD_") and any(n in first for n in names):
                return True
    return False


def _colour_cache_lacks() -> list[str]:
    cache_class = getattr(_module("textual._styles_cache"), "StylesCache", None)
    if cache_class is None:
        return ["textual._styles_cache.StylesCache"]
    lacks: list[str] = []
    textual_way = _textual_inner_outer(cache_class)
    wrapped = getattr(textual_way, "__wrapped__", None)
    if not callable(getattr(textual_way, "cache_clear", None)) or not hasattr(wrapped, "__code__"):
        lacks.append("StylesCache.get_inner_outer (a functools.lru_cache over a function)")
    elif _reads_first_argument(wrapped):
        lacks.append("StylesCache.get_inner_outer working out its styles from its colours alone")
    if "get_inner_outer" not in _names_used(getattr(cache_class, "render_line", None)):
        lacks.append("StylesCache.render_line asking get_inner_outer")
    return lacks


def lacking() -> dict[str, list[str]]:
    """What each trick relies on that this Textual lacks, by trick (empty where nothing is)."""
    return {
        "kept_lines": _kept_lines_lacks(),
        "fitted_rows": _fitted_rows_lacks(),
        "quiet_input": _quiet_input_lacks(),
        "pruned_footer": _pruned_footer_lacks(),
        "colour_cache": _colour_cache_lacks(),
    }


def _textual_version() -> str:
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        return f"Textual {version('textual')}"
    return "this Textual"


def choose(environ: Mapping[str, str] = os.environ) -> tuple[Tricks, Tricks]:
    """The tricks this Textual allows, and those to use (none where SLOTOP_PLAIN_RENDER=1).

    Says once in the log what it chose where that is not every trick: a warning naming what
    is missing, or an info line for the variable.
    """
    lacks = lacking()
    allowed = Tricks(**{trick: not missing for trick, missing in lacks.items()})
    forced = environ.get(PLAIN_RENDER_ENV, "0") not in ("", "0")
    chosen = PLAIN if forced else allowed
    missing = [f"{what} ({trick})" for trick, whats in lacks.items() for what in whats]
    if missing:
        falls_back = "; ".join(FALLBACKS[t] for t, whats in lacks.items() if whats)
        _log.warning(
            "%s lacks what slotop's drawing relies on: %s. So %s.%s",
            _textual_version(),
            ", ".join(missing),
            falls_back,
            f" ({PLAIN_RENDER_ENV} is set: every trick is off)" if forced else "",
        )
    elif forced:
        _log.info(
            "%s=%s: Textual draws its own way (%s)",
            PLAIN_RENDER_ENV,
            environ[PLAIN_RENDER_ENV],
            "; ".join(FALLBACKS.values()),
        )
    return allowed, chosen


# Colours cached by colour alone (set in Textual's place here, as the choice is made).


_inner_outer_by_widget: Any = None
"""Textual's own `StylesCache.get_inner_outer`, once the dashboard's stands in its place."""

_InnerOuter = tuple[VisualStyle, VisualStyle]


def _get_inner_outer(cache: object, base_background: Color, background: Color) -> _InnerOuter:
    """A widget's inner and outer background styles: cached by its colours alone, or as
    Textual caches them (with the widget's `StylesCache`) where the trick is off."""
    if _in_use.colour_cache:
        return _inner_outer(base_background, background)
    return cast(_InnerOuter, _inner_outer_by_widget(cache, base_background, background))


@functools.lru_cache(maxsize=1024)
def _inner_outer(base_background: Color, background: Color) -> _InnerOuter:
    """Textual's function, which reads no widget (`_colour_cache_lacks` checks it), for two
    colours."""
    return cast(_InnerOuter, _inner_outer_by_widget.__wrapped__(None, base_background, background))


def _set_colour_cache() -> None:
    """Stand the dashboard's `get_inner_outer` in Textual's place, once, where it may."""
    global _inner_outer_by_widget
    cache_class = getattr(_module("textual._styles_cache"), "StylesCache", None)
    if cache_class is None or not _allowed.colour_cache or _inner_outer_by_widget is not None:
        return
    _inner_outer_by_widget = vars(cache_class)["get_inner_outer"]
    cache_class.get_inner_outer = _get_inner_outer


_allowed, _in_use = choose()
_set_colour_cache()


def in_use() -> Tricks:
    """The tricks in use now."""
    return _in_use


def allowed() -> Tricks:
    """The tricks this Textual allows (those whose internals are all there and behave)."""
    return _allowed


@contextlib.contextmanager
def using(tricks: Tricks) -> Iterator[Tricks]:
    """Use these tricks (less any this Textual does not allow) until the block ends.

    For tests and benches that draw one screen both ways in one process; the app itself keeps
    what was chosen at import. The driver is chosen when an app is made.
    """
    global _in_use
    before, _in_use = _in_use, tricks.without(_allowed)
    try:
        yield _in_use
    finally:
        _in_use = before


def _turn_off(trick: str, why: str) -> None:
    """Turn a trick off for the rest of the process, saying why in the log."""
    global _allowed, _in_use
    _allowed = dataclasses.replace(_allowed, **{trick: False})
    _in_use = _in_use.without(_allowed)
    _log.warning("%s. So %s.", why, FALLBACKS[trick])


# Kept lines.


@dataclass(frozen=True, slots=True)
class _Answer:
    """The lines a widget last handed the compositor, and what they were for."""

    crop: Region
    filters: tuple[LineFilter, ...]
    first_cached: Strip | None
    """The line Textual's cache held at the crop's top: the same object while none was redrawn."""
    cached: int
    """How many lines the cache held."""
    strips: list[Strip]


class KeptLines(Widget):
    """A widget that answers the compositor with its last lines while nothing in them changed.

    It answers the same list again, without asking Textual, when the same area is asked for, the
    same line filters are on (they are applied after the cache), and Textual's line cache for it
    holds exactly what it held then: no line marked for repaint, the same number of lines kept
    and the first of them the same object. Anything else that changes how the widget looks goes
    through that cache (a repaint of a line or of the widget, a resize, a style or class change,
    a theme change clears it or marks it), so an answer is never kept past a change.

    A Textual class comes first in each subclass's bases: Textual takes a widget's default styles
    along the first base only.
    """

    _kept: _Answer | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        if not _in_use.kept_lines:
            self._kept = None  # what it kept may be stale by the time the trick is on again
            return super().render_lines(crop)
        cache: Any = self._styles_cache
        lines: dict[int, Strip] = cache._cache
        filters = tuple(self.get_line_filters())
        kept = self._kept
        if (
            kept is not None
            and not cache._dirty_lines
            and kept.crop == crop
            and kept.filters == filters
            and kept.cached == len(lines)
            and kept.first_cached is lines.get(crop.y)
        ):
            return kept.strips
        strips = super().render_lines(crop)
        self._kept = _Answer(crop, filters, lines.get(crop.y), len(lines), strips)
        return strips


# Fitted rows.

TextualWay = Callable[[Text, int, int, VisualStyle], list[Strip]]
"""How a pane draws a row with Textual's renderer: (row, line y, width, style) → its lines."""

_rows_to_verify = VERIFIED_ROWS


def fitted_row(
    widget: Widget, row: Text, y: int, width: int, style: VisualStyle, textual_way: TextualWay
) -> Strip | None:
    """A row that fits its line, drawn into the cells and styles Textual's renderer gives it at
    line `y` of the widget's text; None where the short way does not apply (a row wider than the
    line or holding a tab, text not aligned left and top, a selection, links) or is off."""
    global _rows_to_verify
    if not _in_use.fitted_rows:
        return None
    rules = widget.styles
    if (
        width <= 0
        or rules.text_align not in ("left", "start")
        or rules.line_pad != 0
        or tuple(rules.content_align) != ("left", "top")
        or widget.text_selection is not None
        or widget.auto_links
    ):
        return None
    content = Content.from_rich_text(row, console=widget.app.console)
    if content.cell_length > width or "\t" in content.plain:
        return None
    segments: list[Segment] = []
    x = 0
    for part, part_style in content.render(style, end="", parse_style=widget._get_style):
        segments.append(Segment(part, (style + part_style).rich_style_with_offset(x, y)))
        x += len(part)  # the offset a selection reads counts characters, as Textual's does
    strip = Strip(segments, content.cell_length)
    if _rows_to_verify > 0:
        theirs = textual_way(row, y, width, style)
        if len(theirs) != 1 or theirs[0] != strip or theirs[0].cell_length != strip.cell_length:
            _turn_off("fitted_rows", f"Textual's renderer draws the row {row.plain!r} otherwise")
            return None
        _rows_to_verify -= 1
    return strip


# The quiet input thread.

TICK_S = 0.1
"""How often the thread checks the escape delay while keys are coming (Textual's own beat)."""
QUIET_S = constants.ESCAPE_DELAY + 1.0
"""How long after the last byte the thread keeps that beat before it waits with no timeout."""
THREAD_NAME = "slotop-input"
"""The input thread's name as the system shows it (`top -H`, /proc/PID/task/TID/comm)."""
_PR_SET_NAME = 15


class _WakingEvent(threading.Event):
    """An event that, once set, also makes a pipe readable while one is open for it: a thread
    waiting in select() on the pipe sees the event at once."""

    def __init__(self) -> None:
        super().__init__()
        self._pipe_lock = threading.Lock()
        self._write_fd: int | None = None

    def set(self) -> None:
        with self._pipe_lock:  # the pipe is not closed between setting and writing
            super().set()
            if self._write_fd is not None:
                with contextlib.suppress(OSError):  # a full pipe is already readable
                    os.write(self._write_fd, b"\0")

    def open_pipe(self) -> int:
        """Open the pipe the event writes to when set; return the end to wait on."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        with self._pipe_lock:
            self._write_fd = write_fd
        return read_fd

    def close_pipe(self, read_fd: int) -> None:
        """Close the pipe: the event writes to it no more (its numbers may be reused)."""
        with self._pipe_lock:
            write_fd, self._write_fd = self._write_fd, None
        for fd in (read_fd, write_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


class QuietInputDriver(LinuxDriver):
    """Textual's Linux driver whose input thread does not wake while the terminal is quiet.

    While input is quiet the thread waits on the terminal with no timeout. Once bytes come it
    wakes on Textual's own 0.1 s beat until the escape delay and a second more have passed
    without any, so a lone Escape is still told from the start of an escape sequence as Textual
    tells it. Stopping (quit, suspend) sets the driver's exit event, which also writes to a pipe
    the thread waits on, so the thread leaves at once rather than at its next wake. Each run of
    the thread (one per start of application mode: a suspend and resume starts another, on the
    same driver) opens its wake pipe and closes it as it leaves.
    """

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        self._parser_debug = bool(options.get("debug", False))
        self._exit = _WakingEvent()
        self.exit_event = self._exit

    def run_input_thread(self) -> None:
        """Read the terminal until the exit event is set, feeding Textual's key parser."""
        name_this_thread(THREAD_NAME)
        xterm: Any = _module("textual._xterm_parser")
        parser = xterm.XTermParser(self._parser_debug)
        decode = getincrementaldecoder("utf-8")().decode
        last_input_s = -QUIET_S  # quiet from the start: wait with no timeout
        wake = self._exit.open_pipe()
        try:
            with selectors.SelectSelector() as selector:  # as Textual's: kqueue takes no tty
                selector.register(self.fileno, selectors.EVENT_READ, "terminal")
                selector.register(wake, selectors.EVENT_READ, "wake")
                while not self.exit_event.is_set():
                    keys_coming = time.monotonic() - last_input_s < QUIET_S
                    for key, _ in selector.select(TICK_S if keys_coming else None):
                        if key.data == "wake":  # set: the loop's test ends it
                            continue
                        data = os.read(self.fileno, 4096)
                        if not data:  # end of input (stdin closed): nothing more will come
                            selector.unregister(self.fileno)
                            continue
                        last_input_s = time.monotonic()
                        for event in parser.feed(decode(data)):
                            self.process_message(event)
                    for event in parser.tick():  # a lone Escape, once the escape delay passed
                        self.process_message(event)
        finally:
            self._exit.close_pipe(wake)
            with contextlib.suppress(Exception):  # closes the parser; what is left is dropped
                for _ in parser.feed(""):
                    pass


def linux_driver() -> type[LinuxDriver]:
    """The driver to run where Textual would take its Linux driver: the quiet one, or Textual's."""
    return QuietInputDriver if _in_use.quiet_input else LinuxDriver


def name_this_thread(name: str) -> None:
    """Give the calling thread a name the system shows (Linux; Python 3.11 names only its own
    thread objects). Best effort: where it cannot, the thread keeps the process's name."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


# A footer that lets go of the keys it drew.


def drop_closed_watchers(node: object) -> None:
    """Drop the watchers left on `node` by widgets since removed (closing or closed), as Textual
    drops them when the watched value changes."""
    watchers = getattr(node, "__watchers", None)
    if not isinstance(watchers, dict):
        return
    for entries in watchers.values():
        entries[:] = [
            (watcher, callback)
            for watcher, callback in entries
            if not (getattr(watcher, "_closing", False) or getattr(watcher, "_closed", False))
        ]


class PrunedFooter(Footer):
    """Textual's footer, letting go of the keys it drew before once it has drawn them anew."""

    async def recompose(self) -> None:
        """Draw the keys anew, then drop the watchers the keys removed left behind."""
        await super().recompose()
        if _in_use.pruned_footer:
            drop_closed_watchers(self)
