"""Settings: a TOML file loaded into frozen dataclasses, checked key by key, overridden by flags.

Each setting is declared once, in `sections` (its default, its rule and its comment); `loading`
checks values by those rules, and `sample` writes the commented sample file from them.
"""

from __future__ import annotations

from slotop.config.loading import (
    CONFIG_ENV,
    LAUNCH_DIAL_FLAGS,
    LOCAL_FILE_NAME,
    RESTART_PLACEHOLDERS,
    SGLANG_DIAL_FLAGS,
    find_config_file,
    load_settings,
    secret_values,
    settings_from_mapping,
    with_overrides,
)
from slotop.config.sample import REGENERATE_COMMAND, SAMPLE_PATH, sample_text
from slotop.config.sections import (
    DEFAULT_SLO,
    MAX_PROBE_WORKERS,
    SLO_KEYS,
    SLO_KEYS_MS,
    TUNE_DIALS,
    FleetSettings,
    GpuSettings,
    LaunchSettings,
    LoadSettings,
    ReplicaSettings,
    RestartSettings,
    SessionSettings,
    Settings,
    SloSection,
    SweepSettings,
    TuiSettings,
    TuneSettings,
    WindowSettings,
    slo_from_keys,
    slo_keys,
)

__all__ = [
    "CONFIG_ENV",
    "DEFAULT_SLO",
    "LAUNCH_DIAL_FLAGS",
    "LOCAL_FILE_NAME",
    "MAX_PROBE_WORKERS",
    "REGENERATE_COMMAND",
    "RESTART_PLACEHOLDERS",
    "SAMPLE_PATH",
    "SGLANG_DIAL_FLAGS",
    "SLO_KEYS",
    "SLO_KEYS_MS",
    "TUNE_DIALS",
    "FleetSettings",
    "GpuSettings",
    "LaunchSettings",
    "LoadSettings",
    "ReplicaSettings",
    "RestartSettings",
    "SessionSettings",
    "Settings",
    "SloSection",
    "SweepSettings",
    "TuiSettings",
    "TuneSettings",
    "WindowSettings",
    "find_config_file",
    "load_settings",
    "sample_text",
    "secret_values",
    "settings_from_mapping",
    "slo_from_keys",
    "slo_keys",
    "with_overrides",
]
