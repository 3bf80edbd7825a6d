"""CrewAI: deferred tools and ToolSearch through CrewAI's tool and LLM-call hooks
(docs/integrations/crewai.md).

:class:`ToolSearchTools` gives an ``Agent`` ToolSearch and the tools loaded up front; its hooks,
registered with CrewAI while the object is open, do the rest for every agent that holds its
ToolSearch:

- before each model call (``before_llm_call``) it sets the run's tools to ToolSearch, the tools
  loaded up front and those ToolSearch loaded earlier in the run — read back from the run's
  messages, so they belong to that run alone and come back with a restored conversation —
  plus the agent's other tools less the denied ones; it names the deferred tools in the
  system message and counts the request's tokens;
- before and after each tool call (``before_tool_call``, ``after_tool_call``) it refuses a
  denied tool, whoever gave it to the agent, and answers a call to a deferred tool not loaded
  yet with the ``select:`` hint.

CrewAI keeps a run's tools on its executor and offers no public call to change them mid-run;
the hook changes them the way CrewAI adds its own tool-result reader mid-run. Needs an LLM
with native function calling. Needs ``pip install 'toolsearch[crewai]'``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from toolsearch.backend import SearchBackend
from toolsearch.engine import DEFAULT_MAX_RESULTS, DEFAULT_MAX_RESULTS_CAP, tool_search_tool
from toolsearch.errors import ConfigError, MissingExtraError
from toolsearch.integrations.deferred import DeferredPool, Savings, framework_tool, loaded_names
from toolsearch.permissions import DenyRule
from toolsearch.tokens import TokenCounter
from toolsearch.tool import TOOL_SEARCH_NAME, is_deferred

try:
    from crewai.hooks import (
        HookAborted,
        LLMCallHookContext,
        ToolCallHookContext,
        register_after_tool_call_hook,
        register_before_llm_call_hook,
        register_before_tool_call_hook,
        unregister_after_tool_call_hook,
        unregister_before_llm_call_hook,
        unregister_before_tool_call_hook,
    )
    from crewai.tools import BaseTool
    from crewai.tools.base_tool import Tool
    from crewai.utilities.agent_utils import get_tool_names, render_text_description_and_args
    from crewai.utilities.pydantic_schema_utils import create_model_from_schema
    from crewai.utilities.string_utils import sanitize_tool_name
    from pydantic import BaseModel
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingExtraError("the CrewAI integration", "crewai", ["crewai"]) from exc

__all__ = ["ToolSearchTools"]


def _search_tool(pool: DeferredPool) -> BaseTool:
    """ToolSearch as a CrewAI tool, answering from the pool."""
    spec = tool_search_tool(pool.max_results_cap)
    schema = dict(spec.definition()["input_schema"])
    args: type[BaseModel] = create_model_from_schema(schema, model_name="ToolSearchArguments")

    def search(query: Any = None, max_results: Any = DEFAULT_MAX_RESULTS) -> str:
        return pool.search(query, max_results).text

    return Tool(name=TOOL_SEARCH_NAME, description=spec.description, func=search, args_schema=args)


def _pool_name(name: str) -> str:
    """The tool's name in the pool: its own, or CrewAI's sanitised one (``search_the_web``)
    when it has spaces, as CrewAI tool names often do and toolsearch names may not."""
    return sanitize_tool_name(name) if any(ch.isspace() for ch in name) else name


def _schema(tool: BaseTool) -> dict[str, Any]:
    return dict(tool.args_schema.model_json_schema())


def _message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping))
    return ""


def _found_in(messages: Iterable[Mapping[str, Any]]) -> list[str]:
    """The tools the run's ToolSearch results loaded, in the order they were found."""
    found: dict[str, None] = {}
    for message in messages:
        if message.get("role") == "tool":
            found.update(dict.fromkeys(loaded_names(_message_text(message))))
    return list(found)


class ToolSearchTools:
    """Deferred tools and ToolSearch for CrewAI agents.

    ``tools`` are CrewAI tools, each deferred unless named in ``always_load``; ``deny``
    removes tools — these and any other tool an agent holding :attr:`tools` was given —
    before anything else sees them; ``backend`` and ``backend_options`` choose the ranking;
    ``counter`` counts the tokens of :meth:`savings`; ``announce`` names the deferred tools in
    the system message.

    Give the agent :attr:`tools`. The hooks stay registered with CrewAI until :meth:`close`
    (or the end of a ``with`` block); one object serves any number of agents and runs.
    """

    def __init__(
        self,
        tools: Sequence[BaseTool] = (),
        *,
        deny: Iterable[str | DenyRule] = (),
        always_load: Iterable[str] = (),
        backend: SearchBackend | str | None = None,
        backend_options: Mapping[str, Any] | None = None,
        max_results_cap: int = DEFAULT_MAX_RESULTS_CAP,
        counter: TokenCounter | None = None,
        announce: bool = True,
    ) -> None:
        self._framework: dict[str, BaseTool] = {_pool_name(t.name): t for t in tools}
        upfront = {_pool_name(name) for name in always_load}
        unknown = sorted(upfront - set(self._framework))
        if unknown:
            raise ConfigError(f"always_load names no given tool: {', '.join(unknown)}")
        self.pool = DeferredPool(
            [
                framework_tool(name, t.description, _schema(t), deferred=name not in upfront)
                for name, t in self._framework.items()
            ],
            deny=deny,
            backend=backend,
            backend_options=backend_options,
            max_results_cap=max_results_cap,
            counter=counter,
            announce=announce,
        )
        self._search = _search_tool(self.pool)
        self._own_ids = {id(t) for t in (self._search, *self._framework.values())}
        self._called = self._call_names()
        register_before_llm_call_hook(self._before_llm)
        register_before_tool_call_hook(self._before_tool)
        register_after_tool_call_hook(self._after_tool)

    def _call_names(self) -> dict[str, str]:
        """CrewAI's names for the tools (it sends and reads them sanitised: ``tool_search``)
        mapped to toolsearch's."""
        names = [TOOL_SEARCH_NAME, *self._framework]
        called: dict[str, str] = {}
        for name in names:
            other = called.setdefault(sanitize_tool_name(name), name)
            if other != name:
                raise ConfigError(f"CrewAI would call tools {other!r} and {name!r} by one name")
        return called

    @property
    def tools(self) -> list[BaseTool]:
        """ToolSearch and the permitted tools loaded up front: give them to the agent."""
        upfront = [t.name for t in self.pool.refresh().tools if not is_deferred(t)]
        return [self._crewai(name) for name in upfront]

    def savings(self) -> Savings:
        """Tool-definition tokens of every model request so far (all runs), against all
        tools bound."""
        return self.pool.savings()

    def close(self) -> None:
        """Unregister the hooks from CrewAI."""
        unregister_before_llm_call_hook(self._before_llm)
        unregister_before_tool_call_hook(self._before_tool)
        unregister_after_tool_call_hook(self._after_tool)

    def __enter__(self) -> ToolSearchTools:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _crewai(self, name: str) -> BaseTool:
        return self._search if name == TOOL_SEARCH_NAME else self._framework[name]

    def _holds_search(self, tools: Iterable[Any] | None) -> bool:
        return any(t is self._search for t in tools or ())

    # -- model calls -----------------------------------------------------------------------

    def _before_llm(self, context: LLMCallHookContext) -> None:
        """Set the run's tools for this model call, announce the deferred tools, count."""
        executor = context.executor
        current = getattr(executor, "original_tools", None)
        if current is None or not self._holds_search(current):
            return
        if not getattr(getattr(executor, "state", None), "use_native_tools", False):
            raise HookAborted(
                reason="toolsearch's ToolSearch needs an LLM with native function calling "
                "(supports_function_calling())"
            )
        outside = [t for t in current if id(t) not in self._own_ids]
        # a deny rule naming one of the agent's other tools is no typo (no DenyRuleWarning)
        self.pool.note_outside(framework_tool(t.name, None, None, deferred=False) for t in outside)
        visible = self.pool.visible(_found_in(context.messages))
        others = [t for t in outside if not self.pool.is_denied(t.name)]
        _set_tools(executor, [*(self._crewai(t.name) for t in visible), *others])
        self._announce(context.messages)
        self.pool.count_request(visible)

    def _announce(self, messages: list[Any]) -> None:
        block = self.pool.announcement()
        if not block:
            return
        system = next((m for m in messages if m.get("role") == "system"), None)
        if system is None:
            messages.insert(0, {"role": "system", "content": block})
        elif isinstance(system.get("content"), str) and block not in system["content"]:
            system["content"] = f"{system['content']}\n\n{block}"

    # -- tool calls ------------------------------------------------------------------------

    def _refusal(self, context: ToolCallHookContext) -> str | None:
        """Why the call must not run (denied, or deferred and not loaded in this run), or
        None to let CrewAI run it."""
        if not self._holds_search(getattr(context.agent, "tools", None)):
            return None
        name = self._called.get(context.tool_name)
        if name is None:
            name = context.tool.name if context.tool is not None else context.tool_name
            return self.pool.call_error(name, ()) if self.pool.is_denied(name) else None
        if name == TOOL_SEARCH_NAME:
            return None
        if context.tool is None or self.pool.pool.get(name) is None:
            # not among the tools CrewAI sent in this call: not loaded yet, or denied
            return self.pool.call_error(name, ())
        return None

    def _before_tool(self, context: ToolCallHookContext) -> bool | None:
        """Block a call :meth:`_refusal` refuses (its text comes in :meth:`_after_tool`)."""
        return False if self._refusal(context) is not None else None

    def _after_tool(self, context: ToolCallHookContext) -> str | None:
        """The refusal text in place of CrewAI's "blocked" or "not found" result."""
        return self._refusal(context)


def _set_tools(executor: Any, tools: list[BaseTool]) -> None:
    """Make ``tools`` the executor's tools, as CrewAI adds a tool mid-run: the original tools,
    their structured forms and the native-calling schemas. The schema list is updated in
    place because the model call about to run already holds it."""
    if [id(t) for t in tools] == [id(t) for t in executor.original_tools]:
        return
    sent = executor._openai_tools
    executor.original_tools[:] = tools
    executor.tools = [t.to_structured_tool() for t in tools]
    executor.tools_names = get_tool_names(executor.tools)
    executor.tools_description = render_text_description_and_args(executor.tools)
    executor._setup_native_tools()
    sent[:] = executor._openai_tools
    executor._openai_tools = sent
