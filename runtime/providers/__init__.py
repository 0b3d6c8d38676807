"""The embedded scripted model provider: a loopback HTTP server that plays the model from the script
language of `script.py`, in the wire dialect of each native Harness's provider.

- `responses.py`: the OpenAI Responses API (`POST /v1/responses`, SSE), which Codex speaks.
- `anthropic.py`: the Anthropic Messages API (`POST /v1/messages?beta=true`, SSE), which Claude Code speaks.

Every request is logged as one JSON line (`log_path`) and kept in memory (`requests`), with its headers
(lower-case names; credentials redacted), so tests can assert what the native Harness actually sent and tell
a child agent's requests apart (Codex: `x-openai-subagent`, `x-codex-parent-thread-id`; Claude Code:
`x-claude-code-agent-id`). Nothing in the product depends on this provider: with a
real provider key the same Runtime runs real models.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

log = logging.getLogger("runtime.provider")

# A dialect answers one request: (handler, parsed body) -> None, writing the whole reply.
Dialect = Callable[["_Handler", dict[str, Any]], None]


class ScriptedProvider:
    def __init__(self, log_path: Optional[str] = None, host: str = "127.0.0.1", port: int = 0):
        from . import anthropic, responses

        self.dialects: dict[str, Dialect] = {"/v1/responses": responses.answer, "/v1/messages": anthropic.answer}
        self.log_path = log_path
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._server.daemon_threads = True
        self._server.provider = self  # type: ignore[attr-defined]
        self._thread: Optional[threading.Thread] = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ScriptedProvider:
        self._thread = threading.Thread(target=self._server.serve_forever, name="scripted-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(self, path: str, body: Any, headers: Optional[dict[str, str]] = None) -> None:
        entry = {"at": round(time.time(), 3), "path": path, "headers": headers or {}, "body": body}
        with self._lock:
            self.requests.append(entry)
            if self.log_path:
                with open(self.log_path, "a") as fh:
                    fh.write(json.dumps(entry) + "\n")


SECRET_HEADERS = ("authorization", "x-api-key", "proxy-authorization", "cookie")


def request_headers(items: Any) -> dict[str, str]:
    """A request's headers with lower-case names; a credential's value is never logged."""
    return {name.lower(): "[redacted]" if name.lower() in SECRET_HEADERS else value for name, value in items}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        log.debug("%s " + format, self.address_string(), *args)

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        provider: ScriptedProvider = self.server.provider  # type: ignore[attr-defined]
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self.error(400, "The request body is not JSON.")
            return
        provider.record(self.path, body, request_headers(self.headers.items()))
        dialect = provider.dialects.get(path)
        if dialect is None:
            self.error(404, f"The scripted provider does not serve {path}.")
            return
        try:
            dialect(self, body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the Harness went away (interrupt): nothing to answer

    def error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        data = json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, name: str, data: dict[str, Any]) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()
