"""Plain function calling, for any API without tool references (Chat Completions shape).

Most function-calling APIs (vLLM, Ollama, LiteLLM, Mistral, Groq...) accept the Chat
Completions format, so that is what this adapter emits. Nothing here needs provider support for
deferral: ToolSearch's result is text listing each loaded tool's name, description and JSON
schema, and the runtime adds the discovered tools to the next request's ``tools`` — the request
assembler already does that, so ``defer_loading`` is simply not rendered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolsearch.agent.messages import HistoryError, Message, text_of
from toolsearch.agent.providers.base import RequestParts
from toolsearch.agent.state import referenced_names
from toolsearch.tool import Tool

__all__ = ["LOADED_HEADER", "PlainAdapter", "function_tool", "loaded_text"]

LOADED_HEADER = "Loaded tools — their definitions follow and they can be called directly now:"

_SKIPPED = frozenset({"thinking", "redacted_thinking"})


def function_tool(tool: Tool) -> dict[str, Any]:
    """One ``{"type": "function", "function": {...}}`` definition."""
    schema = dict(tool.definition()["input_schema"])
    schema.setdefault("type", "object")
    function: dict[str, Any] = {"name": tool.name, "parameters": schema}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def loaded_text(tools: list[Tool]) -> str:
    """ToolSearch's result as text: one JSON definition a line after a header."""
    lines = [LOADED_HEADER]
    for tool in tools:
        definition = function_tool(tool)["function"]
        lines.append(json.dumps(definition, ensure_ascii=False, sort_keys=True))
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class PlainAdapter:
    """Renders Chat Completions requests (``{"tools", "messages"}``)."""

    name: str = "plain"
    server_side: bool = False

    def render(self, parts: RequestParts) -> dict[str, Any]:
        """The payload for ``client.chat.completions.create(**payload, model=...)``."""
        tools = [function_tool(sent.tool) for sent in parts.tools]
        messages: list[dict[str, Any]] = []
        if parts.system:
            messages.append({"role": "system", "content": parts.system})
        for index, message in enumerate(parts.messages):
            messages.extend(self._messages(index, message, parts))
        return {"tools": tools, "messages": messages}

    def _messages(self, index: int, message: Message, parts: RequestParts) -> list[dict[str, Any]]:
        role = message["role"]
        content = message["content"]
        if isinstance(content, str):
            return [{"role": role, "content": content}] if content else []
        out: list[dict[str, Any]] = []
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        for position, block in enumerate(content):
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use" and role == "assistant":
                calls.append(
                    {
                        "id": str(block["id"]),
                        "type": "function",
                        "function": {
                            "name": str(block["name"]),
                            "arguments": json.dumps(
                                block.get("input") or {}, ensure_ascii=False, sort_keys=True
                            ),
                        },
                    }
                )
            elif kind == "tool_result" and role == "user":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(block["tool_use_id"]),
                        "content": self._result_text(block, parts),
                    }
                )
            elif kind in _SKIPPED:
                continue
            else:
                raise HistoryError(
                    f"message {index}, block {position}: the plain adapter cannot render a "
                    f"{kind!r} block"
                )
        if role == "assistant":
            assistant: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
            if calls:
                assistant["tool_calls"] = calls
            return [assistant]
        if texts:
            out.append({"role": "user", "content": "\n".join(texts)})
        return out

    @staticmethod
    def _result_text(block: Mapping[str, Any], parts: RequestParts) -> str:
        content = block.get("content", "")
        text = text_of(content) if isinstance(content, str | list) else ""
        loaded = [parts.pool[n] for n in referenced_names(block) if n in parts.pool]
        if loaded:
            text = loaded_text(loaded) + (f"\n{text}" if text else "")
        if block.get("is_error") and not text.startswith("Error"):
            text = f"Error: {text}"
        return text
