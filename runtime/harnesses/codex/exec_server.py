"""Codex with its commands on the user's machine: a Session whose Environment is joined through the stock
`codex exec-server --remote` (runtime/environments/exec_server.py). The model loop and the model key stay on this
Runtime; the app-server is given that exec-server with `environment/add {environmentId, execServerUrl}` and runs every
root Turn in it (`environments: [{environmentId, cwd: <workspace_directory>}]` on each `turn/start`), under
the sandbox policy the Session's thread was started with, enforced by the exec-server on the user's machine.

`install(driver)` makes a CodexDriver's Sessions exec-server-aware; a Session without one (no `executor` in its
start, which the hub's `bind` adds) is unchanged. The app-server itself runs in a private directory of this Runtime's state (never the user's
workspace path, which exists only on their machine).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Optional

from .driver import CodexDriver
from .rpc import RpcError
from .session import START_TIMEOUT, CodexSession

log = logging.getLogger("runtime.codex.executor")

# After its exec-server connection closed, the app-server tries to resume the old exec-server session (for up
# to 25 s, every 100 ms); a command sent meanwhile waits for that and fails if the resume is refused (a new
# exec-server process does not know the session). Before a Turn, the driver waits for the app-server's view
# of the exec-server to settle and, once the resume has failed, has it connect afresh.
SETTLE_SECONDS = 40.0


class ExecServerSession(CodexSession):
    def __init__(self, driver: CodexDriver, start: dict[str, Any]):
        super().__init__(driver, start)
        self.exec_server: Optional[dict[str, Any]] = start.get("executor")
        self._added_to: Any = None  # the app-server process the exec-server was added to
        if self.exec_server is not None:
            self.cwd = self.root / "work"
            self.cwd.mkdir(exist_ok=True)

    async def _ensure(self, start: dict[str, Any]) -> Any:
        peer = await super()._ensure(start)
        joined = start.get("executor") or self.exec_server
        if joined is None:
            return peer
        self.exec_server = joined
        if self._added_to is not peer:
            await peer.request("environment/add", {"environmentId": joined["environment_id"],
                                                   "execServerUrl": joined["url"],
                                                   "authBearerToken": joined["token"]}, timeout=START_TIMEOUT)
            self._added_to = peer
        else:
            await settle(peer, joined["environment_id"])
        return _InEnvironment(peer, joined["environment_id"], joined["cwd"])


async def settle(peer: Any, environment_id: str, bound: float = SETTLE_SECONDS) -> str:
    """Wait until the app-server's connection to the exec-server is ready: `environment/status` never starts or
    recovers a connection; while it says `recovering` (resuming the previous exec-server session) wait; once
    that failed (`disconnected` with its reason), `environment/info` is a use of the Environment, which makes
    the app-server connect afresh (a new exec-server session). Bounded: past it the Turn goes on, and a
    command that cannot reach the machine fails visibly. Returns the last status seen."""
    deadline, status = time.monotonic() + bound, "unknown"
    while time.monotonic() < deadline:
        try:
            answer = await peer.request("environment/status", {"environmentId": environment_id}, timeout=10)
        except (RpcError, TimeoutError) as exc:
            log.info("environment/status for %s: %s", environment_id, exc)
            return status  # an app-server without the method: the command itself reconnects
        status, error = (answer or {}).get("status", "unknown"), (answer or {}).get("error") or ""
        if status in ("ready", "unknown"):
            return status
        if status == "disconnected" and "recovering" not in error:
            log.info("executor of %s disconnected (%s): connecting afresh", environment_id, error[:200])
            try:
                await peer.request("environment/info", {"environmentId": environment_id},
                                   timeout=max(1.0, deadline - time.monotonic()))
                return "ready"
            except (RpcError, TimeoutError) as exc:
                log.info("environment/info for %s: %s", environment_id, exc)
        await asyncio.sleep(0.2)
    return status


class _InEnvironment:
    """The app-server peer, with every `turn/start` placed in the exec-server's Environment."""

    def __init__(self, peer: Any, environment_id: str, cwd: str):
        self._peer, self._environment = peer, {"environmentId": environment_id, "cwd": cwd}

    async def request(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        if method == "turn/start":
            params = {**params, "environments": [self._environment]}
        return await self._peer.request(method, params, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._peer, name)


def install(driver: CodexDriver) -> None:
    driver.session_class = ExecServerSession
