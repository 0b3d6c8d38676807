"""Codex with its commands on the user's machine: a Session whose Environment is joined through the stock
`codex exec-server --remote` (runtime/executor.py). The model loop and the model key stay on this Runtime;
the app-server is given that executor with `environment/add {environmentId, execServerUrl}` and runs every
root Turn in it (`environments: [{environmentId, cwd: <workspace_directory>}]` on each `turn/start`), under
the sandbox policy the Session's thread was started with, enforced by the exec-server on the user's machine.

`install(driver)` makes a CodexDriver's Sessions executor-aware; a Session without an executor is
unchanged. The app-server itself runs in a private directory of this Runtime's state (never the user's
workspace path, which exists only on their machine).
"""

from __future__ import annotations

from typing import Any, Optional

from .driver import START_TIMEOUT, CodexDriver, CodexSession


class ExecutorSession(CodexSession):
    def __init__(self, driver: CodexDriver, start: dict[str, Any]):
        super().__init__(driver, start)
        self.executor: Optional[dict[str, Any]] = start.get("executor")
        self._added_to: Any = None  # the app-server process the executor was added to
        if self.executor is not None:
            self.cwd = self.root / "work"
            self.cwd.mkdir(exist_ok=True)

    async def _ensure(self, start: dict[str, Any]) -> Any:
        peer = await super()._ensure(start)
        executor = start.get("executor") or self.executor
        if executor is None:
            return peer
        self.executor = executor
        if self._added_to is not peer:
            await peer.request("environment/add", {"environmentId": executor["environment_id"],
                                                   "execServerUrl": executor["url"]}, timeout=START_TIMEOUT)
            self._added_to = peer
        return _InEnvironment(peer, executor["environment_id"], executor["cwd"])


class _InEnvironment:
    """The app-server peer, with every `turn/start` placed in the executor's Environment."""

    def __init__(self, peer: Any, environment_id: str, cwd: str):
        self._peer, self._environment = peer, {"environmentId": environment_id, "cwd": cwd}

    async def request(self, method: str, params: Any = None, timeout: float = 60.0) -> Any:
        if method == "turn/start":
            params = {**params, "environments": [self._environment]}
        return await self._peer.request(method, params, timeout=timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._peer, name)


def install(driver: CodexDriver) -> None:
    driver.session_class = ExecutorSession
