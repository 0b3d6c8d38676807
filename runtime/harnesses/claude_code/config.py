"""Claude Code: Claude Agent SDK options.

- "The Claude adapter passes outputFormat to the pinned SDK and allows its native StructuredOutput
  terminal tool, which is internal and never an extra caller function ... the adapter's inventory
  check leaves it and ToolSearch to native."
- "The Claude adapter's MCP server marks eager definitions anthropic/alwaysLoad:true and deferred
  ones false, and sets ENABLE_TOOL_SEARCH=true; the none profile allows only declared callbacks,
  declared MCP tools and ToolSearch."
- web search: "On a workspace placement the native claude_code tool set runs without ask-user,
  scheduling, workflow, background and ListAgents tools; disabled removes WebSearch and WebFetch,
  and live keeps them. environment: none keeps no built-in tools, and live adds only WebSearch".
- "Claude Code starts the server with command and args in the directory of its own process, which
  is the workspace directory".
- "Anonymous Claude requests send a blank Authorization header to suppress native OAuth injection."
- "... and requires static inventories": each declared stdio server runs behind `static_relay.py`, which refuses
  one announcing `tools.listChanged` (`StaticRelay`).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Any, Optional

from ..common import one, output_schema, placement, tools_of

FUNCTIONS_SERVER = "functions"  # the adapter's own MCP server carrying the caller's functions
NATIVE_TO_LEAVE = ("StructuredOutput", "ToolSearch")
WORKSPACE_EXCLUDED = ("AskUserQuestion", "CronCreate", "CronDelete", "CronList", "ScheduleWakeup", "Workflow",
                      "BashOutput", "KillShell", "ListAgents")


RELAY_SOURCE = (pathlib.Path(__file__).parent / "static_relay.py").read_text()


@dataclass(frozen=True)
class StaticRelay:
    """How a declared stdio server starts behind the static-inventory relay: `python`, the interpreter where
    Claude Code runs it; `marks`, the directory (as seen there) where the relay writes a refusal, one file per
    server label (labels are ASCII letters, digits, underscore and hyphen)."""

    python: str
    marks: str

    def entry(self, label: str, command: str, args: list[str]) -> dict[str, Any]:
        return {"type": "stdio", "command": self.python,
                "args": ["-I", "-c", RELAY_SOURCE, label, f"{self.marks}/{label}", "--", command, *args]}


def _functions_server(start: dict[str, Any]) -> Optional[dict[str, Any]]:
    functions = tools_of(start, "function")
    if not functions:
        return None
    return {"type": "sdk", "name": FUNCTIONS_SERVER, "tools": [
        {"name": f["name"], "description": f["description"], "inputSchema": f["parameters"],
         "_meta": {"anthropic/alwaysLoad": not f["defer_loading"]}} for f in functions]}


def _mcp_servers(start: dict[str, Any], credentials: Optional[dict[str, str]],
                 relay: Optional[StaticRelay] = None) -> dict[str, Any]:
    servers: dict[str, Any] = {}
    functions = _functions_server(start)
    if functions is not None:
        servers[FUNCTIONS_SERVER] = functions
    for tool in tools_of(start, "mcp"):
        label, transport = tool["server_label"], tool["transport"]
        if transport["type"] == "stdio":
            # Started in the adapter's own directory (the workspace); admission pinned cwd to it.
            servers[label] = {"type": "stdio", "command": transport["command"], "args": list(transport["args"])}
            if relay is not None:
                servers[label] = relay.entry(label, transport["command"], list(transport["args"]))
        else:
            headers = dict(transport.get("headers") or {})
            if credentials and label in credentials:
                headers["Authorization"] = f"Bearer ${{{credentials[label]}}}"
            else:
                headers["Authorization"] = ""  # suppress native OAuth injection on anonymous requests
            servers[label] = {"type": "http", "url": transport["server_url"], "headers": headers}
    return servers


def _allowed_tools(start: dict[str, Any]) -> list[str]:
    allowed = [f"mcp__{FUNCTIONS_SERVER}__{f['name']}" for f in tools_of(start, "function")]
    for tool in tools_of(start, "mcp"):
        label = tool["server_label"]
        if tool["allowed_tools"] is None:
            allowed.append(f"mcp__{label}")
        else:
            allowed += [f"mcp__{label}__{name}" for name in tool["allowed_tools"]]
    if one(start, "tool_search") is not None:
        allowed.append("ToolSearch")
    return allowed


def _multi_agent(start: dict[str, Any]) -> bool:
    return bool((start["agent"].get("multi_agent") or {}).get("enabled"))


def hidden_tools(start: dict[str, Any], inventories: Optional[dict[str, list[str]]] = None) -> list[str]:
    """What the model must not be offered: "the adapter can hide unselected tools only on HTTP servers", and
    `allowed_tools` only gates permission natively (an unlisted tool is still offered), so the unselected ones
    are disallowed, which hides them. A server whose allowed_tools is [] is disallowed whole (`mcp__LABEL`);
    with a list, its unselected tools need its inventory (`inventories`: server label -> tool names, as the
    connected server listed them)."""
    hidden: list[str] = []
    for tool in tools_of(start, "mcp"):
        label, allowed = tool["server_label"], tool["allowed_tools"]
        if allowed is None or tool["transport"]["type"] != "http":
            continue
        if not allowed:
            hidden.append(f"mcp__{label}")
            continue
        hidden += [f"mcp__{label}__{name}" for name in (inventories or {}).get(label, []) if name not in allowed]
    return hidden


def offered_tools(start: dict[str, Any], inventories: dict[str, list[str]]) -> list[str]:
    """The MCP tools the model may be offered: the Session's functions and each declared server's selected
    tools (every tool of its inventory when allowed_tools is null)."""
    expected = [f"mcp__{FUNCTIONS_SERVER}__{f['name']}" for f in tools_of(start, "function")]
    for tool in tools_of(start, "mcp"):
        label, allowed = tool["server_label"], tool["allowed_tools"]
        names = inventories.get(label, []) if allowed is None else allowed
        expected += [f"mcp__{label}__{name}" for name in names]
    return expected


def options(start: dict[str, Any], credentials: Optional[dict[str, str]] = None,
            hidden: Optional[list[str]] = None, relay: Optional[StaticRelay] = None) -> dict[str, Any]:
    """`hidden`: the declared servers' unselected tools, disallowed on every placement (by default what is known
    before any connection: the servers whose allowed_tools is []); `relay`: how stdio servers start behind the
    static-inventory relay (the session always gives one; without it, the declared command line)."""
    where = placement(start)
    hidden = hidden_tools(start) if hidden is None else hidden
    search = one(start, "web_search")
    out: dict[str, Any] = {"mcpServers": _mcp_servers(start, credentials, relay)}
    schema = output_schema(start)
    if schema is not None:
        out["outputFormat"] = {"type": "json_schema", "schema": schema}
    if one(start, "tool_search") is not None:
        out["env"] = {"ENABLE_TOOL_SEARCH": "true"}
    if where == "none":
        # ToolSearch is native search, not a built-in tool of the environment: the CLI offers it (and
        # defers definitions) only when it is in `tools`.
        builtins: list[str] = ["ToolSearch"] if one(start, "tool_search") is not None else []
        if search is not None and search["mode"] == "live":
            builtins.append("WebSearch")  # a provider-side tool; WebFetch would fetch from the Runtime host
        out["tools"] = builtins
        out["allowedTools"] = [*_allowed_tools(start), *(b for b in builtins if b != "ToolSearch")]
        if hidden:
            out["disallowedTools"] = list(hidden)
    else:
        out["tools"] = {"type": "preset", "preset": "claude_code"}
        disallowed = list(WORKSPACE_EXCLUDED)
        if search is not None and search["mode"] == "disabled":
            disallowed += ["WebSearch", "WebFetch"]
        if not _multi_agent(start):
            disallowed += ["Agent", "Task"]  # the subagent tool (`Task` in older names): multi_agent is off
        out["disallowedTools"] = [*disallowed, *hidden]
        out["cwd"] = start["environment"].get("workspace_directory")
    return out


def native_inventory_check(expected: list[str], reported: list[str]) -> list[str]:
    """Tools the native session reported that were not declared; StructuredOutput and ToolSearch
    are left to native ("the adapter's inventory check leaves it and ToolSearch to native")."""
    return sorted(t for t in reported if t not in expected and t not in NATIVE_TO_LEAVE)
