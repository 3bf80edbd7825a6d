"""Counting the tokens tool definitions cost a request.

The default is a character estimate (2.5 characters a token over name, description and JSON
schema, the anchor's fallback); ``TokenizerCounter`` counts exactly with a local
``tokenizer.json``. Any object with ``count(text) -> int`` can be plugged in (an API's
count-tokens endpoint, a local tokenizer).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from toolsearch.errors import MissingExtraError
from toolsearch.tool import Tool

__all__ = [
    "CharEstimate",
    "TokenCounter",
    "TokenizerCounter",
    "default_counter",
    "definition_text",
    "tool_tokens",
]


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that counts the tokens of a text."""

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


class CharEstimate:
    """``ceil(len(text) / chars_per_token)``: no dependency, deterministic, close enough."""

    def __init__(self, chars_per_token: float = 2.5) -> None:
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token}")
        self.chars_per_token = chars_per_token

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def __repr__(self) -> str:
        return f"CharEstimate({self.chars_per_token})"


class TokenizerCounter:
    """Exact counts for a local Hugging Face ``tokenizer.json`` (no network needed).

    Needs the ``tokenizers`` package (installed with ``toolsearch[embedding]``).
    """

    def __init__(self, path: str) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingExtraError("tokenizer counter", "embedding", ["tokenizers"]) from exc
        self._tokenizer: Any = Tokenizer.from_file(path)
        # a model's tokenizer.json often pads/truncates to its input length; counts need neither
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.path = path

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def __repr__(self) -> str:
        return f"TokenizerCounter({self.path!r})"


def default_counter() -> TokenCounter:
    """The character estimate: available everywhere and independent of network access."""
    return CharEstimate()


def definition_text(tool: Tool) -> str:
    """What a tool's definition costs: name, description and JSON schema."""
    schema = json.dumps(dict(tool.definition()["input_schema"]), separators=(",", ":"))
    return f"{tool.name}{tool.description}{schema}"


def tool_tokens(tools: Iterable[Tool], counter: TokenCounter | None = None) -> int:
    """Total tokens of the tools' definitions."""
    counter = counter or default_counter()
    return sum(counter.count(definition_text(tool)) for tool in tools)
