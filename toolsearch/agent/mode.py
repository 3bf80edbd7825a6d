"""Whether tool search is on for a request: ``ENABLE_TOOL_SEARCH``, the kill switch, the auto
threshold and the gates (docs/reference-behaviour.md §4).

``ENABLE_TOOL_SEARCH`` (case and surrounding space ignored):

=====================================  ==================================================
value                                  meaning
=====================================  ==================================================
unset, empty, unrecognised             on
``true`` ``1`` ``yes`` ``on``          on
``false`` ``0`` ``no`` ``off``         off
``auto``                               on once deferred tools reach 10 % of the context
``auto:N``                             the same at N % — N is read like JavaScript's
                                       ``parseInt`` (leading integer), clamped to 0-100;
                                       ``auto:0`` = on, ``auto:100`` = off, no number = 10
=====================================  ==================================================

Then, in this order, any of these turns it off: the kill switch; the model matching a configured
unsupported pattern (case-insensitive substring); ToolSearch denied or missing from the agent's
tools; an endpoint configured as not supporting ``tool_reference`` blocks, unless
``ENABLE_TOOL_SEARCH`` explicitly switches search on; no deferred tools and no MCP server still
connecting. In auto mode the size is the deferred tools' definition tokens (a pluggable
:class:`~toolsearch.tokens.TokenCounter`, the 2.5-characters-a-token estimate by default) minus a
fixed 500-token overhead; while servers are still connecting the size is not final, so search
stays on and is measured again on the next request.

The same settings come from code (:class:`ModeSettings` fields), the environment and the
``[mode]`` table of ``toolsearch.toml`` / ``[tool.toolsearch.mode]`` — precedence code >
environment > config, as for every other setting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from toolsearch.config import Settings, load_settings
from toolsearch.errors import ConfigError
from toolsearch.mode_values import FALSE_WORDS, TRUE_WORDS, int_value, mode_value
from toolsearch.tokens import CharEstimate, TokenCounter, TokenizerCounter, tool_tokens
from toolsearch.tool import TOOL_SEARCH_NAME, Tool, is_deferred

__all__ = [
    "DEFAULT_AUTO_PERCENT",
    "DEFAULT_CONTEXT_WINDOW",
    "ENV_CONTEXT_WINDOW",
    "ENV_ENABLE",
    "ENV_KILL_SWITCH",
    "ENV_TOOL_REFERENCES",
    "ENV_UNSUPPORTED_MODELS",
    "TOKEN_OVERHEAD",
    "EnableSetting",
    "ModeDecision",
    "ModeSettings",
    "parse_enable_tool_search",
    "resolve_mode",
]

ENV_ENABLE = "ENABLE_TOOL_SEARCH"
ENV_KILL_SWITCH = "TOOLSEARCH_DISABLE_TOOL_SEARCH"
ENV_CONTEXT_WINDOW = "TOOLSEARCH_CONTEXT_WINDOW"
ENV_UNSUPPORTED_MODELS = "TOOLSEARCH_UNSUPPORTED_MODELS"
ENV_TOOL_REFERENCES = "TOOLSEARCH_TOOL_REFERENCES"

#: Environment variables that set a mode setting, in the order they are applied.
_ENV_SETTINGS: tuple[tuple[str, str], ...] = (
    (ENV_ENABLE, "enable_tool_search"),
    (ENV_KILL_SWITCH, "kill_switch"),
    (ENV_CONTEXT_WINDOW, "context_window"),
    (ENV_UNSUPPORTED_MODELS, "unsupported_models"),
    (ENV_TOOL_REFERENCES, "tool_references"),
)

DEFAULT_AUTO_PERCENT = 10
DEFAULT_CONTEXT_WINDOW = 200_000
#: Tokens a tool list costs on top of its definitions (the tool-use system prompt).
TOKEN_OVERHEAD = 500

_LEADING_INT = re.compile(r"\s*([+-]?\d+)")

State = Literal["on", "off", "auto"]


@dataclass(frozen=True, slots=True)
class EnableSetting:
    """A parsed ``ENABLE_TOOL_SEARCH`` value.

    ``percent`` is the auto threshold (set for ``auto`` and ``auto:N``); ``explicit`` is True
    when the value was a recognised way of switching search on or to auto — the only thing that
    overrides an endpoint configured as not supporting tool references.
    """

    state: State
    percent: int | None = None
    raw: str | None = None
    explicit: bool = False

    def describe(self) -> str:
        """How the value reads in a decision's reason."""
        shown = "unset" if self.raw is None or not self.raw.strip() else repr(self.raw)
        return f"{ENV_ENABLE}={shown}"


def parse_enable_tool_search(value: str | None) -> EnableSetting:
    """Parse an ``ENABLE_TOOL_SEARCH`` value exactly as the table in this module says."""
    raw = value
    text = (value or "").strip().lower()
    if not text:
        return EnableSetting("on", raw=raw)
    if text in TRUE_WORDS:
        return EnableSetting("on", raw=raw, explicit=True)
    if text in FALSE_WORDS:
        return EnableSetting("off", raw=raw)
    if text == "auto":
        return EnableSetting("auto", DEFAULT_AUTO_PERCENT, raw=raw, explicit=True)
    if text.startswith("auto:"):
        number = _LEADING_INT.match(text[len("auto:") :])
        percent = DEFAULT_AUTO_PERCENT if number is None else int(number.group(1))
        percent = max(0, min(100, percent))
        if percent == 0:
            return EnableSetting("on", 0, raw=raw, explicit=True)
        if percent == 100:
            return EnableSetting("off", 100, raw=raw)
        return EnableSetting("auto", percent, raw=raw, explicit=True)
    return EnableSetting("on", raw=raw)  # unrecognised: the default


def _truthy(value: str) -> bool:
    return value.strip().lower() in TRUE_WORDS


@dataclass(frozen=True, slots=True)
class ModeSettings:
    """Everything that decides whether tool search is on, with the documented defaults.

    ``enable_tool_search`` is the raw ``ENABLE_TOOL_SEARCH`` value; ``kill_switch`` forces
    search off whatever else is set; ``unsupported_models`` are case-insensitive substrings of
    model names that cannot take tool references; ``tool_references`` is False for an endpoint
    (a proxy, a gateway) that does not accept ``tool_reference`` blocks; ``tokenizer`` is the
    path of a ``tokenizer.json`` for exact counts (default: the character estimate).
    """

    enable_tool_search: str | None = None
    kill_switch: bool = False
    context_window: int = DEFAULT_CONTEXT_WINDOW
    unsupported_models: tuple[str, ...] = ()
    tool_references: bool = True
    token_overhead: int = TOKEN_OVERHEAD
    tokenizer: str | None = None
    sources: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        window = int_value(self.context_window, "ModeSettings", "context_window", 1)
        overhead = int_value(self.token_overhead, "ModeSettings", "token_overhead", 0)
        object.__setattr__(self, "context_window", window)
        object.__setattr__(self, "token_overhead", overhead)
        if self.enable_tool_search is not None and not isinstance(self.enable_tool_search, str):
            raise ConfigError(
                f"ModeSettings: 'enable_tool_search' must be a string, "
                f"got {self.enable_tool_search!r}"
            )
        object.__setattr__(self, "unsupported_models", tuple(self.unsupported_models))

    @property
    def setting(self) -> EnableSetting:
        """The parsed ``enable_tool_search`` value."""
        return parse_enable_tool_search(self.enable_tool_search)

    def counter(self) -> TokenCounter:
        """The configured token counter: the tokenizer file when set, else the estimate."""
        if self.tokenizer:
            if not os.path.isfile(self.tokenizer):
                raise ConfigError(f"mode.tokenizer: no tokenizer file at {self.tokenizer!r}")
            return TokenizerCounter(self.tokenizer)
        return CharEstimate()

    @classmethod
    def load(
        cls,
        *,
        settings: Settings | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        **overrides: Any,
    ) -> ModeSettings:
        """Merge config file ``[mode]`` < environment < ``overrides`` (None values skipped).

        Config keys are the field names (``enable_tool_search = "auto:5"``); unknown keys are
        a :class:`ConfigError` listing the valid ones.
        """
        env = os.environ if env is None else env
        settings = load_settings(cwd=cwd, env=env) if settings is None else settings
        valid = {f.name for f in fields(cls)} - {"sources"}
        origin: dict[str, str] = {}  # where each value comes from, named in its errors
        values: dict[str, Any] = {}
        sources: list[str] = []
        section, where = settings.section("mode"), settings.section_source("mode")
        for key, value in section.items():
            if key not in valid:
                raise ConfigError(
                    f"{where}: unknown setting {key!r}; valid: {', '.join(sorted(valid))}"
                )
            values[key], origin[key] = value, where
        if section:
            sources.append(where)
        for variable, key in _ENV_SETTINGS:
            # an empty $TOOLSEARCH_UNSUPPORTED_MODELS clears the list; other empty ones are unset
            if key == "unsupported_models" or env.get(variable, "").strip():
                if variable not in env:
                    continue
                value = env[variable]
                values[key] = _truthy(value) if key == "kill_switch" else value
                origin[key] = f"${variable}"
                sources.append(f"${variable}")
        for key, value in overrides.items():
            if key not in valid:
                raise ConfigError(
                    f"unknown mode setting {key!r}; valid: {', '.join(sorted(valid))}"
                )
            if value is not None:
                values[key], origin[key] = value, f"code:{key}"
                sources.append(f"code:{key}")
        return cls._checked(values, origin, tuple(sources))

    @classmethod
    def _checked(
        cls, values: Mapping[str, Any], origin: Mapping[str, str], sources: tuple[str, ...]
    ) -> ModeSettings:
        out = cls(sources=sources)
        for key, value in values.items():
            out = replace(out, **{key: mode_value(key, value, origin.get(key, "defaults"))})
        return out


@dataclass(frozen=True, slots=True)
class ModeDecision:
    """Whether tool search is on for one request, and why (for logs and ``toolsearch request``).

    ``deferred_tokens`` (size after the overhead) and ``threshold_tokens`` are set when the auto
    threshold was measured.
    """

    enabled: bool
    reason: str
    setting: EnableSetting
    deferred_tools: int = 0
    deferred_tokens: int | None = None
    threshold_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "enabled": self.enabled,
            "reason": self.reason,
            "setting": self.setting.state,
            "percent": self.setting.percent,
            "deferred_tools": self.deferred_tools,
            "deferred_tokens": self.deferred_tokens,
            "threshold_tokens": self.threshold_tokens,
        }


def _unsupported(model: str | None, patterns: Iterable[str]) -> str | None:
    if not model:
        return None
    lowered = model.lower()
    for pattern in patterns:
        if pattern and pattern.lower() in lowered:
            return pattern
    return None


def resolve_mode(
    pool: Sequence[Tool],
    *,
    settings: ModeSettings | None = None,
    model: str | None = None,
    pending_servers: Iterable[str] = (),
    counter: TokenCounter | None = None,
) -> ModeDecision:
    """Decide whether tool search is on for an agent whose (permission-filtered) tools are
    ``pool``. ToolSearch counts as present only if a tool named ``ToolSearch`` is in the pool."""
    settings = ModeSettings() if settings is None else settings
    setting = settings.setting
    deferred = [tool for tool in pool if is_deferred(tool)]
    pending = tuple(pending_servers)

    def decide(enabled: bool, reason: str, **extra: Any) -> ModeDecision:
        return ModeDecision(enabled, reason, setting, len(deferred), **extra)

    if settings.kill_switch:
        return decide(False, "kill switch is set")
    if setting.state == "off":
        return decide(False, f"{setting.describe()} switches tool search off")
    pattern = _unsupported(model, settings.unsupported_models)
    if pattern is not None:
        return decide(False, f"model {model!r} matches unsupported pattern {pattern!r}")
    if not any(tool.name == TOOL_SEARCH_NAME for tool in pool):
        return decide(False, f"{TOOL_SEARCH_NAME} is denied or not in the agent's tools")
    if not settings.tool_references and not setting.explicit:
        return decide(
            False,
            f"the endpoint does not support tool references and {setting.describe()} "
            "does not switch search on explicitly",
        )
    if not deferred and not pending:
        return decide(False, "no deferred tools and no MCP server pending")
    if setting.state == "auto":
        percent = setting.percent if setting.percent is not None else DEFAULT_AUTO_PERCENT
        threshold = -(-percent * settings.context_window // 100)
        if pending:
            return decide(
                True,
                f"auto:{percent}: MCP servers still connecting ({', '.join(pending)}); "
                "measured once they have connected",
                threshold_tokens=threshold,
            )
        counted = tool_tokens(deferred, counter or settings.counter())
        size = max(0, counted - settings.token_overhead)
        enabled = size * 100 >= percent * settings.context_window
        relation = ">=" if enabled else "<"
        return decide(
            enabled,
            f"auto:{percent}: deferred tools {size} tokens {relation} {threshold} "
            f"({percent}% of {settings.context_window})",
            deferred_tokens=size,
            threshold_tokens=threshold,
        )
    return decide(True, f"{setting.describe()}: tool search on")
