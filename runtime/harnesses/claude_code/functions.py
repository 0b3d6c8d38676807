"""The adapter's own MCP server, `functions`: the Session's functions, served to Claude Code in process.

Built on `mcp.server.Server` directly, not the SDK's `@tool` helper, which can set neither
`anthropic/alwaysLoad` nor see the native tool-use id. "The Claude adapter's MCP server marks eager
definitions anthropic/alwaysLoad:true and deferred ones false". A call's params carry
`_meta["claudecode/toolUseId"]`, the native tool-use id, which becomes the call_id; the handler awaits the
caller's admitted result (for minutes if need be) and returns it unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Optional

import mcp.types as types
from mcp.server import Server

TOOL_USE_ID = "claudecode/toolUseId"
ALWAYS_LOAD = "anthropic/alwaysLoad"

# (native tool-use id, function name, arguments) -> the admitted result (the Runtime protocol's shape)
Handler = Callable[[Optional[str], str, dict[str, Any]], Awaitable[dict[str, Any]]]


def definitions(functions: list[dict[str, Any]]) -> list[types.Tool]:
    return [types.Tool(name=f["name"], description=f.get("description") or "", input_schema=f["parameters"],
                       _meta={ALWAYS_LOAD: not f.get("defer_loading")}) for f in functions]


class FunctionsServer:
    def __init__(self, functions: list[dict[str, Any]], handler: Handler, name: str = "functions"):
        self.tools = definitions(functions)
        self.handler = handler
        self.server = Server(name, version="1.0.0", on_list_tools=self._list, on_call_tool=self._call)

    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools)

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        from .driver import result_content

        meta = params.meta if isinstance(params.meta, dict) else (params.meta.model_dump(by_alias=True)
                                                                    if params.meta is not None else {})
        result = await self.handler(meta.get(TOOL_USE_ID), params.name, dict(params.arguments or {}))
        content, is_error = result_content(result)
        parts: list[Any] = []
        for part in content:
            if part["type"] == "image":
                parts.append(types.ImageContent(type="image", data=part["data"], mime_type=part["mimeType"]))
            else:
                parts.append(types.TextContent(type="text", text=part["text"]))
        return types.CallToolResult(content=parts, is_error=is_error)
