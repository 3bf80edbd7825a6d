"""PydanticAI: deferred tools and ToolSearch as a toolset that grows
(docs/integrations/pydantic-ai.md).

:class:`ToolSearchToolset` wraps the agent's own toolset (or a list of tools) the way
PydanticAI's wrapper toolsets add filtering or deferral: each model request it lists
ToolSearch, the tools loaded up front and the deferred tools found so far, plus an MCP hub's
tools once found; it names the deferred tools in its instructions, and forwards calls to the
wrapped toolset or the hub. Denied tools are never listed, so PydanticAI itself refuses a call
to one as an unknown tool.

The discovered set lives in the toolset, not in the message history, so a history processor
that trims or summarises messages keeps every loaded tool; use one toolset per conversation
(``discovered=`` restores a saved one). PydanticAI's own ``ToolSearch`` capability is a
different, keyword-overlap search without deny rules; this toolset does not mark tools
``defer_loading``, so that capability stays inactive beside it.

Needs ``pip install 'toolsearch[pydantic-ai]'``.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, tool_search_tool
from toolsearch.errors import ConfigError, MissingExtraError
from toolsearch.integrations.deferred import DeferredPool, Savings, framework_tool
from toolsearch.permissions import DenyRule
from toolsearch.tokens import TokenCounter
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

try:
    from pydantic_ai import ModelRetry, RunContext, ToolFailed
    from pydantic_ai import Tool as PydanticTool
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool, WrapperToolset
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


def _key(tool_def: ToolDefinition) -> str:
    schema = json.dumps(tool_def.parameters_json_schema, sort_keys=True, default=str)
    return f"{tool_def.name}\0{tool_def.description}\0{schema}"


class ToolSearchToolset(WrapperToolset[Any]):
    """Deferred tools and ToolSearch for a PydanticAI ``Agent`` (pass it in ``toolsets``).

    ``wrapped`` is the agent's own toolset, or a list of tools and functions (made a
    ``FunctionToolset``); each is deferred unless named in ``always_load``. ``hub`` adds a
    running MCP hub's tools; ``deny`` removes tools before anything else sees them;
    ``backend`` and ``backend_options`` choose the ranking; ``counter`` counts the tokens of
    :meth:`savings`; ``announce`` names the deferred tools in the toolset's instructions.
    ``max_retries`` is how often the model may retry a ToolSearch call with bad arguments.
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
        discovered: Iterable[str] = (),
        max_retries: int = 1,
    ) -> None:
        if not isinstance(wrapped, AbstractToolset):
            wrapped = FunctionToolset(list(wrapped))
        super().__init__(wrapped)
        self.always_load = frozenset(always_load)
        self.max_retries = max_retries
        self.pool = DeferredPool(
            hub=hub,
            deny=deny,
            backend=backend,
            backend_options=backend_options,
            max_results_cap=max_results_cap,
            counter=counter,
            announce=announce,
            discovered=discovered,
        )
        self._converted: dict[str, Tool] = {}

    @property
    def discovered(self) -> tuple[str, ...]:
        """The tools ToolSearch has loaded in this conversation (save it to resume one)."""
        return self.pool.discovered

    def savings(self) -> Savings:
        """Tool-definition tokens of every model request so far, against all tools bound."""
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

    # -- listing ---------------------------------------------------------------------------

    def _pool_tool(self, tool_def: ToolDefinition) -> Tool:
        """The pool's form of a wrapped tool, made once per definition so the engine sees
        the same object while the tool is unchanged."""
        key = _key(tool_def)
        tool = self._converted.get(key)
        if tool is None:
            deferred = tool_def.name not in self.always_load
            schema = tool_def.parameters_json_schema
            tool = framework_tool(tool_def.name, tool_def.description, schema, deferred=deferred)
            self._converted[key] = tool
        return tool

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """ToolSearch, the tools loaded up front and the discovered ones (one model
        request's worth, counted for :meth:`savings`)."""
        own = await self.wrapped.get_tools(ctx)
        unknown = sorted(self.always_load - set(own))
        if unknown:
            raise ConfigError(f"always_load names no tool of the toolset: {', '.join(unknown)}")
        self.pool.set_tools(self._pool_tool(t.tool_def) for t in own.values())
        visible = self.pool.visible()
        self.pool.count_request(visible)
        return {tool.name: own.get(tool.name) or self._toolset_tool(tool) for tool in visible}

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
                tool_args.get("query"), tool_args.get("max_results", DEFAULT_MAX_RESULTS)
            )
            if answer.is_error:
                raise ModelRetry(answer.text)
            return answer.text
        if not self.pool.is_hub_tool(name):
            return await self.wrapped.call_tool(name, tool_args, ctx, tool)
        result = await self.pool.acall_hub(name, tool_args)
        if result.is_error:
            raise ToolFailed(result.as_text())
        return result.as_text()
