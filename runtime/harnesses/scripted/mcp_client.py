"""The scripted harness as a real MCP client: `mcp LABEL TOOL {json}` calls the tool of the Session's declared
HTTP server LABEL over streamable HTTP (the `mcp` package), with the Vault bearer of the Turn's `turn.start`
when the server has one. The bearer is an HTTP header of this one call, never logged. On an operator's
Runtime the connection leaves through the egress proxy (`start["egress"]`), so the tenant's server_url
reaches only what the egress policy allows, redirects included."""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from typing import Any, Optional

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
    why = refusal(start, tool["transport"]["server_url"])
    if why is not None:  # the proxy would refuse it too; say why rather than an HTTP error
        raise McpCallError(f"MCP server '{label}' cannot be reached: the egress policy refuses it ({why}).")
    try:
        return asyncio.run(asyncio.wait_for(_call(tool["transport"]["server_url"], headers, name, arguments,
                                                  proxy_url(start)), CALL_TIMEOUT))
    except TimeoutError:
        raise McpCallError(f"MCP server '{label}' did not answer within {CALL_TIMEOUT:.0f} seconds.") from None
    except Exception as exc:  # noqa: BLE001 - any transport failure is the call's error
        leaf = _leaf(exc)
        raise McpCallError(f"MCP server '{label}' failed: {type(leaf).__name__}: {str(leaf)[:200]}") from None


def proxy_url(start: dict[str, Any]) -> Optional[str]:
    egress = start.get("egress")
    return egress.url if egress is not None else None


def refusal(start: dict[str, Any], url: str) -> Optional[str]:
    """Why the egress policy refuses `url` (resolved now), or None: a required server the policy refuses
    fails the start naming it."""
    egress = start.get("egress")
    if egress is None:
        return None
    from ...environments.egress import EgressRefused

    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        asyncio.run(egress.policy.resolve(parts.hostname or "", port))
    except EgressRefused as exc:
        logging.getLogger("runtime.egress").info("egress refused: runtime -> %s:%s (%s)", parts.hostname, port, exc)
        return str(exc)
    return None


async def _call(url: str, headers: dict[str, str], name: str, arguments: dict[str, Any],
                proxy: Optional[str]) -> dict[str, Any]:
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    # trust_env off: the proxy is the egress proxy (or none on an Environment's own machine), never one the
    # Runtime's environment names
    http = httpx2.AsyncClient(headers=headers, proxy=proxy, trust_env=False,
                              timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT))
    async with http, streamable_http_client(url, http_client=http) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool(name, arguments)
    return result.model_dump(by_alias=True, exclude_none=True, mode="json")
