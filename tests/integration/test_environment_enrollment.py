"""Environments, in process: a workspace Session runs only in its own Environment, never on a shared
Runtime; enrollment connects exactly that Environment; connection state, the required action and the
bounded wait. Given / When / Then, each test named after the behaviour."""

import json
import os

import openai
import pytest

from agents_core.apikeys import create_key
from agents_core.runtimes.connections import create_runtime_token
from agents_core.store import unpack
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures

BETA = {"headers": {"OpenAI-Beta": "agents=v1"}}  # an extension route: the SDK has no method that sets it


def self_hosted(client, script=None, workspace="/workspace", harness="scripted"):
    body = {"agent": {"model": "gpt-5"}, "extra_body": {"x_agents_core": {"harness": harness}},
            "environment": {"type": "self_hosted", "workspace_directory": workspace}}
    if script is not None:
        body["input"] = script
    return client.beta.agents.sessions.create(**body)


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def enroll(client, env_id):
    return client.post(f"/agents/environments/{env_id}/enrollments", body={}, cast_to=object, options=BETA)


def outbox_events(stack, tenant, session_id):
    items = stack.store.query(pk=f"T#{tenant}#SESSION#{session_id}", sk_prefix="OUT#", limit=100,
                              consistent=True).items
    return [e for i in items for e in json.loads(unpack(i["events"]))]


def starts(runtime):
    return [m for m in runtime.inbox if m.get("type") == "turn.start"]


@pytest.fixture
def shared(stack):
    """The operator's shared Runtime: it serves environment none, for every tenant."""
    return stack.connect_runtime(create_runtime_token(stack.store, "shared"), ["scripted"])


def test_a_self_hosted_session_never_runs_on_the_shared_runtime_and_asks_for_its_environment(client, stack, shared):
    session = self_hosted(client, "say hello")
    env_id = session.environment.id
    assert env_id == "env_" + session.id.removeprefix("sess_")
    assert session.environment.remote_url == os.environ["WEBSOCKET_URL"]
    # the required action before any Turn runs
    read = client.beta.agents.sessions.retrieve(session.id)
    assert read.status == "requires_action"
    assert [a.model_dump() for a in read.required_actions] == [
        {"environment_id": env_id, "type": "environment_connection"}]
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    assert turn.status == "queued"
    stack.poller.pump()
    assert starts(shared) == []  # the shared Runtime never gets it
    env = client.beta.agents.environments.retrieve(env_id)
    assert (env.object, env.type, env.status, env.files, env.plugins, env.skills) == (
        "agent.environment", "self_hosted", "pending", [], [], [])
    assert [e.id for e in client.beta.agents.environments.list(extra_query={"type": "self_hosted"}).data] == [env_id]
    assert client.beta.agents.environments.list().data == []  # the SDK's default type is openai_hosted


def test_an_offline_environment_without_pending_input_asks_for_nothing(client):
    session = self_hosted(client)
    assert session.status == "idle" and session.required_actions == []


def test_enrollment_connects_exactly_that_environment_and_the_waiting_input_runs(client, stack, shared, tmp_path):
    session = self_hosted(client, "say hello from my machine", workspace=str(tmp_path))
    env_id = session.environment.id
    enrollment = enroll(client, env_id)
    assert set(enrollment) == {"object", "environment_id", "token", "expires_at", "command", "exec_server"}
    assert enrollment["object"] == "agent.environment.enrollment" and enrollment["environment_id"] == env_id
    assert enrollment["token"].startswith("enr-") and enrollment["expires_at"] > 0
    command = enrollment["command"]
    assert command.startswith("AGENTS_CORE_ENROLLMENT_TOKEN=") and "--enrollment-token " not in command
    assert f"--url {os.environ['WEBSOCKET_URL']}" in command and f"--workspace {tmp_path}" in command
    # the token is stored hashed: nothing in the table holds it
    assert enrollment["token"] not in json.dumps([i for i in stack.store.query(
        pk=f"T#tenant-a#ENV#{env_id}", limit=10).items], default=str)

    machine = stack.connect_runtime(enrollment["token"], ["scripted"], workspace=str(tmp_path))
    wait_for(lambda: machine.credential, timeout=10)
    assert machine.credential.startswith("rte-")
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id).status
             == "completed", timeout=20)
    read = client.beta.agents.sessions.retrieve(session.id)
    assert read.required_actions == [] and read.status == "idle"
    assert client.beta.agents.environments.retrieve(env_id).status == "connected"
    assert [m["turn_id"] for m in starts(machine)] == [turn.id] and starts(shared) == []
    start = starts(machine)[0]
    assert start["environment"]["workspace_directory"] == str(tmp_path)
    connected = [e for e in outbox_events(stack, "tenant-a", session.id)
                 if e["type"] == "agent.session.environment.connected"]
    assert connected and connected[0]["environment"] == {"id": env_id, "type": "self_hosted",
                                                         "status": "connected", "error": None}
    # single use: the same token cannot connect again
    with pytest.raises(PermissionError):
        stack.connect_runtime(enrollment["token"], ["scripted"], workspace=str(tmp_path))


def test_a_runtime_enrolled_for_environment_a_never_receives_environment_b_turns(client, stack, tmp_path):
    a = self_hosted(client)
    b = self_hosted(client)
    machine = stack.connect_runtime(enroll(client, a.environment.id)["token"], ["scripted"], workspace=str(tmp_path))
    wait_for(lambda: machine.credential, timeout=10)
    client.beta.agents.sessions.events.create(b.id, events=[message("say for b")])
    stack.poller.pump()
    assert starts(machine) == []
    assert client.beta.agents.sessions.retrieve(b.id).required_actions[0].environment_id == b.environment.id
    # nor a none Session's
    none = client.beta.agents.sessions.create(agent={"model": "gpt-5"}, environment={"type": "none"},
                                              input="say none", extra_body={"x_agents_core": {"harness": "scripted"}})
    stack.poller.pump()
    assert starts(machine) == [] and client.beta.agents.sessions.turns.list(none.id).data[0].status == "queued"


def test_a_foreign_or_missing_environment_is_404_on_every_route(client, stack):
    session = self_hosted(client)
    env_id = session.environment.id
    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    for call in (lambda c: c.beta.agents.environments.retrieve(env_id),
                 lambda c: enroll(c, env_id),
                 lambda c: c.beta.agents.environments.list(extra_query={"type": "self_hosted", "after": env_id})):
        with pytest.raises(openai.NotFoundError) as err:
            call(other)
        assert err.value.body["message"] == "Resource not found."
    for missing in ("env_missing", "sess_x", "env_" + "x" * 200):
        with pytest.raises(openai.NotFoundError):
            client.beta.agents.environments.retrieve(missing)
    assert other.beta.agents.environments.list(extra_query={"type": "self_hosted"}).data == []


def test_an_enrollment_request_with_a_body_member_is_a_400_and_writes_nothing(client, stack):
    session = self_hosted(client)
    before = stack.store.query(pk="T#tenant-a#ENV#" + session.environment.id, limit=10).items
    with pytest.raises(openai.BadRequestError) as err:
        client.post(f"/agents/environments/{session.environment.id}/enrollments", body={"ttl": 5}, cast_to=object,
                    options=BETA)
    assert err.value.body["message"] == "Unknown parameter: 'ttl'."
    assert stack.store.query(pk="T#tenant-a#ENV#" + session.environment.id, limit=10).items == before
    with pytest.raises(openai.BadRequestError):
        client.beta.agents.environments.create(environment={"type": "self_hosted"})


def test_the_durable_credential_reconnects_and_a_newer_enrollment_replaces_it(client, stack, tmp_path):
    session = self_hosted(client, "say one", workspace=str(tmp_path))
    first = stack.connect_runtime(enroll(client, session.environment.id)["token"], ["scripted"],
                                  workspace=str(tmp_path))
    wait_for(lambda: first.credential, timeout=10)
    credential = first.credential
    first.kill()
    wait_for(lambda: client.beta.agents.environments.retrieve(session.environment.id).status == "disconnected",
             timeout=10)
    again = stack.connect_runtime(credential, ["scripted"], workspace=str(tmp_path))  # a reconnect
    wait_for(lambda: client.beta.agents.environments.retrieve(session.environment.id).status == "connected",
             timeout=10)
    again.kill()
    newer = stack.connect_runtime(enroll(client, session.environment.id)["token"], ["scripted"],
                                  workspace=str(tmp_path))
    wait_for(lambda: newer.credential, timeout=10)
    with pytest.raises(PermissionError):
        stack.connect_runtime(credential, ["scripted"], workspace=str(tmp_path))  # replaced
    kinds = [e["type"] for e in outbox_events(stack, "tenant-a", session.id)
             if e["type"].startswith("agent.session.environment.")]
    assert kinds[:3] == ["agent.session.environment.connected", "agent.session.environment.disconnected",
                         "agent.session.environment.connected"]


def test_a_session_workspace_other_than_the_bound_directory_fails_its_turn_saying_so(client, stack, tmp_path):
    session = self_hosted(client, "say hi", workspace="/somewhere/else")
    machine = stack.connect_runtime(enroll(client, session.environment.id)["token"], ["scripted"],
                                    workspace=str(tmp_path))
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id).status == "failed",
             timeout=20)
    failed = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    message = failed.model_extra["x_agents_core"]["error"]["message"]
    assert "/somewhere/else" in message and str(tmp_path) in message and "/workspace" in message
    assert machine.credential


def test_input_waits_a_bounded_time_then_fails_clearly_and_a_later_turn_runs(client, stack, monkeypatch, tmp_path):
    from agents_core import settings

    monkeypatch.setenv("ENVIRONMENT_WAIT_SECONDS", "1")
    settings.get_settings.cache_clear()
    session = self_hosted(client, "say too early", workspace=str(tmp_path))
    env_id = session.environment.id
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id).status == "failed",
             timeout=20)
    failed = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    assert failed.error.code == "sandbox_error"
    assert env_id in failed.error.message and "did not connect within 1 seconds" in failed.error.message
    read = client.beta.agents.sessions.retrieve(session.id)
    assert read.required_actions == [] and read.status == "failed"
    monkeypatch.setenv("ENVIRONMENT_WAIT_SECONDS", "300")
    settings.get_settings.cache_clear()
    stack.connect_runtime(enroll(client, env_id)["token"], ["scripted"], workspace=str(tmp_path))
    wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "connected", timeout=10)
    client.beta.agents.sessions.events.create(session.id, events=[message("say now")])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=20)
    assert client.beta.agents.sessions.turns.list(session.id).data[0].status == "completed"


def test_deleting_the_session_deletes_its_environment_and_revokes_its_credential(client, stack, tmp_path):
    session = self_hosted(client, workspace=str(tmp_path))
    machine = stack.connect_runtime(enroll(client, session.environment.id)["token"], ["scripted"],
                                    workspace=str(tmp_path))
    wait_for(lambda: machine.credential, timeout=10)
    client.beta.agents.sessions.delete(session.id)
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.environments.retrieve(session.environment.id)
    with pytest.raises(PermissionError):
        stack.connect_runtime(machine.credential, ["scripted"], workspace=str(tmp_path))


def test_an_expired_enrollment_connects_nothing_and_one_that_expires_before_hello_is_not_spent(client, stack, tmp_path):
    import hashlib

    session = self_hosted(client, "say late", workspace=str(tmp_path))
    token = enroll(client, session.environment.id)["token"]
    key = {"PK": "ENROLL#" + hashlib.sha256(token.encode()).hexdigest(), "SK": "N"}
    stored = stack.store.get(key)
    assert stored["tenant"] == "tenant-a" and "token" not in json.dumps(stored, default=str).replace("ENROLL#", "")
    stack.store.put({**stored, "expires_at": 1})  # expired
    with pytest.raises(PermissionError):
        stack.connect_runtime(token, ["scripted"], workspace=str(tmp_path))
    # valid at $connect, expired by runtime.hello: the hello is refused, nothing is spent or connected
    fresh = enroll(client, session.environment.id)["token"]
    fresh_key = {"PK": "ENROLL#" + hashlib.sha256(fresh.encode()).hexdigest(), "SK": "N"}
    frames = []
    conn = stack.ws.connect(lambda text: frames.append(json.loads(text)), {"Authorization": f"Bearer {fresh}"})
    assert conn is not None
    stack.store.put({**stack.store.get(fresh_key), "expires_at": 1})
    from runtime.capabilities import declarations

    stack.ws.receive(conn, json.dumps({"action": "runtime.hello", "harnesses": declarations(["scripted"])}))
    error = wait_for(lambda: [f for f in frames if f.get("type") == "error"], timeout=5)[0]
    assert "used or has expired" in error["error"]["message"]
    assert not [f for f in frames if f.get("type") == "runtime.welcome"]
    assert "used_at" not in stack.store.get(fresh_key)
    assert client.beta.agents.environments.retrieve(session.environment.id).status == "pending"
    assert client.beta.agents.sessions.turns.list(session.id).data[0].status == "queued"


def test_a_connection_forgotten_after_a_gone_post_leaves_its_environment_disconnected(client, stack, tmp_path):
    """A post that meets GoneException forgets the connection before `$disconnect` arrives (which then
    finds nothing): the Environment must not stay `connected` to a socket that is gone."""
    from agents_core.runtimes import connections

    session = self_hosted(client, workspace=str(tmp_path))
    machine = stack.connect_runtime(enroll(client, session.environment.id)["token"], ["scripted"],
                                    workspace=str(tmp_path))
    wait_for(lambda: machine.credential, timeout=10)
    connections.forget_connection(stack.store, machine.connection_id)  # what post_safely does on Gone
    assert client.beta.agents.environments.retrieve(session.environment.id).status == "disconnected"
    machine.kill()  # the late $disconnect changes nothing more
    kinds = [e["type"] for e in outbox_events(stack, "tenant-a", session.id)
             if e["type"].startswith("agent.session.environment.")]
    assert kinds == ["agent.session.environment.connected", "agent.session.environment.disconnected"]
