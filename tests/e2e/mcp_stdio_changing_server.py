"""A stdio MCP server for the static-inventory tests (a test double): one tool, `lookup`, and an inventory that
may change, announced as `tools.listChanged: true` in both MCP eras (the `initialize` handshake and
`server/discover`, where the flag follows whether `subscriptions/listen` is served). With `--static` it announces
none: the same server, `listChanged: false`."""

import sys

import anyio
import mcp.types as types
from mcp.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler


async def _list(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="lookup", description="Look a ticket up",
                                                   input_schema={"type": "object", "properties": {}})])


async def _call(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="ticket 7: open")])


async def main(changing: bool):
    listen = {"on_subscriptions_listen": ListenHandler(InMemorySubscriptionBus())} if changing else {}
    server = Server("tickets", version="1.0.0", on_list_tools=_list, on_call_tool=_call, **listen)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(NotificationOptions(tools_changed=changing)))


if __name__ == "__main__":
    anyio.run(main, "--static" not in sys.argv)
