"""The exec round trip of a self_hosted Codex Environment connected with the stock `codex exec-server --remote`
(issue 26): `process/start` of `true` to its `process/exited`, as the Codex app-server sends it,
- through this path: the app-server's loopback endpoint on the executor host (runtime/environments/exec_server.py), joined
  frame for frame to the pinned exec-server's registered WebSocket (`--remote-transport direct --aws-sigv4`);
- straight to a local exec-server on loopback (`codex exec-server --listen`, no host in between);
- a local process start (`true` spawned here: what a local app-server does for its own commands).
The registration is answered by a stand-in for Core's registry (the round trip never touches Core once the
exec-server is joined). p50/p95 milliseconds."""

from __future__ import annotations

try:
    from bench.common import ROOT, emit, percentiles
except ImportError:  # run as a script
    from common import ROOT, emit, percentiles  # type: ignore[no-redef]

import hashlib
import http.server
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROUNDS = 2 if "--smoke" in sys.argv[1:] else 200  # make test's smoke: two round trips each
CODEX = ROOT / ".venv/lib/python3.11/site-packages/codex_cli_bin/bin/codex"


def _round_trips(url: str, cwd: Path, rounds: int, bearer: str | None = None) -> list[float]:
    from websockets.sync.client import connect

    samples = []
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else None  # the executor host's app endpoint
    with connect(url, max_size=None, open_timeout=20, additional_headers=headers) as ws:
        ws.send(json.dumps({"id": 0, "method": "initialize", "params": {"clientName": "bench"}}))
        while json.loads(ws.recv(timeout=20)).get("id") != 0:
            pass
        ws.send(json.dumps({"method": "initialized"}))
        for i in range(1, rounds + 1):
            started = time.perf_counter()
            ws.send(json.dumps({"id": i, "method": "process/start", "params": {
                "processId": f"p{i}", "argv": ["true"], "cwd": cwd.as_uri(), "env": {}, "tty": False}}))
            while True:
                message = json.loads(ws.recv(timeout=20))
                if message.get("method") == "process/exited" and message["params"]["processId"] == f"p{i}":
                    break
            samples.append(time.perf_counter() - started)
    return samples


def _exec_server_env(root: Path) -> dict[str, str]:
    (root / "home" / ".codex").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(root / "home"), "CODEX_HOME": str(root / "home" / ".codex"),
            "TMPDIR": str(root / "tmp"), "AWS_ACCESS_KEY_ID": "AKEXBENCHBENCHBENCH0", "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_REGION": "us-east-1"}


def through_the_executor_host(root: Path, rounds: int) -> list[float]:
    from runtime.environments.exec_server import ExecServerHub

    told: list[dict] = []
    hub = ExecServerHub("127.0.0.1:0", None, told.append).start()
    env_id = "env_bench"

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("content-length") or 0))
            token, registration = secrets.token_urlsafe(16), f"xreg_{secrets.token_hex(4)}"
            hub.on_message({"type": "executor.expect", "registration_id": registration, "environment_id": env_id,
                            "token_sha256": hashlib.sha256(token.encode()).hexdigest()})
            body = json.dumps({"environment_id": env_id, "transport": "direct_jsonrpc_v1",
                               "registration_id": registration,
                               "url": f"{hub.public_url}/{registration}?token={token}"}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    registry = http.server.HTTPServer(("127.0.0.1", 0), Registry)
    threading.Thread(target=registry.serve_forever, daemon=True).start()
    server = subprocess.Popen([str(CODEX), "exec-server", "--remote", f"http://127.0.0.1:{registry.server_port}",  # noqa: S603
                               "--remote-transport", "direct", "--aws-sigv4", "--environment-id", env_id],
                              cwd=root, env=_exec_server_env(root), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while not told and time.time() < deadline:
            time.sleep(0.02)
        executor = hub.bind({"harness": "codex", "session_id": "sess_bench", "environment": {"type": "self_hosted"},
                             "agent": {"tools": []}})["executor"]
        return _round_trips(executor["url"], root, rounds, bearer=executor["token"])
    finally:
        server.terminate()
        server.wait(timeout=10)
        registry.shutdown()
        hub.stop()


def straight_to_a_local_exec_server(root: Path, rounds: int) -> list[float]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([str(CODEX), "exec-server", "--listen", f"ws://127.0.0.1:{port}"], cwd=root,  # noqa: S603
                              env=_exec_server_env(root), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        return _round_trips(f"ws://127.0.0.1:{port}", root, rounds)
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> dict:
    root = Path(tempfile.mkdtemp(dir=str(ROOT / ".local") if (ROOT / ".local").is_dir() else None))
    local = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        subprocess.run(["true"], check=True)  # noqa: S607 - the bench's own baseline
        local.append(time.perf_counter() - started)
    result = {
        "benchmark": "exec_server",
        "exec_round_trip_through_executor_host": percentiles(through_the_executor_host(root / "a", ROUNDS)),
        "exec_round_trip_direct_exec_server": percentiles(straight_to_a_local_exec_server(root / "b", ROUNDS)),
        "local_process_start_true": percentiles(local),
        "note": "process/start of `true` to process/exited; the first through the executor host's splice to the "
                "pinned exec-server registered with --remote-transport direct, the second to a loopback "
                "exec-server, the third a local spawn (a local app-server's own exec)",
    }
    return emit("exec_server", result)


if __name__ == "__main__":
    main()
