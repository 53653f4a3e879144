"""Textual's internals in one room: checked at import, a way back to Textual's own path, said once.

tui/textual_internals.py holds every use of Textual's internals. Here: this Textual has all they
rely on; with one of them taken away (as a Textual release that moved it would), its trick is
off, the others stay on, one warning names what went, and the app then draws and reads keys
Textual's own way without a word more; `SLOTOP_PLAIN_RENDER=1` turns every trick off; a row the
short way draws otherwise than Textual's renderer turns that way off; and no other module of the
dashboard imports a private module of Textual or uses a private name of the Textual classes it
subclasses.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import gc
import importlib
import inspect
import logging
import os
import pkgutil
import subprocess
import sys
import textwrap
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import textual
import textual._styles_cache
import textual._xterm_parser
import textual.reactive
from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.color import Color
from textual.drivers.linux_driver import LinuxDriver
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

import slotop.tui
from slotop.config import Settings
from slotop.tui import textual_internals
from slotop.tui.app import SlotopApp
from slotop.tui.driver import slotop_driver
from slotop.tui.messages import LatencyTrend, SnapshotCollected
from slotop.tui.panes.base import Pane
from slotop.tui.textual_internals import (
    ALL,
    PLAIN,
    PLAIN_RENDER_ENV,
    KeptLines,
    PrunedFooter,
    QuietInputDriver,
    Tricks,
    choose,
    fitted_row,
    using,
)
from tests.support.tui_fakes import capture_snapshot, fresh

ROOM = textual_internals.__name__
TUI = Path(slotop.tui.__file__).parent


@pytest.fixture
def room_log(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[logging.LogRecord]]]:
    """What the room has said in the log since the test began."""
    caplog.set_level(logging.INFO, logger=ROOM)
    yield lambda: [record for record in caplog.records if record.name == ROOM]


def test_this_textual_has_everything_the_tricks_rely_on() -> None:
    assert textual_internals.lacking() == {
        "kept_lines": [],
        "fitted_rows": [],
        "quiet_input": [],
        "pruned_footer": [],
        "colour_cache": [],
    }
    assert textual_internals.allowed() == ALL


def _no_styles_cache(patch: pytest.MonkeyPatch) -> None:
    patch.delattr(textual._styles_cache, "StylesCache")


def _no_dirty_lines(patch: pytest.MonkeyPatch) -> None:
    def cache_without_marks(cache: Any) -> None:
        cache._cache = {}

    patch.setattr(textual._styles_cache.StylesCache, "__init__", cache_without_marks)


def _set_dirty_leaves_the_cache(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(Widget, "_set_dirty", lambda widget, *regions: None)


def _no_get_style(patch: pytest.MonkeyPatch) -> None:
    patch.delattr(Widget, "_get_style")


def _no_key_parser(patch: pytest.MonkeyPatch) -> None:
    patch.delattr(textual._xterm_parser, "XTermParser")


def _no_input_thread_body(patch: pytest.MonkeyPatch) -> None:
    patch.delattr(LinuxDriver, "run_input_thread")


def _watchers_kept_elsewhere(patch: pytest.MonkeyPatch) -> None:
    def watch(node: object, obj: object, name: str, callback: object, init: bool = True) -> None:
        pass

    patch.setattr(textual.reactive, "_watch", watch)


def _inner_outer_not_cached(patch: pytest.MonkeyPatch) -> None:
    def get_inner_outer(cache: Any, base_background: Color, background: Color) -> Any:
        return Style(background=base_background + background), Style(background=base_background)

    patch.setattr(textual._styles_cache.StylesCache, "get_inner_outer", get_inner_outer)


def _inner_outer_reads_the_widget(patch: pytest.MonkeyPatch) -> None:
    @functools.lru_cache(1024)
    def get_inner_outer(cache: Any, base_background: Color, background: Color) -> Any:
        return cache.background, Style(background=base_background)

    patch.setattr(textual._styles_cache.StylesCache, "get_inner_outer", get_inner_outer)


@pytest.mark.parametrize(
    ("take_away", "tricks", "named"),
    [
        (
            _no_styles_cache,
            ("kept_lines", "colour_cache"),
            "textual._styles_cache.StylesCache",
        ),
        (_no_dirty_lines, ("kept_lines",), "StylesCache._dirty_lines"),
        (_set_dirty_leaves_the_cache, ("kept_lines",), "Widget._set_dirty marking"),
        (_no_get_style, ("fitted_rows",), "Widget._get_style"),
        (_no_key_parser, ("quiet_input",), "textual._xterm_parser.XTermParser"),
        (_no_input_thread_body, ("quiet_input",), "LinuxDriver.run_input_thread"),
        (_watchers_kept_elsewhere, ("pruned_footer",), "textual.reactive._watch keeping"),
        (_inner_outer_not_cached, ("colour_cache",), "a functools.lru_cache over a function"),
        (_inner_outer_reads_the_widget, ("colour_cache",), "from its colours alone"),
    ],
)
def test_a_missing_internal_turns_its_trick_off_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch,
    room_log: Callable[[], list[logging.LogRecord]],
    take_away: Callable[[pytest.MonkeyPatch], None],
    tricks: tuple[str, ...],
    named: str,
) -> None:
    with monkeypatch.context() as patch:
        take_away(patch)
        allowed, chosen = choose({})
    expected = {name: name not in tricks for name in textual_internals.FALLBACKS}
    assert allowed == chosen == Tricks(**expected)
    [said] = room_log()
    assert said.levelno == logging.WARNING
    assert named in said.getMessage()
    assert all(textual_internals.FALLBACKS[trick] in said.getMessage() for trick in tricks)


def test_plain_render_turns_every_trick_off_and_says_so_once(
    room_log: Callable[[], list[logging.LogRecord]],
) -> None:
    assert choose({PLAIN_RENDER_ENV: "0"}) == (ALL, ALL)
    assert room_log() == []
    assert choose({PLAIN_RENDER_ENV: "1"}) == (ALL, PLAIN)
    [said] = room_log()
    assert said.levelno == logging.INFO
    assert PLAIN_RENDER_ENV in said.getMessage()


@pytest.mark.anyio
async def test_without_its_internals_the_app_takes_textual_s_own_path_and_says_nothing_more(
    monkeypatch: pytest.MonkeyPatch, room_log: Callable[[], list[logging.LogRecord]]
) -> None:
    with monkeypatch.context() as patch:
        _no_styles_cache(patch)
        _no_key_parser(patch)
        allowed, chosen = choose({})
    assert chosen == Tricks(
        kept_lines=False,
        fitted_rows=True,
        quiet_input=False,
        pruned_footer=True,
        colour_cache=False,
    )
    assert len(room_log()) == 1
    # A Textual that lacked them would keep lacking them while the app runs.
    monkeypatch.setattr(textual_internals, "_allowed", allowed)
    monkeypatch.delattr(textual._xterm_parser, "XTermParser")
    with using(ALL):
        assert slotop_driver(LinuxDriver) is LinuxDriver
        app = SlotopApp(Settings())
        async with app.run_test(size=(160, 50)) as pilot:
            app.post_message(SnapshotCollected(fresh(capture_snapshot()), LatencyTrend()))
            await pilot.pause()
            await pilot.pause()
            kept = list(app.screen.query(KeptLines))
            assert len(kept) > 10
            assert all(widget._kept is None for widget in kept)  # none answered from its own
            assert "running" in app.query_one("#kv", Pane).render().plain
    assert len(room_log()) == 1


def test_with_its_internals_there_the_terminal_driver_is_the_quiet_one() -> None:
    with using(ALL):
        assert slotop_driver(LinuxDriver) is QuietInputDriver
    with using(PLAIN):
        assert slotop_driver(LinuxDriver) is LinuxDriver


class _Rows(Pane):
    def draw(self, view: list[str]) -> Text:
        return Text("\n".join(view))


class _OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield _Rows()


@pytest.mark.anyio
async def test_a_row_drawn_otherwise_than_by_textual_turns_the_short_way_off_once(
    monkeypatch: pytest.MonkeyPatch, room_log: Callable[[], list[logging.LogRecord]]
) -> None:
    monkeypatch.setattr(textual_internals, "_allowed", ALL)
    asked: list[str] = []

    def textual_way(row: Text, y: int, width: int, style: Any) -> list[Strip]:
        asked.append(row.plain)
        if row.plain == "drawn otherwise":
            return [Strip([Segment(row.plain.upper())])]
        return pane._textual_row(row, y, width, style)

    app = _OnePane()
    async with app.run_test(size=(40, 10)):
        pane = app.query_one(_Rows)
        style = pane.visual_style
        monkeypatch.setattr(textual_internals, "_rows_to_verify", 2)
        with using(ALL):
            for y, words in enumerate(("one", "two", "three")):
                assert fitted_row(pane, Text(words), y, 40, style, textual_way) is not None
            assert asked == ["one", "two"]  # checked both ways while rows are left to check
            monkeypatch.setattr(textual_internals, "_rows_to_verify", 1)
            assert fitted_row(pane, Text("drawn otherwise"), 3, 40, style, textual_way) is None
            assert not textual_internals.in_use().fitted_rows
            assert not textual_internals.allowed().fitted_rows
            assert fitted_row(pane, Text("after"), 4, 40, style, textual_way) is None
    assert asked == ["one", "two", "drawn otherwise"]
    [said] = room_log()
    assert said.levelno == logging.WARNING
    assert "'drawn otherwise'" in said.getMessage()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("environment", "before_import", "in_use", "level", "named"),
    [
        (
            {},
            "import textual.widget as w; del w.Widget._get_style",
            "Tricks(kept_lines=True, fitted_rows=False, quiet_input=True, pruned_footer=True, "
            "colour_cache=True)",
            "WARNING",
            "Widget._get_style",
        ),
        (
            {PLAIN_RENDER_ENV: "1"},
            "",
            "Tricks(kept_lines=False, fitted_rows=False, quiet_input=False, pruned_footer=False, "
            "colour_cache=False)",
            "INFO",
            PLAIN_RENDER_ENV,
        ),
    ],
)
def test_the_choice_is_made_at_import_and_said_once(
    environment: dict[str, str], before_import: str, in_use: str, level: str, named: str
) -> None:
    script = "; ".join(
        (
            "import logging",
            "logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')",
            before_import or "pass",
            "from slotop.tui.app import SlotopApp",
            "from slotop.tui import textual_internals",
            "print(textual_internals.in_use())",
        )
    )
    env = {k: v for k, v in os.environ.items() if k != PLAIN_RENDER_ENV} | environment
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == in_use
    said = [line for line in done.stderr.splitlines() if line.startswith(ROOM)]
    assert len(said) == 1, done.stderr
    assert said[0].startswith(f"{ROOM} {level} ")
    assert named in said[0]


# One room: no other module of the dashboard reaches into Textual.


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_on_self(node: ast.AST) -> str | None:
    """The name, where a node is `self._name` (or `cls._name`)."""
    if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
        return None
    return node.attr if node.value.id in ("self", "cls") and _private(node.attr) else None


def _dashboard_modules() -> Iterator[Any]:
    for found in pkgutil.walk_packages(slotop.tui.__path__, "slotop.tui."):
        if found.name != ROOM:
            yield importlib.import_module(found.name)


@functools.cache
def _textual_private_names(kind: type) -> frozenset[str]:
    """The private names a Textual class defines or sets on its instances."""
    names = {name for name in vars(kind) if _private(name)}
    try:
        source = textwrap.dedent(inspect.getsource(kind))
    except (OSError, TypeError):
        return frozenset(names)
    names.update(filter(None, map(_private_on_self, ast.walk(ast.parse(source)))))
    return frozenset(names)


def _private_names_on_self(kind: type) -> dict[str, int]:
    """The private names a class's own code defines or reads on itself, with a line of each."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(kind)))):
        if (name := _private_on_self(node)) is not None:
            found.setdefault(name, node.lineno)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
            found.setdefault(node.name, node.lineno)
    return found


def test_no_other_module_imports_a_private_module_of_textual() -> None:
    found = []
    for module in _dashboard_modules():
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            found += [
                f"{module.__name__}:{node.lineno} {name}"
                for name in names
                if name.startswith("textual.") and any(_private(p) for p in name.split("."))
            ]
    assert found == []


def test_no_other_class_uses_a_private_name_of_the_textual_classes_it_is_made_of() -> None:
    found = []
    for module in _dashboard_modules():
        for kind in vars(module).values():
            if not inspect.isclass(kind) or kind.__module__ != module.__name__:
                continue
            theirs = [base for base in kind.__mro__ if base.__module__.startswith("textual.")]
            if not theirs:
                continue
            private = frozenset().union(*(_textual_private_names(base) for base in theirs))
            found += [
                f"{module.__name__}.{kind.__name__} (line {line} of the class): {name}"
                for name, line in _private_names_on_self(kind).items()
                if name in private
            ]
    assert found == []


def _other_modules(tree: ast.AST) -> set[str]:
    """The names a module imports other packages than Textual as (`os` in `os._exit`)."""
    return {
        alias.asname or alias.name.partition(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.partition(".")[0] != "textual"
    }


def _names_set_or_defined(tree: ast.AST) -> set[str]:
    """The private names a module defines (functions, classes) or sets (`x._name = ...`)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute):
                    names.add(target.attr)
                elif isinstance(target, ast.Name):
                    names.add(target.id)
    return {name for name in names if _private(name)}


def test_no_other_module_reads_a_private_name_of_textual_s_on_anything() -> None:
    """`widget._styles_cache`, `app._display` and the like, on any object; a name the dashboard
    sets or defines itself is its own."""
    textual_names: set[str] = set()
    for path in Path(textual.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                textual_names.add(node.attr)
    trees = {
        module.__name__: ast.parse(inspect.getsource(module)) for module in _dashboard_modules()
    }
    trees[ROOM] = ast.parse(inspect.getsource(textual_internals))  # its names are slotop's too
    ours = set().union(*map(_names_set_or_defined, trees.values()))
    found = [
        f"{name}:{node.lineno} {node.attr}"
        for name, tree in trees.items()
        if name != ROOM
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in textual_names - ours
        and not (isinstance(node.value, ast.Name) and node.value.id in _other_modules(tree))
    ]
    assert found == []


def test_the_checks_above_see_a_private_name_where_one_is_used() -> None:
    assert "_styles_cache" in _private_names_on_self(KeptLines)
    assert "_styles_cache" in _textual_private_names(Widget)
    assert "_get_style" in _textual_private_names(Widget)


class _Dialog(ModalScreen[None]):
    BINDINGS: ClassVar = [("escape", "dismiss", "close")]

    def compose(self) -> ComposeResult:
        yield Static("a dialog")


class _FooterApp(App[None]):
    BINDINGS: ClassVar = [("m", "dialog", "open a dialog")]

    def __init__(self, footer: type[Footer]) -> None:
        super().__init__()
        self._footer = footer

    def compose(self) -> ComposeResult:
        yield Static("the screen")
        yield self._footer()

    def action_dialog(self) -> None:
        self.push_screen(_Dialog())


def _keys_alive() -> int:
    gc.collect()
    return sum(isinstance(thing, FooterKey) for thing in gc.get_objects())


async def _keys_alive_after_dialogs(footer: type[Footer], dialogs: int) -> int:
    """How many more footer keys are alive after so many dialogs than before the app began."""
    before = _keys_alive()
    app = _FooterApp(footer)
    async with app.run_test() as pilot:
        for _ in range(dialogs):
            await pilot.press("m")
            await pilot.pause()
            await pilot.press("escape")
            await pilot.pause()
            await pilot.pause()
        return _keys_alive() - before


@pytest.mark.anyio
async def test_the_footer_lets_go_of_the_keys_it_drew_before() -> None:
    # each dialog opened and closed draws the footer's keys twice; Textual's footer keeps them
    # all through a watcher on its `compact` (Textual issue 6666), the pruned one only the last
    # (six dialogs: twelve draws kept apart from the last one's four keys)
    with using(ALL):
        assert await _keys_alive_after_dialogs(PrunedFooter, 6) <= 4
    with using(PLAIN):
        assert await _keys_alive_after_dialogs(PrunedFooter, 6) >= 12
    assert await _keys_alive_after_dialogs(Footer, 6) >= 12


def _line_caches_kept(caches: int) -> int:
    """How many of so many widgets' line caches, each asked for its colours and then let go,
    are still alive."""
    kept = []
    for n in range(caches):
        cache = textual._styles_cache.StylesCache()
        cache.get_inner_outer(Color(n, 0, 0), Color(0, 0, 255, 0.5))
        kept.append(weakref.ref(cache))
    del cache
    gc.collect()
    return sum(ref() is not None for ref in kept)


def test_a_widget_s_line_cache_goes_with_it() -> None:
    # Textual's cache of a widget's colours keys them by the widget's StylesCache, so the
    # lines of up to 1024 widgets since removed stay alive (Textual issue 6665)
    with using(ALL):
        assert _line_caches_kept(20) == 0
    with using(dataclasses.replace(ALL, colour_cache=False)):
        assert _line_caches_kept(20) == 20


def test_the_colours_are_textual_s_own() -> None:
    cache = textual._styles_cache.StylesCache()
    base, background = Color(10, 20, 30), Color(210, 100, 0, 0.5)
    blended = Color(110, 60, 15)  # half way from the base to the background
    with using(ALL):
        inner, outer = cache.get_inner_outer(base, background)
    assert (inner, outer) == (Style(background=blended), Style(background=base))
    with using(PLAIN):
        assert cache.get_inner_outer(base, background) == (inner, outer)


def _line_caches_alive() -> int:
    gc.collect()
    return sum(isinstance(thing, textual._styles_cache.StylesCache) for thing in gc.get_objects())


@pytest.mark.anyio
async def test_dialogs_opened_and_closed_leave_no_line_caches_behind() -> None:
    # each dialog's screen and text, and the footer keys drawn as it opens and closes, have a
    # line cache each; a dashboard restarting its replica opens two dialogs every few minutes
    with using(ALL):
        app = _FooterApp(PrunedFooter)
        async with app.run_test() as pilot:
            alive = []
            for _ in range(8):
                await pilot.press("m")
                await pilot.pause()
                await pilot.press("escape")
                await pilot.pause()
                await pilot.pause()
                alive.append(_line_caches_alive())
    assert alive[-1] <= alive[0]
