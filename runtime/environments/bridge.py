"""The model-provider bridge: a Harness in a network namespace calls the provider, never reads the key.

A Harness in a sandbox (a hosted Environment's, or a shared Runtime's network namespace) is configured with
a loopback base URL and a placeholder key that is a token of its own. The bridge (in the Runtime's own
process, outside every namespace) listens on one Unix socket per namespace, bound into that namespace
only, and for each request:
- checks the token against the one that socket was issued (another namespace's token is refused, so a
  call is attributed to its Environment, and logged with its id, never a key);
- forwards only the provider's inference routes the Harnesses use (`Route`: method and path; anything
  else, such as `POST /v1/files`, is a 403): the bridge is not an open relay of the operator's key;
- drops whatever credential headers the request carries and adds the operator's real one, then relays
  the request to the real provider and the response back unchanged (streaming included).
One request per connection (`Connection: close`), so each request's head passes through the bridge.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import pathlib
import secrets
import ssl
import urllib.parse
from dataclasses import dataclass
from typing import Optional

from .loopserver import LoopServer, pipe

log = logging.getLogger("runtime.bridge")

HEAD_LIMIT = 64 * 1024
_DROPPED = {b"authorization", b"x-api-key", b"api-key", b"host", b"connection", b"proxy-connection", b"keep-alive",
            b"proxy-authorization"}


@dataclass(frozen=True)
class Route:
    """One inference route: `method` and exact `path` (no query) as the Harness sends it, relayed to
    `upstream` (scheme://host[:port]) with `header` added (None: a provider that takes no key)."""

    harness: str
    method: str
    path: str
    upstream: str
    header: Optional[tuple[str, str]] = None


def inference_routes(harness: str, base_url: str, header: Optional[tuple[str, str]]) -> list[Route]:
    """The routes a Harness needs of its provider, under the provider's base URL.

    Codex (Responses API, `wire_api = "responses"`): `POST {base}/responses` (streamed turns; compaction
    goes through the same route). Claude Code (Messages API): `POST {base}/v1/messages` (`?beta=true`)
    and `POST {base}/v1/messages/count_tokens`."""
    parts = urllib.parse.urlsplit(base_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    base = parts.path.rstrip("/")
    if harness == "codex":
        paths = [("POST", f"{base}/responses")]
    elif harness == "claude_code":
        paths = [("POST", f"{base}/v1/messages"), ("POST", f"{base}/v1/messages/count_tokens")]
    else:
        raise ValueError(f"no provider routes for '{harness}'")
    return [Route(harness, method, path, origin, header) for method, path in paths]


class ProviderBridge(LoopServer):
    thread_name = "provider bridge"

    def __init__(self, routes: list[Route], directory: str):
        self.routes = {(r.method, r.path): r for r in routes}
        self.directory = pathlib.Path(directory)
        self._tokens: dict[str, str] = {}  # identity -> its token
        self._servers: dict[str, asyncio.AbstractServer] = {}
        self.requests = 0
        self.refused = 0
        super().__init__()

    async def _listen(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o711)  # noqa: S103 - a socket is reached by its path where it is bound

    def token(self, identity: str) -> str:
        """The placeholder key of one namespace: what its Harness sends where the key would be."""
        if identity not in self._tokens:
            self._tokens[identity] = "acb_" + secrets.token_urlsafe(24)
        return self._tokens[identity]

    def socket_for(self, identity: str, owner: Optional[int] = None) -> str:
        """One namespace's socket (created once), answering only that namespace's token."""
        self.token(identity)
        return self.unix_socket(self.directory / f"{identity}.sock", lambda r, w: self._serve(r, w, identity),
                                self._servers, owner)

    def stop(self) -> None:
        async def shutdown() -> None:
            for server in self._servers.values():
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

    def _authorized(self, identity: str, headers: list[bytes]) -> bool:
        expected = self._tokens.get(identity)
        if expected is None:
            return False
        for line in headers:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip()
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                value = value[7:].strip()
            elif name != b"x-api-key":
                continue
            if hmac.compare_digest(value, expected.encode()):
                return True
        return False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, identity: str) -> None:
        upstream_writer = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > HEAD_LIMIT:
                raise ValueError("head too large")
            lines = head[:-4].split(b"\r\n")
            method, target, version = lines[0].split(b" ", 2)
            path = urllib.parse.urlsplit(target.decode("latin-1")).path
            route = self.routes.get((method.decode("latin-1").upper(), path))
            if not self._authorized(identity, lines[1:]):
                self.refused += 1
                log.info("bridge refused %s: %s %s (not this namespace's token)", identity, method.decode(), path)
                await _answer(writer, 401, "authentication_error",
                              "This bridge answers only the token its namespace was given.")
                return
            if route is None:
                self.refused += 1
                log.info("bridge refused %s: %s %s (not an inference route)", identity, method.decode(), path)
                await _answer(writer, 403, "permission_error",
                              f"{method.decode()} {path} is not a model inference route this bridge relays.")
                return
            self.requests += 1
            log.info("bridge %s: %s %s (%s)", identity, route.method, path, route.harness)
            parsed = urllib.parse.urlsplit(route.upstream)
            headers = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower() not in _DROPPED]
            headers.append(b"Host: " + parsed.netloc.encode())
            headers.append(b"Connection: close")
            if route.header is not None:
                headers.append(f"{route.header[0]}: {route.header[1]}".encode())
            request = b" ".join([method, target, version]) + b"\r\n" + b"\r\n".join(headers) + b"\r\n\r\n"
            context = ssl.create_default_context() if parsed.scheme == "https" else None
            host = parsed.hostname or "127.0.0.1"
            port = parsed.port or (443 if parsed.scheme == "https" else 80)
            upstream_reader, upstream_writer = await asyncio.open_connection(
                host, port, ssl=context, server_hostname=host if context else None)
            upstream_writer.write(request)
            await upstream_writer.drain()
            await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            log.debug("bridge request failed: %s", type(exc).__name__)
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    w.close()


async def _answer(writer: asyncio.StreamWriter, status: int, kind: str, message: str) -> None:
    import json

    reason = {401: "Unauthorized", 403: "Forbidden"}.get(status, "Error")
    body = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                 "Connection: close\r\n\r\n".encode() + body)
    try:
        await writer.drain()
    except OSError:
        pass

