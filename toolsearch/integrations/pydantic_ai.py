"""PydanticAI: deferred tools and ToolSearch as a toolset that grows
(docs/integrations/pydantic-ai.md).

:class:`ToolSearchToolset` wraps the agent's own toolset (or a list of tools) the way
PydanticAI's wrapper toolsets add filtering or deferral: each model request it lists
ToolSearch, the tools loaded up front and the deferred tools found so far in this
conversation, plus an MCP hub's tools once found; it names the deferred tools in its
instructions, and forwards calls to the wrapped toolset or the hub. Denied tools are never
listed, so PydanticAI itself refuses a call to one; a denied tool the agent was given outside
the toolset refuses the run with an error naming it.

Found tools belong to the conversation, not to the toolset: they are read back from the
ToolSearch results in the run's message history, and remembered under the run's
``conversation_id`` so that a history processor that trims or summarises messages keeps them.
One toolset serves any number of users (a module-level agent).

PydanticAI's own ``ToolSearch`` capability is not built on (docs/integrations/pydantic-ai.md
says why); this toolset marks nothing ``defer_loading``, so that capability stays inactive.

Needs ``pip install 'toolsearch[pydantic-ai]'``.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, tool_search_tool
from toolsearch.errors import ConfigError, MissingExtraError
from toolsearch.integrations.deferred import (
    DeferredPool,
    FoundTools,
    KeepLoaded,
    Savings,
    found_in_same_response,
    framework_tool,
    loaded_names,
)
from toolsearch.permissions import DenyRule
from toolsearch.tokens import TokenCounter
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

try:
    from pydantic_ai import ModelRetry, RunContext, ToolFailed
    from pydantic_ai import Tool as PydanticTool
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        RetryPromptPart,
        ToolReturnPart,
    )
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import (
        AbstractToolset,
        CombinedToolset,
        FunctionToolset,
        PrefixedToolset,
        ToolsetTool,
        WrapperToolset,
    )
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(
        "the PydanticAI integration", "pydantic-ai", ["pydantic-ai-slim"]
    ) from exc

if TYPE_CHECKING:
    from toolsearch.mcp.hub import BlockingMcpHub, McpHub

__all__ = ["ToolSearchToolset"]

#: Arguments of ToolSearch and of hub tools reach the engine or the server as given; both
#: check them and answer with an error the model reads.
_ANY_ARGUMENTS = SchemaValidator(core_schema.any_schema())

#: Conversations whose found tools are remembered (beyond the history) per toolset; the
#: oldest is forgotten first and then comes back from its history alone.
REMEMBERED_CONVERSATIONS = 4096

#: (server, the tool's name on it) for a tool an MCP toolset brought
Origin = tuple[str, str]


def _key(tool_def: ToolDefinition, origin: Origin | None) -> str:
    schema = json.dumps(tool_def.parameters_json_schema, sort_keys=True, default=str)
    return f"{tool_def.name}\0{tool_def.description}\0{schema}\0{origin}"


def _mcp_toolset_type() -> type[Any] | None:
    try:
        from pydantic_ai.mcp import MCPToolset
    except ImportError:  # PydanticAI's MCP client (fastmcp) is not installed
        return None
    return MCPToolset


def _has_mcp_leaf(toolset: AbstractToolset[Any], mcp_type: type[Any]) -> bool:
    leaves: list[AbstractToolset[Any]] = []
    toolset.apply(leaves.append)
    return any(isinstance(leaf, mcp_type) for leaf in leaves)


def mcp_origins(tools: Mapping[str, ToolsetTool[Any]]) -> dict[str, Origin]:
    """The MCP server of each tool that PydanticAI's MCP toolset brought: the prefix of a
    ``PrefixedToolset`` around it (``load_mcp_toolsets`` prefixes with the config's server
    name), else the MCP toolset's ``id``."""
    mcp_type = _mcp_toolset_type()
    if mcp_type is None:
        return {}
    origins: dict[str, Origin] = {}
    for name, tool in tools.items():
        owner = tool.toolset
        if isinstance(owner, PrefixedToolset) and _has_mcp_leaf(owner, mcp_type):
            origins[name] = (owner.prefix, name.removeprefix(f"{owner.prefix}_"))
        elif isinstance(owner, mcp_type) and owner.id:
            origins[name] = (owner.id, name)
    return origins


def _walk(toolset: AbstractToolset[Any]) -> Iterator[AbstractToolset[Any]]:
    yield toolset
    if isinstance(toolset, WrapperToolset):
        yield from _walk(toolset.wrapped)
    elif isinstance(toolset, CombinedToolset):
        for member in toolset.toolsets:
            yield from _walk(member)


def read_found(messages: Sequence[ModelMessage], found: FoundTools) -> FoundTools:
    """Add what ``messages`` record to ``found``: each ToolSearch result (read back from the
    text the model got) and each tool that ran."""
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if not isinstance(part, ToolReturnPart) or _retried(part):
                continue
            if part.tool_name == TOOL_SEARCH_NAME:
                found.record_search(part.tool_call_id, loaded_names(str(part.content)))
            else:
                found.record_call(part.tool_name)
    return found


class ToolSearchToolset(WrapperToolset[Any]):
    """Deferred tools and ToolSearch for a PydanticAI ``Agent`` (pass it in ``toolsets``).

    ``wrapped`` is the agent's own toolset, or a list of tools and functions (made a
    ``FunctionToolset``); each is deferred unless named in ``always_load``. MCP toolsets may be
    among them: their tools answer to ``mcp__<server>__<tool>`` rules. ``hub`` adds a running
    MCP hub's tools; ``deny`` removes tools before anything else sees them; ``backend`` and
    ``backend_options`` choose the ranking; ``counter`` counts the tokens of :meth:`savings`;
    ``announce`` names the deferred tools in the toolset's instructions; ``keep_loaded``
    bounds what stays loaded (``"all"`` or ``"called"``). ``discovered`` names tools treated
    as found in every conversation. ``max_retries`` is how often the model may retry a
    ToolSearch call with bad arguments; ``max_refusals`` how often it may call a tool that is
    not loaded or is denied before PydanticAI's own retry limit applies.
    """

    def __init__(
        self,
        wrapped: AbstractToolset[Any] | Sequence[PydanticTool[Any] | Callable[..., Any]] = (),
        *,
        hub: McpHub | BlockingMcpHub | None = None,
        deny: Iterable[str | DenyRule] = (),
        always_load: Iterable[str] = (),
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        counter: TokenCounter | None = None,
        announce: bool = True,
        keep_loaded: KeepLoaded = "all",
        discovered: Iterable[str] = (),
        max_retries: int = 1,
        max_refusals: int = 3,
    ) -> None:
        if not isinstance(wrapped, AbstractToolset):
            wrapped = FunctionToolset(list(wrapped))
        super().__init__(wrapped)
        self.always_load = frozenset(always_load)
        self.max_retries = max_retries
        self.max_refusals = max_refusals
        self.initial = tuple(discovered)
        self.pool = DeferredPool(
            hub=hub,
            deny=deny,
            backend=backend,
            backend_options=backend_options,
            max_results_cap=max_results_cap,
            counter=counter,
            announce=announce,
            keep_loaded=keep_loaded,
        )
        self._origin: ToolSearchToolset = self
        self._converted: dict[str, Tool] = {}
        self._conversations: OrderedDict[str, FoundTools] = OrderedDict()

    def discovered_in(self, messages: Sequence[ModelMessage]) -> tuple[str, ...]:
        """The tools loaded in the conversation ``messages`` belong to (a run's
        ``all_messages()``), in the order they were found."""
        conversation = next(
            (m.conversation_id for m in reversed(messages) if m.conversation_id), None
        )
        found = copy.deepcopy(self._conversations.get(conversation or "", FoundTools()))
        return self._loaded(read_found(messages, found))

    def savings(self) -> Savings:
        """Tool-definition tokens of every model request so far (every run of this toolset),
        against all tools bound."""
        return self.pool.savings()

    # -- the wrapper contract: keep this pool when PydanticAI swaps the wrapped toolset -----

    def _with(self, wrapped: AbstractToolset[Any]) -> ToolSearchToolset:
        if wrapped is self.wrapped:
            return self
        clone = copy.copy(self)
        clone.wrapped = wrapped
        return clone

    async def for_run(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return self._with(await self.wrapped.for_run(ctx))

    async def for_run_step(self, ctx: RunContext[Any]) -> AbstractToolset[Any]:
        return self._with(await self.wrapped.for_run_step(ctx))

    def visit_and_replace(
        self, visitor: Callable[[AbstractToolset[Any]], AbstractToolset[Any]]
    ) -> AbstractToolset[Any]:
        return self._with(self.wrapped.visit_and_replace(visitor))

    # -- the conversation's found tools ----------------------------------------------------

    def _found(self, ctx: RunContext[Any]) -> FoundTools:
        """This run's conversation: what it remembers, plus what its history records."""
        key = ctx.conversation_id or ctx.run_id or ""
        found = self._conversations.get(key)
        if found is None:
            found = self._conversations[key] = FoundTools()
            while len(self._conversations) > REMEMBERED_CONVERSATIONS:
                self._conversations.popitem(last=False)
        self._conversations.move_to_end(key)
        return read_found(ctx.messages, found)

    def _loaded(self, found: FoundTools) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.initial, *found.loaded(self.pool.keep_loaded)]))

    # -- listing ---------------------------------------------------------------------------

    def _pool_tool(self, tool_def: ToolDefinition, origin: Origin | None) -> Tool:
        """The pool's form of a wrapped tool, made once per definition so the engine sees
        the same object while the tool is unchanged."""
        key = _key(tool_def, origin)
        tool = self._converted.get(key)
        if tool is None:
            server, server_tool = origin if origin is not None else (None, None)
            tool = framework_tool(
                tool_def.name,
                tool_def.description,
                tool_def.parameters_json_schema,
                deferred=tool_def.name not in self.always_load,
                server=server,
                server_tool=server_tool,
            )
            self._converted[key] = tool
        return tool

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """ToolSearch, the tools loaded up front and the ones this conversation found (one
        model request's worth, counted for :meth:`savings`)."""
        own = await self.wrapped.get_tools(ctx)
        unknown = sorted(self.always_load - set(own))
        if unknown:
            raise ConfigError(f"always_load names no tool of the toolset: {', '.join(unknown)}")
        origins = mcp_origins(own)
        self.pool.set_tools(self._pool_tool(t.tool_def, origins.get(n)) for n, t in own.items())
        await self._refuse_denied_outside(ctx)
        loaded = self._loaded(self._found(ctx))
        visible = self.pool.visible(loaded)
        self.pool.count_request(visible)
        self._answer_refusals(ctx, {tool.name for tool in visible}, loaded)
        return {tool.name: own.get(tool.name) or self._toolset_tool(tool) for tool in visible}

    async def _refuse_denied_outside(self, ctx: RunContext[Any]) -> None:
        """A deny rule must hold for every tool the agent sends: a denied tool the agent was
        given beside this toolset (``Agent(tools=...)``, another toolset) refuses the run."""
        if not self.pool.rules or ctx.agent is None:
            return
        for toolset in ctx.agent.toolsets:
            if any(getattr(node, "_origin", None) is self._origin for node in _walk(toolset)):
                continue
            tools = await toolset.get_tools(ctx)
            origins = mcp_origins(tools)
            self.pool.note_outside(
                self._pool_tool(tool.tool_def, origins.get(name)) for name, tool in tools.items()
            )
            for name in tools:
                if self.pool.is_denied(name, *origins.get(name, (None, None))):
                    raise ConfigError(
                        f"the agent was given the tool {name!r} outside the ToolSearchToolset, "
                        "and a deny rule denies it: PydanticAI would send and run it. Pass "
                        "it to the toolset (which keeps it from the model) or remove it"
                    )

    def _answer_refusals(
        self, ctx: RunContext[Any], visible: set[str], loaded: Sequence[str]
    ) -> None:
        """A call to a tool that is not loaded yet (or denied) is PydanticAI's unknown-tool
        retry. Its text becomes toolsearch's (the ``select:`` hint, or that the tool is not
        available) before the model reads it, and up to ``max_refusals`` of them per tool are
        not charged to the agent's retry budget (1 by default: the second such call would end
        the run)."""
        for name in [n for n in ctx.retries if n not in visible]:
            if self._known(name) and _refusals(ctx.messages, name) <= self.max_refusals:
                ctx.retries[name] = 0
        request = next((m for m in reversed(ctx.messages) if isinstance(m, ModelRequest)), None)
        for part in request.parts if request is not None else ():
            if not isinstance(part, ToolReturnPart | RetryPromptPart) or not _retried(part):
                continue
            name = part.tool_name or ""
            if not str(part.content).startswith("Unknown tool name") or not self._known(name):
                continue
            if name in visible:  # found by a ToolSearch call in the response that called it
                part.content = found_in_same_response(name)
            else:
                part.content = self.pool.call_error(name, loaded) or part.content

    def _known(self, name: str) -> bool:
        """Whether ``name`` is a tool of the pool or one a rule denies."""
        return self.pool.pool.get(name) is not None or self.pool.is_denied(name)

    def _toolset_tool(self, tool: Tool) -> ToolsetTool[Any]:
        """ToolSearch or a hub tool, as this toolset's own tool."""
        if tool.name == TOOL_SEARCH_NAME:
            tool = tool_search_tool(self.pool.max_results_cap)
        definition = ToolDefinition(
            name=tool.name,
            description=tool.description,
            parameters_json_schema=dict(tool.definition()["input_schema"]),
        )
        return ToolsetTool(
            toolset=self,
            tool_def=definition,
            max_retries=self.max_retries,
            args_validator=_ANY_ARGUMENTS,
        )

    async def get_instructions(self, ctx: RunContext[Any]) -> Any:
        """The wrapped toolset's instructions, then the announcement of the deferred tools."""
        own = await super().get_instructions(ctx)
        block = self.pool.announcement()
        if not block:
            return own
        if own is None:
            return block
        parts = [own] if isinstance(own, str) or not isinstance(own, Sequence) else list(own)
        return [*parts, block]

    # -- calling ---------------------------------------------------------------------------

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """ToolSearch runs on the pool, a hub tool on its server, anything else on the
        wrapped toolset."""
        if name == TOOL_SEARCH_NAME:
            answer = self.pool.search(
                tool_args.get("query"),
                tool_args.get("max_results", DEFAULT_MAX_RESULTS),
                remember=False,
            )
            if answer.is_error:
                raise ModelRetry(answer.text)
            self._found(ctx).record_search(ctx.tool_call_id or "", answer.names)
            return answer.text
        self._found(ctx).record_call(name)
        if not self.pool.is_hub_tool(name):
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        result = await self.pool.acall_hub(name, tool_args)
        if result.is_error:
            raise ToolFailed(result.as_text())
        return result.as_text()


def _retried(part: Any) -> bool:
    """Whether a tool result part is a retry request (a refused or failed-validation call)."""
    return isinstance(part, RetryPromptPart) or getattr(part, "outcome", None) == "retried"


def _refusals(messages: Sequence[ModelMessage], name: str) -> int:
    return sum(
        1
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if _retried(part) and getattr(part, "tool_name", None) == name
    )
