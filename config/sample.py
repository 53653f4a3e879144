"""The sample settings file, written from the settings' declarations: every key, its default and
its comment (`slotop sample-config` prints it; the packaged `sample.toml` is a copy of it)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from slotop.config.rules import Rule, declared_sections, declared_settings
from slotop.config.sections import Settings

SAMPLE_PATH = Path(__file__).parents[1] / "sample.toml"
"""The sample file as packaged; tests/test_config.py keeps it equal to `sample_text()`."""

REGENERATE_COMMAND = "slotop sample-config > sample.toml"
"""How `sample.toml` is written again after a declaration changed (from the repository root)."""

LINE_WIDTH = 100
"""The widest line a comment is wrapped to."""

_HEADER = (
    "slotop settings. Every key is shown with its default; delete what you do not change.\n"
    "slotop reads, in order: --config FILE, $SLOTOP_CONFIG, ./slotop.toml, "
    "~/.config/slotop/slotop.toml. Flags given on the command line override this file. Unknown keys are refused, so a typo never "
    "silently falls back to a default."
)


def _comment(text: str) -> list[str]:
    """Prose as comment lines wrapped to the line width; a newline in it starts a new line."""
    if not text:
        return []
    return [
        line
        for paragraph in text.split("\n")
        for line in textwrap.wrap(
            paragraph,
            LINE_WIDTH,
            initial_indent="# ",
            subsequent_indent="# ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    ]


def _toml_value(value: Any, rule: Rule) -> str:
    """A default as TOML writes it: tuples are arrays, or a table where the rule holds one."""
    if rule.holds_table:
        return "{" + ", ".join(f"{name} = {json.dumps(item)}" for name, item in value) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml_value(item, rule) for item in value) + "]"
    return repr(value)


def sample_text() -> str:
    """The sample settings file: each section with its opening comment, each key with its comment
    above it and its default."""
    lines = _comment(_HEADER)
    for name, section in declared_sections(Settings):
        lines += ["", f"[{name}]", *_comment(section.comment)]
        for key, declared in declared_settings(section.keys):
            lines += _comment(declared.comment)
            lines.append(f"{key.name} = {_toml_value(key.default, declared.rule)}")
    return "\n".join(lines) + "\n"
