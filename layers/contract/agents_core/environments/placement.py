"""Who may run what, where: placement is a security boundary.

A Runtime connection is one of three kinds, decided once at `$connect` and stored with it:
- `shared`: an operator's `rt-` token; serves `environment: none` only, for every tenant;
- `enrolled`: a tenant's machine connected with an Environment enrollment; serves exactly that
  self_hosted Environment;
- `hosted`: an operator Runtime that runs each openai_hosted Environment in its own sandbox.
Core never sends a workspace Turn to a shared Runtime. Dispatch asks `may_serve`, and each kind
declares its Harnesses in its own GSI pool, so a query for one placement cannot see another's Runtimes.
"""

from __future__ import annotations

from typing import Any, Optional

from .. import keys

KINDS = ("shared", "enrolled", "hosted")
_SERVES = {"shared": "none", "enrolled": "self_hosted", "hosted": "openai_hosted"}
WORKSPACE = ("self_hosted", "openai_hosted")


def environment_id(session_id: str) -> str:
    """A workspace Session's own Environment."""
    return "env_" + session_id.removeprefix("sess_")


def session_environment_id(session_id: str, environment: dict[str, Any]) -> Optional[str]:
    """The Environment a Session's Turns run in: the one it names (`openai_hosted.environment_id`,
    kept in its snapshot as `id`), else its own; None for `environment: none`."""
    if environment.get("type") not in WORKSPACE:
        return None
    return environment.get("id") or environment_id(session_id)


def may_serve(kind: Optional[str], placement: str, *, runtime_env: Optional[str] = None,
              env_id: Optional[str] = None) -> bool:
    """Whether a connection of `kind` may run a Turn of `placement` (an enrolled one: of its own Environment)."""
    if _SERVES.get(kind or "shared") != placement:
        return False
    return placement != "self_hosted" or (runtime_env is not None and runtime_env == env_id)


def pool_for(placement: str, harness: str, env_id: Optional[str]) -> str:
    """The pool that serves a Turn of `placement`."""
    kind = {v: k for k, v in _SERVES.items()}[placement]
    return keys.runtime_pool(kind, harness, env_id)


def queue(placement: str, harness: str, env_id: Optional[str]) -> str:
    """The GSI1 partition a queued Turn waits in, read when a Runtime of its pool says hello."""
    return keys.turn_queue(pool_for(placement, harness, env_id))
