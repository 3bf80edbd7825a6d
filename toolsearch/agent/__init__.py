"""The agent-loop layer: tool-search mode, subagents, conversation state, request assembly."""
