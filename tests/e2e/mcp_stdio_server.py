"""A stdio MCP server for the native e2e tests (a test double: one static tool, `lookup`)."""

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server


async def _list(ctx, params):
    return types.ListToolsResult(tools=[types.Tool(name="lookup", description="Look a ticket up",
                                                   input_schema={"type": "object", "properties": {}})])


async def _call(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text="ticket 7: open")])


async def main():
    server = Server("tickets", version="1.0.0", on_list_tools=_list, on_call_tool=_call)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
