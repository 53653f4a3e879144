"""Settings from a TOML file or flags: every key checked by its declared rule, then the whole."""

from __future__ import annotations

import dataclasses
import difflib
import os
import string
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slotop.config.rules import Rule, declared_sections, declared_settings, is_number
from slotop.config.sections import Settings, slo_from_keys
from slotop.errors import ConfigError
from slotop.redact import REDACTED, argv_secrets, redact_argv, shown_url, url_password

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

LOCAL_FILE_NAME = "slotop.toml"
CONFIG_ENV = "SLOTOP_CONFIG"

RESTART_PLACEHOLDERS = ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens", "dial_args")
"""The names a [launch] restart_command may hold in braces; {dial_args} must be a whole argument."""


def _placeholders(argument: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(argument) if name is not None]
    except ValueError:
        return ["an unbalanced brace"]


LAUNCH_DIAL_FLAGS = ("--kv-cache-dtype", "--max-num-seqs", "--max-num-batched-tokens")
"""The `vllm serve` flags slotop owns in a launch command: [launch] holds their values."""

SGLANG_DIAL_FLAGS = ("--kv-cache-dtype", "--max-running-requests", "--chunked-prefill-size")
"""SGLang's flags for the same dials, in the same order: kv_cache_dtype, max_num_seqs,
max_num_batched_tokens."""

_LAUNCH_KEYS = ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens")


_RULES: dict[str, dict[str, Rule]] = {
    name: {key.name: declared.rule for key, declared in declared_settings(section.keys)}
    for name, section in declared_sections(Settings)
}
"""Each section's keys, with the rule a value of each must keep."""


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{hint}known: {', '.join(choices)}"


def _shown_value(value: Any) -> str:
    """A refused value as an error message shows it: URLs without user info, command lines with
    their secrets hidden, the values of an environment table left out."""
    if isinstance(value, str):
        return repr(shown_url(value)) if "://" in value or "@" in value else repr(value)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return repr(redact_argv(value))
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{name!r} = {REDACTED}" for name in value) + "}"
    return repr(value)


def secret_values(settings: Settings, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every secret the settings hold or name: the API key, a URL's password, [launch] env values
    and secret-looking arguments of its commands, the fleet's credentials (file or variable).

    What slotop shows, logs or records is scrubbed of these (slotop.redact.Scrubber)."""
    env = os.environ if environ is None else environ
    found: list[str | None] = [settings.replica.api_key, url_password(settings.replica.url)]
    found += [value for _, value in settings.launch.env]
    found += argv_secrets(settings.launch.command) + argv_secrets(settings.launch.restart_command)
    fleet = settings.fleet
    for name in (fleet.bearer_token_env, fleet.basic_auth_env):
        if name:
            value = env.get(name, "").strip()
            found += [value, value.partition(":")[2]]
    for file in (fleet.bearer_token_file, fleet.basic_auth_file):
        if file:
            try:
                text = Path(file).expanduser().read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                continue
            line = text.splitlines()[0].strip() if text else ""
            found += [line, line.partition(":")[2]]
    return [secret for secret in found if secret]


def _checked(source: str, section: str, key: str, value: Any) -> Any:
    rules = _RULES[section]
    if key not in rules:
        raise ConfigError(
            f"{source}: unknown key [{section}] {key}; {_suggest(key, sorted(rules))}"
        )
    rule = rules[key]
    if not rule.type_ok(value):
        raise ConfigError(
            f"{source}: [{section}] {key} = {_shown_value(value)} is {type(value).__name__}; "
            f"expected {rule.type_words}"
        )
    if rule.value_ok is not None and not rule.value_ok(value):
        raise ConfigError(
            f"{source}: [{section}] {key} = {_shown_value(value)}; expected {rule.value_words}"
        )
    if isinstance(value, list):
        return tuple(value)
    if rule.holds_table:
        return tuple(sorted(value.items()))
    if is_number(value) and not rule.keeps_int:
        return float(value)
    return value


def _check_whole(settings: Settings) -> Settings:
    """Check what spans keys, and resolve the API key from its environment variable."""
    window = settings.window
    if window.short_s > window.long_s:
        raise ConfigError(
            f"{settings.source}: [window] short_s = {window.short_s:g} is longer than "
            f"long_s = {window.long_s:g}; the short window must fit in the long one"
        )
    load = settings.load
    if load.initial_concurrency > load.max_concurrency:
        raise ConfigError(
            f"{settings.source}: [load] initial_concurrency = {load.initial_concurrency} is above "
            f"max_concurrency = {load.max_concurrency}; raise the cap or start lower"
        )
    if isinstance(load.workers, int) and load.workers > load.max_concurrency:
        raise ConfigError(
            f"{settings.source}: [load] workers = {load.workers} is above max_concurrency = "
            f"{load.max_concurrency}; each worker holds at least one stream: ask for fewer "
            'workers, raise the cap, or say "auto"'
        )
    if load.shared_prefix_tokens and load.prompts_file:
        raise ConfigError(
            f"{settings.source}: [load] shared_prefix_tokens = {load.shared_prefix_tokens} goes "
            "on synthetic prompts only, but prompts_file is set; set shared_prefix_tokens = 0 "
            'or prompts_file = ""'
        )
    sweep = settings.sweep
    if sweep.max_dwell_s < sweep.dwell_s:
        raise ConfigError(
            f"{settings.source}: [sweep] max_dwell_s = {sweep.max_dwell_s:g} is shorter than "
            f"dwell_s = {sweep.dwell_s:g}; a step dwells at least dwell_s"
        )
    above = [c for c in (*sweep.concurrency, sweep.max_concurrency) if c > load.max_concurrency]
    if above:
        raise ConfigError(
            f"{settings.source}: [sweep] asks for concurrency {max(above)}, above [load] "
            f"max_concurrency = {load.max_concurrency}; raise the cap or sweep lower"
        )
    for argument in settings.launch.command:
        flag = argument.partition("=")[0]
        for flags in (LAUNCH_DIAL_FLAGS, SGLANG_DIAL_FLAGS):
            if flag not in flags:
                continue
            key = _LAUNCH_KEYS[flags.index(flag)]
            raise ConfigError(
                f"{settings.source}: [launch] command holds {flag}; slotop sets that flag itself: "
                f"put the value in [launch] {key} instead"
            )
    for argument in settings.launch.restart_command:
        for name in _placeholders(argument):
            if name not in RESTART_PLACEHOLDERS or (
                name == "dial_args" and argument != "{dial_args}"
            ):
                what = f"{{{name}}}" if name.isidentifier() else name
                raise ConfigError(
                    f"{settings.source}: [launch] restart_command argument "
                    f"{redact_argv([argument])[0]!r} holds "
                    f"{what}; use {{kv_cache_dtype}}, {{max_num_seqs}} or "
                    "{max_num_batched_tokens} inside an argument, or {dial_args} as a whole one "
                    "(write {{ and }} for literal braces)"
                )
    session = settings.session
    if session.max_folder_mb and session.max_file_mb > session.max_folder_mb:
        raise ConfigError(
            f"{settings.source}: [session] max_file_mb = {session.max_file_mb:g} is above "
            f"max_folder_mb = {session.max_folder_mb:g}; one file of a session would outgrow the "
            "folder's budget: lower max_file_mb or raise max_folder_mb"
        )
    _check_fleet(settings)
    env_name = settings.replica.api_key_env
    api_key = (os.environ.get(env_name) or None) if env_name else None
    replica = dataclasses.replace(settings.replica, api_key=api_key)
    return dataclasses.replace(settings, replica=replica)


def _check_fleet(settings: Settings) -> None:
    """One source per credential, one kind of credential, and the model label apart."""
    fleet = settings.fleet
    for kind in ("bearer_token", "basic_auth"):
        file, env = getattr(fleet, f"{kind}_file"), getattr(fleet, f"{kind}_env")
        if file and env:
            raise ConfigError(
                f"{settings.source}: [fleet] sets both {kind}_file and {kind}_env; keep one"
            )
    if (fleet.bearer_token_file or fleet.bearer_token_env) and (
        fleet.basic_auth_file or fleet.basic_auth_env
    ):
        raise ConfigError(
            f"{settings.source}: [fleet] names both a bearer token and basic auth; a server "
            "takes one: keep the one it expects"
        )
    if fleet.model_label in fleet.replica_labels:
        raise ConfigError(
            f"{settings.source}: [fleet] model_label = {fleet.model_label!r} is also in "
            "replica_labels; list only the labels that tell replicas of one model apart"
        )


_DEFAULTS = Settings()


def _with_keys(section: str, current: Any, values: Mapping[str, Any]) -> Any:
    """A section with checked values, named by the settings file's keys, put in place of its own."""
    if section == "slo":
        return slo_from_keys(values, current)
    return dataclasses.replace(current, **values)


def settings_from_mapping(data: Mapping[str, Any], source: str) -> Settings:
    """Build settings from parsed TOML, naming ``source`` and the key in every error."""
    sections: dict[str, Any] = {}
    for section, table in data.items():
        if section not in _RULES:
            raise ConfigError(
                f"{source}: unknown section [{section}]; {_suggest(section, sorted(_RULES))}"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: {section} must be a [{section}] table, not a value")
        values = {key: _checked(source, section, key, value) for key, value in table.items()}
        sections[section] = _with_keys(section, getattr(_DEFAULTS, section), values)
    return _check_whole(Settings(**sections, source=source))


def find_config_file(explicit: Path | None) -> Path | None:
    """The settings file to read: --config, then $SLOTOP_CONFIG, ./slotop.toml, the user's."""
    if explicit is not None:
        return explicit
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return Path(from_env)
    local = Path.cwd() / LOCAL_FILE_NAME
    if local.is_file():
        return local
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    user = config_home / "slotop" / LOCAL_FILE_NAME
    return user if user.is_file() else None


def load_settings(explicit: Path | None = None) -> Settings:
    """Load settings from the file ``find_config_file`` picks, or the defaults when there is none."""
    path = find_config_file(explicit)
    if path is None:
        return _check_whole(Settings())
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such settings file; `slotop sample-config > {path}` writes one"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the settings file ({exc.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return settings_from_mapping(data, str(path))


def with_overrides(settings: Settings, overrides: Mapping[str, Any]) -> Settings:
    """Apply flag values given as ``{"section.key": value}``; ``None`` means the flag was not set."""
    changed: dict[str, dict[str, Any]] = {}
    for dotted, value in overrides.items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        changed.setdefault(section, {})[key] = _checked("command line", section, key, value)
    if not changed:
        return settings
    replaced = {
        section: _with_keys(section, getattr(settings, section), values)
        for section, values in changed.items()
    }
    return _check_whole(dataclasses.replace(settings, **replaced))
