"""Settings: the real sample.toml loads, and every bad value is named with its file and key."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tomllib

from slotop.config import (
    REGENERATE_COMMAND,
    SAMPLE_PATH,
    Settings,
    find_config_file,
    load_settings,
    sample_text,
    settings_from_mapping,
    with_overrides,
)
from slotop.errors import ConfigError
from slotop.slo import GoodputTargets, Slo


def test_sample_toml_is_what_the_declarations_write() -> None:
    assert SAMPLE_PATH.read_text(encoding="utf-8") == sample_text(), (
        f"sample.toml differs from the settings' declarations: run `{REGENERATE_COMMAND}`"
    )


def test_sample_toml_loads_and_equals_the_defaults() -> None:
    loaded = load_settings(SAMPLE_PATH)
    assert loaded == dataclasses.replace(Settings(), source=str(SAMPLE_PATH))
    assert loaded.slo == Slo(ttft_s=0.5, itl_s=0.05, ttft_percentile=99.0, itl_percentile=99.0)


def test_sample_comments_wrap_within_the_line_width() -> None:
    lines = sample_text().splitlines()
    assert max(len(line) for line in lines) <= 100
    assert any(line.startswith('# command = ["vllm", "serve"') for line in lines), (
        "an example's line"
    )


def test_sample_toml_documents_every_key_with_a_comment() -> None:
    data = tomllib.loads(SAMPLE_PATH.read_text(encoding="utf-8"))
    lines = SAMPLE_PATH.read_text(encoding="utf-8").splitlines()
    documented = 0
    for section, table in data.items():
        for key in table:
            index = next(i for i, line in enumerate(lines) if line.startswith(f"{key} ="))
            assert lines[index - 1].startswith("#") or lines[index - 2].startswith("#"), (
                f"[{section}] {key} has no comment above it"
            )
            documented += 1
    assert documented == sum(len(getattr(Settings(), s).__slots__) for s in data) - 1  # api_key


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[replica]\nurl = 42\n", "[replica] url = 42 is int; expected a string"),
        ('[replica]\nurl = "localhost:8000"\n', "expected an http:// or https:// URL"),
        ("[replica]\nscrape_interval_s = -1\n", "scrape_interval_s = -1; expected greater than 0"),
        ("[replica]\nscrape_interval_s = true\n", "is bool; expected a number"),
        (
            "[replica]\nscrap_interval_s = 1\n",
            "unknown key [replica] scrap_interval_s; did you mean",
        ),
        ("[slo]\nttft_percentile = 100\n", "ttft_percentile = 100; expected between 0 and 100"),
        ("[slo]\nitl_percentile = 0\n", "itl_percentile = 0; expected between 0 and 100"),
        ("[slo]\nitl_ms = 0\n", "itl_ms = 0; expected greater than 0"),
        ("[sloo]\nitl_ms = 5\n", "unknown section [sloo]; did you mean 'slo'?"),
        ("slo = 5\n", "slo must be a [slo] table"),
        ("[window]\nlong_s = 5\nshort_s = 10\n", "short window must fit in the long one"),
        ("[gpu]\nindices = [0, -1]\n", "expected a list of GPU indices"),
        ('[replica]\napi_key_env = "MY KEY"\n', "expected an environment variable name"),
        ("[replica\n", "not valid TOML"),
        ('[load]\nendpoint = "responses"\n', "expected completions or chat"),
        ('[load]\nprompt_form = "ids"\n', "expected one of auto, token_ids, text"),
        ("[load]\nmax_concurrency = 0\n", "max_concurrency = 0; expected at least 1"),
        ("[load]\nmax_concurrency = 8.5\n", "is float; expected a whole number"),
        ("[load]\ninitial_concurrency = -1\n", "expected 0 or more"),
        ("[load]\nmax_rate_rps = 0\n", "max_rate_rps = 0; expected greater than 0"),
        ('[load]\nprompt_distribution = "zipf"\n', "expected one of fixed, uniform, normal"),
        ("[load]\noutput_tokens = 0\n", "output_tokens = 0; expected at least 1"),
        ('[load]\nallow_remote_load = "yes"\n', "is str; expected true or false"),
        ("[load]\nignore_eos = 1\n", "is int; expected true or false"),
        (
            "[load]\nmax_concurrency = 4\ninitial_concurrency = 5\n",
            "initial_concurrency = 5 is above max_concurrency = 4",
        ),
        ("[load]\nshared_prefix_tokens = -16\n", "shared_prefix_tokens = -16; expected 0 or more"),
        ("[load]\nshared_prefix_tokens = 1.5\n", "is float; expected a whole number"),
        ("[load]\nshared_prefix_ratio = 1.5\n", "shared_prefix_ratio = 1.5; expected between 0"),
        ('[load]\nshared_prefix_ratio = "half"\n', "is str; expected a number"),
        (
            '[load]\nshared_prefix_tokens = 256\nprompts_file = "p.jsonl"\n',
            "shared_prefix_tokens = 256 goes on synthetic prompts only, but prompts_file is set",
        ),
        ("[replica]\nmax_scrape_mb = 0\n", "max_scrape_mb = 0; expected from 0.01 to 4096"),
        ('[replica]\nmax_scrape_mb = "32"\n', "is str; expected a number"),
        ("[session]\nmax_file_mb = -1\n", "max_file_mb = -1; expected 0 (one file"),
        ("[session]\nmax_folder_mb = 0.001\n", "max_folder_mb = 0.001; expected 0 (no budget"),
        (
            "[session]\nmax_file_mb = 100\nmax_folder_mb = 50\n",
            "max_file_mb = 100 is above max_folder_mb = 50; one file of a session would outgrow",
        ),
        (
            '[replica]\nurl = "ftp://u:pw-in-url@h"\n',
            "url = 'ftp://h'; expected an http:// or https:// URL",
        ),
        (
            '[launch]\ncommand = ["vllm", "--api-key", "k-in-argv", ""]\n',
            "command = ['vllm', '--api-key', '<redacted>', ''] is list",
        ),
        (
            "[launch]\nenv = { HF_TOKEN = 5 }\n",
            "env = {'HF_TOKEN' = <redacted>} is dict",
        ),
    ],
)
def test_bad_values_name_the_file_the_key_and_what_is_expected(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert str(path) in str(caught.value)
    assert words in str(caught.value)


def test_a_missing_explicit_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sample-config"):
        load_settings(tmp_path / "absent.toml")


def test_integers_become_floats_and_index_lists_become_tuples() -> None:
    settings = settings_from_mapping({"slo": {"ttft_ms": 300}, "gpu": {"indices": [1, 0]}}, "t")
    assert settings.slo.ttft_s == 0.3
    assert isinstance(settings.slo.ttft_s, float)
    assert settings.gpu.indices == (1, 0)


def test_load_counts_stay_integers_and_rates_become_floats() -> None:
    settings = settings_from_mapping(
        {"load": {"max_concurrency": 8, "prompt_tokens": 100, "max_rate_rps": 5}}, "t"
    )
    assert settings.load.max_concurrency == 8
    assert isinstance(settings.load.max_concurrency, int)
    assert isinstance(settings.load.prompt_tokens, int)
    assert settings.load.max_rate_rps == 5.0
    assert isinstance(settings.load.max_rate_rps, float)
    assert with_overrides(settings, {"load.allow_remote_load": True}).load.allow_remote_load


def test_api_key_is_read_from_the_named_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_VLLM_KEY", "sekret")
    settings = settings_from_mapping({"replica": {"api_key_env": "MY_VLLM_KEY"}}, "t")
    assert settings.replica.api_key == "sekret"
    assert "sekret" not in repr(settings)
    monkeypatch.delenv("MY_VLLM_KEY")
    assert (
        settings_from_mapping({"replica": {"api_key_env": "MY_VLLM_KEY"}}, "t").replica.api_key
        is None
    )
    assert settings_from_mapping({"replica": {"api_key_env": ""}}, "t").replica.api_key is None


def test_flags_override_the_file_and_are_checked_the_same_way() -> None:
    base = settings_from_mapping({"replica": {"url": "http://a:1"}}, "file.toml")
    changed = with_overrides(
        base, {"replica.url": "http://b:2", "slo.ttft_ms": 250, "slo.itl_ms": None}
    )
    assert changed.replica.url == "http://b:2"
    assert changed.slo.ttft_s == 0.25
    assert changed.slo.itl_s == base.slo.itl_s
    with pytest.raises(ConfigError, match=r"command line: \[slo\] ttft_percentile = 100"):
        with_overrides(base, {"slo.ttft_percentile": 100})


def test_the_slo_keys_in_milliseconds_become_seconds_once() -> None:
    text = "[slo]\nttft_ms = 1003\nttft_percentile = 95\nitl_ms = 42.5\nitl_percentile = 90\n"
    settings = settings_from_mapping(tomllib.loads(text), "slotop.toml")
    assert settings.slo == Slo(
        ttft_s=1.003, itl_s=0.0425, ttft_percentile=95.0, itl_percentile=90.0
    )
    assert settings.slo.goodput_targets == GoodputTargets(ttft_s=1.003, tpot_s=0.0425)
    assert Settings().slo == Slo(ttft_s=0.5, itl_s=0.05, ttft_percentile=99.0, itl_percentile=99.0)
    # a flag converts its own key; the seconds already made are not divided again
    flagged = with_overrides(settings, {"slo.itl_ms": 40, "slo.ttft_percentile": 99})
    assert flagged.slo == Slo(ttft_s=1.003, itl_s=0.04, ttft_percentile=99.0, itl_percentile=90.0)
    assert with_overrides(flagged, {"replica.timeout_s": 2}).slo == flagged.slo


def test_config_file_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert find_config_file(None) is None
    user = tmp_path / "xdg" / "slotop" / "slotop.toml"
    user.parent.mkdir(parents=True)
    user.write_text("", encoding="utf-8")
    assert find_config_file(None) == user
    local = tmp_path / "slotop.toml"
    local.write_text("", encoding="utf-8")
    assert find_config_file(None) == local
    monkeypatch.setenv("SLOTOP_CONFIG", str(tmp_path / "env.toml"))
    assert find_config_file(None) == tmp_path / "env.toml"
    assert find_config_file(tmp_path / "flag.toml") == tmp_path / "flag.toml"


def test_launch_section_loads_its_lists_tables_and_dials() -> None:
    assert load_settings(SAMPLE_PATH).launch == Settings().launch
    launch = settings_from_mapping(
        {
            "launch": {
                "command": ["vllm", "serve", "m", "--port", "8000"],
                "env": {"VLLM_LOGGING_LEVEL": "DEBUG", "CUDA_VISIBLE_DEVICES": "1"},
                "max_num_seqs": 64,
                "restart_command": ["restart-vllm", "{dial_args}", "--seqs={max_num_seqs}"],
            }
        },
        "t",
    ).launch
    assert launch.command == ("vllm", "serve", "m", "--port", "8000")
    assert launch.env == (("CUDA_VISIBLE_DEVICES", "1"), ("VLLM_LOGGING_LEVEL", "DEBUG"))
    assert launch.max_num_seqs == 64
    assert isinstance(launch.max_num_seqs, int)
    assert launch.restart_command[1] == "{dial_args}"


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"command": "vllm serve m"}, "expected a list of non-empty strings"),
        ({"command": ["vllm", ""]}, "expected a list of non-empty strings"),
        ({"command": ["vllm", "serve", "--kv-cache-dtype=fp8"]}, "put the value in [launch]"),
        ({"command": ["vllm", "--max-num-seqs", "8"]}, "[launch] max_num_seqs instead"),
        ({"env": {"BAD NAME": "1"}}, 'expected a table of NAME = "value" strings'),
        ({"env": {"N": 1}}, 'expected a table of NAME = "value" strings'),
        ({"health_timeout_s": 0}, "health_timeout_s = 0; expected greater than 0"),
        ({"max_num_seqs": -1}, "max_num_seqs = -1; expected 0 or more"),
        ({"kv_cache_dtype": " "}, "kv_cache_dtype = ' '; expected not empty"),
        ({"restart_command": ["r", "{max_seqs}"]}, "holds {max_seqs}; use {kv_cache_dtype}"),
        ({"restart_command": ["r", "--x={dial_args}"]}, "{dial_args} as a whole one"),
        ({"restart_command": ["r", "{"]}, "holds an unbalanced brace"),
        ({"quality_prompts_file": 3}, "quality_prompts_file = 3 is int; expected a string"),
        (
            {"quality_prompts_file": "no/such/prompts.jsonl"},
            "quality_prompts_file = 'no/such/prompts.jsonl'; expected an existing JSONL prompts "
            "file",
        ),
    ],
)
def test_bad_launch_values_are_refused_with_the_key(table: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping({"launch": table}, "launch.toml")
    assert "launch.toml: [launch]" in str(caught.value)
    assert words in str(caught.value)


def test_quality_prompts_file_is_empty_for_the_built_in_set_or_an_existing_file(
    tmp_path: Path,
) -> None:
    assert Settings().launch.quality_prompts_file == ""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('"hello"\n', encoding="utf-8")
    data = {"launch": {"quality_prompts_file": str(prompts)}}
    assert settings_from_mapping(data, "t").launch.quality_prompts_file == str(prompts)
    with pytest.raises(ConfigError, match="leave it empty for the built-in prompts"):
        settings_from_mapping({"launch": {"quality_prompts_file": str(tmp_path)}}, "t")


def test_tui_section_keeps_counts_whole_and_refuses_a_zero_refresh() -> None:
    settings = settings_from_mapping({"tui": {"refresh_s": 2, "demo_concurrency": 3}}, "t")
    assert settings.tui.refresh_s == 2.0
    assert isinstance(settings.tui.refresh_s, float)
    assert settings.tui.demo_concurrency == 3
    with pytest.raises(ConfigError, match=r"\[tui\] refresh_s = 0; expected greater than 0"):
        settings_from_mapping({"tui": {"refresh_s": 0}}, "t")
    with pytest.raises(ConfigError, match=r"\[tui\] demo_concurrency = 0; expected at least 1"):
        settings_from_mapping({"tui": {"demo_concurrency": 0}}, "t")


def test_sweep_section_loads_its_steps_and_rules() -> None:
    assert load_settings(SAMPLE_PATH).sweep == Settings().sweep
    sweep = settings_from_mapping(
        {"sweep": {"concurrency": [1, 4, 16], "min_requests": 20, "warmup_s": 0, "dwell_s": 5}},
        "t",
    ).sweep
    assert sweep.concurrency == (1, 4, 16)
    assert isinstance(sweep.min_requests, int)
    assert (sweep.warmup_s, sweep.dwell_s) == (0.0, 5.0)
    assert isinstance(sweep.warmup_s, float)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"sweep": {"concurrency": [1, 0]}}, "expected a list of concurrencies (integers ≥ 1)"),
        ({"sweep": {"concurrency": "1,2"}}, "is str; expected a list of concurrencies"),
        ({"sweep": {"growth_factor": 1}}, "growth_factor = 1; expected greater than 1"),
        ({"sweep": {"warmup_s": -1}}, "warmup_s = -1; expected 0 or more"),
        ({"sweep": {"min_requests": 0}}, "min_requests = 0; expected at least 1"),
        ({"sweep": {"kv_full_ratio": 0}}, "kv_full_ratio = 0; expected above 0, at most 1"),
        ({"sweep": {"max_error_ratio": 2}}, "max_error_ratio = 2; expected between 0 and 1"),
        ({"sweep": {"allow_preemptions": 1}}, "is int; expected true or false"),
        (
            {"sweep": {"dwell_s": 30, "max_dwell_s": 10}},
            "[sweep] max_dwell_s = 10 is shorter than dwell_s = 30",
        ),
        (
            {"sweep": {"concurrency": [1, 128]}},
            "[sweep] asks for concurrency 128, above [load] max_concurrency = 64",
        ),
        (
            {"load": {"max_concurrency": 8}, "sweep": {"max_concurrency": 16}},
            "asks for concurrency 16, above [load] max_concurrency = 8",
        ),
    ],
)
def test_bad_sweep_values_are_refused_with_the_key(data: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(data, "sweep.toml")
    assert str(caught.value).startswith("sweep.toml: ")
    assert words in str(caught.value)
