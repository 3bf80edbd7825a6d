"""The OpenAI Agents SDK: deferred tools and ToolSearch through the SDK's own switches
(docs/integrations/openai-agents.md).

:class:`ToolSearchTools` hands an ``Agent`` ToolSearch and every permitted tool, each gated by
``FunctionTool.is_enabled``: a deferred tool is enabled from the turn after ToolSearch found
it, so the SDK sends only ToolSearch, the tools loaded up front and the discovered ones. Its
:meth:`ToolSearchTools.run_config` adds, through ``RunConfig``: the announcement of the
deferred names and the per-request token count (``call_model_input_filter``), a refusal of
the run when the agent holds a denied tool outside the integration (its own tools or
``mcp_servers``), and a clear error for a call to a denied or not-yet-loaded tool instead of
a failed run (``tool_not_found_behavior`` with ``tool_error_formatter``). An MCP hub's tools
become function tools that call the hub.

Found tools belong to the run, not to the :class:`ToolSearchTools` object: each run's are
kept with that run (keyed by its usage record, which the SDK shares between the run and its
tool calls) and read back from the ToolSearch results in the input the run starts from — a
session's items, ``result.to_input_list()``, or a resumed ``RunState``. One object serves any
number of users.

Needs ``pip install 'toolsearch[openai-agents]'``.
"""

from __future__ import annotations

import copy
import inspect
import json
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
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

__all__ = ["ToolSearchTools", "read_found"]

InputFilter = Callable[[CallModelData[Any]], Any]


def _arguments(text: str) -> dict[str, Any]:
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError(f"tool arguments must be a JSON object, got {text!r}")
    return value


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):  # content parts
        return "".join(str(_field(part, "text") or "") for part in output)
    return str(output or "")


def read_found(items: Iterable[Any], found: FoundTools) -> FoundTools:
    """Add what run items record to ``found``: each ToolSearch result (read back from the
    function call output the model got) and each other tool that returned an output."""
    calls: dict[str, str] = {}
    for item in items:
        kind = _field(item, "type")
        if kind == "function_call":
            calls[str(_field(item, "call_id"))] = str(_field(item, "name"))
        elif kind == "function_call_output":
            call_id = str(_field(item, "call_id"))
            name = calls.get(call_id)
            if name == TOOL_SEARCH_NAME:
                found.record_search(call_id, loaded_names(_output_text(_field(item, "output"))))
            elif name is not None:
                found.record_call(name)
    return found


def _approved(context: RunContextWrapper[Any], name: str) -> bool:
    """Whether the run holds an approved call of ``name``: the model called the tool while it
    was loaded and a person approved the call, so a run resumed from its ``RunState`` (whose
    input no longer holds the ToolSearch result) must still run it. The SDK keeps approvals
    by call id; each recorded id is checked through its public ``is_tool_approved``."""
    records = getattr(context, "_approvals", None)
    if not isinstance(records, Mapping):
        return False
    for record in records.values():
        approved = getattr(record, "approved", None)
        if isinstance(approved, list) and any(
            isinstance(call_id, str) and context.is_tool_approved(name, call_id)
            for call_id in approved
        ):
            return True
    return False


class _Runs:
    """Each run's found tools, keyed by the run's usage record: the SDK hands the same object
    to the run's context and to every tool call's context, and drops it with the run."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[weakref.ref[Any], FoundTools]] = {}
        #: per run, the input list last read (the SDK sets a new one each turn), so that the
        #: is_enabled check of every tool does not read the same items again
        self._read: dict[int, int] = {}

    def of(self, usage: Any) -> FoundTools:
        key = id(usage)
        entry = self._by_id.get(key)
        if entry is not None and entry[0]() is usage:
            return entry[1]
        found = FoundTools()

        def forget(_: Any) -> None:
            self._by_id.pop(key, None)
            self._read.pop(key, None)

        self._by_id[key] = (weakref.ref(usage, forget), found)
        self._read.pop(key, None)
        return found

    def with_input(self, context: RunContextWrapper[Any]) -> FoundTools:
        """The run's found tools, with what its input records read once per input list."""
        found = self.of(context.usage)
        items = context.turn_input
        if self._read.get(id(context.usage)) != id(items):
            read_found(items, found)
            self._read[id(context.usage)] = id(items)
        return found


class ToolSearchTools:
    """Deferred tools and ToolSearch for an Agents SDK ``Agent``.

    ``tools`` are the agent's ``FunctionTool``s, each deferred unless named in
    ``always_load``; ``hub`` adds a running MCP hub's tools (read when :attr:`tools` is built:
    wait for the hub first). ``deny`` removes tools before anything else sees them;
    ``backend`` and ``backend_options`` choose the ranking; ``counter`` counts the tokens of
    :meth:`savings`; ``announce`` names the deferred tools in the instructions;
    ``keep_loaded`` bounds what stays loaded (``"all"`` or ``"called"``). ``discovered``
    names tools treated as found in every run.

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
        keep_loaded: KeepLoaded = "all",
        discovered: Iterable[str] = (),
    ) -> None:
        self._framework: dict[str, FunctionTool] = {t.name: t for t in tools}
        upfront = set(always_load)
        unknown = sorted(upfront - set(self._framework))
        if unknown:
            raise ConfigError(f"always_load names no given tool: {', '.join(unknown)}")
        self.initial = tuple(discovered)
        self._runs = _Runs()
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
            keep_loaded=keep_loaded,
        )

    def discovered_in(self, items: Iterable[Any]) -> tuple[str, ...]:
        """The tools loaded in a conversation, from its items (``result.to_input_list()``, a
        session's items), in the order they were found."""
        return self._loaded(read_found(items, FoundTools()))

    def savings(self) -> Savings:
        """Tool-definition tokens of every model request so far (every run), against all
        tools bound."""
        return self.pool.savings()

    # -- a run's found tools ---------------------------------------------------------------

    def _found(self, context: RunContextWrapper[Any]) -> FoundTools:
        """The run's found tools: what it recorded, plus what its input records."""
        return self._runs.with_input(context)

    def _loaded(self, found: FoundTools) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*self.initial, *found.loaded(self.pool.keep_loaded)]))

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
            query, limit = values.get("query"), values.get("max_results", DEFAULT_MAX_RESULTS)
            answer = self.pool.search(query, limit, remember=False)
            call_id = str(getattr(context, "tool_call_id", "") or "")
            self._runs.of(context.usage).record_search(call_id, answer.names)
            return answer.text

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
        function.on_invoke_tool = self._recorded(tool.name, function.on_invoke_tool)
        original = function.is_enabled
        if not is_deferred(tool):
            return function
        name = tool.name

        async def enabled(context: RunContextWrapper[Any], agent: Any) -> bool:
            if name not in self._loaded(self._found(context)) and not _approved(context, name):
                return False
            if isinstance(original, bool):
                return original
            result = original(context, agent)
            return bool(await result if inspect.isawaitable(result) else result)

        function.is_enabled = enabled
        return function

    def _recorded(self, name: str, invoke: Callable[[Any, str], Any]) -> Callable[..., Any]:
        """``invoke`` noting in the run that the model called ``name``."""

        async def recorded(context: Any, arguments: str) -> Any:
            self._runs.of(context.usage).record_call(name)
            result = invoke(context, arguments)
            return await result if inspect.isawaitable(result) else result

        return recorded

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
        counts each model request, refuses a run whose agent holds a denied tool outside
        :attr:`tools`, and answers calls to denied or unloaded tools with an error the model
        reads. ``input_filter`` is your own ``call_model_input_filter`` (e.g. one that trims
        the history); it runs first."""

        async def prepare(data: CallModelData[Any]) -> ModelInputData:
            await self._refuse_denied_outside(data.agent)
            sent = self._sent(data.model_data.input)
            if input_filter is not None:
                filtered = input_filter(data)
                data.model_data = await filtered if inspect.isawaitable(filtered) else filtered
            return self._prepare(data.model_data, sent)

        return RunConfig(
            call_model_input_filter=prepare,
            tool_not_found_behavior="return_error_to_model",
            tool_error_formatter=self._format_error,
            **options,
        )

    async def _refuse_denied_outside(self, agent: Any) -> None:
        """Deny rules hold for every tool the agent sends: a denied tool among the agent's
        own tools or its ``mcp_servers``' tools refuses the run before the model request."""
        if not self.pool.rules:
            return
        ours = {t.name for t in self.pool.pool.tools}
        outside: list[tuple[str, str | None]] = [
            (t.name, None) for t in agent.tools if getattr(t, "name", None) not in ours
        ]
        for server in getattr(agent, "mcp_servers", None) or []:
            listed = await server.list_tools(None, agent)
            outside += [(t.name, server.name) for t in listed]
        self.pool.note_outside(
            framework_tool(name, None, None, deferred=False, server=server)
            for name, server in outside
        )
        for name, server in outside:
            if self.pool.is_denied(name, server, name if server else None):
                where = f"MCP server {server!r}" if server else "the agent's own tools"
                raise ConfigError(
                    f"the agent holds the tool {name!r} ({where}) outside ToolSearchTools, "
                    "and a deny rule denies it: the SDK would send and run it. Give it to "
                    "ToolSearchTools (or serve the server through the hub), or remove it"
                )

    def _prepare(self, model_data: ModelInputData, sent: list[Tool]) -> ModelInputData:
        self.pool.count_request(sent)
        block = self.pool.announcement()
        if block:
            base = model_data.instructions
            model_data.instructions = f"{base}\n\n{block}" if base else block
        return model_data

    def _sent(self, items: list[Any]) -> list[Tool]:
        """The pool's tools this request carries (the run's found tools as of its input)."""
        return self.pool.visible(self._loaded(read_found(items, FoundTools())))

    def _format_error(self, args: ToolErrorFormatterArgs[Any]) -> str | None:
        if args.kind != "tool_not_found":
            return None
        name = args.tool_name
        loaded = self._loaded(self._found(args.run_context))
        if name in loaded:
            return found_in_same_response(name)
        return self.pool.call_error(name, loaded) or args.default_message
