"""A small asyncio JSON-RPC peer for `codex app-server`: one JSON object per line on stdin/stdout,
without a `"jsonrpc"` member.

The reader never waits on a handler: notifications and server requests (`item/tool/call`) are handed
to callbacks that only record or schedule work, so a call pending for minutes blocks nothing. (The
official Codex Python SDK answers server requests on its only reader thread, and has no dynamicTools.)
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any, Optional

log = logging.getLogger("runtime.codex")

LINE_LIMIT = 64 * 1024 * 1024  # a single notification can carry a whole turn's items


class RpcError(Exception):
    def __init__(self, method: str, error: Any):
        self.method = method
        self.error = error if isinstance(error, dict) else {"message": str(error)}
        super().__init__(f"{method}: {self.error.get('message', self.error)}")


class ProcessExited(Exception):
    pass


Notification = Callable[[str, dict[str, Any]], None]
ServerRequest = Callable[[Any, str, dict[str, Any]], None]


class JsonRpcPeer:
    def __init__(self, on_notification: Notification, on_request: ServerRequest,
                 on_exit: Optional[Callable[[Optional[int]], None]] = None):
        self.on_notification = on_notification
        self.on_request = on_request
        self.on_exit = on_exit
        self.process: Optional[asyncio.subprocess.Process] = None
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._tasks: list[asyncio.Task[Any]] = []
        self.stderr_tail: list[str] = []

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def spawn(self, argv: list[str], env: dict[str, str], cwd: str) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=env, cwd=cwd, limit=LINE_LIMIT, start_new_session=True)
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._drain_stderr())]

    async def request(self, method: str, params: Any, timeout: float = 60.0) -> Any:
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        await self._write({"id": request_id, "method": method, "params": params})
        try:
            return await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: Optional[dict[str, Any]] = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        await self._write(message)

    async def respond(self, request_id: Any, result: Any) -> None:
        await self._write({"id": request_id, "result": result})

    async def respond_error(self, request_id: Any, code: int, message: str) -> None:
        await self._write({"id": request_id, "error": {"code": code, "message": message}})

    async def _write(self, message: dict[str, Any]) -> None:
        if not self.alive:
            raise ProcessExited("codex app-server is not running")
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        await self.process.stdin.drain()

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        while True:
            line = await stdout.readline()
            if not line:
                break
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("codex app-server wrote a line that is not JSON (%d bytes)", len(line))
                continue
            if not isinstance(message, dict):
                continue
            method = message.get("method")
            if method is None and "id" in message:
                future = self._pending.get(message["id"])
                if future is not None and not future.done():
                    if "error" in message:
                        future.set_exception(RpcError(str(message.get("id")), message["error"]))
                    else:
                        future.set_result(message.get("result"))
            elif method is not None and "id" in message:
                self._guard(self.on_request, message["id"], method, message.get("params") or {})
            elif method is not None:
                self._guard(self.on_notification, method, message.get("params") or {})
        code = await self.process.wait()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ProcessExited(f"codex app-server exited with {code}"))
        if self.on_exit is not None:
            self.on_exit(code)

    @staticmethod
    def _guard(handler: Callable[..., None], *args: Any) -> None:
        try:
            handler(*args)
        except Exception:  # a handler bug must not stop the reader (every Turn would hang)
            log.exception("codex message handler failed for %s", args[-2] if len(args) > 1 else args)

    async def _drain_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while True:
            line = await self.process.stderr.readline()
            if not line:
                return
            text = line.decode(errors="replace").rstrip()
            self.stderr_tail = [*self.stderr_tail[-19:], text]
            log.debug("codex: %s", text)

    async def close(self, grace: float = 3.0) -> None:
        if self.process is None:
            return
        if self.process.returncode is None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.terminate()
            try:
                await asyncio.wait_for(self.process.wait(), grace)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        for task in self._tasks:
            task.cancel()
