"""A reference agent loop: assemble → call the model → run its tool calls → append → repeat.

Each turn the loop assembles the request from the history (:func:`assemble_request`), appends
the announcement delta it must persist, asks the client, appends the reply, and answers every
``tool_use`` block in order:

- ``ToolSearch`` (when search is on) runs on the loop's :class:`~toolsearch.engine.ToolSearch`
  engine, built over the agent's resolved pool only; matches become ``tool_reference`` blocks,
  no match the engine's text, bad arguments an error result;
- a tool outside the pool (denied, out of the subagent's scope, unknown), ToolSearch while
  search is off, or a deferred tool never loaded is refused with the hygiene texts — the runner
  is never called for it;
- anything else goes to the **tool runner**, a callable ``runner(call, tool)`` returning a
  string, a list of content blocks or a :class:`ToolOutput` (an exception becomes an error
  result). Plug MCP sessions, local functions or sandboxes in here; :meth:`AgentLoop.arun`
  also awaits runners (and clients) that return awaitables.

The loop stops when a reply has no tool calls or after ``max_turns`` model calls. The pool can
change between turns (:meth:`AgentLoop.set_tools`, e.g. when an MCP server connects); the next
request then announces the difference.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolsearch.agent.announce import AnnounceStyle
from toolsearch.agent.assemble import NextRequest, assemble_request
from toolsearch.agent.clients import ModelClient, ModelReply
from toolsearch.agent.hygiene import call_error
from toolsearch.agent.messages import (
    Block,
    Message,
    ToolCall,
    reference_block,
    text_block,
    tool_calls,
    tool_result_block,
    user_message,
    validate_history,
)
from toolsearch.agent.mode import ModeSettings
from toolsearch.agent.pool import ResolvedTools, resolve_tools
from toolsearch.agent.providers import ProviderAdapter
from toolsearch.agent.state import discovered_tools
from toolsearch.agent.subagents import AgentDefinition
from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, SearchResult, ToolSearch
from toolsearch.errors import ConfigError, QueryError
from toolsearch.permissions import DenyRule
from toolsearch.tokens import TokenCounter
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

__all__ = [
    "AgentLoop",
    "CallRecord",
    "LoopResult",
    "ToolOutput",
    "ToolRunner",
    "Turn",
    "echo_runner",
]

ToolRunner = Callable[[ToolCall, Tool], Any]
"""``runner(call, tool)`` → str, content blocks, :class:`ToolOutput` (or an awaitable of one,
under :meth:`AgentLoop.arun`)."""

CallKind = Literal["search", "tool", "rejected"]
StopReason = Literal["end_turn", "max_turns"]


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool returned: text or content blocks, and whether it failed."""

    content: str | Sequence[Block]
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One answered tool call: how it was handled and the result block sent back."""

    call: ToolCall
    kind: CallKind
    result: Block
    search: SearchResult | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """One model call and the tool calls it led to."""

    index: int
    request: NextRequest
    reply: ModelReply
    calls: tuple[CallRecord, ...]
    newly_discovered: tuple[str, ...] = ()


@dataclass(slots=True)
class LoopResult:
    """The full history after the run, every turn, and why the loop stopped."""

    messages: list[Message]
    turns: list[Turn] = field(default_factory=list)
    stop_reason: StopReason = "end_turn"

    @property
    def discovered(self) -> frozenset[str]:
        """Tools discovered over the whole run."""
        return discovered_tools(self.messages)


def echo_runner(call: ToolCall, tool: Tool) -> ToolOutput:
    """A runner for demos and tests: answers every call with its own name and arguments."""
    arguments = json.dumps(dict(call.input), ensure_ascii=False, sort_keys=True)
    return ToolOutput(f"{tool.name} ran with {arguments}")


def _no_runner(call: ToolCall, tool: Tool) -> ToolOutput:
    return ToolOutput(f"no tool runner is configured to run {tool.name}", is_error=True)


def _as_output(value: Any) -> ToolOutput:
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput(value)
    if isinstance(value, Mapping):
        return ToolOutput(json.dumps(dict(value), ensure_ascii=False, sort_keys=True))
    if isinstance(value, Sequence) and all(isinstance(b, Mapping) for b in value):
        return ToolOutput([dict(b) for b in value])
    if value is None:
        return ToolOutput("")
    return ToolOutput(str(value))


class AgentLoop:
    """Runs a conversation against a model client with tool search over ``tools``.

    ``deny`` and ``agent`` scope the pool before anything else; ``backend`` ranks keyword
    queries (any backend: the loop never depends on which). ``provider`` defaults to the
    client's. ``max_turns`` bounds the model calls of one :meth:`run`.
    """

    def __init__(
        self,
        client: ModelClient,
        tools: Iterable[Tool],
        *,
        runner: ToolRunner | None = None,
        deny: Iterable[str | DenyRule] = (),
        agent: AgentDefinition | None = None,
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        settings: ModeSettings | None = None,
        provider: str | ProviderAdapter | None = None,
        model: str | None = None,
        pending_servers: Iterable[str] = (),
        counter: TokenCounter | None = None,
        announce: AnnounceStyle = "delta",
        system: str | None = None,
        max_turns: int = 20,
    ) -> None:
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ConfigError(f"max_turns must be a positive integer, got {max_turns!r}")
        self.client = client
        self.runner: ToolRunner = runner or _no_runner
        self.deny = list(deny)
        self.agent = agent
        self.settings = ModeSettings.load() if settings is None else settings
        self.provider: str | ProviderAdapter = provider or client.provider
        self.model = model
        self.counter = counter
        self.announce: AnnounceStyle = announce
        self.system = system if system is not None else (agent.prompt if agent else None) or None
        self.max_turns = max_turns
        self.pending_servers: tuple[str, ...] = tuple(pending_servers)
        self._pool = resolve_tools(tools, deny=self.deny, agent=agent)
        self.engine = ToolSearch(
            self._pool.tools,
            backend=backend,
            backend_options=backend_options,
            pending_servers=self.pending_servers,
        )

    @property
    def pool(self) -> ResolvedTools:
        """The agent's tools after permissions and scoping."""
        return self._pool

    def set_tools(self, tools: Iterable[Tool], *, pending_servers: Iterable[str] = ()) -> None:
        """Replace the tool pool between turns (same deny rules and agent)."""
        self._pool = resolve_tools(tools, deny=self.deny, agent=self.agent)
        self.pending_servers = tuple(pending_servers)
        self.engine.pending_servers = self.pending_servers
        self.engine.set_tools(self._pool.tools)

    def assemble(self, messages: Sequence[Message]) -> NextRequest:
        """The next request for ``messages`` with this loop's settings."""
        return assemble_request(
            self._pool,
            messages,
            provider=self.provider,
            settings=self.settings,
            model=self.model,
            pending_servers=self.pending_servers,
            counter=self.counter,
            announce=self.announce,
            system=self.system,
        )

    # -- one call -------------------------------------------------------------------------

    def _search(self, call: ToolCall) -> CallRecord:
        query = call.input.get("query")
        max_results = call.input.get("max_results", DEFAULT_MAX_RESULTS)
        try:
            if not isinstance(query, str):
                raise QueryError(f"'query' must be a string, got {query!r}")
            result = self.engine.search(query, max_results)
        except QueryError as exc:
            block = tool_result_block(call.id, f"{TOOL_SEARCH_NAME} error: {exc}", is_error=True)
            return CallRecord(call, "search", block)
        # select: names that matched no tool are named, after the matches or the no-match text
        content: str | list[Block]
        if result.matches:
            content = [reference_block(name) for name in result.names]
            if result.not_found:
                content.append(text_block(result.not_found_text()))
        else:
            content = "\n".join(filter(None, (result.text(), result.not_found_text())))
        return CallRecord(call, "search", tool_result_block(call.id, content), result)

    def _triage(self, call: ToolCall, loaded: set[str], enabled: bool) -> CallRecord | Tool:
        pool = {t.name: t for t in self._pool.tools}
        error = call_error(call.name, pool=pool, loaded=loaded, search_enabled=enabled)
        if error is not None:
            return CallRecord(call, "rejected", tool_result_block(call.id, error, is_error=True))
        if call.name == TOOL_SEARCH_NAME:
            record = self._search(call)
            if record.search is not None:
                loaded.update(record.search.names)
            return record
        return pool[call.name]

    @staticmethod
    def _tool_record(call: ToolCall, output: Any) -> CallRecord:
        result = _as_output(output)
        block = tool_result_block(call.id, result.content, is_error=result.is_error)
        return CallRecord(call, "tool", block)

    def _run_tool(self, call: ToolCall, tool: Tool) -> CallRecord:
        try:
            output = self.runner(call, tool)
        except Exception as exc:  # a failing tool is reported to the model, not raised
            output = ToolOutput(f"{type(exc).__name__}: {exc}", is_error=True)
        if inspect.isawaitable(output):
            _close(output)
            raise ConfigError("the tool runner returned an awaitable; use AgentLoop.arun")
        return self._tool_record(call, output)

    async def _arun_tool(self, call: ToolCall, tool: Tool) -> CallRecord:
        try:
            output = self.runner(call, tool)
            if inspect.isawaitable(output):
                output = await output
        except Exception as exc:  # a failing tool is reported to the model, not raised
            output = ToolOutput(f"{type(exc).__name__}: {exc}", is_error=True)
        return self._tool_record(call, output)

    # -- turns ----------------------------------------------------------------------------

    def _begin(self, history: list[Message]) -> NextRequest:
        request = self.assemble(history)
        history.extend(dict(m) for m in request.persist)
        return request

    @staticmethod
    def _finish(
        index: int,
        history: list[Message],
        request: NextRequest,
        reply: ModelReply,
        records: list[CallRecord],
    ) -> Turn:
        if records:
            history.append(user_message([r.result for r in records]))
        before = request.discovered
        after = discovered_tools(history)
        return Turn(index, request, reply, tuple(records), tuple(sorted(after - before)))

    def _start(self, prompt: str | Sequence[Message]) -> list[Message]:
        if isinstance(prompt, str):
            return [user_message(prompt)]
        return validate_history(prompt)

    def step(self, history: list[Message], index: int = 0) -> Turn:
        """Run one turn on ``history`` (appended to in place)."""
        request = self._begin(history)
        reply = self.client.complete(request)
        history.append(dict(reply.message))
        loaded = set(request.loaded)
        records: list[CallRecord] = []
        for call in tool_calls(reply.message):
            triaged = self._triage(call, loaded, request.search_enabled)
            records.append(
                triaged if isinstance(triaged, CallRecord) else self._run_tool(call, triaged)
            )
        return self._finish(index, history, request, reply, records)

    async def astep(self, history: list[Message], index: int = 0) -> Turn:
        """:meth:`step` for async runners and clients."""
        request = self._begin(history)
        reply: Any = self.client.complete(request)
        if inspect.isawaitable(reply):
            reply = await reply
        history.append(dict(reply.message))
        loaded = set(request.loaded)
        records: list[CallRecord] = []
        for call in tool_calls(reply.message):
            triaged = self._triage(call, loaded, request.search_enabled)
            if isinstance(triaged, CallRecord):
                records.append(triaged)
            else:
                records.append(await self._arun_tool(call, triaged))
        return self._finish(index, history, request, reply, records)

    def run(self, prompt: str | Sequence[Message]) -> LoopResult:
        """Run until the model stops calling tools or ``max_turns`` is reached."""
        history = self._start(prompt)
        result = LoopResult(history)
        for index in range(self.max_turns):
            turn = self.step(history, index)
            result.turns.append(turn)
            if not turn.calls:
                return result
        result.stop_reason = "max_turns"
        return result

    async def arun(self, prompt: str | Sequence[Message]) -> LoopResult:
        """:meth:`run` for async runners and clients (e.g. MCP sessions)."""
        history = self._start(prompt)
        result = LoopResult(history)
        for index in range(self.max_turns):
            turn = await self.astep(history, index)
            result.turns.append(turn)
            if not turn.calls:
                return result
        result.stop_reason = "max_turns"
        return result


def _close(awaitable: Awaitable[Any]) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
