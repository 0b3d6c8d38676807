"""The stock `codex exec-server --remote <remote_url>` connects a self_hosted Codex Environment (issue 26),
on the local stack with the official SDK: the Environment's enrollment mints its executor key; the pinned
exec-server, a separate process with a variable only it has, registers (SigV4) and joins an operator's
Codex Runtime (the executor host); the model's `exec_command` (scripted provider) runs on the exec-server's
side in the Session's workspace_directory; the connection action follows the exec-server; a wrong
signature, another tenant's key and another Environment's id are refused; a frame over 128 KB passes."""

from __future__ import annotations

import json
import os
import pathlib
import struct
import subprocess
import zlib

import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import NativeRuntime, enroll, tenant_client

CODEX = pathlib.Path(__file__).resolve().parents[2] / ".venv/lib/python3.11/site-packages/codex_cli_bin/bin/codex"
SECRET_VALUE = "only-the-exec-server-has-this-4711"


@pytest.fixture(scope="module")
def executor_host(local_stack, tmp_path_factory):
    """An operator's native Codex Runtime (the scripted model provider) that hosts exec-server connections."""
    host = NativeRuntime(local_stack, tmp_path_factory.mktemp("executor-host"), "codex",
                         extra=("--executor-listen", "127.0.0.1:0"))
    host.start()
    wait_for(lambda: "executor listener on" in host.stderr.read_text(), timeout=10)
    yield host
    host.stop()


class ExecServer:
    """`codex exec-server --remote <remote_url> --remote-transport direct --aws-sigv4 --environment-id <id>`,
    the pinned binary, with the enrollment's key pair in its environment (as the enrollment's command says)."""

    def __init__(self, root: pathlib.Path, workspace: pathlib.Path):
        self.root, self.workspace = root, workspace
        self.log = root / "exec-server.log"
        self.process: subprocess.Popen | None = None

    def start(self, remote_url: str, env_id: str, key: dict, extra_env: dict | None = None) -> ExecServer:
        home = self.root / "home"
        (home / ".codex").mkdir(parents=True, exist_ok=True)
        (self.root / "tmp").mkdir(exist_ok=True)  # Codex makes its sandbox helper links only outside TMPDIR
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
               "TMPDIR": str(self.root / "tmp"),
               "AWS_ACCESS_KEY_ID": key["access_key_id"], "AWS_SECRET_ACCESS_KEY": key["secret_access_key"],
               "AWS_REGION": key["region"], "RUST_LOG": "warn", **(extra_env or {})}
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(  # noqa: S603 - the pinned binary
                [str(CODEX), "exec-server", "--remote", remote_url, "--remote-transport", "direct", "--aws-sigv4",
                 "--environment-id", env_id], cwd=self.workspace, env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=log)
        return self

    def exited(self, timeout: float = 20) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)


def session_for(client, workspace: pathlib.Path, script: str | None = None):
    body = {"agent": {"model": "gpt-5"}, "extra_body": {"x_agents_core": {"harness": "codex"}},
            "environment": {"type": "self_hosted", "workspace_directory": str(workspace)}}
    if script is not None:
        body["input"] = script
    return client.beta.agents.sessions.create(**body)


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def last_turn(client, session_id):
    return client.beta.agents.sessions.turns.list(session_id).data[0]


def finished(client, session_id, timeout=90):
    wait_for(lambda: last_turn(client, session_id).status in ("completed", "failed", "cancelled"), timeout=timeout,
             interval=0.2)
    return last_turn(client, session_id)


def png(path: pathlib.Path, size: int) -> None:
    """An incompressible PNG of about `size` bytes (random pixels, stored)."""
    side = int((size / 3) ** 0.5) + 1
    rows = b"".join(b"\x00" + os.urandom(side * 3) for _ in range(side))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows, 0)) + chunk(b"IEND", b""))


def test_the_stock_exec_server_runs_the_models_commands_on_its_machine(local_stack, executor_host, tmp_path):
    client = tenant_client(local_stack, "exec-server-a")
    workspace = tmp_path / "users-machine" / "project"
    workspace.mkdir(parents=True)
    session = session_for(client, workspace, 'call exec_command {"cmd": "echo $EXEC_ONLY_VARIABLE > seen.txt; '
                                             'pwd >> seen.txt"}\nsay Ran it on your machine.')
    env_id = session.environment.id
    assert session.environment.remote_url == local_stack["remote_url"]
    read = client.beta.agents.sessions.retrieve(session.id)
    assert [a.type for a in read.required_actions] == ["environment_connection"]
    key = enroll(client, env_id)["exec_server"]
    assert key["command"].endswith(f"codex exec-server --remote {session.environment.remote_url} "
                                   f"--remote-transport direct --aws-sigv4 --environment-id {env_id}")
    server = ExecServer(tmp_path, workspace).start(session.environment.remote_url, env_id, key,
                                                   {"EXEC_ONLY_VARIABLE": SECRET_VALUE})
    try:
        turn = finished(client, session.id)
        assert turn.status == "completed", (turn.model_dump(), server.log.read_text()[-1500:],
                                            executor_host.stderr.read_text()[-3000:])
        seen = (workspace / "seen.txt").read_text().splitlines()
        assert seen == [SECRET_VALUE, str(workspace)]  # its variable, in the Session's workspace_directory
        assert client.beta.agents.environments.retrieve(env_id).status == "connected"
        read = client.beta.agents.sessions.retrieve(session.id)
        assert read.required_actions == [] and read.status == "idle"
        # the Runtime host never had the variable: it is the exec-server's alone
        assert SECRET_VALUE not in (executor_host.stderr.read_text() + json.dumps(os.environ.copy()))

        # a frame over API Gateway's 128 KB: view_image of a 300 KB file (fs/readFile through the executor)
        png(workspace / "big.png", 300_000)
        client.beta.agents.sessions.events.create(session.id, events=[message(
            f'call view_image {{"path": "{workspace}/big.png"}}\nsay Seen.')])
        wait_for(lambda: len(client.beta.agents.sessions.turns.list(session.id).data) == 2, timeout=10)
        turn = finished(client, session.id)
        assert turn.status == "completed", turn
        images = [len(json.dumps(r["body"])) for r in executor_host.requests() if "data:image/png;base64," in
                  json.dumps(r["body"])]
        assert images and max(images) > 400_000  # the 300 KB file reached the model, base64, whole

        # the exec-server stops: the Environment goes offline, input waits and asks for the connection
        server.stop()
        # ... and the file came in one frame over API Gateway's 128 KB message limit (the host logs sizes only)
        import re

        wait_for(lambda: "from it (largest" in executor_host.stderr.read_text(), timeout=10)
        largest = max(int(m) for m in re.findall(r"from it \(largest (\d+) bytes\)", executor_host.stderr.read_text()))
        assert largest > 128 * 1024
        wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "disconnected", timeout=30)
        client.beta.agents.sessions.events.create(session.id, events=[message(
            'call exec_command {"cmd": "echo back > back.txt"}\nsay Back.')])
        wait_for(lambda: [a.type for a in client.beta.agents.sessions.retrieve(session.id).required_actions]
                 == ["environment_connection"], timeout=15)
        # it comes back (the same command, a new process): the action clears and the waiting input runs there,
        # its first command included (the app-server's resume of the old exec-server session fails; the driver
        # waits for that and has it connect afresh before the Turn)
        server.start(session.environment.remote_url, env_id, key, {"EXEC_ONLY_VARIABLE": SECRET_VALUE})
        turn = finished(client, session.id)
        assert turn.status == "completed"
        assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
        assert (workspace / "back.txt").read_text() == "back\n"
    finally:
        server.stop()


def test_a_wrong_signature_another_tenants_key_and_another_environment_are_refused(local_stack, executor_host,
                                                                                    tmp_path):
    client = tenant_client(local_stack, "exec-server-b")
    other = tenant_client(local_stack, "exec-server-c")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    mine, sibling = session_for(client, workspace), session_for(client, workspace)
    foreign = session_for(other, workspace)
    key = enroll(client, mine.environment.id)["exec_server"]
    foreign_key = enroll(other, foreign.environment.id)["exec_server"]
    remote = mine.environment.remote_url
    cases = [
        ("a wrong signature", mine.environment.id, {**key, "secret_access_key": key["secret_access_key"] + "x"}, "403"),
        ("another tenant's key", mine.environment.id, foreign_key, "404"),
        ("another Environment's id", sibling.environment.id, key, "404"),
        ("another tenant's Environment", foreign.environment.id, key, "404"),
    ]
    for i, (name, env_id, signing, status) in enumerate(cases):
        root = tmp_path / f"case{i}"
        root.mkdir()
        server = ExecServer(root, workspace).start(remote, env_id, signing)
        try:
            assert server.exited() != 0, name
        finally:
            server.stop()
        assert status in server.log.read_text(), (name, server.log.read_text()[-500:])
    for session in (mine, sibling):
        assert client.beta.agents.environments.retrieve(session.environment.id).status == "pending"
    assert other.beta.agents.environments.retrieve(foreign.environment.id).status == "pending"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_large_write_fails_visibly_and_a_restarted_host_gets_its_exec_server_back(local_stack, tmp_path):
    """The pinned exec-server drops its connection on a message from the harness of about 8.9 KB or more:
    the call fails and the Turn ends (it never hangs). A restarted executor host does not expect the old
    registration: the exec-server's next handshake is a 409, it registers again and joins the new host."""
    host = NativeRuntime(local_stack, tmp_path / "host", "codex",
                         extra=("--executor-listen", f"127.0.0.1:{free_port()}"))
    (tmp_path / "host").mkdir()
    host.start()
    client = tenant_client(local_stack, "exec-server-d")
    workspace = tmp_path / "project"
    workspace.mkdir()
    session = session_for(client, workspace, 'call exec_command {"cmd": "echo small > small.txt"}\nsay Small.')
    env_id = session.environment.id
    key = enroll(client, env_id)["exec_server"]
    server = ExecServer(tmp_path, workspace).start(session.environment.remote_url, env_id, key)
    try:
        assert finished(client, session.id).status == "completed"
        assert (workspace / "small.txt").read_text() == "small\n"
        long_command = "echo " + "x" * 12_000 + " | wc -c > large.txt"
        client.beta.agents.sessions.events.create(session.id, events=[message(
            f'call exec_command {{"cmd": "{long_command}"}}\nsay After the large write.')])
        wait_for(lambda: len(client.beta.agents.sessions.turns.list(session.id).data) == 2, timeout=10)
        turn = finished(client, session.id, timeout=120)
        assert turn.status in ("completed", "failed")  # it ends, whichever way the Harness takes the error
        assert not (workspace / "large.txt").exists()
        # the exec-server came back (~0.7 s): the next command runs again, from the same app-server
        client.beta.agents.sessions.events.create(session.id, events=[message(
            'call exec_command {"cmd": "echo still > still.txt"}\nsay Still.')])
        wait_for(lambda: len(client.beta.agents.sessions.turns.list(session.id).data) == 3, timeout=10)
        assert finished(client, session.id).status == "completed"
        assert (workspace / "still.txt").read_text() == "still\n"
        # the host restarts: the exec-server comes back to it by itself and the next input runs there
        host.stop()
        wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "disconnected", timeout=30)
        host.start()
        wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "connected", timeout=60,
                 interval=0.2)
        client.beta.agents.sessions.events.create(session.id, events=[message(
            'call exec_command {"cmd": "echo again > again.txt"}\nsay Again.')])
        wait_for(lambda: len(client.beta.agents.sessions.turns.list(session.id).data) == 4, timeout=10)
        assert finished(client, session.id).status == "completed"
        assert (workspace / "again.txt").read_text() == "again\n"
    finally:
        server.stop()
        host.stop()
