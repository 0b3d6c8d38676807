"""The model-provider bridge of hosted Environments: a sandbox calls the provider, never reads the key.

A Harness in a sandbox is configured with a loopback base URL and a placeholder key. The bridge (in the
Runtime's own process, outside every sandbox) receives each HTTP request, drops whatever credential
headers it carries, adds the operator's real one, and relays the request to the real provider, then
the response back unchanged (streaming included). One request per connection (`Connection: close`), so
each request's head passes through the bridge. It listens on a loopback TCP port (sandboxes that share
the host's network) and on a Unix socket (sandboxes with `network.access: disabled`, where a forwarder
inside relays a loopback port to it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
import urllib.parse
from typing import Optional

from .loopserver import LoopServer

log = logging.getLogger("runtime.bridge")

HEAD_LIMIT = 64 * 1024
_DROPPED = {b"authorization", b"x-api-key", b"api-key", b"host", b"connection", b"proxy-connection", b"keep-alive"}


class ProviderBridge(LoopServer):
    thread_name = "provider bridge"

    def __init__(self, upstream: str, header: Optional[tuple[str, str]], socket_path: str):
        """`upstream`: the provider's origin (scheme://host[:port]; paths pass unchanged); `header`: (name, value) to add, or None
        (a provider that takes no key, such as the scripted one)."""
        parsed = urllib.parse.urlsplit(upstream)
        self.scheme = parsed.scheme
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self.netloc = parsed.netloc
        self._header = header
        self.socket_path = socket_path
        self.port_tcp = 0
        super().__init__()
        self._servers: list[asyncio.AbstractServer] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port_tcp}"

    async def _listen(self) -> None:
        tcp = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port_tcp = tcp.sockets[0].getsockname()[1]
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        unix = await asyncio.start_unix_server(self._serve, self.socket_path)
        os.chmod(self.socket_path, 0o666)  # noqa: S103 - every sandbox's uid may call the provider (never read the key)
        self._servers = [tcp, unix]

    def stop(self) -> None:
        async def shutdown() -> None:
            for server in self._servers:
                server.close()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        except Exception:  # noqa: BLE001 - stopping anyway
            log.debug("bridge shutdown incomplete", exc_info=True)
        self.loop.call_soon_threadsafe(self.loop.stop)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_writer = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > HEAD_LIMIT:
                raise ValueError("head too large")
            lines = head[:-4].split(b"\r\n")
            method, target, version = lines[0].split(b" ", 2)
            headers = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _DROPPED]
            headers.append(b"Host: " + self.netloc.encode())
            headers.append(b"Connection: close")
            if self._header is not None:
                headers.append(f"{self._header[0]}: {self._header[1]}".encode())
            request = b" ".join([method, target, version]) + b"\r\n" + b"\r\n".join(headers) + b"\r\n\r\n"
            context = ssl.create_default_context() if self.scheme == "https" else None
            upstream_reader, upstream_writer = await asyncio.open_connection(
                self.host, self.port, ssl=context, server_hostname=self.host if context else None)
            upstream_writer.write(request)
            await upstream_writer.drain()
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            log.debug("bridge request failed: %s", type(exc).__name__)
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except OSError:
            pass
