"""Hosted Environments, in process: an operator's Runtime that isolates each openai_hosted Environment
says so in its hello (`isolation`) and becomes `hosted`; placement keeps every kind to its own Turns; an
Environment is bound to the host that first claims one of its Turns; its lifecycle (pending, ready,
connected, disconnected, expired, failed) is told by `turn.environment`, `environment.idle` and the
host's connections; `environments.create` and Sessions that name an Environment. Raw WebSocket clients
play the hosted Runtimes, so every frame is the test's to choose. Given / When / Then."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

import openai
import pytest

from agents_core.apikeys import create_key
from agents_core.runtimes.connections import create_runtime_token
from agents_core.store import unpack
from local.inprocess import wait_for
from runtime.capabilities import declarations
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures

BETA = {"headers": {"OpenAI-Beta": "agents=v1"}}


class HostedRuntime:
    """A raw hosted Runtime connection: hello with `isolation`, every frame recorded, unnumbered heartbeats
    for the Turns it started, and whatever observation a test sends."""

    def __init__(self, stack: Any, host_id: str | None = "host-a", harnesses: tuple[str, ...] = ("scripted",),
                 token: str | None = None, isolation: Any = None):
        self.stack = stack
        self.frames: list[dict[str, Any]] = []
        self.routes: dict[str, dict[str, str]] = {}
        self.seq: dict[str, int] = {}
        self._stop = threading.Event()
        token = token or create_runtime_token(stack.store, "hosted")
        self.conn = stack.ws.connect(lambda text: self.frames.append(json.loads(text)),
                                     {"Authorization": f"Bearer {token}"})
        assert self.conn is not None
        hello: dict[str, Any] = {"action": "runtime.hello", "harnesses": declarations(list(harnesses))}
        if isolation is not None:
            hello["isolation"] = isolation
        elif host_id is not None:
            hello["isolation"] = {"type": "bubblewrap", "host_id": host_id}
        self.send(hello)
        threading.Thread(target=self._beat, daemon=True).start()

    def _beat(self) -> None:
        while not self._stop.wait(0.4):
            for route in list(self.routes.values()):
                self.send({"action": "turn.heartbeat", **route})

    def send(self, message: dict[str, Any]) -> None:
        if self.conn is not None:
            self.stack.ws.receive(self.conn, json.dumps(message))

    def welcome(self) -> dict[str, Any]:
        return wait_for(lambda: [f for f in self.frames if f.get("type") in ("runtime.welcome", "error")],
                        timeout=10)[0]

    def starts(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == "turn.start"]

    def start(self, timeout: float = 15) -> dict[str, Any]:
        start = wait_for(lambda: [m for m in self.starts() if m["turn_id"] not in self.routes], timeout=timeout)[0]
        self.routes[start["turn_id"]] = {k: start[k] for k in ("tenant", "session_id", "turn_id")}
        return start

    def observe(self, turn_id: str, action: str, **fields: Any) -> None:
        self.seq[turn_id] = self.seq.get(turn_id, 0) + 1
        self.send({"action": action, **self.routes[turn_id], "seq": self.seq[turn_id], **fields})

    def complete(self, turn_id: str) -> None:
        self.observe(turn_id, "turn.environment", status="connected", prepared=self.seq.get(turn_id, 0) == 0)
        self.observe(turn_id, "turn.completed")

    def errors(self) -> list[dict[str, Any]]:
        return [f for f in self.frames if f.get("type") == "error"]

    def drop(self) -> None:
        self._stop.set()
        conn, self.conn = self.conn, None
        if conn:
            self.stack.ws.disconnect(conn, code=1006)


def hosted_session(client, script: str | None = "say hi", **environment: Any):
    body: dict[str, Any] = {"agent": {"model": "gpt-5"}, "extra_body": {"x_agents_core": {"harness": "scripted"}},
                            "environment": {"type": "openai_hosted", **environment}}
    if script is not None:
        body["input"] = script
    return client.beta.agents.sessions.create(**body)


def message(text: str) -> dict[str, Any]:
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def outbox_events(stack, session_id: str, tenant: str = "tenant-a") -> list[dict[str, Any]]:
    items = stack.store.query(pk=f"T#{tenant}#SESSION#{session_id}", sk_prefix="OUT#", limit=200,
                              consistent=True).items
    return [e for i in items for e in json.loads(unpack(i["events"]))]


def env_events(stack, session_id: str) -> list[tuple[str, str]]:
    return [(e["type"].rsplit(".", 1)[1], e["environment"]["status"]) for e in outbox_events(stack, session_id)
            if e["type"].startswith("agent.session.environment.")]


def env_item(stack, env_id: str, tenant: str = "tenant-a") -> dict[str, Any]:
    return stack.store.get({"PK": f"T#{tenant}#ENV#{env_id}", "SK": "E"})


def turn_status(client, session_id: str, turn_id: str) -> str:
    return client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session_id).status


def wait_turn(client, session_id: str, turn_id: str, status: str, timeout: float = 20) -> None:
    wait_for(lambda: turn_status(client, session_id, turn_id) == status, timeout=timeout)


# ---- the hosted kind --------------------------------------------------------------------------------

def test_an_operator_runtime_that_declares_isolation_is_hosted_and_declares_in_the_hosted_pool(stack):
    runtime = HostedRuntime(stack, "host-a")
    welcome = runtime.welcome()
    assert welcome["type"] == "runtime.welcome" and welcome["kind"] == "hosted" and welcome["host_id"] == "host-a"
    conn = stack.store.get({"PK": f"CONN#{runtime.conn}", "SK": "C"})
    rows = stack.store.query(pk="RUNTIME#HOSTED#scripted", index="GSI1", limit=10).items
    assert [(r["runtime_kind"], r["host_id"]) for r in rows] == [("hosted", "host-a")]
    assert stack.store.query(pk="RUNTIME#scripted", index="GSI1", limit=10).items == []  # not in the shared pool
    assert (conn["runtime_kind"], conn["host_id"]) == ("hosted", "host-a")


@pytest.mark.parametrize("isolation,param", [
    ("bubblewrap", "isolation"),
    ({"type": "bubblewrap"}, "isolation"),
    ({"type": "bubblewrap", "host_id": "h", "extra": 1}, "isolation"),
    ({"type": "docker", "host_id": "h"}, "isolation.type"),
    ({"type": "bubblewrap", "host_id": "a b"}, "isolation.host_id"),
    ({"type": "bubblewrap", "host_id": "x" * 65}, "isolation.host_id"),
    ({"type": "bubblewrap", "host_id": 7}, "isolation.host_id"),
], ids=["string", "no-host", "unknown-member", "not-bubblewrap", "space", "too-long", "number"])
def test_a_malformed_isolation_is_an_error_frame_naming_it_and_writes_nothing(stack, isolation, param):
    runtime = HostedRuntime(stack, isolation=isolation)
    error = runtime.welcome()
    assert error["type"] == "error" and error["error"]["param"] == param
    assert stack.store.query(pk="RUNTIME#HOSTED#scripted", index="GSI1", limit=10).items == []
    assert stack.store.query(pk="RUNTIME#scripted", index="GSI1", limit=10).items == []


def test_an_environment_connection_declaring_isolation_is_refused_and_spends_nothing(client, stack):
    session = client.beta.agents.sessions.create(agent={"model": "gpt-5"}, extra_body={
        "x_agents_core": {"harness": "scripted"}}, environment={"type": "self_hosted", "workspace_directory": "/w"})
    token = client.post(f"/agents/environments/{session.environment.id}/enrollments", body={}, cast_to=object,
                        options=BETA)["token"]
    machine = HostedRuntime(stack, "host-a", token=token)
    error = machine.welcome()
    assert error["type"] == "error" and error["error"]["param"] == "isolation"
    assert client.beta.agents.environments.retrieve(session.environment.id).status == "pending"
    assert stack.store.query(pk="RUNTIME#HOSTED#scripted", index="GSI1", limit=10).items == []


# ---- placement ------------------------------------------------------------------------------------------

def test_each_kind_serves_only_its_own_placement(client, stack, tmp_path):
    shared = stack.connect_runtime(create_runtime_token(stack.store, "shared"), ["scripted"])
    hosted = HostedRuntime(stack, "host-a")
    hosted.welcome()
    # a none Turn never reaches the hosted Runtime
    none = client.beta.agents.sessions.create(agent={"model": "gpt-5"}, environment={"type": "none"},
                                              input="say none", extra_body={"x_agents_core": {"harness": "scripted"}})
    wait_turn(client, none.id, client.beta.agents.sessions.turns.list(none.id).data[0].id, "completed")
    # a self_hosted Turn never reaches it either
    own = client.beta.agents.sessions.create(agent={"model": "gpt-5"}, input="say mine", environment={
        "type": "self_hosted", "workspace_directory": str(tmp_path)}, extra_body={"x_agents_core": {"harness": "scripted"}})
    stack.poller.pump()
    assert client.beta.agents.sessions.turns.list(own.id).data[0].status == "queued"
    # an openai_hosted Turn reaches the hosted Runtime only
    session = hosted_session(client)
    start = hosted.start()
    assert start["session_id"] == session.id
    assert [s["session_id"] for s in hosted.starts()] == [session.id]
    assert session.id not in {m.get("session_id") for m in shared.inbox if m.get("type") == "turn.start"}
    hosted.complete(start["turn_id"])
    wait_turn(client, session.id, start["turn_id"], "completed")


def test_an_openai_hosted_turn_never_reaches_a_shared_or_enrolled_runtime(client, stack, tmp_path):
    shared = stack.connect_runtime(create_runtime_token(stack.store, "shared"), ["scripted"])
    workspace = client.beta.agents.sessions.create(agent={"model": "gpt-5"}, extra_body={
        "x_agents_core": {"harness": "scripted"}}, environment={"type": "self_hosted",
                                                               "workspace_directory": str(tmp_path)})
    token = client.post(f"/agents/environments/{workspace.environment.id}/enrollments", body={}, cast_to=object,
                        options=BETA)["token"]
    machine = stack.connect_runtime(token, ["scripted"], workspace=str(tmp_path))
    wait_for(lambda: machine.credential, timeout=10)
    session = hosted_session(client)
    stack.poller.pump()
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    assert turn.status == "queued"
    for runtime in (shared, machine):
        assert not [m for m in runtime.inbox if m.get("type") == "turn.start" and m["session_id"] == session.id]
    assert env_events(stack, session.id) == [("pending", "pending")]
    # openai_hosted provisioning never asks for a connection
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []


# ---- turn.start, preparation and lifecycle ---------------------------------------------------------

def test_turn_start_carries_the_preparation_which_no_read_or_event_shows(client, stack):
    hosted = HostedRuntime(stack, "host-a")
    hosted.welcome()
    data = base64.b64encode(b"a,b\n1,2\n").decode()
    session = hosted_session(client, files=[{"type": "inline", "path": "/workspace/data.csv", "data": data}],
                             packages={"python": ["requests==2.32.3"], "npm": ["left-pad"]},
                             setup_commands=[{"command": "echo SECRET-SETUP > /workspace/s"}],
                             env={"API_TOKEN": "SECRET-VALUE"}, network={"access": "enabled"})
    start = hosted.start()
    env_id = session.environment.id
    assert start["environment"]["id"] == env_id
    upload = start["environment"]["hosted"].pop("artifacts")  # the Turn's outputs' upload form (test_artifacts.py)
    assert upload["key_prefix"] == f"artifacts/tenant-a/{session.id}/{start['turn_id']}/"
    assert start["environment"]["hosted"] == {
        "files": [{"path": "/workspace/data.csv", "data": data}],
        "packages": {"python": ["requests==2.32.3"], "npm": ["left-pad"]},
        "setup_commands": [{"command": "echo SECRET-SETUP > /workspace/s", "cwd": "/workspace"}],
        "env": {"API_TOKEN": "SECRET-VALUE"}, "network": {"access": "enabled"}}
    files = [f.model_dump() for f in session.environment.files]
    assert files == [{"id": files[0]["id"], "path": "/workspace/data.csv", "size_bytes": 8, "type": "inline"}]
    assert [f.model_dump() for f in client.beta.agents.environments.retrieve(env_id).files] == files
    hosted.complete(start["turn_id"])
    wait_turn(client, session.id, start["turn_id"], "completed")
    reads = json.dumps([client.beta.agents.sessions.retrieve(session.id).model_dump(),
                        client.beta.agents.environments.retrieve(env_id).model_dump(),
                        client.beta.agents.environments.list().model_dump(), outbox_events(stack, session.id)])
    for secret in ("SECRET-SETUP", "SECRET-VALUE", data):
        assert secret not in reads
    assert "SECRET" not in json.dumps(env_item(stack, env_id), default=str)  # stored packed, apart
    # the first preparation: pending -> ready -> connected
    assert env_events(stack, session.id) == [("pending", "pending"), ("ready", "ready"), ("connected", "connected")]
    assert client.beta.agents.environments.retrieve(env_id).status == "connected"


def test_environment_idle_moves_connected_to_ready_only_from_the_host_that_holds_it(client, stack):
    a = HostedRuntime(stack, "host-a")
    a.welcome()
    session = hosted_session(client)
    start = a.start()
    a.complete(start["turn_id"])
    wait_turn(client, session.id, start["turn_id"], "completed")
    env_id = session.environment.id
    b = HostedRuntime(stack, "host-b")
    b.welcome()
    b.send({"action": "environment.idle", "environment_id": env_id})
    assert wait_for(lambda: b.errors(), timeout=5)[0]["error"]["param"] == "environment_id"
    a.send({"action": "environment.idle", "environment_id": env_id})
    wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "ready", timeout=5)
    assert env_events(stack, session.id)[-1] == ("ready", "ready")
    # the next Turn: connected again, without a second ready (prepared once)
    client.beta.agents.sessions.events.create(session.id, events=[message("say again")])
    again = a.start()
    a.observe(again["turn_id"], "turn.environment", status="connected", prepared=False)
    a.observe(again["turn_id"], "turn.completed")
    wait_turn(client, session.id, again["turn_id"], "completed")
    assert env_events(stack, session.id)[-1] == ("connected", "connected")
    assert b.starts() == []


def test_a_failed_preparation_fails_the_environment_the_turn_and_the_session_and_later_input_is_409(client, stack):
    hosted = HostedRuntime(stack, "host-a")
    hosted.welcome()
    session = hosted_session(client, setup_commands=[{"command": "exit 3"}])
    start = hosted.start()
    error = {"code": "setup_command_failed", "message": "setup_commands[0] exited with status 3",
             "type": "sandbox_error"}
    hosted.observe(start["turn_id"], "turn.environment", status="failed", prepared=False, error=error)
    hosted.observe(start["turn_id"], "turn.failed", error={"message": "setup failed"})
    wait_turn(client, session.id, start["turn_id"], "failed")
    env_id = session.environment.id
    assert client.beta.agents.environments.retrieve(env_id).status == "failed"
    failed = [e for e in outbox_events(stack, session.id) if e["type"] == "agent.session.environment.failed"]
    assert failed[0]["environment"] == {"id": env_id, "type": "openai_hosted", "status": "failed", "error": error}
    turn = client.beta.agents.sessions.turns.retrieve(start["turn_id"], session_id=session.id)
    assert turn.error.code == "sandbox_error" and env_id in turn.error.message and "status 3" in turn.error.message
    read = client.beta.agents.sessions.retrieve(session.id)
    assert read.status == "failed" and env_id in read.error and "status 3" in read.error  # with the reason
    before = stack.store.get({"PK": f"T#tenant-a#SESSION#{session.id}", "SK": "S"})["out_seq"]
    with pytest.raises(openai.ConflictError) as err:
        client.beta.agents.sessions.events.create(session.id, events=[message("say more")])
    assert env_id in err.value.body["message"] and "failed" in err.value.body["message"]
    assert err.value.status_code == 409 and err.value.body["type"] == "conflict_error"
    assert stack.store.get({"PK": f"T#tenant-a#SESSION#{session.id}", "SK": "S"})["out_seq"] == before
    with pytest.raises(openai.ConflictError):  # nor can a new Session name it
        hosted_session(client, environment_id=env_id)


# ---- affinity, disconnection, expiry --------------------------------------------------------------------

def test_an_environment_runs_only_on_the_host_that_holds_it_and_waits_for_that_host(client, stack):
    a = HostedRuntime(stack, "host-a")
    a.welcome()
    session = hosted_session(client)
    first = a.start()
    a.complete(first["turn_id"])
    wait_turn(client, session.id, first["turn_id"], "completed")
    env_id = session.environment.id
    assert env_item(stack, env_id)["host_id"] == "host-a"
    b = HostedRuntime(stack, "host-b")  # a newer connection: dispatch would prefer it, but the host is bound
    b.welcome()
    a.drop()
    wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "disconnected", timeout=10)
    client.beta.agents.sessions.events.create(session.id, events=[message("say later")])
    stack.poller.pump()
    second = client.beta.agents.sessions.turns.list(session.id).data[0]
    assert second.status == "queued" and b.starts() == []
    # the host comes back (a new connection of host-a): ready again, and its queued Turn runs there
    a2 = HostedRuntime(stack, "host-a")
    start = a2.start()
    assert start["turn_id"] == second.id
    a2.observe(start["turn_id"], "turn.environment", status="connected", prepared=False)
    a2.observe(start["turn_id"], "turn.completed")
    wait_turn(client, session.id, second.id, "completed")
    assert b.starts() == []
    assert [k for k, _ in env_events(stack, session.id)] == ["pending", "ready", "connected", "disconnected", "ready",
                                                             "connected"]


def test_a_host_with_another_connection_left_keeps_its_environments(client, stack):
    a1 = HostedRuntime(stack, "host-a")
    a1.welcome()
    a2 = HostedRuntime(stack, "host-a")
    a2.welcome()
    session = hosted_session(client)
    start = wait_for(lambda: a1.starts() + a2.starts(), timeout=15)[0]
    runner = a1 if start in a1.starts() else a2
    runner.routes[start["turn_id"]] = {k: start[k] for k in ("tenant", "session_id", "turn_id")}
    runner.complete(start["turn_id"])
    wait_turn(client, session.id, start["turn_id"], "completed")
    (a2 if runner is a1 else a1).drop()
    stack.poller.pump()
    assert client.beta.agents.environments.retrieve(session.environment.id).status == "connected"
    runner.drop()  # the host's last connection: now its Environments are disconnected
    wait_for(lambda: client.beta.agents.environments.retrieve(session.environment.id).status == "disconnected",
             timeout=10)


def test_a_gone_host_expires_its_environment_after_the_bound_and_input_is_then_409(client, stack, monkeypatch):
    from agents_core import settings

    a = HostedRuntime(stack, "host-a")
    a.welcome()
    session = hosted_session(client)
    first = a.start()
    a.complete(first["turn_id"])
    wait_turn(client, session.id, first["turn_id"], "completed")
    env_id = session.environment.id
    a.drop()
    wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "disconnected", timeout=10)
    monkeypatch.setenv("ENVIRONMENT_WAIT_SECONDS", "1")
    settings.get_settings.cache_clear()
    try:
        client.beta.agents.sessions.events.create(session.id, events=[message("say late")])
        turn = client.beta.agents.sessions.turns.list(session.id).data[0]
        wait_turn(client, session.id, turn.id, "failed")
    finally:
        monkeypatch.setenv("ENVIRONMENT_WAIT_SECONDS", "300")
        settings.get_settings.cache_clear()
    failed = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    assert failed.error.code == "sandbox_error"
    assert env_id in failed.error.message and "host that holds its workspace is gone" in failed.error.message
    assert client.beta.agents.environments.retrieve(env_id).status == "expired"
    assert env_events(stack, session.id)[-1] == ("expired", "expired")
    with pytest.raises(openai.ConflictError) as err:
        client.beta.agents.sessions.events.create(session.id, events=[message("say again")])
    assert env_id in err.value.body["message"] and "expired" in err.value.body["message"]


# ---- environments.create and Sessions that name an Environment ----------------------------------------

def test_environments_create_list_retrieve_and_sessions_that_share_it(client, stack):
    data = base64.b64encode(b"hello").decode()
    created = client.beta.agents.environments.create(environment={
        "type": "openai_hosted", "files": [{"type": "inline", "path": "/workspace/a.txt", "data": data}],
        "setup_commands": [{"command": "touch /workspace/ready"}]})
    assert (created.object, created.type, created.status) == ("agent.environment", "openai_hosted", "pending")
    assert created.id.startswith("env_") and [(f.path, f.size_bytes, f.type) for f in created.files] == [
        ("/workspace/a.txt", 5, "inline")]
    assert client.beta.agents.environments.retrieve(created.id) == created
    assert [e.id for e in client.beta.agents.environments.list(extra_query={"type": "openai_hosted"}).data] == [
        created.id]
    hosted = HostedRuntime(stack, "host-a")
    hosted.welcome()
    one = hosted_session(client, environment_id=created.id)
    assert one.environment.id == created.id and [f.path for f in one.environment.files] == ["/workspace/a.txt"]
    start = hosted.start()
    assert start["environment"]["id"] == created.id
    assert start["environment"]["hosted"]["setup_commands"] == [{"command": "touch /workspace/ready",
                                                                 "cwd": "/workspace"}]
    hosted.complete(start["turn_id"])
    wait_turn(client, one.id, start["turn_id"], "completed")
    two = hosted_session(client, environment_id=created.id)
    start = hosted.start()
    assert start["environment"]["id"] == created.id and start["session_id"] == two.id
    hosted.complete(start["turn_id"])
    wait_turn(client, two.id, start["turn_id"], "completed")
    client.beta.agents.sessions.delete(one.id)  # a Session that only names it leaves it in place
    assert client.beta.agents.environments.retrieve(created.id).status == "connected"
    # another tenant cannot name it
    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    with pytest.raises(openai.NotFoundError) as err:
        hosted_session(other, environment_id=created.id)
    assert err.value.body["message"] == "Resource not found."
    with pytest.raises(openai.NotFoundError):
        hosted_session(client, environment_id="env_missing")


def test_environment_id_with_inline_configuration_is_a_400_that_writes_nothing(client, stack):
    created = client.beta.agents.environments.create(environment={"type": "openai_hosted"})
    before = stack.store.query(pk="T#tenant-a#SESSIONS", index="GSI1", limit=100).items
    with pytest.raises(openai.BadRequestError) as err:
        hosted_session(client, environment_id=created.id, network={"access": "enabled"})
    assert err.value.body["param"] == "environment.network"
    assert "cannot be combined with a template or inline configuration" in err.value.body["message"]
    assert stack.store.query(pk="T#tenant-a#SESSIONS", index="GSI1", limit=100).items == before


@pytest.mark.parametrize("environment,param", [
    ({"files": [{"type": "file_id", "file_id": "file_1"}]}, "environment.files[0].path"),  # a File by id is built
    ({"packages": {"system": ["curl"]}}, "environment.packages.system"),
    ({"network": {"access": "restricted", "allowed_domains": ["example.com"]}}, "environment.network.access"),
    ({"desktop": {"enabled": True}}, "environment.desktop.enabled"),
    ({"environment_template_id": "tmpl_1"}, "environment.environment_template_id"),
    ({"setup_commands": [{"command": " "}]}, "environment.setup_commands[0].command"),
], ids=["file-id", "system-packages", "restricted", "desktop", "template", "blank-command"])
def test_environments_create_rejects_what_is_not_built_and_writes_nothing(client, stack, environment, param):
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.environments.create(environment={"type": "openai_hosted", **environment})
    assert err.value.body["param"] == param
    assert client.beta.agents.environments.list().data == []


def test_environments_create_takes_the_tenants_vaults_only_and_rejects_unknown_members(client, stack):
    vault = client.beta.agents.vaults.create(name="ci")
    created = client.beta.agents.environments.create(environment={"type": "openai_hosted"}, vault_ids=[vault.id])
    assert env_item(stack, created.id)["vault_ids"] == [vault.id]
    other = sdk(stack.http, create_key(stack.store, "tenant-b")).beta.agents.vaults.create(name="theirs")
    for ids in (["vault_missing"], [other.id]):
        with pytest.raises(openai.NotFoundError):
            client.beta.agents.environments.create(environment={"type": "openai_hosted"}, vault_ids=ids)
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.environments.create(environment={"type": "openai_hosted"}, vault_ids=[vault.id] * 11)
    assert err.value.body["param"] == "vault_ids"
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.environments.create(environment={"type": "openai_hosted", "container_size": "large"})
    assert "container_size" in err.value.body["message"]
    assert [e.id for e in client.beta.agents.environments.list().data] == [created.id]


def test_a_named_environment_deleted_with_the_session_that_created_it_refuses_input(client, stack):
    owner = hosted_session(client, script=None)
    named = hosted_session(client, script=None, environment_id=owner.environment.id)
    assert named.environment.id == owner.environment.id
    client.beta.agents.sessions.delete(owner.id)  # its own Environment goes with it
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.environments.retrieve(owner.environment.id)
    with pytest.raises(openai.ConflictError) as err:
        client.beta.agents.sessions.events.create(named.id, events=[message("say hi")])
    assert owner.environment.id in err.value.body["message"] and "no longer exists" in err.value.body["message"]
    assert client.beta.agents.sessions.turns.list(named.id).data == []


def test_the_preparation_is_sealed_at_rest_and_opens_only_for_its_own_environment(client, stack):
    """Setup command bodies, env values and file data are confidential: the Environment item keeps them
    KMS-sealed (envelope, context tenant + Environment), never packed plaintext, for a Session's own
    Environment and for one made with environments.create; a copy onto another Environment never opens."""
    from agents_core import environments
    from agents_core.vault_crypto import SecretUnavailable, default_sealer

    session = hosted_session(client, None, setup_commands=[{"command": "echo SEALED-BODY"}], env={"K": "SEALED-VALUE"})
    made = client.beta.agents.environments.create(environment={
        "type": "openai_hosted", "setup_commands": [{"command": "echo SEALED-TOO"}]})
    for env_id, secret in ((session.environment.id, "SEALED-BODY"), (made.id, "SEALED-TOO")):
        item = env_item(stack, env_id)
        assert "preparation" not in item and set(item["preparation_sealed"]) == {"key", "nonce", "data"}
        raw = json.dumps(item, default=lambda v: str(v) if not hasattr(v, "value") and not isinstance(v, bytes)
                         else bytes(getattr(v, "value", v)).decode("latin-1"))
        assert secret not in raw
        opened = default_sealer().open(item["preparation_sealed"], environments.preparation_context("tenant-a", env_id))
        assert secret in opened
        with pytest.raises(SecretUnavailable):
            default_sealer().open(item["preparation_sealed"], environments.preparation_context("tenant-b", env_id))
    with pytest.raises(SecretUnavailable):  # a sealed preparation copied onto another Environment
        default_sealer().open(env_item(stack, session.environment.id)["preparation_sealed"],
                              environments.preparation_context("tenant-a", made.id))


def test_a_preparation_that_does_not_open_fails_the_turn_before_it_starts(client, stack):
    session = hosted_session(client, "say hi", setup_commands=[{"command": "true"}])
    env_id = session.environment.id
    item = env_item(stack, env_id)
    sealed = dict(item["preparation_sealed"])
    sealed["data"] = bytes(getattr(sealed["data"], "value", sealed["data"]))[:-1] + b"\x00"  # tampered
    stack.store.put({**item, "preparation_sealed": sealed})
    hosted = HostedRuntime(stack, "host-a")
    hosted.welcome()
    turn = client.beta.agents.sessions.turns.list(session.id).data[0]
    wait_turn(client, session.id, turn.id, "failed")
    failed = client.beta.agents.sessions.turns.retrieve(turn.id, session_id=session.id)
    assert "preparation could not be opened" in json.dumps(failed.model_extra)
    assert not [f for f in hosted.frames if f.get("type") == "turn.start"]
