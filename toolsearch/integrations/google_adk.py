"""Google ADK: deferred tools and ToolSearch as a toolset and two agent callbacks
(docs/integrations/google-adk.md).

:class:`ToolSearchToolset` is an ADK ``BaseToolset`` that ADK lists again before every model
request (``get_tools``): ToolSearch, the tools loaded up front and the deferred tools found so
far in this session. ToolSearch records what it loaded in the session state (key
:data:`STATE_KEY`), so each session — each user, each conversation — has its own tools, the
session service saves them with the conversation, and a session read back from it resumes
with them; the toolset object keeps no conversation state and serves any number of sessions.
Its ``process_llm_request`` names the deferred tools in the system instruction.

Two agent callbacks (:meth:`ToolSearchToolset.callbacks`) apply the deny rules to every tool,
those given to the agent outside the toolset included: ``before_model_callback`` removes
denied tools from the request and counts its tokens, ``before_tool_callback`` refuses a call
to a denied tool, or to a deferred tool not loaded yet (with the ``select:`` hint). The toolset
refuses to run on an agent without them.

Needs ``pip install 'toolsearch[google-adk]'``.
"""

from __future__ import annotations

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
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.agents.readonly_context import ReadonlyContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.sessions.state import State
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.base_toolset import BaseToolset
    from google.adk.tools.function_tool import FunctionTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("the Google ADK integration", "google-adk", ["google-adk"]) from exc

if TYPE_CHECKING:
    from toolsearch.mcp.hub import BlockingMcpHub, McpHub

__all__ = ["STATE_KEY", "ToolSearchToolset"]

#: The session-state key that holds the tools ToolSearch loaded, as ``{name: True}`` (a
#: mapping, so parallel ToolSearch calls in one response merge rather than overwrite). The
#: ``owner:key`` form keeps it out of an agent's declared state schema, as ADK's own keys are.
STATE_KEY = "toolsearch:discovered"

AdkTool = BaseTool | Callable[..., Any] | BaseToolset


def discovered_in(state: Mapping[str, Any] | State) -> tuple[str, ...]:
    """The tool names a session state holds under :data:`STATE_KEY` (a mapping, or a list
    when set by hand through ``create_session(state=...)``)."""
    value = state.get(STATE_KEY) or ()
    if isinstance(value, str) or not isinstance(value, Mapping | Sequence):
        raise ConfigError(
            f"session state {STATE_KEY!r} must map tool names to True or list them, got {value!r}"
        )
    return tuple(str(name) for name in value)


def _schema(tool: BaseTool) -> dict[str, Any] | None:
    """The JSON schema of an ADK tool's parameters, as ADK declares it to the model."""
    declaration = tool._get_declaration()
    if declaration is None:
        return None
    if declaration.parameters_json_schema is not None:
        return dict(declaration.parameters_json_schema)
    if declaration.parameters is not None:
        return declaration.parameters.json_schema.model_dump(mode="json", exclude_none=True)
    return None


def _declaration(tool: Tool) -> types.FunctionDeclaration:
    return types.FunctionDeclaration(
        name=tool.name,
        description=tool.description,
        parameters_json_schema=dict(tool.definition()["input_schema"]),
    )


class _SearchTool(BaseTool):
    """ToolSearch as an ADK tool: it answers from the pool and adds the tools it loaded to
    the session state."""

    def __init__(self, pool: DeferredPool) -> None:
        self._spec = tool_search_tool(pool.max_results_cap)
        super().__init__(name=TOOL_SEARCH_NAME, description=self._spec.description)
        self._pool = pool

    def _get_declaration(self) -> types.FunctionDeclaration:
        return _declaration(self._spec)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        answer = self._pool.search(args.get("query"), args.get("max_results", DEFAULT_MAX_RESULTS))
        if answer.is_error:
            return {"error": answer.text}
        if answer.names:
            found = dict.fromkeys(discovered_in(tool_context.state), True)
            found.update(dict.fromkeys(answer.names, True))
            tool_context.state[STATE_KEY] = found
        return {"result": answer.text, "loaded": list(answer.names)}


class _HubTool(BaseTool):
    """One of an MCP hub's tools as an ADK tool that calls the hub."""

    def __init__(self, pool: DeferredPool, tool: Tool) -> None:
        super().__init__(name=tool.name, description=tool.description)
        self._pool = pool
        self.tool = tool

    def _get_declaration(self) -> types.FunctionDeclaration:
        return _declaration(self.tool)

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> Any:
        result = await self._pool.acall_hub(self.name, args)
        return {"error" if result.is_error else "result": result.as_text()}


def _key(tool: BaseTool) -> str:
    schema = json.dumps(_schema(tool), sort_keys=True, default=str)
    return f"{tool.name}\0{tool.description}\0{schema}"


class ToolSearchToolset(BaseToolset):
    """Deferred tools and ToolSearch for an ADK ``LlmAgent``.

    ``tools`` are the agent's tools — ``BaseTool``s, functions (made ``FunctionTool``s) and
    toolsets such as ``McpToolset`` (listed again each request) — each deferred unless named
    in ``always_load``. ``hub`` adds a running MCP hub's tools; ``deny`` removes tools before
    anything else sees them; ``backend`` and ``backend_options`` choose the ranking;
    ``counter`` counts the tokens of :meth:`savings`; ``announce`` names the deferred tools in
    the system instruction.

    Give the agent ``tools=[toolset]`` and ``**toolset.callbacks()``.
    """

    def __init__(
        self,
        tools: Sequence[AdkTool] = (),
        *,
        hub: McpHub | BlockingMcpHub | None = None,
        deny: Iterable[str | DenyRule] = (),
        always_load: Iterable[str] = (),
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        counter: TokenCounter | None = None,
        announce: bool = True,
    ) -> None:
        # listed again before every model request: a ToolSearch call changes what is sent
        super().__init__(disable_invocation_cache=True)
        self._toolsets = [t for t in tools if isinstance(t, BaseToolset)]
        self._tools = [
            t if isinstance(t, BaseTool) else FunctionTool(t)
            for t in tools
            if not isinstance(t, BaseToolset)
        ]
        self.always_load = frozenset(always_load)
        self.pool = DeferredPool(
            hub=hub,
            deny=deny,
            backend=backend,
            backend_options=backend_options,
            max_results_cap=max_results_cap,
            counter=counter,
            announce=announce,
        )
        self._search = _SearchTool(self.pool)
        self._converted: dict[str, Tool] = {}
        self._listed: tuple[Tool, ...] = ()
        self._own: dict[str, BaseTool] = {}
        self._hub_tools: dict[str, _HubTool] = {}
        if not self._toolsets:
            self._take(self._tools)

    def savings(self) -> Savings:
        """Tool-definition tokens of every model request so far (all sessions), against all
        tools bound."""
        return self.pool.savings()

    def callbacks(self) -> dict[str, Any]:
        """The agent callbacks that apply the deny rules to every tool and count tokens:
        ``LlmAgent(..., tools=[toolset], **toolset.callbacks())``."""
        return {
            "before_model_callback": self.before_model_callback,
            "before_tool_callback": self.before_tool_callback,
        }

    # -- listing ---------------------------------------------------------------------------

    def _pool_tool(self, tool: BaseTool) -> Tool:
        """The pool's form of an ADK tool, made once per definition so the engine sees the
        same object while the tool is unchanged."""
        key = _key(tool)
        converted = self._converted.get(key)
        if converted is None:
            deferred = tool.name not in self.always_load
            converted = framework_tool(
                tool.name, tool.description, _schema(tool), deferred=deferred
            )
            self._converted[key] = converted
        return converted

    def _take(self, own: Sequence[BaseTool]) -> None:
        """Make ``own`` the pool's framework tools (re-indexed only when they changed)."""
        unknown = sorted(self.always_load - {t.name for t in own})
        if unknown:
            raise ConfigError(f"always_load names no tool of the toolset: {', '.join(unknown)}")
        listed = tuple(self._pool_tool(t) for t in own)
        if listed != self._listed:
            self.pool.set_tools(listed)
            self._listed = listed
        self._own = {t.name: t for t in own}

    async def _list_own(self, context: ReadonlyContext | None) -> None:
        if not self._toolsets:
            return
        own = list(self._tools)
        for toolset in self._toolsets:
            own += await toolset.get_tools_with_prefix(context)
        self._take(own)

    def _adk_tool(self, tool: Tool) -> BaseTool:
        """The ADK tool sent for a pool tool."""
        if tool.name == TOOL_SEARCH_NAME:
            return self._search
        own = self._own.get(tool.name)
        if own is not None:
            return own
        cached = self._hub_tools.get(tool.name)
        if cached is None or cached.tool is not tool:
            cached = self._hub_tools[tool.name] = _HubTool(self.pool, tool)
        return cached

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        """ToolSearch, the tools loaded up front and the tools found in this session."""
        await self._list_own(readonly_context)
        self._note_agent_tools(readonly_context)
        found = discovered_in(readonly_context.state) if readonly_context is not None else ()
        return [self._adk_tool(t) for t in self.pool.visible(found)]

    def _note_agent_tools(self, context: ReadonlyContext | None) -> None:
        """Tell the pool the agent's other tools (functions and tools given to ``LlmAgent``
        directly): a deny rule naming one of them is no typo (no ``DenyRuleWarning``)."""
        invocation = getattr(context, "_invocation_context", None)
        entries = getattr(getattr(invocation, "agent", None), "tools", None) or []
        names = [
            getattr(entry, "name", None) or getattr(entry, "__name__", None)
            for entry in entries
            if entry is not self and not isinstance(entry, BaseToolset)
        ]
        self.pool.note_outside(
            framework_tool(name, None, None, deferred=False)
            for name in names
            if isinstance(name, str)
        )

    async def close(self) -> None:
        """Close the wrapped toolsets (MCP sessions and the like)."""
        for toolset in self._toolsets:
            await toolset.close()

    # -- the request -----------------------------------------------------------------------

    async def process_llm_request(
        self, *, tool_context: ToolContext, llm_request: LlmRequest
    ) -> None:
        """Check that the agent has the callbacks and the session state is readable (ADK
        drops a toolset whose listing fails, with only a log line), and name the deferred
        tools in the system instruction."""
        self._check_callbacks(tool_context._invocation_context.agent)
        discovered_in(tool_context.state)
        block = self.pool.announcement()
        if block:
            llm_request.append_instructions([block])

    def _check_callbacks(self, agent: Any) -> None:
        model_callbacks = getattr(agent, "canonical_before_model_callbacks", None)
        tool_callbacks = getattr(agent, "canonical_before_tool_callbacks", None)
        if model_callbacks is None or tool_callbacks is None:
            return
        if self.before_model_callback in model_callbacks and (
            self.before_tool_callback in tool_callbacks
        ):
            return
        raise ConfigError(
            f"agent {agent.name!r} has a ToolSearchToolset but not its callbacks, so deny "
            "rules would not reach its other tools: pass **toolset.callbacks() to LlmAgent "
            "(before_model_callback and before_tool_callback)"
        )

    def _refused(self, name: str) -> bool:
        return name != TOOL_SEARCH_NAME and self.pool.is_denied(name)

    def before_model_callback(
        self, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """Remove denied tools from the request, whoever added them, and count its tokens."""
        for name in [n for n in llm_request.tools_dict if self._refused(n)]:
            del llm_request.tools_dict[name]
        for tool in llm_request.config.tools or []:
            if isinstance(tool, types.Tool) and tool.function_declarations:
                tool.function_declarations = [
                    d for d in tool.function_declarations if not self._refused(d.name or "")
                ]
        self.pool.count_request(self.pool.visible(discovered_in(callback_context.state)))
        return None

    def before_tool_callback(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Refuse a call to a denied tool, or to a deferred tool not loaded when the model
        wrote the call; None lets any other call run."""
        name = tool.name
        if tool is self._search:
            return None
        pooled = self.pool.pool.get(name)
        if pooled is None:
            if self._refused(name) or name in self._own or name == TOOL_SEARCH_NAME:
                return {"error": self.pool.call_error(name, ())}
            return None  # one of the agent's other tools: ADK runs it or reports it missing
        error = self.pool.call_error(name, discovered_in(tool_context.state))
        if error is not None:
            return {"error": error}
        if tool is not self._adk_tool(pooled):
            return {
                "error": f"{name} was loaded by a {TOOL_SEARCH_NAME} call in the same response, "
                "so it was not available yet when this call was written. It is loaded now: "
                "call it again."
            }
        return None
