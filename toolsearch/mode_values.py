"""The ``[mode]`` settings' keys and values, checked without the agent layer.

The configuration (:func:`toolsearch.config.check_settings`) checks a file's ``[mode]`` table
and the agent layer (:class:`toolsearch.agent.mode.ModeSettings`) reads it; both use these
rules, which sit below them both so the core never imports the agent layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolsearch.errors import ConfigError

__all__ = [
    "ENABLE_VALUES",
    "FALSE_WORDS",
    "MODE_KEYS",
    "TRUE_WORDS",
    "bool_value",
    "check_mode_section",
    "int_value",
    "is_enable_value",
    "mode_value",
]

#: The ``ENABLE_TOOL_SEARCH`` values a config file and ``--mode`` accept (case ignored).
ENABLE_VALUES = ("true", "1", "yes", "on", "false", "0", "no", "off", "auto", "auto:N")
#: The keys of a ``[mode]`` table: the fields of ``ModeSettings``.
MODE_KEYS: tuple[str, ...] = (
    "context_window",
    "enable_tool_search",
    "kill_switch",
    "token_overhead",
    "tokenizer",
    "tool_references",
    "unsupported_models",
)
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})


def is_enable_value(text: str) -> bool:
    """Whether ``text`` is an ``ENABLE_TOOL_SEARCH`` value typed on purpose (case ignored):
    the rule for config files and ``--mode``. The environment variable keeps the reference
    rule that an unrecognised value means on."""
    lowered = text.strip().lower()
    number = lowered.removeprefix("auto:")
    return lowered in ENABLE_VALUES[:-1] or (
        lowered.startswith("auto:") and number.isdigit() and int(number) <= 100
    )


def bool_value(value: Any, source: str, key: str) -> bool:
    """A true/false setting: a boolean, or one of the true and false words."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in TRUE_WORDS:
            return True
        if text in FALSE_WORDS:
            return False
    raise ConfigError(f"{source}: '{key}' must be true or false, got {value!r}")


def int_value(value: Any, source: str, key: str, minimum: int) -> int:
    """An integer setting of at least ``minimum`` (digits in a string count)."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{source}: '{key}' must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{source}: '{key}' must be at least {minimum}, got {value}")
    return value


def _patterns(value: Any, source: str, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        items = list(value)
    else:
        raise ConfigError(f"{source}: '{key}' must be a list of strings, got {value!r}")
    return tuple(item.strip() for item in items if item.strip())


def mode_value(key: str, value: Any, where: str) -> Any:
    """One mode setting checked and converted; errors name ``where`` it was set."""
    if key == "enable_tool_search":
        if value is not None and not isinstance(value, str | bool | int):
            raise ConfigError(f"{where}: 'enable_tool_search' must be a string")
        if isinstance(value, bool):
            return "true" if value else "false"
        return None if value is None else str(value)
    if key in ("kill_switch", "tool_references"):
        return bool_value(value, where, key)
    if key in ("context_window", "token_overhead"):
        return int_value(value, where, key, 1 if key == "context_window" else 0)
    if key == "unsupported_models":
        return _patterns(value, where, key)
    if value is not None and not isinstance(value, str):  # tokenizer
        raise ConfigError(f"{where}: 'tokenizer' must be a file path")
    return value or None


def check_mode_section(section: Mapping[str, Any], where: str) -> None:
    """A config file's ``[mode]`` table: known keys, valid values, and an
    ``enable_tool_search`` that is a recognised value (in a file a typo is a mistake, not
    "on" as the environment variable's reference rule has it)."""
    for key, value in section.items():
        if key not in MODE_KEYS:
            raise ConfigError(
                f"{where}: unknown setting {key!r}; valid: {', '.join(sorted(MODE_KEYS))}"
            )
        mode_value(key, value, where)
    value = section.get("enable_tool_search")
    if isinstance(value, str) and not is_enable_value(value):
        raise ConfigError(
            f"{where}: 'enable_tool_search' = {value!r} is not a "
            f"recognised value; valid: {', '.join(ENABLE_VALUES)} (N a whole percent 0-100)"
        )
