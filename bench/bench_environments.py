"""Environments on the local stack as a user runs it (`python -m local`, real HTTP and WebSockets):
- a dev-tenant self_hosted Session create, which answers once `make dev` has connected its Environment
  (enrollment minted, `python -m runtime --workspace` started, enrollment spent at hello);
- enrollment -> a machine connected (another tenant: mint, start the Runtime with the token, status
  `connected`), then its first Turn completed;
- a reconnect with the durable credential (Runtime restart -> `connected`).
p50/p95 seconds."""

from __future__ import annotations

try:
    from bench.common import ROOT, emit, local_stack, percentiles
except ImportError:  # run as a script
    from common import ROOT, emit, local_stack, percentiles  # type: ignore[no-redef]

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 1 if "--smoke" in sys.argv[1:] else 8  # make test's smoke: one of each


def main() -> dict:
    from openai import OpenAI

    from local.inprocess import wait_for
    from tests.e2e.conftest import EnrolledRuntime, tenant_client

    root = Path(tempfile.mkdtemp())
    creates, enrolled, first_turn, reconnects = [], [], [], []
    # A reused stack (the smoke under make test) starts no Runtime of its own: the dev tenant's self_hosted create,
    # which make dev's workspace Runtime answers, is measured only on a stack this benchmark starts.
    reused = bool(os.environ.get("BENCH_STACK_FILE"))
    with local_stack({}) as info:
        dev = OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0)
        for i in range(0 if reused else ROUNDS):
            workspace = root / f"dev-{i}"
            workspace.mkdir()
            s = time.perf_counter()
            session = dev.beta.agents.sessions.create(
                environment={"type": "self_hosted", "workspace_directory": str(workspace)}, agent={"model": "m"})
            creates.append(time.perf_counter() - s)
            assert dev.beta.agents.environments.retrieve(session.environment.id).status == "connected"
        other = tenant_client(info, "bench-tenant")
        for i in range(ROUNDS):
            workspace = root / f"machine-{i}"
            workspace.mkdir()
            session = other.beta.agents.sessions.create(
                environment={"type": "self_hosted", "workspace_directory": str(workspace)}, agent={"model": "m"},
                input="say hello")
            machine = EnrolledRuntime(workspace, "scripted")
            s = time.perf_counter()
            machine.connect(other, session, str(workspace), wait=False)
            wait_for(lambda: other.beta.agents.environments.retrieve(session.environment.id).status == "connected",
                     timeout=30, interval=0.01)
            enrolled.append(time.perf_counter() - s)
            wait_for(lambda: other.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=30,
                     interval=0.01)
            first_turn.append(time.perf_counter() - s)
            machine.stop()
            wait_for(lambda: other.beta.agents.environments.retrieve(session.environment.id).status
                     == "disconnected", timeout=30, interval=0.01)
            s = time.perf_counter()
            machine.process = subprocess.Popen(  # noqa: S603 - the credential from the state dir, no token
                [sys.executable, "-m", "runtime", "--url", info["websocket_url"], "--workspace", str(workspace),
                 "--harness", "scripted", "--state-dir", str(workspace / "state")], cwd=ROOT,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}"})
            wait_for(lambda: other.beta.agents.environments.retrieve(session.environment.id).status == "connected",
                     timeout=30, interval=0.01)
            reconnects.append(time.perf_counter() - s)
            machine.stop()
    return emit("environments", {
        "benchmark": "environments_local_stack",
        "dev_self_hosted_create_connected": percentiles(creates) if creates else "not measured on a reused stack",
        "enrollment_to_connected": percentiles(enrolled),
        "enrollment_to_first_turn_idle": percentiles(first_turn),
        "credential_reconnect_to_connected": percentiles(reconnects),
        "rounds": ROUNDS,
        "note": "each connection starts a fresh `python -m runtime` process (scripted engine); polling every 10 ms",
    })


if __name__ == "__main__":
    main()
