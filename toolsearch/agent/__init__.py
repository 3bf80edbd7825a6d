"""The agent-loop layer: deferral mode, permissions and subagents, conversation state, request assembly."""
