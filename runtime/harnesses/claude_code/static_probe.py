"""What a declared HTTP MCP server announces to Claude Code: one `mcp` client connection, made the way Claude Code
makes its own (the same URL, the declared headers and bearer, `server/discover` first with the handshake as the
fallback, the same network), to read `capabilities.tools.listChanged`. "Claude ... requires static inventories",
and Claude Code shows nothing of a server's capabilities.

Run as source text (`python -I -c SOURCE`) where Claude Code would run: directly when it shares the Runtime's
network, inside a network namespace of the same identity otherwise (session.py), so the probe reaches only what
Claude Code reaches, through the same egress proxy (`HTTP_PROXY`/`HTTPS_PROXY`, which httpx honours). The URL,
headers and bearer come on stdin, never in argv; the verdict is one JSON line on stdout: `{"list_changed": bool}`
or `{"error": "..."}` (never a header).
"""

import json
import sys

TIMEOUT = 20.0


async def list_changed(spec):
    import anyio
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    with anyio.fail_after(TIMEOUT):
        async with httpx2.AsyncClient(headers=spec["headers"], timeout=TIMEOUT) as http, \
                Client(streamable_http_client(spec["url"], http_client=http)) as client:
            tools = client.server_capabilities.tools
            return bool(tools is not None and tools.list_changed)


def main():
    import anyio

    spec = json.loads(sys.stdin.read())
    try:
        verdict = {"list_changed": anyio.run(list_changed, spec)}
    except BaseException as exc:  # noqa: BLE001 - reported, by type only (a message may quote a header)
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        verdict = {"error": type(exc).__name__}
    sys.stdout.write(json.dumps(verdict) + "\n")


if __name__ == "__main__":
    main()
