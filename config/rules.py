"""What a setting may hold: rules that check a TOML value, and the declaration that carries one.

A setting is declared once, as a field of its section's dataclass: `setting(default, rule,
comment)`. Validation reads the rule from the field, and the sample settings file reads the
default and the comment from it (slotop.config.sample).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, TypeVar, get_args
from urllib.parse import urlsplit

Check = Callable[[Any], bool]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Rule:
    """What a key must hold: its type and its value, each with the words an error uses.

    ``keeps_int``: a whole number stays an int (other numbers become floats). ``holds_table``: the
    value is a TOML table, held as its sorted (name, value) pairs.
    """

    type_ok: Check
    type_words: str
    value_ok: Check | None = None
    value_words: str = ""
    keeps_int: bool = False
    holds_table: bool = False


@dataclass(frozen=True, slots=True)
class Declaration:
    """A setting's rule, and the comment the sample settings file shows above it."""

    rule: Rule
    comment: str


@dataclass(frozen=True, slots=True)
class SectionDeclaration:
    """A section of the settings file: the dataclass declaring its keys, and its opening comment."""

    keys: type[Any]
    comment: str


_SETTING = "slotop.setting"
_SECTION = "slotop.section"


def setting(default: T, rule: Rule, comment: str = "") -> T:
    """A settings field: its default, the rule a value must keep, and the comment that explains it.

    The comment is prose, wrapped where the sample file is written; a newline starts a new line
    there (an example). Empty: the comment above, on an earlier key, covers this one too.
    """
    return field(default=default, metadata={_SETTING: Declaration(rule, comment)})


def section(default: T, comment: str = "", keys: type[Any] | None = None) -> T:
    """A section of `Settings`: its default, its opening comment, and the dataclass of its keys
    (the default's own type unless the file's keys differ from the value's fields)."""
    declared = SectionDeclaration(type(default) if keys is None else keys, comment)
    return field(default=default, metadata={_SECTION: declared})


def declared_settings(keys: type[Any]) -> list[tuple[Field[Any], Declaration]]:
    """The fields of a section's dataclass that are settings, in order, with their declarations."""
    return [(f, f.metadata[_SETTING]) for f in fields(keys) if _SETTING in f.metadata]


def declared_sections(settings: type[Any]) -> list[tuple[str, SectionDeclaration]]:
    """The sections of the settings dataclass, in order, with their declarations."""
    return [(f.name, f.metadata[_SECTION]) for f in fields(settings) if _SECTION in f.metadata]


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_string(value: Any) -> bool:
    return isinstance(value, str)


def is_string_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(item, str) for item in value)


def is_http_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def is_env_name(value: str) -> bool:
    return value == "" or (value.replace("_", "a").isalnum() and not value[0].isdigit())


def is_argv(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(a, str) and a for a in value)


def _is_env_table(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and k and is_env_name(k) and isinstance(v, str) for k, v in value.items()
    )


def number_where(value_ok: Check, value_words: str) -> Rule:
    """A number (an int or a float; a float is kept) that ``value_ok`` accepts."""
    return Rule(is_number, "a number", value_ok, value_words)


def whole_where(value_ok: Check, value_words: str) -> Rule:
    """A whole number, kept an int, that ``value_ok`` accepts."""
    return Rule(is_whole, "a whole number", value_ok, value_words, keeps_int=True)


def string_where(value_ok: Check, value_words: str) -> Rule:
    """A string that ``value_ok`` accepts."""
    return Rule(is_string, "a string", value_ok, value_words)


def one_of(choices: Any) -> Rule:
    """A string among a `Literal`'s choices."""
    names: tuple[str, ...] = get_args(choices)
    words = " or ".join(names) if len(names) == 2 else f"one of {', '.join(names)}"
    return string_where(lambda value: value in names, words)


NUMBER_POSITIVE = number_where(lambda v: math.isfinite(v) and v > 0, "greater than 0")
NUMBER_NOT_NEGATIVE = number_where(lambda v: math.isfinite(v) and v >= 0, "0 or more")
GREATER_THAN_1 = number_where(lambda v: v > 1, "greater than 1")
PERCENTILE = number_where(lambda v: 0 < v < 100, "between 0 and 100, exclusive")
RATIO = number_where(lambda v: 0 <= v <= 1, "between 0 and 1")
ABOVE_0_AT_MOST_1 = number_where(lambda v: 0 < v <= 1, "above 0, at most 1")
WHOLE_POSITIVE = whole_where(lambda v: v >= 1, "at least 1")
WHOLE_NOT_NEGATIVE = whole_where(lambda v: v >= 0, "0 or more")
BOOLEAN = Rule(lambda v: isinstance(v, bool), "true or false")
PATH = Rule(is_string, "a string (a path, or empty)")
HTTP_URL = string_where(is_http_url, "an http:// or https:// URL")
ENV_NAME = string_where(
    is_env_name, "an environment variable name (letters, digits, _), or empty for none"
)
ARGV = Rule(is_argv, "a list of non-empty strings, or empty for none")
ENV_TABLE = Rule(_is_env_table, 'a table of NAME = "value" strings', holds_table=True)
