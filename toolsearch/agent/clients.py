"""A small model-client interface, with Anthropic, OpenAI and scripted clients.

A client has one method, ``complete(request) -> ModelReply``: it sends the provider payload of
a :class:`~toolsearch.agent.assemble.NextRequest` and returns the assistant's answer as a
neutral message (text and ``tool_use`` blocks). ``provider`` says which adapter's payload it
consumes.

- :class:`ScriptedClient` plays back prepared replies (messages, or functions of the request)
  and records every request: for tests, demos and reproducible examples.
- :class:`AnthropicClient` (Messages API), :class:`OpenAIClient` (Responses API) and
  :class:`ChatCompletionsClient` (any Chat Completions endpoint, for the ``plain`` provider)
  wrap the official SDKs, imported only when such a client is built; they refuse to start
  without an API key (argument or environment) unless an SDK client object is passed in.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from toolsearch.agent.messages import Block, Message, text_block, tool_use_block
from toolsearch.errors import ConfigError, MissingExtraError, ToolSearchError
from toolsearch.tool import TOOL_SEARCH_NAME

if TYPE_CHECKING:
    from toolsearch.agent.assemble import NextRequest

__all__ = [
    "AnthropicClient",
    "ChatCompletionsClient",
    "ClientError",
    "ModelClient",
    "ModelReply",
    "OpenAIClient",
    "ScriptedClient",
    "Step",
    "api_key_configured",
    "reply_from_anthropic",
    "reply_from_chat_completion",
    "reply_from_openai",
]

_KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "plain": "OPENAI_API_KEY"}


class ClientError(ToolSearchError):
    """A model client cannot produce a reply (script exhausted, malformed response)."""


@dataclass(frozen=True, slots=True)
class ModelReply:
    """One assistant turn: the neutral message, why the model stopped, token usage."""

    message: Message
    stop_reason: str | None = None
    usage: Mapping[str, int] = field(default_factory=dict)


@runtime_checkable
class ModelClient(Protocol):
    """Anything that answers a request with an assistant message."""

    provider: str

    def complete(self, request: NextRequest) -> ModelReply:
        """Send ``request.payload`` and return the reply."""
        ...


def api_key_configured(provider: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment holds an API key for ``provider``."""
    env = os.environ if env is None else env
    name = _KEY_ENV.get(provider)
    return bool(name and env.get(name, "").strip())


Step = Message | Callable[["NextRequest"], Message]


class ScriptedClient:
    """Replies from a script: each step is an assistant message, or a function of the request
    that returns one (so a script can react to what ToolSearch loaded).

    ``requests`` records every request received. When the script runs out the client raises
    :class:`ClientError` (or, with ``final_text``, answers with that text and no tool calls).
    """

    def __init__(
        self, steps: Iterable[Step], *, provider: str = "plain", final_text: str | None = None
    ) -> None:
        self.steps: list[Step] = list(steps)
        self.provider = provider
        self.final_text = final_text
        self.requests: list[NextRequest] = []

    def complete(self, request: NextRequest) -> ModelReply:
        self.requests.append(request)
        index = len(self.requests) - 1
        if index >= len(self.steps):
            if self.final_text is None:
                raise ClientError(f"the script has {len(self.steps)} steps; request {index + 1}")
            return ModelReply({"role": "assistant", "content": self.final_text}, "end_turn")
        step = self.steps[index]
        message = step(request) if callable(step) else step
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            raise ClientError(f"script step {index + 1} did not produce an assistant message")
        has_calls = isinstance(message.get("content"), list) and any(
            isinstance(b, Mapping) and b.get("type") == "tool_use" for b in message["content"]
        )
        return ModelReply(dict(message), "tool_use" if has_calls else "end_turn")


def _sdk(module: str, what: str) -> Any:
    """The provider SDK ``module`` (an ``agents`` extra), or the pip line that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(what, "agents", [module]) from exc


def _require_key(provider: str, api_key: str | None) -> str:
    key = api_key or os.environ.get(_KEY_ENV[provider], "")
    if not key.strip():
        raise ConfigError(
            f"no API key for {provider}: pass api_key= or set ${_KEY_ENV[provider]} "
            "(or use the scripted client)"
        )
    return key


def _dump(obj: Any) -> dict[str, Any]:
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        data = dump(exclude_none=True)
        if isinstance(data, dict):
            return data
    raise ClientError(f"cannot read a response item of type {type(obj).__name__}")


def _usage(obj: Any) -> dict[str, int]:
    if obj is None:
        return {}
    data = _dump(obj)
    return {k: v for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)}


def reply_from_anthropic(response: Any) -> ModelReply:
    """A Messages API response (SDK object or dict) as a neutral reply."""
    data = _dump(response)
    content: list[Block] = []
    for raw in data.get("content", []):
        block = _dump(raw)
        kind = block.get("type")
        if kind == "text":
            content.append(text_block(str(block.get("text", ""))))
        elif kind == "tool_use":
            content.append(tool_use_block(str(block["id"]), str(block["name"]), block["input"]))
        elif kind == "server_tool_use":
            content.append(
                {"type": kind, "id": block["id"], "name": block["name"], "input": block["input"]}
            )
        else:  # tool_search_tool_result, thinking...: passed back to the API unchanged
            content.append(block)
    return ModelReply(
        {"role": "assistant", "content": content},
        data.get("stop_reason"),
        _usage(data.get("usage")),
    )


def _parsed_arguments(text: Any) -> dict[str, Any]:
    if isinstance(text, Mapping):
        return dict(text)
    try:
        value = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ClientError(f"the model's tool arguments are not valid JSON: {text!r}") from exc
    if not isinstance(value, dict):
        raise ClientError(f"the model's tool arguments are not a JSON object: {text!r}")
    return value


def reply_from_openai(response: Any) -> ModelReply:
    """A Responses API response as a neutral reply (``tool_search_call`` → ToolSearch)."""
    data = _dump(response)
    content: list[Block] = []
    for raw in data.get("output", []):
        item = _dump(raw)
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content", []):
                part = _dump(part)
                if part.get("type") == "output_text":
                    content.append(text_block(str(part.get("text", ""))))
        elif kind == "function_call":
            arguments = _parsed_arguments(item.get("arguments"))
            content.append(tool_use_block(str(item["call_id"]), str(item["name"]), arguments))
        elif kind == "tool_search_call" and item.get("execution") == "client":
            arguments = _parsed_arguments(item.get("arguments"))
            call_id = str(item.get("call_id") or item.get("id"))
            content.append(tool_use_block(call_id, TOOL_SEARCH_NAME, arguments))
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return ModelReply({"role": "assistant", "content": content}, stop, _usage(data.get("usage")))


def reply_from_chat_completion(response: Any) -> ModelReply:
    """A Chat Completions response as a neutral reply."""
    data = _dump(response)
    choices = data.get("choices") or []
    if not choices:
        raise ClientError("the chat completion has no choices")
    choice = _dump(choices[0])
    message = _dump(choice.get("message", {}))
    content: list[Block] = []
    if message.get("content"):
        content.append(text_block(str(message["content"])))
    for raw in message.get("tool_calls") or []:
        call = _dump(raw)
        function = _dump(call.get("function", {}))
        arguments = _parsed_arguments(function.get("arguments"))
        content.append(tool_use_block(str(call["id"]), str(function["name"]), arguments))
    return ModelReply(
        {"role": "assistant", "content": content},
        choice.get("finish_reason"),
        _usage(data.get("usage")),
    )


class AnthropicClient:
    """The Messages API through the ``anthropic`` SDK (``pip install 'toolsearch[agents]'``)."""

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = 4096,
        client: Any = None,
        **create_options: Any,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.create_options = create_options
        if client is None:
            key = _require_key("anthropic", api_key)
            client = _sdk("anthropic", "anthropic client").Anthropic(api_key=key)
        self._client = client

    def complete(self, request: NextRequest) -> ModelReply:
        response = self._client.messages.create(
            model=request.model or self.model,
            max_tokens=self.max_tokens,
            **request.payload,
            **self.create_options,
        )
        return reply_from_anthropic(response)


class OpenAIClient:
    """The Responses API through the ``openai`` SDK (``pip install 'toolsearch[agents]'``)."""

    provider = "openai"

    def __init__(
        self, model: str, *, api_key: str | None = None, client: Any = None, **create_options: Any
    ) -> None:
        self.model = model
        self.create_options = create_options
        if client is None:
            key = _require_key("openai", api_key)
            client = _sdk("openai", "openai client").OpenAI(api_key=key)
        self._client = client

    def complete(self, request: NextRequest) -> ModelReply:
        response = self._client.responses.create(
            model=request.model or self.model, **request.payload, **self.create_options
        )
        return reply_from_openai(response)


class ChatCompletionsClient:
    """Any Chat Completions endpoint (OpenAI, vLLM, Ollama...) for the ``plain`` provider."""

    provider = "plain"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: Any = None,
        **create_options: Any,
    ) -> None:
        self.model = model
        self.create_options = create_options
        if client is None:
            key = api_key or os.environ.get("OPENAI_API_KEY", "")
            if not key.strip() and base_url is None:
                raise ConfigError(
                    "no API key for chat completions: pass api_key= or base_url=, "
                    "or set $OPENAI_API_KEY"
                )
            openai = _sdk("openai", "chat completions client")
            client = openai.OpenAI(api_key=key or "not-needed", base_url=base_url)
        self._client = client

    def complete(self, request: NextRequest) -> ModelReply:
        payload = dict(request.payload)
        if not payload.get("tools"):
            payload.pop("tools", None)
        response = self._client.chat.completions.create(
            model=request.model or self.model, **payload, **self.create_options
        )
        return reply_from_chat_completion(response)
