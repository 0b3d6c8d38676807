"""A server that runs on an asyncio loop of its own, in a daemon thread (the provider bridge, the egress
proxy, the exec-server listener): `start()` returns once `_listen()` has bound its sockets; `pipe` relays one
direction of a connection."""

from __future__ import annotations

import asyncio
import os
import pathlib
import threading
from collections.abc import Awaitable, Callable
from typing import Optional


class LoopServer:
    thread_name = "loop-server"

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()

    def start(self):  # noqa: ANN201 - returns the subclass
        threading.Thread(target=self._run, name=self.thread_name, daemon=True).start()
        if not self._ready.wait(10):
            raise RuntimeError(f"the {self.thread_name} did not start")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._listen())
        self._ready.set()
        self.loop.run_forever()

    async def _listen(self) -> None:
        raise NotImplementedError

    def unix_socket(self, path: pathlib.Path, serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter],
                                                              Awaitable[None]],
                    servers: dict[str, asyncio.AbstractServer], owner: Optional[int] = None) -> str:
        """A Unix socket served on this loop (created once, kept in `servers`): owned by `owner` with mode
        0600 (an Environment's uid), or 0666 when the Runtime runs Environments as itself; either way it is
        reached only where it is bound (one namespace)."""
        key = str(path)
        if key in servers and path.exists():
            return key

        async def listen() -> None:
            if path.exists():
                path.unlink()
            server = await asyncio.start_unix_server(serve, key)
            if owner is not None:
                os.chown(key, owner, owner)
                os.chmod(key, 0o600)
            else:
                os.chmod(key, 0o666)  # noqa: S103 - reached only where it is bound (one namespace)
            servers[key] = server

        asyncio.run_coroutine_threadsafe(listen(), self.loop).result(10)
        return key


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy `reader` to `writer` until EOF, then half-close `writer` (the other direction may go on)."""
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
