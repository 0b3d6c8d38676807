"""`make dev` serves the dev tenant's self_hosted Environments on this machine, as a user would.

The developer's laptop is their workspace: for each self_hosted Environment of the dev tenant, the
local stack mints an enrollment through the public API (with the dev key, exactly as a user would)
and starts the reference Runtime with it (`python -m runtime --url <remote_url> --workspace DIR`, the
token in the environment, never in argv). DIR is the Session's own workspace_directory when that
directory exists on this machine, else a private directory under `.local/environments/` for
`/workspace`. Other tenants' Environments are never connected automatically.
`AGENTS_CORE_CONNECT_ENVIRONMENTS=0` turns this off, so the connection action can be seen.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import subprocess
import sys
import threading
import time
from typing import Any, Optional

log = logging.getLogger("local")
MAX_CONNECTED = 24  # Runtime processes at most; the least recently started stops first
RESTART_SECONDS = 3.0
# How often the dev tenant's Environments are listed when nothing points at a change: each listing is a
# GSI query, which moto answers by reading the whole table (it was a third of the stack's CPU at 4 a second
# in a long run). A Session create answered with JSON is connected before its answer (local/server.py);
# after a create by the dev tenant that is not (a streamed Session create, environments.create) the
# listing runs every `interval` for BUSY_SECONDS; a Runtime process that exits is seen at the next `interval`.
IDLE_SECONDS = 2.0
BUSY_SECONDS = 3.0


class EnvironmentConnector:
    def __init__(self, gateway: Any, api_key: str, tenant: str, websocket_url: str, root: pathlib.Path,
                 state: pathlib.Path, runtime_args: list[str], interval: float = 0.25):
        self.gateway = gateway
        self.api_key = api_key
        self.tenant = tenant
        self.websocket_url = websocket_url
        self.root = root
        self.state = state
        self.runtime_args = runtime_args  # harnesses, natives, provider: as the stack's own Runtimes
        self.interval = interval
        self.processes: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def start(self) -> EnvironmentConnector:
        self._thread = threading.Thread(target=self._loop, name="environments", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        from agents_core.store import default_store

        store = default_store()
        busy_until = listed_at = 0.0
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            if self._wake.is_set():
                self._wake.clear()
                busy_until = now + BUSY_SECONDS
            exited = any(process.poll() is not None for process, _ in list(self.processes.values()))
            if now < busy_until or exited or now - listed_at >= IDLE_SECONDS:
                listed_at = now
                try:
                    self._step(store)
                except Exception:  # noqa: BLE001 - the next step tries again
                    log.exception("environment connector step failed")

    def created(self, authorization: str) -> None:
        """A create whose Environment is not connected before its answer (a streamed Session create,
        environments.create): the dev tenant's is looked for at once, and again for a few seconds."""
        if authorization == f"Bearer {self.api_key}":
            self._wake.set()

    def ensure(self, env_id: str, timeout: float = 15.0) -> bool:
        """Connect the dev tenant's Environment now and wait until it is connected, so a Session created
        on this laptop can take input at once (another tenant's Environment is left alone)."""
        from agents_core import keys
        from agents_core.store import default_store

        store = default_store()
        key = keys.environment(self.tenant, env_id)
        env = store.get(key)
        if env is None or env.get("type") != "self_hosted":
            return False
        with self._lock:
            current = self.processes.get(env_id)
            if current is None or current[0].poll() is not None:
                self._connect(env)
        end = time.time() + timeout
        while time.time() < end:
            found = store.get(key)
            if found is None or found.get("status") == "connected":
                return found is not None
            time.sleep(0.02)
        return False

    def _step(self, store: Any) -> None:
        from agents_core import keys

        envs = store.query(**keys.environments_of_tenant(self.tenant, "self_hosted"), limit=MAX_CONNECTED,
                           ascending=False).items
        for env_id in list(self.processes):
            if store.get(keys.environment(self.tenant, env_id), consistent=False) is None:
                self._terminate(env_id)  # the Session (and its Environment) was deleted
        for env in envs:
            with self._lock:
                current = self.processes.get(env["id"])
                if current is not None and (current[0].poll() is None or time.time() - current[1] < RESTART_SECONDS):
                    continue
                self._connect(env)

    def _workspace(self, env: dict[str, Any]) -> str:
        declared = env.get("workspace_directory") or "/workspace"
        if declared != "/workspace" and os.path.isdir(declared):
            return declared
        private = self.state / env["id"] / "workspace"
        private.mkdir(parents=True, exist_ok=True)
        return str(private)

    def _connect(self, env: dict[str, Any]) -> None:
        answer = self.gateway.handle("POST", f"/v1/agents/environments/{env['id']}/enrollments", "", {
            "authorization": f"Bearer {self.api_key}", "openai-beta": "agents=v1",
            "content-type": "application/json"}, b"{}")
        if answer.status != 201:
            log.warning("could not enroll %s (HTTP %s)", env["id"], answer.status)
            return
        enrollment = json.loads(answer.body)
        while len(self.processes) >= MAX_CONNECTED:
            self._terminate(min(self.processes, key=lambda k: self.processes[k][1]))
        self._terminate(env["id"])
        home = self.state / env["id"]
        argv = [sys.executable, "-m", "runtime", "--url", self.websocket_url, "--workspace", self._workspace(env),
                "--state-dir", str(home / "state"), *self.runtime_args]
        process = subprocess.Popen(  # noqa: S603 - our own module; the token travels in the environment
            argv, cwd=self.root, env={**os.environ, "AGENTS_CORE_ENROLLMENT_TOKEN": enrollment["token"]})
        self.processes[env["id"]] = (process, time.time())

    def _terminate(self, env_id: str) -> None:
        entry = self.processes.pop(env_id, None)
        if entry is not None and entry[0].poll() is None:
            entry[0].terminate()
            try:
                entry[0].wait(timeout=5)
            except subprocess.TimeoutExpired:
                entry[0].kill()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for process, _ in self.processes.values():  # all at once, then each waited for
                if process.poll() is None:
                    process.terminate()
            for env_id in list(self.processes):
                self._terminate(env_id)
