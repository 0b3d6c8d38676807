"""Runtime capabilities: the vocabulary, a Runtime's declaration, and what a Turn requires.

"Before dispatch, the selected Runtime must also advertise the operation's capability. An
advertisement alone never enables an operation": dispatch needs both the Harness declaration
(checked at admission) and `covers(declaration, required_capabilities(...))`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional

from .errors import InvalidRequest

if TYPE_CHECKING:  # an annotation only: a Runtime reads this vocabulary without the parser's models (0.2 s)
    from .parser import Snapshot

ALWAYS = (
    "streaming",
    "steering",
    "durable_turns",
    "durable_input_receipts",
    "preparation",
    "execution_controls",
    "tool_observations",
)
PLACEMENT = ("environment_none", "local_environment")
CONDITIONAL = (
    "function_tools",
    "function_result_images",
    "message_images",
    "structured_output",
    "message_items",
    "workspace_structured_output",
    "tool_search",
    "workspace_tool_search",
    "web_search_control",
    "programmatic_tool_calling_disable",
    "mcp_http_tools",
    "mcp_http_required",
    "mcp_http_bearer_auth",
)
VOCABULARY = ALWAYS + PLACEMENT + CONDITIONAL


def parse_declaration(raw: Any, *, where: str = "capabilities") -> frozenset[str]:
    """A complete declaration: every name present and boolean; omitted, null or unknown rejected."""
    if not isinstance(raw, dict):
        raise InvalidRequest(f"Invalid type for '{where}': expected an object.", param=where)
    unknown = sorted(set(raw) - set(VOCABULARY))
    if unknown:
        raise InvalidRequest(f"Unknown parameter: '{where}.{unknown[0]}'.", param=f"{where}.{unknown[0]}")
    for name in VOCABULARY:
        if name not in raw:
            raise InvalidRequest(f"Missing required parameter: '{where}.{name}'.", param=f"{where}.{name}")
        if not isinstance(raw[name], bool):
            raise InvalidRequest(
                f"Invalid type for '{where}.{name}': expected a boolean.", param=f"{where}.{name}"
            )
    return frozenset(name for name in VOCABULARY if raw[name])


def full_declaration(advertised: Iterable[str]) -> dict[str, bool]:
    advertised = set(advertised)
    return {name: name in advertised for name in VOCABULARY}


def _has_images(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "input_image" for p in content)


def required_capabilities(
    snapshot: Snapshot,
    *,
    messages: Optional[list[dict[str, Any]]] = None,
    results: Optional[list[dict[str, Any]]] = None,
) -> frozenset[str]:
    """The capabilities a Turn of this Session needs (plus what its input or results use)."""
    workspace = snapshot.placement == "workspace"
    need = set(ALWAYS)
    need.add("local_environment" if workspace else "environment_none")
    tools = snapshot.tools
    types = {t["type"] for t in tools}
    functions = [t for t in tools if t["type"] == "function"]
    if functions or "automations" in types:  # the automations tool is called as a function
        need.add("function_tools")
    if "tool_search" in types or any(f["defer_loading"] for f in functions):
        need.add("workspace_tool_search" if workspace else "tool_search")
    if snapshot.output_schema is not None:
        need.update({"structured_output", "message_items"})
        if workspace:
            need.add("workspace_structured_output")
    # web_search and programmatic_tool_calling: "The Runtime needs only the execution_controls capability"
    # (always required). The spec wins over the notes' conditional web_search_control and
    # programmatic_tool_calling_disable: they stay in the vocabulary, and no Turn requires them.
    mcp = [t for t in tools if t["type"] == "mcp"]
    if mcp:
        need.add("mcp_http_tools")
    if any(t["required"] for t in mcp):
        need.add("mcp_http_required")
    if any(t.get("credential_id") for t in mcp):
        need.add("mcp_http_bearer_auth")
    for message in messages or []:
        if _has_images(message.get("content")):
            need.add("message_images")
    need.update(result_capabilities(results or []))
    return frozenset(need)


def result_capabilities(results: list[dict[str, Any]]) -> frozenset[str]:
    """What function results (as submitted) need of the Runtime that runs their Turn: "Results with image
    parts need the Runtime's function_result_images capability". Conditional names are "required only by a
    request that uses the operation", so dispatch never asks for it (a Turn does not know whether a result
    will carry an image); results admission checks it against the Runtime that claimed the Turn."""
    return frozenset({"function_result_images"} if any(_has_images(r.get("output")) for r in results) else ())


def covers(advertised: frozenset[str], required: frozenset[str]) -> bool:
    return required <= advertised


def missing(advertised: frozenset[str], required: frozenset[str]) -> list[str]:
    return sorted(required - advertised)


# Each native Harness's capability set, as the reference Runtime advertises it when impersonating.
_BASE = set(ALWAYS) | set(PLACEMENT) | {"function_tools", "message_images", "mcp_http_tools", "web_search_control",
                                        "programmatic_tool_calling_disable", "message_items"}
HARNESS_CAPABILITIES: dict[str, frozenset[str]] = {
    "codex": frozenset(_BASE | {"function_result_images", "structured_output", "workspace_structured_output",
                                "mcp_http_required", "mcp_http_bearer_auth"}),
    "claude_code": frozenset(_BASE | {"function_result_images", "structured_output", "workspace_structured_output",
                                      "tool_search", "workspace_tool_search", "mcp_http_required",
                                      "mcp_http_bearer_auth"}),
    "minimax_code": frozenset(_BASE),
    "scripted": frozenset(VOCABULARY),
}
