"""The local stack's pre-bound listening sockets: a connection accepted on them by asyncio (uvicorn)
has TCP_NODELAY, so a keep-alive response is not held back by Nagle's algorithm waiting on the
client's delayed ACK (that cost every SDK call on `make dev` about 40 ms)."""

from __future__ import annotations

import asyncio
import socket

import pytest

from local.server import PortInUse, _bind


def test_bound_socket_says_tcp():
    sock = _bind(0, "AGENTS_CORE_HTTP_PORT")
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


def test_connection_accepted_by_asyncio_has_nodelay():
    sock = _bind(0, "AGENTS_CORE_HTTP_PORT")
    seen: list[int] = []

    async def scenario() -> None:
        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted = writer.get_extra_info("socket")
            seen.append(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(scenario())
    assert seen == [1]


def test_busy_port_names_the_variable():
    held = _bind(0, "AGENTS_CORE_WS_PORT")
    held.listen(1)
    try:
        with pytest.raises(PortInUse, match="AGENTS_CORE_WS_PORT"):
            _bind(held.getsockname()[1], "AGENTS_CORE_WS_PORT")
    finally:
        held.close()
