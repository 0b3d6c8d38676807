"""The Agents API execution contract: pure rules shared by every handler (no AWS imports)."""

from .errors import AgentsError

__all__ = ["AgentsError"]
