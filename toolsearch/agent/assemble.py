"""Request assembly: one function that returns the tools and messages of the next request.

:func:`assemble_request` runs the whole pipeline in the order the rules require:

1. permissions, then subagent scoping (:func:`~toolsearch.agent.pool.resolve_tools`);
2. the mode decision (:func:`~toolsearch.agent.mode.resolve_mode`) on what is left;
3. the discovered set, rebuilt from the history (:mod:`toolsearch.agent.state`);
4. the announcement — a persisted delta or a prepended block (:mod:`toolsearch.agent.announce`);
5. history hygiene (:mod:`toolsearch.agent.hygiene`);
6. the tool selection: on → non-deferred tools, ToolSearch and the discovered deferred tools
   (``defer_loading``), or every deferred tool for a server-side search; off → every tool
   except ToolSearch, inline;
7. the provider payload (:mod:`toolsearch.agent.providers`).

Nothing depends on the search backend: assembly never searches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolsearch.agent.announce import (
    AnnounceStyle,
    Delta,
    block_message,
    compute_delta,
    delta_message,
)
from toolsearch.agent.hygiene import clean_history
from toolsearch.agent.messages import DELTA_KIND, Message, meta_kind, validate_history
from toolsearch.agent.mode import ModeDecision, ModeSettings, resolve_mode
from toolsearch.agent.pool import ResolvedTools, resolve_tools
from toolsearch.agent.providers import ProviderAdapter, RequestParts, SentTool, get_adapter
from toolsearch.agent.state import discovered_tools
from toolsearch.agent.subagents import AgentDefinition
from toolsearch.errors import ConfigError
from toolsearch.permissions import DenyRule
from toolsearch.tokens import TokenCounter
from toolsearch.tool import TOOL_SEARCH_NAME, Tool, is_deferred

__all__ = ["NextRequest", "assemble_request", "select_tools"]


@dataclass(frozen=True, slots=True)
class NextRequest:
    """Everything about the next request.

    ``tools`` and ``messages`` are the neutral selection and the cleaned history as sent;
    ``payload`` is the same in the provider's shape. ``persist`` holds the messages the caller
    must append to its history (the announcement delta) so the next request sees them as
    already announced. ``announcement`` is the announcement text sent this turn, if any.
    """

    provider: str
    tools: tuple[SentTool, ...]
    messages: tuple[Message, ...]
    payload: dict[str, Any]
    decision: ModeDecision
    pool: ResolvedTools
    discovered: frozenset[str]
    persist: tuple[Message, ...] = ()
    announcement: str | None = None
    delta: Delta | None = None
    system: str | None = None
    model: str | None = None

    @property
    def search_enabled(self) -> bool:
        """Whether tool search is on for this request."""
        return self.decision.enabled

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools sent, in order."""
        return [sent.name for sent in self.tools]

    @property
    def loaded(self) -> frozenset[str]:
        """Deferred tools of the pool the model has loaded (discovered and still present)."""
        return frozenset(t.name for t in self.pool.deferred if t.name in self.discovered)

    def to_json(self) -> dict[str, Any]:
        """What ``toolsearch request`` prints: the decision, the payload and the announcement."""
        return {
            "provider": self.provider,
            "tool_search": self.decision.to_json(),
            "tools": self.payload.get("tools", []),
            "announcement": self.announcement,
            "delta": None
            if self.delta is None
            else {"added": list(self.delta.added), "removed": list(self.delta.removed)},
            "discovered": sorted(self.loaded),
            "pool": {
                "tools": len(self.pool.tools),
                "deferred": len(self.pool.deferred),
                "denied": list(self.pool.denied),
                "excluded": list(self.pool.excluded),
                "unknown_allowlist_entries": list(self.pool.unknown),
                "agent": None if self.pool.agent is None else self.pool.agent.name,
            },
        }


def select_tools(
    pool: ResolvedTools, discovered: Iterable[str], *, enabled: bool, server_side: bool
) -> tuple[SentTool, ...]:
    """The tools a request carries (step 6 of the pipeline), non-deferred ones first."""
    if not enabled:
        return tuple(SentTool(t) for t in pool.tools if t.name != TOOL_SEARCH_NAME)
    found = set(discovered)
    plain = [
        SentTool(t)
        for t in pool.tools
        if not is_deferred(t) and not (server_side and t.name == TOOL_SEARCH_NAME)
    ]
    deferred = [
        SentTool(t, defer_loading=True) for t in pool.deferred if server_side or t.name in found
    ]
    return (*plain, *deferred)


def assemble_request(
    tools: Iterable[Tool] | ResolvedTools,
    messages: Sequence[Message] = (),
    *,
    provider: str | ProviderAdapter = "anthropic",
    deny: Iterable[str | DenyRule] = (),
    agent: AgentDefinition | None = None,
    settings: ModeSettings | None = None,
    model: str | None = None,
    pending_servers: Iterable[str] = (),
    counter: TokenCounter | None = None,
    announce: AnnounceStyle = "delta",
    system: str | None = None,
) -> NextRequest:
    """Build the next request from the agent's tools and the conversation so far.

    ``tools`` is the runtime's tool list (ToolSearch is added as a built-in when missing) or an
    already :class:`ResolvedTools` pool (then ``deny`` and ``agent`` must be left empty).
    ``settings`` defaults to :meth:`ModeSettings.load` (config and environment). The history
    is not mutated; append :attr:`NextRequest.persist` to it.
    """
    if announce not in ("delta", "block"):
        raise ConfigError(f"announce must be 'delta' or 'block', got {announce!r}")
    adapter = get_adapter(provider)
    history = validate_history(messages)
    pool = _resolved_pool(tools, list(deny), agent)
    settings = ModeSettings.load() if settings is None else settings
    decision = resolve_mode(
        pool.tools,
        settings=settings,
        model=model,
        pending_servers=tuple(pending_servers),
        counter=counter,
    )
    enabled = decision.enabled
    discovered = discovered_tools(history)
    told = _announced(
        history,
        [t.name for t in pool.deferred],
        enabled=enabled,
        server_side=adapter.server_side,
        announce=announce,
    )
    cleaned = tuple(
        clean_history(
            told.rendered,
            search_enabled=enabled,
            pool_names=pool.names,
            server_side=adapter.server_side,
        )
    )
    sent = select_tools(pool, discovered, enabled=enabled, server_side=adapter.server_side)
    parts = RequestParts(sent, cleaned, enabled, {t.name: t for t in pool.tools}, system)
    return NextRequest(
        provider=adapter.name,
        tools=sent,
        messages=cleaned,
        payload=adapter.render(parts),
        decision=decision,
        pool=pool,
        discovered=discovered,
        persist=told.persist,
        announcement=told.announcement,
        delta=told.delta,
        system=system,
        model=model,
    )


def _resolved_pool(
    tools: Iterable[Tool] | ResolvedTools, deny: list[str | DenyRule], agent: AgentDefinition | None
) -> ResolvedTools:
    """Step 1: the pool after permissions and subagent scoping (a resolved pool as given)."""
    if not isinstance(tools, ResolvedTools):
        return resolve_tools(tools, deny=deny, agent=agent)
    if agent is not None or deny:
        raise ConfigError("deny rules and agent apply to a tool list, not a resolved pool")
    return tools


@dataclass(frozen=True, slots=True)
class _Announcement:
    """Step 4's outcome: the history to render, what to persist, and what was announced."""

    rendered: list[Message]
    persist: tuple[Message, ...] = ()
    announcement: str | None = None
    delta: Delta | None = None


def _announced(
    history: list[Message],
    deferred_names: list[str],
    *,
    enabled: bool,
    server_side: bool,
    announce: AnnounceStyle,
) -> _Announcement:
    """Step 4: announce the deferred tools as a persisted delta or a prepended block; with
    search off, drop earlier announcements (they name tools the model can no longer search
    for); a server-side search needs none."""
    if not enabled:
        return _Announcement([m for m in history if meta_kind(m) != DELTA_KIND])
    if server_side:
        return _Announcement(history)
    if announce == "delta":
        delta = compute_delta(history, deferred_names)
        if delta.is_empty:
            return _Announcement(history, delta=delta)
        persist = (delta_message(delta),)
        return _Announcement([*history, *persist], persist, delta.text(), delta)
    if not deferred_names:
        return _Announcement(history)
    block = block_message(deferred_names)
    return _Announcement([block, *history], announcement=str(block["content"]))
