"""The adapter's own MCP server, `functions`: the Session's functions, served to Claude Code in process.

Built on `mcp.server.Server` directly, not the SDK's `@tool` helper, which can set neither
`anthropic/alwaysLoad` nor see the native tool-use id. "The Claude adapter's MCP server marks eager
definitions anthropic/alwaysLoad:true and deferred ones false". A call's params carry
`_meta["claudecode/toolUseId"]`, the native tool-use id, which becomes the call_id; the handler awaits the
caller's admitted result (for minutes if need be) and returns it unchanged.
"""

from __future__ import annotations

import base64
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


def result_content(result: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    """The caller's result as MCP content, unchanged: (content, is_error). A string is one text part;
    inline PNG/JPEG image parts of a successful result become image content."""
    success = bool(result.get("success", True))
    output = result.get("output")
    if output is None:
        error = result.get("error")
        return [{"type": "text", "text": error if isinstance(error, str) else ""}], not success
    if isinstance(output, str):
        return [{"type": "text", "text": output}], not success
    content: list[dict[str, Any]] = []
    for part in output:
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            content.append({"type": "text", "text": part.get("text", "")})
        elif kind == "input_image" and success:
            url = part.get("image_url") or ""
            for mime in ("image/png", "image/jpeg"):
                prefix = f"data:{mime};base64,"
                if url.startswith(prefix):
                    data = url[len(prefix):]
                    base64.b64decode(data, validate=True)
                    content.append({"type": "image", "data": data, "mimeType": mime})
    return content, not success
