"""MiniMax Code.

- web search "disabled only, through the native features.webSearch=false because native search
  needs a MiniMax account credential. On a workspace placement the native tools run, and disabled
  also removes web_fetch while an omitted control keeps it. environment: none has no built-in tools".
- "MiniMax Code serves public functions as the MCP server functions".
"""

from __future__ import annotations

from typing import Any

from ..common import one, placement, tools_of

FUNCTIONS_SERVER = "functions"


def config(start: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    search = one(start, "web_search")
    where = placement(start)
    if search is not None and search["mode"] == "disabled":
        out["features"] = {"webSearch": False}
        if where == "workspace":
            out["disabledTools"] = ["web_fetch"]
    if where == "none":
        out["builtinTools"] = []
    servers: dict[str, Any] = {}
    functions = tools_of(start, "function")
    if functions:
        servers[FUNCTIONS_SERVER] = {"type": "core-functions", "tools": [
            {"name": f["name"], "description": f["description"], "inputSchema": f["parameters"]} for f in functions]}
    for tool in tools_of(start, "mcp"):
        transport = tool["transport"]
        servers[tool["server_label"]] = {"type": "http", "url": transport["server_url"],
                                         "headers": dict(transport.get("headers") or {})}
    if servers:
        out["mcpServers"] = servers
    return out
