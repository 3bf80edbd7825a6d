"""OpenAI Responses API requests with client-executed tool search.

The request's ``tools`` are the non-deferred functions, one ``{"type": "tool_search",
"execution": "client", ...}`` tool carrying ToolSearch's description and parameters, and the
discovered deferred functions with ``defer_loading: true``. In ``input``, a ToolSearch call is a
``tool_search_call`` item and its result a ``tool_search_output`` item listing the loaded
function definitions (the Responses counterpart of ``tool_reference`` blocks); other calls are
``function_call`` / ``function_call_output`` items. A ToolSearch result that loaded nothing
(the no-match text, an error) still gets its ``tool_search_output`` (with no tools), followed by
a user message with the text, since the output item has no text field.

With search off, a ToolSearch call left in the history is rendered as an ordinary function call
whose output is the hygiene placeholder.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from toolsearch.agent.messages import HistoryError, Message, text_of
from toolsearch.agent.providers.base import RequestParts
from toolsearch.agent.state import referenced_names, search_call_ids
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

__all__ = ["OpenAIResponsesAdapter", "function_param", "tool_search_param"]

_SKIPPED = frozenset({"thinking", "redacted_thinking"})


def function_param(tool: Tool, *, defer_loading: bool = False) -> dict[str, Any]:
    """A function tool (``openai.types.responses.FunctionToolParam``)."""
    schema = dict(tool.definition()["input_schema"])
    schema.setdefault("type", "object")
    param: dict[str, Any] = {
        "type": "function",
        "name": tool.name,
        "parameters": schema,
        "strict": False,
    }
    if tool.description:
        param["description"] = tool.description
    if defer_loading:
        param["defer_loading"] = True
    return param


def tool_search_param(tool: Tool) -> dict[str, Any]:
    """ToolSearch as a client-executed ``tool_search`` tool (``ToolSearchToolParam``)."""
    return {
        "type": "tool_search",
        "execution": "client",
        "description": tool.description,
        "parameters": dict(tool.definition()["input_schema"]),
    }


def _arguments(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True, slots=True)
class OpenAIResponsesAdapter:
    """Renders Responses API requests (``{"tools", "input", "instructions"?}``)."""

    name: str = "openai"
    server_side: bool = False

    def render(self, parts: RequestParts) -> dict[str, Any]:
        """The payload for ``client.responses.create(**payload, model=...)``."""
        tools: list[dict[str, Any]] = []
        for sent in parts.tools:
            if sent.name == TOOL_SEARCH_NAME:
                if parts.search_enabled:
                    tools.append(tool_search_param(sent.tool))
                continue
            tools.append(function_param(sent.tool, defer_loading=sent.defer_loading))
        search_ids = search_call_ids(parts.messages)
        items: list[dict[str, Any]] = []
        for index, message in enumerate(parts.messages):
            items.extend(self._items(index, message, parts, search_ids))
        payload: dict[str, Any] = {"tools": tools, "input": items}
        if parts.system:
            payload["instructions"] = parts.system
        return payload

    def _items(
        self, index: int, message: Message, parts: RequestParts, search_ids: Collection[str]
    ) -> list[dict[str, Any]]:
        role = message["role"]
        content = message["content"]
        if isinstance(content, str):
            return [{"role": role, "content": content}] if content else []
        items: list[dict[str, Any]] = []
        texts: list[str] = []
        for position, block in enumerate(content):
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use" and role == "assistant":
                if texts:
                    items.append({"role": "assistant", "content": "\n".join(texts)})
                    texts = []
                items.append(self._call(block, parts.search_enabled))
            elif kind == "tool_result" and role == "user":
                items.extend(self._output(block, parts, search_ids, texts))
            elif kind in _SKIPPED:
                continue
            else:
                raise HistoryError(
                    f"message {index}, block {position}: the openai adapter cannot render a "
                    f"{kind!r} block"
                )
        if texts:
            items.append({"role": role, "content": "\n".join(texts)})
        return items

    @staticmethod
    def _call(block: Mapping[str, Any], search_enabled: bool) -> dict[str, Any]:
        if block.get("name") == TOOL_SEARCH_NAME and search_enabled:
            return {
                "type": "tool_search_call",
                "call_id": str(block["id"]),
                "execution": "client",
                "status": "completed",
                "arguments": dict(block.get("input") or {}),
            }
        return {
            "type": "function_call",
            "call_id": str(block["id"]),
            "name": str(block["name"]),
            "arguments": _arguments(block.get("input")),
        }

    @staticmethod
    def _output(
        block: Mapping[str, Any],
        parts: RequestParts,
        search_ids: Collection[str],
        texts: list[str],
    ) -> list[dict[str, Any]]:
        call_id = str(block["tool_use_id"])
        content = block.get("content", "")
        text = text_of(content) if isinstance(content, str | list) else ""
        if call_id in search_ids and parts.search_enabled:
            loaded = [parts.pool[n] for n in referenced_names(block) if n in parts.pool]
            items: list[dict[str, Any]] = [
                {
                    "type": "tool_search_output",
                    "call_id": call_id,
                    "execution": "client",
                    "status": "completed",
                    "tools": [function_param(t, defer_loading=True) for t in loaded],
                }
            ]
            if text:
                texts.append(text)
            return items
        if block.get("is_error") and not text.startswith("Error"):
            text = f"Error: {text}"
        return [{"type": "function_call_output", "call_id": call_id, "output": text}]
