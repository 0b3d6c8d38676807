"""Hosted Environments on the local stack, with the official SDK and the reference Runtime's documented
command line (`python -m runtime --hosted-environments DIR`): each openai_hosted Environment runs in a
bubblewrap sandbox of its own on the operator's host. Two tenants' Sessions try to read each other's
workspace, /root, the Runtime's state directory and its environment, through a stdio MCP server's
command and through the model's own shell call, and see nothing; declared files are in the workspace;
a failing setup command fails the Environment with its exit code; an Environment made with
`environments.create` is shared by the Sessions that name it."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import openai
import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import BEAT, ROOT, RuntimeProcess, aws_client, tenant_client

pytestmark = pytest.mark.e2e

SHELL_TOOL = {"codex": ("exec_command", "cmd"), "claude_code": ("Bash", "command")}


class HostedRuntime(RuntimeProcess):
    """An operator's host for hosted Environments: every Harness, codex and claude_code natively on the
    scripted model provider, each Environment in its own sandbox under `directory`."""

    def __init__(self, info: dict, root: pathlib.Path, egress_allow: str = ""):
        self.info = info
        self.root = root
        self.egress_allow = egress_allow  # the operator's AGENTS_CORE_EGRESS_ALLOW (empty: the public internet only)
        self.directory = root / "hosted"
        self.state = root / "state"
        self.log = root / "provider.jsonl"
        self.stderr = root / "hosted.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        args = [sys.executable, "-m", "runtime", "--url", self.info["websocket_url"], "--heartbeat", BEAT,
                "--hosted-environments", str(self.directory), "--state-dir", str(self.state),
                "--native", "codex,claude_code", "--model-provider", "scripted", "--provider-log", str(self.log)]
        for harness in ("scripted", "codex", "claude_code"):
            args += ["--harness", harness]
        with open(self.stderr, "a") as err:
            self.process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,  # noqa: S603
                                            env={**os.environ, "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}",
                                                 "AGENTS_CORE_RUNTIME_TOKEN": self.info["runtime_token"],
                                                 "OPENAI_API_KEY": "sk-operator-must-not-leak",
                                                 "AGENTS_CORE_EGRESS_ALLOW": self.egress_allow})
        wait_for(lambda: "connected; serving" in self.stderr.read_text() or self.process.poll() is not None,
                 timeout=30)
        assert self.process.poll() is None, self.stderr.read_text()[-2000:]

    def workspace(self, env_id: str) -> pathlib.Path:
        return self.directory / "envs" / env_id / "workspace"


@pytest.fixture(scope="module")
def hosted_runtime(local_stack):
    root = pathlib.Path(tempfile.mkdtemp(dir="/var/tmp", prefix="e2e-hosted-"))  # noqa: S108 - traversable
    os.chmod(root, 0o711)  # noqa: S103 - each Environment's uid reaches its own directory only
    runtime = HostedRuntime(local_stack, root)
    runtime.start()
    yield runtime
    runtime.stop()
    subprocess.run(["rm", "-rf", str(root)], check=False)  # noqa: S603, S607


def finished(client, session_id, timeout=120):
    def ended():
        turns = client.beta.agents.sessions.turns.list(session_id).data
        return turns and turns[0].status in ("completed", "failed", "cancelled")

    wait_for(ended, timeout=timeout, interval=0.2)
    return client.beta.agents.sessions.turns.list(session_id).data[0]


def inline(path: str, text: str) -> dict:
    return {"type": "inline", "path": path, "data": base64.b64encode(text.encode()).decode()}


def probe(hosted: HostedRuntime, other_env: str) -> str:
    """A shell script that tries to read what a sandbox must never see, and reports what it saw."""
    return "; ".join([
        "echo own=$(cat /workspace/mine.txt 2>&1)",
        f"echo other=$(cat {hosted.workspace(other_env)}/mine.txt 2>&1)",
        f"echo hosts=$(ls {hosted.directory} 2>&1)",
        f"echo state=$(ls {hosted.state} 2>&1)",
        "echo root=$(ls -A /root 2>&1)",
        "echo work=$(ls /work 2>&1)",
        "echo environ=$(tr '\\0' ' ' < /proc/1/environ)",
        "echo self=$(env | tr '\\n' ' ')",
    ])


@pytest.mark.parametrize("harness", ["codex", "claude_code"])
def test_two_tenants_hosted_sessions_see_their_own_workspace_and_nothing_else(local_stack, hosted_runtime,
                                                                             harness):
    """Each tenant's Session declares a file and a stdio MCP server whose command writes what it can read,
    and the scripted model makes a shell call that does the same: each sees its own file, and neither the
    other tenant's workspace, /root, the Runtime's state nor a token or key of the Runtime."""
    tool_name, argument = SHELL_TOOL[harness]
    alice, bob = tenant_client(local_stack, f"alice-{harness}"), tenant_client(local_stack, f"bob-{harness}")
    made = {}
    for name, client in (("alice", alice), ("bob", bob)):
        made[name] = client.beta.agents.environments.create(environment={
            "type": "openai_hosted", "files": [inline("/workspace/mine.txt", f"{name}'s file")]})
    sessions = {}
    for name, client in (("alice", alice), ("bob", bob)):
        other = made["bob" if name == "alice" else "alice"].id
        stdio = {"type": "mcp", "server_label": "probe", "transport": {
            "type": "stdio", "command": "/bin/sh", "args": ["-c", f"({probe(hosted_runtime, other)}) > "
                                                                  "/workspace/mcp-probe.txt"],
            "cwd": "/workspace", "env_vars": []}}
        shell = f"({probe(hosted_runtime, other)}) > /workspace/shell-probe.txt"
        script = f"call {tool_name} {json.dumps({argument: shell})}\nsay Probed."
        sessions[name] = client.beta.agents.sessions.create(
            environment={"type": "openai_hosted", "environment_id": made[name].id},
            agent={"model": "gpt-5", "tools": [stdio]}, extra_body={"x_agents_core": {"harness": harness}},
            input=script)
    for name, client in (("alice", alice), ("bob", bob)):
        turn = finished(client, sessions[name].id)
        assert turn.status == "completed", (turn.model_extra, hosted_runtime.stderr.read_text()[-3000:])
    for name in ("alice", "bob"):
        workspace = hosted_runtime.workspace(made[name].id)
        for source in ("mcp-probe.txt", "shell-probe.txt"):
            wait_for((workspace / source).exists, timeout=30)
            seen = dict(line.split("=", 1) for line in (workspace / source).read_text().splitlines() if "=" in line)
            assert seen["own"] == f"{name}'s file", (source, seen)
            for key in ("other", "hosts", "state", "root", "work"):
                assert "No such file or directory" in seen[key], (source, key, seen[key])
            everything = seen["environ"] + seen["self"]
            for secret in ("AGENTS_CORE", "rt-", "sk-operator-must-not-leak", "AWS_", local_stack["api_key"]):
                assert secret not in everything, (source, secret)
        # the Environments' workspaces are owned by different uids, unreadable to the other
        if os.geteuid() == 0:
            assert hosted_runtime.workspace(made["alice"].id).stat().st_uid != \
                hosted_runtime.workspace(made["bob"].id).stat().st_uid


def test_a_failing_setup_command_fails_the_environment_and_the_session_with_its_exit_code(local_stack,
                                                                                        hosted_runtime):
    client = tenant_client(local_stack, "setup-failure")
    session = client.beta.agents.sessions.create(
        environment={"type": "openai_hosted", "setup_commands": [
            {"command": "true"}, {"command": "echo CONFIDENTIAL-BODY; exit 7"}]},
        agent={"model": "gpt-5"}, extra_body={"x_agents_core": {"harness": "scripted"}}, input="say Never.")
    turn = finished(client, session.id, timeout=60)
    assert turn.status == "failed"
    environment = client.beta.agents.environments.retrieve(session.environment.id)
    assert environment.status == "failed"
    failed = client.beta.agents.sessions.retrieve(session.id)
    assert failed.status == "failed"
    text = failed.model_dump_json() + turn.model_dump_json() + environment.model_dump_json()
    assert "CONFIDENTIAL-BODY" not in text
    assert "setup_commands[1]" in turn.model_dump_json() and "7" in turn.model_dump_json()


def test_environments_create_then_two_sessions_share_its_workspace(local_stack, hosted_runtime):
    client = tenant_client(local_stack, "shared-workspace")
    environment = client.beta.agents.environments.create(environment={
        "type": "openai_hosted", "files": [inline("/workspace/readme.txt", "declared")]})
    assert environment.status == "pending" and environment.type == "openai_hosted"
    assert [f.path for f in environment.files] == ["/workspace/readme.txt"]
    first = client.beta.agents.sessions.create(
        environment={"type": "openai_hosted", "environment_id": environment.id}, agent={"model": "gpt-5"},
        extra_body={"x_agents_core": {"harness": "codex"}},
        input='call exec_command {"cmd": "echo written-by-the-first > /workspace/shared.txt"}\nsay Written.')
    assert finished(client, first.id).status == "completed"
    second = client.beta.agents.sessions.create(
        environment={"type": "openai_hosted", "environment_id": environment.id}, agent={"model": "gpt-5"},
        extra_body={"x_agents_core": {"harness": "codex"}},
        input='call exec_command {"cmd": "cat /workspace/shared.txt /workspace/readme.txt > /workspace/seen.txt"}'
              '\nsay Read.')
    assert finished(client, second.id).status == "completed"
    assert first.environment.id == second.environment.id == environment.id
    seen = hosted_runtime.workspace(environment.id) / "seen.txt"
    wait_for(seen.exists, timeout=10)
    assert seen.read_text() == "written-by-the-first\ndeclared"
    assert client.beta.agents.environments.retrieve(environment.id).status in ("ready", "connected")


def _rows_naming(local_stack: dict, text: str) -> list[dict]:
    dynamodb = aws_client(local_stack, "dynamodb")
    return [item for item in dynamodb.scan(TableName=local_stack["table"], ConsistentRead=True)["Items"]
            if text in json.dumps(item, default=str)]


def test_with_iam_on_a_hosted_session_deletes_whole_and_a_host_that_goes_away_disconnects_its_environments(
        local_stack, hosted_runtime):
    """Issue 35 on the real stack, IAM enforced from template.yaml (the local stack's default): deleting a Session
    whose hosted Environment is bound to a host deletes its binding too (AdmissionFunction's LeadingKeys name
    HOST#*), and a host whose process is killed leaves its Environments disconnected (the WebSocket disconnect
    function under its own policy). Last in this module: it stops the module's host."""
    client = tenant_client(local_stack, "iam-hosted")
    created = []
    for _ in range(2):
        session = client.beta.agents.sessions.create(
            environment={"type": "openai_hosted"}, agent={"model": "gpt-5"}, input="say bound",
            extra_body={"x_agents_core": {"harness": "scripted"}})
        assert finished(client, session.id).status == "completed"
        created.append(session)
    doomed, kept = created
    assert _rows_naming(local_stack, doomed.environment.id)
    client.beta.agents.sessions.delete(doomed.id)
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.retrieve(doomed.id)
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.environments.retrieve(doomed.environment.id)
    assert _rows_naming(local_stack, doomed.environment.id) == []  # the host binding went with it

    assert client.beta.agents.environments.retrieve(kept.environment.id).status != "disconnected"
    hosted_runtime.process.kill()  # no goodbye: the socket just closes
    hosted_runtime.process.wait(timeout=10)
    wait_for(lambda: client.beta.agents.environments.retrieve(kept.environment.id).status == "disconnected",
             timeout=20, interval=0.2)
