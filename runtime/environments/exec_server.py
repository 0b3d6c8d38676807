"""An exec-server host (the hub): this Runtime runs the model loop of self_hosted Codex Environments whose commands run
on the user's own machine, through the stock `codex exec-server --remote <remote_url>` (issue 26).

The exec-server registers with Core's registry, which picks an exec-server host and tells it what to expect
(`executor.expect`: the registration, its Environment and the SHA-256 of a one-time token); the
exec-server then opens a WebSocket to this listener (`--exec-server-listen`, reachable as `--exec-server-url`)
with that token. Its frames never travel through API Gateway's WebSocket API (128 KB messages, 32 KB
frames): the listener joins them, frame for frame and unchanged, to the Codex app-server this Runtime
runs for the Environment's Session, which connects to a loopback endpoint here
(`environment/add {environmentId, execServerUrl, authBearerToken}`: the endpoint's secret is a bearer,
never in the URL). Core hears `executor.connected` when an exec-server joins and `executor.disconnected` when it is gone past a grace (it reconnects ~0.7 s after a close).

One exec-server connection serves one app-server connection, once: when either side closes, the other is
closed too, so the exec-server reconnects with a fresh JSON-RPC session for the next app-server (its
`initialize` cannot be repeated on a used connection). A registration's token admits one connection: the
reconnection's handshake is answered 409, which makes the exec-server register again, so Core checks its
key each time (and a restarted Runtime, which expects nothing, is joined the same way).

Limits measured on the pinned exec-server (direct mode): a message from the harness to the exec-server of
about 8.9 KB or more drops its connection (the other direction carried 416 KB), so a large write (an
`apply_patch` of a big file) fails; the app-server's request fails when its connection closes, and the
Turn goes on with that tool error.

Kept as they are on the wire: the `executor.*` Runtime-protocol messages, the listener's `/executor/<registration>`
path, the `executor` entry `bind` adds to a Turn's start for the Codex driver, and the log lines operators and
tests read ("executor listener on ...").
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import secrets
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from agents_contract.protocol import EXECUTOR_CONNECTED, EXECUTOR_DISCONNECTED, EXECUTOR_EXPECT, EXECUTOR_HOST

from .loopserver import LoopServer

log = logging.getLogger("runtime.executor")

GRACE_SECONDS = 5.0  # an exec-server that does not come back within this is reported gone
APP_WAIT_SECONDS = 15.0  # an app-server waits this long for a fresh exec-server connection
REREGISTER_AFTER = 1.1  # X-Amz-Date has 1 s resolution: a registration again comes in a later second


@dataclass
class _Expected:
    registration_id: str
    environment_id: str
    token_sha256: str


@dataclass
class _Link:
    """One Environment's exec-server connection and the app-server connection joined to it."""
    registration_id: str
    exec_ws: Any = None
    used: bool = False  # the current exec-server connection already served an app-server
    app_ws: Any = None
    reported: bool = False  # Core heard executor.connected (and not yet executor.disconnected)
    fresh: asyncio.Event = field(default_factory=asyncio.Event)
    grace: Optional[asyncio.TimerHandle] = None


class ExecServerHub(LoopServer):
    thread_name = "exec-server listener"

    def __init__(self, listen: str, public_url: Optional[str], send: Callable[[dict[str, Any]], None],
                 grace_seconds: float = GRACE_SECONDS):
        host, _, port = listen.rpartition(":")
        self.host, self.port = host or "127.0.0.1", int(port or 0)
        self.public_url = public_url
        self.send = send
        self.grace_seconds = grace_seconds
        self.app_secret = secrets.token_urlsafe(24)  # the app-server's endpoint is this Runtime's own
        self.expected: dict[str, _Expected] = {}
        self.spent: dict[str, float] = {}  # registration -> when its token was used (its reconnection's 409)
        self.links: dict[str, _Link] = {}  # environment id -> link
        super().__init__()
        self._server: Any = None

    # -- lifecycle (the listener runs on its own loop and thread) ------------------------------------
    async def _listen(self) -> None:
        from websockets.asyncio.server import serve

        self._server = await serve(self._handle, self.host, self.port, process_request=self._admit, max_size=None,
                                   ping_interval=20, compression=None)
        self.port = self._server.sockets[0].getsockname()[1]
        if not self.public_url:
            self.public_url = f"ws://{self.host}:{self.port}/executor"
        log.info("executor listener on %s:%s (announced as %s)", self.host, self.port, self.public_url)

    def stop(self) -> None:
        if self._server is not None:
            self.loop.call_soon_threadsafe(self._server.close)

    # -- Core's side ----------------------------------------------------------------------------------
    def announcement(self) -> dict[str, Any]:
        return {"action": EXECUTOR_HOST, "url": self.public_url}

    def connected_to_core(self) -> None:
        """A new Core connection: registrations made for the previous one are void there, so forget them and
        close the exec-servers' connections (their next handshake is a 409: they register again)."""
        def reset() -> None:
            self.expected.clear()
            for link in list(self.links.values()):
                link.reported = False
                for ws in (link.exec_ws, link.app_ws):
                    if ws is not None:
                        asyncio.ensure_future(ws.close(1012, "executor host reconnected"))
            self.links.clear()
        self.loop.call_soon_threadsafe(reset)

    def on_message(self, message: dict[str, Any]) -> None:
        if message.get("type") != EXECUTOR_EXPECT:
            return
        expected = _Expected(str(message.get("registration_id")), str(message.get("environment_id")),
                             str(message.get("token_sha256")))
        self.loop.call_soon_threadsafe(self.expected.__setitem__, expected.registration_id, expected)

    def bind(self, message: dict[str, Any]) -> Optional[dict[str, Any]]:
        """A self_hosted Turn of an Environment whose exec-server is joined here: the Codex driver adds it
        (`environment/add`) and runs every command there, in the Session's workspace_directory."""
        environment = message.get("environment") or {}
        if environment.get("type") != "self_hosted" or message.get("harness") != "codex":
            return None
        env_id = environment.get("id") or "env_" + str(message.get("session_id", "")).removeprefix("sess_")
        if env_id not in self.links:
            return None
        for tool in (message.get("agent") or {}).get("tools") or []:
            if tool.get("type") == "mcp" and (tool.get("transport") or {}).get("type") == "stdio":
                from .workspace import WorkspaceError  # the Turn fails saying so

                raise WorkspaceError(f"The stdio MCP server '{tool.get('server_label')}' runs on the Environment's "
                                     "machine, which an exec-server does not start servers on: connect this "
                                     "Environment with its enrollment's Runtime command instead.")
        # The endpoint's secret travels as the app-server's bearer (`authBearerToken`), never in the URL,
        # which the app-server may print in an error that reaches a log or a Turn's error.
        url = f"ws://127.0.0.1:{self.port}/app/{env_id}"
        return {**message, "executor": {"environment_id": env_id, "url": url, "token": self.app_secret,
                                        "cwd": environment.get("workspace_directory") or "/workspace"}}

    def _tell(self, message: dict[str, Any]) -> None:
        try:
            self.send(message)
        except Exception:  # noqa: BLE001 - Core is reconnecting: connected_to_core resets everything
            log.warning("could not tell Core %s", message.get("action"))

    # -- the listener ----------------------------------------------------------------------------------
    async def _admit(self, connection: Any, request: Any) -> Any:
        parts = urllib.parse.urlsplit(request.path)
        query = urllib.parse.parse_qs(parts.query)
        segments = parts.path.strip("/").split("/")
        if len(segments) == 2 and segments[0] == "app":
            peer = connection.remote_address[0] if connection.remote_address else ""
            bearer = request.headers.get("Authorization") or ""
            if not _loopback(peer) or not hmac.compare_digest(bearer, f"Bearer {self.app_secret}"):
                return connection.respond(403, "Forbidden\n")
            return None
        if len(segments) >= 2 and segments[-2] == "executor":
            expected = self.expected.get(segments[-1])
            if expected is None:  # not (or no longer) expected here: the exec-server registers again
                # ... in a later second than its last registration: the same request signed in the same
                # second is byte for byte the same signature, which Core's replay guard refuses.
                used = self.spent.pop(segments[-1], None)
                if used is not None:
                    await asyncio.sleep(max(0.0, used + REREGISTER_AFTER - self.loop.time()))
                return connection.respond(409, "Register again\n")
            token = query.get("token", [""])[0]
            if not hmac.compare_digest(hashlib.sha256(token.encode()).hexdigest(), expected.token_sha256):
                return connection.respond(403, "Forbidden\n")
            return None
        return connection.respond(404, "Not Found\n")

    async def _handle(self, ws: Any) -> None:
        segments = urllib.parse.urlsplit(ws.request.path).path.strip("/").split("/")
        if segments[0] == "app":
            await self._app(ws, segments[1])
        else:
            await self._exec(ws, self.expected[segments[-1]])

    async def _exec(self, ws: Any, expected: _Expected) -> None:
        # The token serves this connection only: a reconnection registers again (a 409 here), so the registry
        # checks the key every time (a replaced or revoked key ends the exec-server).
        self.expected.pop(expected.registration_id, None)
        if len(self.spent) > 10_000:
            self.spent.clear()
        self.spent[expected.registration_id] = self.loop.time()
        link = self.links.get(expected.environment_id)
        if link is None:
            link = self.links[expected.environment_id] = _Link(expected.registration_id)
        if link.registration_id != expected.registration_id:
            link.registration_id, link.reported = expected.registration_id, False  # Core hears the new one
        if link.exec_ws is not None:
            await link.exec_ws.close(1000, "replaced")
        link.exec_ws, link.used = ws, False
        if link.grace is not None:
            link.grace.cancel()
            link.grace = None
        link.fresh.set()
        if not link.reported:
            link.reported = True
            self._tell({"action": EXECUTOR_CONNECTED, "registration_id": expected.registration_id})
            log.info("exec-server joined for %s", expected.environment_id)
        await ws.wait_closed()
        if link.exec_ws is ws:
            link.exec_ws = None
            link.fresh.clear()
            if link.app_ws is not None:
                await link.app_ws.close(1011, "the exec-server connection closed")
            link.grace = self.loop.call_later(self.grace_seconds, self._gone, expected.environment_id, link)

    def _gone(self, env_id: str, link: _Link) -> None:
        if link.exec_ws is None and self.links.get(env_id) is link:
            del self.links[env_id]  # its Turns are no longer bound here
        if link.exec_ws is None and link.reported and self.links.get(env_id) in (link, None):
            link.reported = False
            self._tell({"action": EXECUTOR_DISCONNECTED, "registration_id": link.registration_id})
            log.info("exec-server gone for %s", env_id)

    async def _app(self, ws: Any, env_id: str) -> None:
        deadline = self.loop.time() + APP_WAIT_SECONDS
        link = self.links.get(env_id)
        while link is None and self.loop.time() < deadline:  # re-registering (after this host's reconnect)
            await asyncio.sleep(0.1)
            link = self.links.get(env_id)
        try:
            if link is None:
                raise TimeoutError
            await asyncio.wait_for(_fresh(link), max(0.1, deadline - self.loop.time()))
        except TimeoutError:
            await ws.close(1011, "the exec-server is not connected")
            return
        exec_ws, link.used, link.app_ws = link.exec_ws, True, ws
        link.fresh.clear()
        try:
            await _splice(ws, exec_ws)
        finally:
            if link.app_ws is ws:
                link.app_ws = None
            await ws.close()
            await exec_ws.close(1000, "the app-server left")  # a fresh session for the next app-server


async def _fresh(link: _Link) -> None:
    while link.exec_ws is None or link.used:
        link.fresh.clear()
        await link.fresh.wait()


async def _splice(a: Any, b: Any) -> None:
    """Frames both ways, unchanged, until either side closes (logged: counts and the largest, never content)."""
    stats = {"to_exec": [0, 0], "from_exec": [0, 0]}

    async def pump(source: Any, sink: Any, name: str) -> None:
        async for frame in source:
            await sink.send(frame)
            stats[name][0] += 1
            stats[name][1] = max(stats[name][1], len(frame))

    tasks = [asyncio.ensure_future(pump(a, b, "to_exec")), asyncio.ensure_future(pump(b, a, "from_exec"))]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        log.info("executor connection joined %d frames to the exec-server (largest %d bytes) and %d from it "
                 "(largest %d bytes)", *stats["to_exec"], *stats["from_exec"])


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
