"""Environments on the local stack, with the official SDK, raw HTTP and WebSocket clients and the
reference Runtime's documented command line: a workspace Session runs only in its own Environment,
never on the shared Runtime; a machine connects it with an enrollment; connection state is visible
on reads, SSE and the WebSocket; input waits a bounded time. Tenants other than the dev tenant are
used so that `make dev`'s own automatic connection stays out of the way."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time

import httpx2
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from local.inprocess import wait_for
from tests.e2e.conftest import ENVIRONMENT_WAIT, EnrolledRuntime, NativeRuntime, enroll, tenant_client

pytestmark = pytest.mark.e2e


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def self_hosted(client, workspace, script=None, harness="scripted", tools=()):
    extra = {"input": script} if script is not None else {}
    return client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": str(workspace)},
        agent={"model": "gpt-5", "tools": list(tools)}, extra_body={"x_agents_core": {"harness": harness}}, **extra)


def turns(client, session_id):
    return client.beta.agents.sessions.turns.list(session_id).data


@pytest.mark.parametrize("harness", ["codex", "claude_code"])
def test_a_stdio_mcp_server_of_a_self_hosted_session_never_runs_on_the_shared_runtime_only_on_its_machine(
        local_stack, runtime_process, tmp_path, harness):
    """Given a tenant's stdio MCP server that writes its environment to a marker file, and a shared
    Runtime running the Harness natively: the Session waits for its Environment and nothing runs on
    the shared host; once the tenant's machine connects with an enrollment, the server runs there, in
    the bound workspace, with the variable from --tool-env-file and no Core token."""
    client = tenant_client(local_stack, f"acme-{harness}")
    shared = NativeRuntime(local_stack, tmp_path / "shared", harness)
    (tmp_path / "shared").mkdir()
    shared.start()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    marker = workspace / "marker.env"
    stdio = {"type": "mcp", "server_label": "probe", "transport": {
        "type": "stdio", "command": "/bin/sh", "args": ["-c", f"env > {marker}"], "cwd": str(workspace),
        "env_vars": ["PROBE_VARIABLE"]}}
    machine = EnrolledRuntime(tmp_path / "machine", harness, native=True)
    (tmp_path / "machine").mkdir()
    try:
        session = self_hosted(client, workspace, "say Hello from my machine.", harness, tools=[stdio])
        time.sleep(3)  # bounded: long enough for a shared Runtime to have claimed and started it
        assert not marker.exists()
        waiting = client.beta.agents.sessions.retrieve(session.id)
        assert waiting.status == "requires_action"
        assert [(a.type, a.environment_id) for a in waiting.required_actions] == [
            ("environment_connection", session.environment.id)]
        assert turns(client, session.id)[0].status == "queued"
        assert not [r for r in shared.requests() if "Hello from my machine." in json.dumps(r["body"])]

        enrollment = machine.connect(client, session, str(workspace), {"PROBE_VARIABLE": "from-the-environment"})
        turn = turns(client, session.id)[0]
        wait_for(lambda: client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id).status
                 in ("completed", "failed"), timeout=90)
        done = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
        assert done.status == "completed", done.model_extra
        assert done.model_extra["x_agents_core"]["engine"].startswith(harness)
        wait_for(marker.exists, timeout=30)
        seen = marker.read_text()
        assert "PROBE_VARIABLE=from-the-environment" in seen
        for secret in ("enr-", "rte-", "AGENTS_CORE_", enrollment["token"]):
            assert secret not in seen
        assert [r for r in machine.requests() if "Hello from my machine." in json.dumps(r["body"])]
        credential = tmp_path / "machine" / "state" / "environment-credential"
        assert credential.read_text().startswith("rte-")
        assert stat.S_IMODE(credential.stat().st_mode) == 0o600
        # single use: the spent token cannot connect again
        with pytest.raises(InvalidStatus) as refused:
            connect(local_stack["websocket_url"],
                    additional_headers={"Authorization": f"Bearer {enrollment['token']}"}, open_timeout=5)
        assert refused.value.response.status_code in (401, 403)  # as API Gateway refuses a handshake
    finally:
        machine.stop()
        shared.stop()


def test_connection_events_reach_sse_and_websocket_and_the_environment_status_follows(local_stack, runtime_process,
                                                                                     tmp_path):
    client = tenant_client(local_stack, "acme-events")
    session = self_hosted(client, tmp_path)
    env_id = session.environment.id
    assert session.environment.remote_url == local_stack["remote_url"]  # the exec-server registry; --url takes it too
    assert client.beta.agents.environments.retrieve(env_id).status == "pending"
    assert env_id in [e.id for e in client.beta.agents.environments.list(extra_query={"type": "self_hosted"})]
    socket = connect(local_stack["websocket_url"], additional_headers={"Authorization": f"Bearer {client.api_key}"})
    socket.send(json.dumps({"action": "subscribe", "session_id": session.id}))
    assert json.loads(socket.recv(timeout=5))["type"] == "subscribed"
    sse = []
    stream = client.beta.agents.sessions.events.stream(session.id)

    def read():
        for event in stream:
            sse.append(event)
            if event.type == "agent.session.environment.disconnected":
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    machine = EnrolledRuntime(tmp_path / "machine", "scripted")
    (tmp_path / "machine").mkdir()
    machine.connect(client, session, str(tmp_path))
    assert client.beta.agents.environments.retrieve(env_id).status == "connected"
    client.beta.agents.sessions.events.create(session.id, events=[message("say on my machine")])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle"
             and turns(client, session.id), timeout=30)
    machine.stop()
    wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "disconnected", timeout=15)
    reader.join(timeout=15)
    stream.close()
    ws = []
    while not any(e.get("type") == "agent.session.environment.disconnected" for e in ws):
        ws.append(json.loads(socket.recv(timeout=10)))
    socket.close()
    for seen in ([e.model_dump() for e in sse], ws):
        kinds = [e for e in seen if e["type"].startswith("agent.session.environment.")]
        assert [(e["type"], e["environment"]) for e in kinds] == [
            ("agent.session.environment.connected",
             {"id": env_id, "type": "self_hosted", "status": "connected", "error": None}),
            ("agent.session.environment.disconnected",
             {"id": env_id, "type": "self_hosted", "status": "disconnected", "error": None})]
    assert turns(client, session.id)[0].status == "completed"


def test_input_on_an_offline_environment_fails_after_the_bounded_wait_and_a_later_turn_runs(
        local_stack, runtime_process, tmp_path):
    client = tenant_client(local_stack, "acme-wait")
    session = self_hosted(client, tmp_path, "say too early")
    turn = turns(client, session.id)[0]
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id).status == "failed",
             timeout=ENVIRONMENT_WAIT + 20)
    failed = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    assert failed.error.code == "sandbox_error"
    assert f"did not connect within {ENVIRONMENT_WAIT} seconds" in failed.error.message
    assert session.environment.id in failed.error.message
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
    # another Environment's machine never takes this one's input
    other = self_hosted(client, tmp_path)
    elsewhere = EnrolledRuntime(tmp_path / "elsewhere", "scripted")
    (tmp_path / "elsewhere").mkdir()
    machine = EnrolledRuntime(tmp_path / "machine", "scripted")
    (tmp_path / "machine").mkdir()
    try:
        elsewhere.connect(client, other, str(tmp_path))
        client.beta.agents.sessions.events.create(session.id, events=[message("say in time")])
        time.sleep(1)
        assert client.beta.agents.sessions.retrieve(session.id).status == "requires_action"
        machine.connect(client, session, str(tmp_path))
        wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=30)
        assert turns(client, session.id)[0].status == "completed"
    finally:
        machine.stop()
        elsewhere.stop()


def test_a_foreign_environment_is_404_on_every_route(local_stack, runtime_process, tmp_path):
    owner = tenant_client(local_stack, "acme-owner")
    session = self_hosted(owner, tmp_path)
    env_id = session.environment.id
    intruder = tenant_client(local_stack, "acme-intruder")
    headers = {"Authorization": f"Bearer {intruder.api_key}", "OpenAI-Beta": "agents=v1"}
    base = local_stack["base_url"]
    for method, path in (("GET", f"/agents/environments/{env_id}"),
                         ("POST", f"/agents/environments/{env_id}/enrollments"),
                         ("GET", f"/agents/environments?type=self_hosted&after={env_id}")):
        answer = httpx2.request(method, base + path, headers=headers, json={} if method == "POST" else None)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["message"] == "Resource not found."
    assert httpx2.get(base + "/agents/environments?type=self_hosted", headers=headers).json()["data"] == []
    assert enroll(owner, env_id)["environment_id"] == env_id  # the owner still can


def test_the_runtime_refuses_to_start_an_environment_without_a_workspace(local_stack):
    import subprocess

    from tests.e2e.conftest import ROOT

    done = subprocess.run([sys.executable, "-m", "runtime", "--url", local_stack["websocket_url"]], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "AGENTS_CORE_ENROLLMENT_TOKEN": "enr-x",
                               "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}"})
    assert done.returncode == 2 and "--workspace" in done.stderr
