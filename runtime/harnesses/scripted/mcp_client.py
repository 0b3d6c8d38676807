"""The scripted harness as a real MCP client: `mcp LABEL TOOL {json}` calls the tool of the Session's declared
HTTP server LABEL over streamable HTTP (the `mcp` package), with the Vault bearer of the Turn's `turn.start`
when the server has one. The bearer is an HTTP header of this one call, never logged."""

from __future__ import annotations

import asyncio
from typing import Any

CALL_TIMEOUT = 30.0


class McpCallError(Exception):
    """The call could not be made; the message names the server and never holds a secret."""


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def call(start: dict[str, Any], label: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tool's CallToolResult as JSON (`content`, `structuredContent`, `isError`)."""
    tool = next((t for t in start["agent"]["tools"] if t["type"] == "mcp" and t["server_label"] == label), None)
    if tool is None:
        raise McpCallError(f"No MCP server '{label}' is declared in this Session.")
    if tool["transport"]["type"] != "http":
        raise McpCallError(f"The scripted harness calls HTTP MCP servers only; '{label}' is {tool['transport']['type']}.")
    if tool["allowed_tools"] is not None and name not in tool["allowed_tools"]:
        raise McpCallError(f"The tool '{name}' of MCP server '{label}' is not in its allowed_tools.")
    headers = dict(tool["transport"].get("headers") or {})
    credential = (start.get("mcp_credentials") or {}).get(label)
    if credential is not None:
        headers["Authorization"] = f"Bearer {credential['token']}"
    try:
        return asyncio.run(asyncio.wait_for(_call(tool["transport"]["server_url"], headers, name, arguments),
                                            CALL_TIMEOUT))
    except TimeoutError:
        raise McpCallError(f"MCP server '{label}' did not answer within {CALL_TIMEOUT:.0f} seconds.") from None
    except Exception as exc:  # noqa: BLE001 - any transport failure is the call's error
        leaf = _leaf(exc)
        raise McpCallError(f"MCP server '{label}' failed: {type(leaf).__name__}: {str(leaf)[:200]}") from None


async def _call(url: str, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with create_mcp_http_client(headers=headers) as http, streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool(name, arguments)
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")
