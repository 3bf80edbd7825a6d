"""LangChain and LangGraph: deferred tools and ToolSearch as an agent middleware, and a
``retrieve_tools`` function for ``langgraph-bigtool`` (docs/integrations/langchain.md).

:class:`ToolSearchMiddleware` plugs into ``langchain.agents.create_agent`` through the
framework's own extension points: it registers ToolSearch and the permitted tools with the
agent (``middleware.tools``), narrows each model request to what is loaded
(``wrap_model_call``), and routes tool calls (``wrap_tool_call``): denied tools are refused, a
deferred tool not loaded yet gets the ``select:`` hint, and an MCP hub's tools run through the
hub. The discovered set is a key of the graph state with its own reducer, so it survives
trimming or summarising the messages and is saved per thread by a checkpointer.

:class:`BigtoolSearch` gives ``langgraph_bigtool.create_agent`` a tool registry of the permitted
pool and ToolSearch as its ``retrieve_tools_function``; bigtool keeps the loaded tools in its
``selected_tool_ids`` state key.

Needs ``pip install 'toolsearch[langchain]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, tool_search_tool
from toolsearch.errors import ConfigError, MissingExtraError
from toolsearch.integrations.deferred import (
    DeferredPool,
    KeepLoaded,
    Savings,
    found_in_same_response,
    framework_tool,
)
from toolsearch.permissions import DenyRule
from toolsearch.tokens import TokenCounter
from toolsearch.tool import TOOL_SEARCH_NAME, Tool

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState
    from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
    from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, ToolException
    from langchain_core.tools import tool as as_langchain_tool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(
        "the LangChain integration", "langchain", ["langchain", "langchain-core", "langgraph"]
    ) from exc

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest

    from toolsearch.mcp.client import ToolCallResult
    from toolsearch.mcp.hub import BlockingMcpHub, McpHub

__all__ = ["LATEST_KEY", "STATE_KEY", "BigtoolSearch", "ToolSearchMiddleware", "ToolSearchState"]

#: The graph-state key that holds the names of the tools ToolSearch loaded.
STATE_KEY = "toolsearch_discovered"
#: The graph-state key that holds the names the latest ToolSearch call loaded (for
#: ``keep_loaded="called"``).
LATEST_KEY = "toolsearch_latest"


def _union(left: list[str] | None, right: list[str] | None) -> list[str]:
    """The state reducer: names found earlier, then new ones, each once."""
    kept = list(left or [])
    kept += [name for name in right or [] if name not in kept]
    return kept


class ToolSearchState(AgentState[Any]):
    """The agent state plus the discovered set (merged, never replaced, by each update)."""

    toolsearch_discovered: NotRequired[Annotated[list[str], _union]]
    toolsearch_latest: NotRequired[list[str]]


def _pool_tool(tool: BaseTool, *, deferred: bool, server: str | None = None) -> Tool:
    parameters = convert_to_openai_tool(tool)["function"].get("parameters")
    server_tool = tool.name.removeprefix(f"{server}_") if server else None
    return framework_tool(
        tool.name,
        tool.description,
        parameters,
        deferred=deferred,
        server=server,
        server_tool=server_tool,
    )


def _result_text(result: ToolCallResult) -> str:
    if result.is_error:
        raise ToolException(result.as_text())
    return result.as_text()


class _Converted:
    """The framework's tools and the hub's tools as LangChain tools, made once per tool."""

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]],
        always_load: Iterable[str],
        pool_options: Mapping[str, Any],
        mcp_tools: Mapping[str, Sequence[BaseTool]] | None = None,
    ) -> None:
        converted = [t if isinstance(t, BaseTool) else as_langchain_tool(t) for t in tools]
        servers = {t.name: server for server, ts in (mcp_tools or {}).items() for t in ts}
        converted += [t for ts in (mcp_tools or {}).values() for t in ts]
        self.framework: dict[str, BaseTool] = {t.name: t for t in converted}
        upfront = set(always_load)
        unknown = sorted(upfront - set(self.framework))
        if unknown:
            raise ConfigError(f"always_load names no given tool: {', '.join(unknown)}")
        pool_tools = [
            _pool_tool(t, deferred=t.name not in upfront, server=servers.get(t.name))
            for t in converted
        ]
        self.pool = DeferredPool(pool_tools, **pool_options)
        self.search = _search_tool(self.pool)
        self._hub: dict[str, tuple[Tool, BaseTool]] = {}

    def permitted_framework_tools(self) -> list[BaseTool]:
        """The framework's tools no deny rule removed."""
        return [t for name, t in self.framework.items() if self.pool.pool.get(name) is not None]

    def langchain(self, tool: Tool) -> BaseTool:
        """The LangChain tool for a pool tool."""
        if tool.name == TOOL_SEARCH_NAME:
            return self.search
        if tool.name in self.framework:
            return self.framework[tool.name]
        cached = self._hub.get(tool.name)
        if cached is None or cached[0] is not tool:
            cached = (tool, self._hub_tool(tool))
            self._hub[tool.name] = cached
        return cached[1]

    def _hub_tool(self, tool: Tool) -> BaseTool:
        pool, name = self.pool, tool.name

        def call(**arguments: Any) -> str:
            return _result_text(pool.call_hub(name, arguments))

        async def acall(**arguments: Any) -> str:
            return _result_text(await pool.acall_hub(name, arguments))

        return StructuredTool(
            name=name,
            description=tool.description,
            args_schema=dict(tool.definition()["input_schema"]),
            func=call,
            coroutine=acall,
            handle_tool_error=True,
        )


def _search_tool(pool: DeferredPool) -> BaseTool:
    """ToolSearch as a LangChain tool that returns a state update: its result message and the
    names it loaded."""

    def run(
        query: str,
        tool_call_id: Annotated[str, InjectedToolCallId],
        max_results: int = DEFAULT_MAX_RESULTS,
    ) -> Command[Any]:
        answer = pool.search(query, max_results)
        message = ToolMessage(
            answer.text,
            tool_call_id=tool_call_id,
            name=TOOL_SEARCH_NAME,
            status="error" if answer.is_error else "success",
        )
        update = {STATE_KEY: list(answer.names), "messages": [message]}
        if answer.names:
            update[LATEST_KEY] = list(answer.names)
        return Command(update=update)

    description = tool_search_tool(pool.max_results_cap).description
    return StructuredTool.from_function(run, name=TOOL_SEARCH_NAME, description=description)


def _announced(system: SystemMessage | None, block: str) -> SystemMessage:
    """The system message with the announcement after it. Structured content keeps its
    blocks (an Anthropic ``cache_control`` marker included) and gains a text block, so a
    cached prefix stays cached; plain text gains the block after a blank line."""
    if system is None:
        return SystemMessage(block)
    if isinstance(system.content, list):
        blocks = [*system.content, {"type": "text", "text": block}]
        return system.model_copy(update={"content": blocks})
    text = f"{system.content}\n\n{block}" if system.content else block
    return system.model_copy(update={"content": text})


def _tool_name(tool: BaseTool | Mapping[str, Any]) -> str:
    return tool.name if isinstance(tool, BaseTool) else str(tool.get("name", ""))


class ToolSearchMiddleware(AgentMiddleware[ToolSearchState, Any, Any]):
    """Deferred tools and ToolSearch for ``langchain.agents.create_agent``.

    ``tools`` (LangChain tools or plain functions) are registered by the middleware — pass
    them here rather than to ``create_agent``; each is deferred unless named in
    ``always_load``. ``mcp_tools`` maps an MCP server's name to the LangChain tools an
    adapter made of its tools (``langchain-mcp-adapters``:
    ``await client.get_tools(server_name=name)``): they join ``tools`` and answer to
    ``mcp__<server>`` rules. ``hub`` adds a running MCP hub's tools; ``deny`` removes tools
    from everything (tools given to ``create_agent`` directly included); ``backend`` and
    ``backend_options`` choose the ranking; ``counter`` counts the tokens of
    :meth:`savings`; ``announce`` names the deferred tools in the system message;
    ``keep_loaded`` bounds what stays loaded (``"all"`` or ``"called"``).
    """

    state_schema = ToolSearchState

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]] = (),
        *,
        mcp_tools: Mapping[str, Sequence[BaseTool]] | None = None,
        hub: McpHub | BlockingMcpHub | None = None,
        deny: Iterable[str | DenyRule] = (),
        always_load: Iterable[str] = (),
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        counter: TokenCounter | None = None,
        announce: bool = True,
        keep_loaded: KeepLoaded = "all",
    ) -> None:
        super().__init__()
        options = {
            "hub": hub,
            "deny": deny,
            "backend": backend,
            "backend_options": backend_options,
            "max_results_cap": max_results_cap,
            "counter": counter,
            "announce": announce,
            "keep_loaded": keep_loaded,
        }
        self._tools = _Converted(tools, always_load, options, mcp_tools)
        self.pool = self._tools.pool
        self.tools = [self._tools.search, *self._tools.permitted_framework_tools()]

    def savings(self) -> Savings:
        """Tool-definition tokens of every model request so far, against all tools bound."""
        return self.pool.savings()

    # -- model requests --------------------------------------------------------------------

    def _loaded(self, state: Any) -> list[str]:
        """The thread's loaded tools, bounded by ``keep_loaded``: with ``"called"``, the
        latest search's plus those that ran (successful tool messages of the thread)."""
        state = state if isinstance(state, Mapping) else {}
        found: list[str] = list(state.get(STATE_KEY, []))
        if self.pool.keep_loaded == "all" or LATEST_KEY not in state:
            return found
        keep = set(state[LATEST_KEY]) | {
            m.name
            for m in state.get("messages", [])
            if isinstance(m, ToolMessage) and m.status == "success" and m.name
        }
        return [name for name in found if name in keep]

    def _prepare(self, request: Any) -> Any:
        own = {*self._tools.framework, TOOL_SEARCH_NAME}
        outside = [t for t in request.tools if _tool_name(t) not in own]
        self.pool.note_outside(
            framework_tool(_tool_name(t), None, None, deferred=False) for t in outside
        )
        visible = self.pool.visible(self._loaded(request.state))
        self.pool.count_request(visible)
        others = [t for t in outside if not self.pool.is_denied(_tool_name(t))]
        tools = [*(self._tools.langchain(t) for t in visible), *others]
        block = self.pool.announcement()
        if not block:
            return request.override(tools=tools)
        system = _announced(request.system_message, block)
        return request.override(tools=tools, system_message=system)

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Send ToolSearch, the tools loaded up front and the discovered ones."""
        return handler(self._prepare(request))

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """:meth:`wrap_model_call` for async agents."""
        return await handler(self._prepare(request))

    # -- tool calls ------------------------------------------------------------------------

    def _route(self, request: ToolCallRequest) -> ToolCallRequest | ToolMessage:
        call = request.tool_call
        name = call["name"]
        if name == TOOL_SEARCH_NAME:
            return request
        outside = name not in self._tools.framework and not self.pool.is_hub_tool(name)
        if outside and not self.pool.is_denied(name):
            return request  # a tool given to create_agent directly: the framework's own
        error = self.pool.call_error(name, self._loaded(request.state))
        if error is not None and self._found_by_a_sibling(request):
            error = found_in_same_response(name)
        if error is not None:
            return ToolMessage(error, tool_call_id=call["id"], name=name, status="error")
        tool = self.pool.pool.get(name)
        if tool is not None and self.pool.is_hub_tool(name):
            return request.override(tool=self._tools.langchain(tool))
        return request

    def _found_by_a_sibling(self, request: ToolCallRequest) -> bool:
        """Whether a ToolSearch call of the same response loads the tool called (the graph
        runs a response's calls together, each on the state from before it)."""
        call = request.tool_call
        state = request.state if isinstance(request.state, Mapping) else {}
        response = next(
            (
                m
                for m in reversed(state.get("messages", []))
                if isinstance(m, AIMessage) and any(c["id"] == call["id"] for c in m.tool_calls)
            ),
            None,
        )
        searches = (
            [c for c in response.tool_calls if c["name"] == TOOL_SEARCH_NAME] if response else []
        )
        return any(
            call["name"]
            in self.pool.search(
                c["args"].get("query"),
                c["args"].get("max_results", DEFAULT_MAX_RESULTS),
                remember=False,
            ).names
            for c in searches
        )

    def wrap_tool_call(self, request: ToolCallRequest, handler: Callable[..., Any]) -> Any:
        """Refuse denied and not-yet-loaded tools; run the hub's tools through the hub."""
        routed = self._route(request)
        return routed if isinstance(routed, ToolMessage) else handler(routed)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[..., Awaitable[Any]]
    ) -> Any:
        """:meth:`wrap_tool_call` for async agents."""
        routed = self._route(request)
        return routed if isinstance(routed, ToolMessage) else await handler(routed)


class BigtoolSearch:
    """ToolSearch as ``langgraph-bigtool``'s tool retrieval, over the permitted pool.

    Pass :attr:`registry` as ``tool_registry`` and :attr:`retrieve_tools_function` /
    :attr:`retrieve_tools_coroutine` to ``langgraph_bigtool.create_agent``. Every tool is
    deferred (bigtool binds only retrieved tools). The hub's tools are read when the registry
    is built: wait for the hub to be ready first.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool | Callable[..., Any]] = (),
        *,
        hub: McpHub | BlockingMcpHub | None = None,
        deny: Iterable[str | DenyRule] = (),
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        counter: TokenCounter | None = None,
    ) -> None:
        options = {
            "hub": hub,
            "deny": deny,
            "backend": backend,
            "backend_options": backend_options,
            "max_results_cap": max_results_cap,
            "counter": counter,
            "announce": False,
        }
        self._tools = _Converted(tools, (), options)
        self.pool = self._tools.pool
        self.registry: dict[str, BaseTool] = {
            t.name: self._tools.langchain(t) for t in self.pool.refresh().deferred
        }
        self.retrieve_tools_function, self.retrieve_tools_coroutine = self._retrievers()

    def _retrievers(self) -> tuple[Callable[..., list[str]], Callable[..., Awaitable[list[str]]]]:
        pool, registry = self.pool, self.registry

        def retrieve(query: str, max_results: int = DEFAULT_MAX_RESULTS) -> list[str]:
            answer = pool.search(query, max_results)
            if answer.is_error:
                raise ToolException(answer.text)
            return [name for name in answer.names if name in registry]

        async def aretrieve(query: str, max_results: int = DEFAULT_MAX_RESULTS) -> list[str]:
            return retrieve(query, max_results)

        # bigtool names its retrieval tool after the function and describes it by the docstring
        description = tool_search_tool(pool.max_results_cap).description
        for function in (retrieve, aretrieve):
            function.__name__ = TOOL_SEARCH_NAME
            function.__doc__ = description
        return retrieve, aretrieve

    def request_savings(self, selected_tool_ids: Iterable[str]) -> Savings:
        """One request's figures for bigtool's state: ToolSearch and the selected tools."""
        search = self.pool.pool.get(TOOL_SEARCH_NAME)
        selected = [t for n in dict.fromkeys(selected_tool_ids) if (t := self.pool.pool.get(n))]
        return self.pool.request_savings([*([search] if search else []), *selected])
