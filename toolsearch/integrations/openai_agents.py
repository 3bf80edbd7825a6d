"""The OpenAI Agents SDK: deferred tools and ToolSearch through the SDK's own switches
(docs/integrations/openai-agents.md).

:class:`ToolSearchTools` hands an ``Agent`` ToolSearch and every permitted tool, each gated by
``FunctionTool.is_enabled``: a deferred tool is enabled from the turn after ToolSearch found
it, so the SDK sends only ToolSearch, the tools loaded up front and the discovered ones. Its
:meth:`ToolSearchTools.run_config` adds, through ``RunConfig``: the announcement of the
deferred names and the per-request token count (``call_model_input_filter``), and a clear
error for a call to a denied or not-yet-loaded tool instead of a failed run
(``tool_not_found_behavior`` with ``tool_error_formatter``). An MCP hub's tools become
function tools that call the hub.

The discovered set lives in the :class:`ToolSearchTools` object, not in the run's items, so a
session or an input filter that trims the history keeps every loaded tool; use one object per
conversation (``discovered=`` restores a saved one).

Needs ``pip install 'toolsearch[openai-agents]'``.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, tool_search_tool
from toolsearch.errors import ConfigError, MissingExtraError
from toolsearch.integrations.deferred import DeferredPool, Savings, framework_tool
from toolsearch.permissions import DenyRule
from toolsearch.tokens import TokenCounter
from toolsearch.tool import TOOL_SEARCH_NAME, Tool, is_deferred

try:
    from agents import FunctionTool, RunConfig, RunContextWrapper
    from agents.run_config import CallModelData, ModelInputData, ToolErrorFormatterArgs
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError(
        "the OpenAI Agents SDK integration", "openai-agents", ["openai-agents"]
    ) from exc

if TYPE_CHECKING:
    from toolsearch.mcp.hub import BlockingMcpHub, McpHub

__all__ = ["ToolSearchTools"]

InputFilter = Callable[[CallModelData[Any]], Any]


def _arguments(text: str) -> dict[str, Any]:
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError(f"tool arguments must be a JSON object, got {text!r}")
    return value


class ToolSearchTools:
    """Deferred tools and ToolSearch for an Agents SDK ``Agent``.

    ``tools`` are the agent's ``FunctionTool``s, each deferred unless named in
    ``always_load``; ``hub`` adds a running MCP hub's tools (read when :attr:`tools` is built:
    wait for the hub first). ``deny`` removes tools before anything else sees them;
    ``backend`` and ``backend_options`` choose the ranking; ``counter`` counts the tokens of
    :meth:`savings`; ``announce`` names the deferred tools in the instructions.

    Give the agent :attr:`tools` and each run :meth:`run_config`.
    """

    def __init__(
        self,
        tools: Sequence[FunctionTool] = (),
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
    ) -> None:
        self._framework: dict[str, FunctionTool] = {t.name: t for t in tools}
        upfront = set(always_load)
        unknown = sorted(upfront - set(self._framework))
        if unknown:
            raise ConfigError(f"always_load names no given tool: {', '.join(unknown)}")
        self.pool = DeferredPool(
            [
                framework_tool(
                    t.name, t.description, t.params_json_schema, deferred=t.name not in upfront
                )
                for t in tools
            ],
            hub=hub,
            deny=deny,
            backend=backend,
            backend_options=backend_options,
            max_results_cap=max_results_cap,
            counter=counter,
            announce=announce,
            discovered=discovered,
        )

    @property
    def discovered(self) -> tuple[str, ...]:
        """The tools ToolSearch has loaded in this conversation (save it to resume one)."""
        return self.pool.discovered

    def savings(self) -> Savings:
        """Tool-definition tokens of every model request so far, against all tools bound."""
        return self.pool.savings()

    # -- the agent's tools -----------------------------------------------------------------

    @property
    def tools(self) -> list[FunctionTool]:
        """ToolSearch and every permitted tool, each deferred one enabled once loaded."""
        pool = self.pool.refresh()
        gated = [self._gated(tool) for tool in pool.tools if tool.name != TOOL_SEARCH_NAME]
        return [self._search_tool(), *gated]

    def _search_tool(self) -> FunctionTool:
        spec = tool_search_tool(self.pool.max_results_cap)

        async def invoke(context: Any, arguments: str) -> str:
            try:
                values = _arguments(arguments)
            except ValueError as exc:
                return f"{TOOL_SEARCH_NAME} error: {exc}"
            query = values.get("query")
            return self.pool.search(query, values.get("max_results", DEFAULT_MAX_RESULTS)).text

        return FunctionTool(
            name=TOOL_SEARCH_NAME,
            description=spec.description,
            params_json_schema=dict(spec.definition()["input_schema"]),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    def _gated(self, tool: Tool) -> FunctionTool:
        own = self._framework.get(tool.name)
        function = copy.copy(own) if own is not None else self._hub_tool(tool)
        original = function.is_enabled
        if not is_deferred(tool):
            return function
        name, pool = tool.name, self.pool

        async def enabled(context: RunContextWrapper[Any], agent: Any) -> bool:
            if name not in pool.discovered:
                return False
            if isinstance(original, bool):
                return original
            result = original(context, agent)
            return bool(await result if inspect.isawaitable(result) else result)

        function.is_enabled = enabled
        return function

    def _hub_tool(self, tool: Tool) -> FunctionTool:
        pool, name = self.pool, tool.name

        async def invoke(context: Any, arguments: str) -> str:
            result = await pool.acall_hub(name, _arguments(arguments))
            return result.as_text()

        return FunctionTool(
            name=name,
            description=tool.description,
            params_json_schema=dict(tool.definition()["input_schema"]),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    # -- the run ---------------------------------------------------------------------------

    def run_config(self, *, input_filter: InputFilter | None = None, **options: Any) -> RunConfig:
        """A ``RunConfig`` (``options`` passed through) that announces the deferred tools,
        counts each model request, and answers calls to denied or unloaded tools with an
        error the model reads. ``input_filter`` is your own ``call_model_input_filter`` (e.g.
        one that trims the history); it runs first."""

        async def prepare(data: CallModelData[Any]) -> ModelInputData:
            if input_filter is not None:
                filtered = input_filter(data)
                data.model_data = await filtered if inspect.isawaitable(filtered) else filtered
            return self._prepare(data.model_data)

        return RunConfig(
            call_model_input_filter=prepare,
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=self._format_error,
            **options,
        )

    def _prepare(self, model_data: ModelInputData) -> ModelInputData:
        self.pool.count_request()
        block = self.pool.announcement()
        if block:
            base = model_data.instructions
            model_data.instructions = f"{base}\n\n{block}" if base else block
        return model_data

    def _format_error(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        if args.kind != "tool_not_found":
            return None
        return self.pool.call_error(args.tool_name) or args.default_message
