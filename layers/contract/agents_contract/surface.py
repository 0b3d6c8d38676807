"""Resources of the pinned SDK's `client.beta.agents` that this deployment does not build yet.

Each one answers a clear 400 in the official envelope (code `unsupported_resource`) instead of
falling through to a neighbouring route (`POST /v1/agents/environments` is not an Agent update of
the Agent `environments`). The README's "Not yet" list names the same resources; template.yaml
routes the same paths to the API handlers, which answer before routing.
"""

from __future__ import annotations

import re
from typing import Optional

from .errors import InvalidRequest

_SEGMENT = r"[^/]+"
# (path pattern under /v1, what the SDK calls it), most specific first.
NOT_BUILT: tuple[tuple[str, str], ...] = (
    (r"agents/environments/templates(/.*)?", "Environment templates (client.beta.agents.environments.templates)"),
    (rf"agents/sessions/{_SEGMENT}/traces(/.*)?", "Traces (client.beta.agents.sessions.traces)"),
)
_COMPILED = tuple((re.compile(rf"^/v1/{pattern}$"), name) for pattern, name in NOT_BUILT)


def not_built(method: str, path: str) -> Optional[InvalidRequest]:
    """The 400 for a request to a resource that is not built yet, or None."""
    for pattern, name in _COMPILED:
        if pattern.match(path):
            return InvalidRequest(
                f"{name} are not supported by this deployment yet ({method.upper()} {path}).", param=None,
                code="unsupported_resource")
    return None
