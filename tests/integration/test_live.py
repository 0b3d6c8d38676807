"""Live events in one process: subscriptions, fan-out in commit order, tenant isolation, GoneException
cleanup, no replay on reconnect, and no duplicates when a stream batch is redelivered."""

import json
import tempfile

import pytest
from openai.types.beta.agent_session_event import AgentSessionEvent
from pydantic import TypeAdapter

from agents_core import keys as key_schema
from agents_core import outbox
from agents_core.apikeys import create_key
from agents_core.aws import default_messenger, default_workflow
from agents_core.runtimes import connections
from agents_core.store import unpack
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import stack  # noqa: F401 - fixtures

EVENT = TypeAdapter(AgentSessionEvent)


@pytest.fixture
def keys(stack):
    return {"a": create_key(stack.store, "tenant-a"), "b": create_key(stack.store, "tenant-b")}


class Subscriber:
    def __init__(self, stack, key):
        self.stack = stack
        self.messages = []
        self.connection_id = stack.ws.connect(lambda text: self.messages.append(json.loads(text)),
                                              {"Authorization": f"Bearer {key}"})

    def subscribe(self, session_id):
        self.stack.ws.message(self.connection_id, json.dumps({"action": "subscribe", "session_id": session_id}))
        return self.messages[-1]

    @property
    def events(self):
        return [m for m in self.messages if m.get("type", "").startswith("agent.session")]


def idle_session(client, stack=None, raw=False):
    """An idle workspace Session; with `stack`, its Environment connected by a scripted machine (or, with
    `raw`, a hand-driven one, returned beside it): no shared Runtime serves a workspace Session."""
    session = client.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/workspace"},
                                                 agent={"model": "gpt-5"},
                                                 extra_body={"x_agents_core": {"harness": "scripted"}})
    if stack is None:
        return session
    from agents_core import environments
    from tests.integration.raw_runtime import RawRuntime

    tenant = stack.store.tenant_for_api_key(client.api_key)
    token = environments.enroll(stack.store, tenant, session.environment.id, None)["token"]
    if raw:
        return session, RawRuntime(stack, token=token)
    machine = stack.connect_runtime(token, ["scripted"], workspace=tempfile.mkdtemp(prefix="workspace-"))
    wait_for(lambda: machine.credential, timeout=10)
    return session


def send(client, session_id, text):
    client.beta.agents.sessions.events.create(session_id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": text}]}]}])


def test_subscriber_receives_the_committed_events_in_order_once(stack, keys):
    client = sdk(stack.http, keys["a"])
    session = idle_session(client, stack)
    sub = Subscriber(stack, keys["a"])
    assert sub.subscribe(session.id) == {"type": "subscribed", "session_id": session.id}
    send(client, session.id, "say hello")
    wait_for(lambda: any(e["type"] == "agent.session.idle" for e in sub.events))
    kinds = [e["type"] for e in sub.events]
    assert kinds[:4] == ["agent.session.turn.created", "agent.session.turn.item.added", "agent.session.in_progress",
                         "agent.session.turn.in_progress"]
    assert kinds[-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    ids = [e["event_id"] for e in sub.events]
    assert len(ids) == len(set(ids))
    for event in sub.events:
        EVENT.validate_python(event)  # exactly the official agent.session.* shapes


def test_foreign_session_subscription_gets_an_error_and_nothing(stack, keys):
    client = sdk(stack.http, keys["a"])
    session = idle_session(client, stack)
    spy = Subscriber(stack, keys["b"])
    reply = spy.subscribe(session.id)
    assert reply["type"] == "error" and reply["error"]["message"] == "Resource not found."
    send(client, session.id, "say secret")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle")
    assert spy.events == []


def test_a_gone_connection_is_deleted_on_the_next_post(stack, keys):
    client = sdk(stack.http, keys["a"])
    session = idle_session(client, stack)
    ghost = Subscriber(stack, keys["a"])
    ghost.subscribe(session.id)
    live = Subscriber(stack, keys["a"])
    live.subscribe(session.id)
    stack.ws.connections.pop(ghost.connection_id)  # the socket vanished without a $disconnect
    assert stack.store.get({"PK": f"CONN#{ghost.connection_id}", "SK": "C"}) is not None
    send(client, session.id, "say hi")
    wait_for(lambda: any(e["type"] == "agent.session.idle" for e in live.events))
    assert stack.store.get({"PK": f"CONN#{ghost.connection_id}", "SK": "C"}) is None
    assert stack.store.get({"PK": f"CONN#{live.connection_id}", "SK": "C"}) is not None  # not the sender's


def test_reconnecting_gets_no_replay(stack, keys):
    client = sdk(stack.http, keys["a"])
    session = idle_session(client, stack)
    first = Subscriber(stack, keys["a"])
    first.subscribe(session.id)
    send(client, session.id, "say one")
    wait_for(lambda: any(e["type"] == "agent.session.idle" for e in first.events))
    stack.ws.disconnect(first.connection_id)
    again = Subscriber(stack, keys["a"])
    again.subscribe(session.id)
    import time
    time.sleep(0.3)
    assert again.events == []


def test_redelivered_stream_batch_posts_nothing_twice(stack, keys):
    client = sdk(stack.http, keys["a"])
    session = idle_session(client)
    sub = Subscriber(stack, keys["a"])
    sub.subscribe(session.id)
    send(client, session.id, "say hi")  # no Runtime: the Turn stays queued, its Session asking for its
    # Environment; the commit has 4 events (turn.created, item.added, in_progress, requires_action)
    outbox_item = wait_for(lambda: [i for i in stack.store.query(pk=key_schema.session_partition("tenant-a", session.id),
                                                                 sk_prefix="OUT#", limit=10).items
                                    if "turn.created" in unpack(i["events"])])[0]
    wait_for(lambda: len(sub.events) == 4)
    for _ in range(2):  # the same record delivered again, twice
        outbox.process(outbox_item, stack.store, default_messenger(), default_workflow())
    assert len(sub.events) == 4
    assert [e["event_id"] for e in sub.events] == [e["event_id"] for e in json.loads(unpack(outbox_item["events"]))]


def test_stream_ticket_is_single_use_and_subscribes(stack, keys):
    client = sdk(stack.http, keys["a"])
    session = idle_session(client)
    ticket = client.post(f"/agents/sessions/{session.id}/stream_tickets", cast_to=object,
                         options={"headers": {"OpenAI-Beta": "agents=v1"}})
    assert ticket["object"] == "agent.session.stream_ticket" and ticket["session_id"] == session.id
    got = []
    conn = stack.ws.connect(lambda text: got.append(json.loads(text)), {}, {"ticket": ticket["ticket"]})
    assert conn is not None
    assert connections.connection(stack.store, conn)["tenant"] == "tenant-a"
    assert stack.ws.connect(lambda text: None, {}, {"ticket": ticket["ticket"]}) is None  # single use
    send(client, session.id, "say hi")
    wait_for(lambda: len(got) >= 3)  # the new Turn's three events (no reply is posted during $connect)
    other = sdk(stack.http, keys["b"])
    import openai
    with pytest.raises(openai.NotFoundError):
        other.post(f"/agents/sessions/{session.id}/stream_tickets", cast_to=object,
                   options={"headers": {"OpenAI-Beta": "agents=v1"}})


@pytest.mark.parametrize("frame", ["[" * 10_000 + "]" * 10_000, '{"action": ' + "[" * 5_000 + "]" * 5_000 + "}"])
def test_a_deeply_nested_frame_gets_an_error_frame_and_the_connection_stays(stack, keys, frame):
    sub = Subscriber(stack, keys["a"])
    stack.ws.message(sub.connection_id, frame)
    reply = wait_for(lambda: [m for m in sub.messages if m.get("type") == "error"], timeout=5)[0]
    assert reply["error"]["type"] == "invalid_request_error"
    assert sub.connection_id in stack.ws.connections
    session = idle_session(sdk(stack.http, keys["a"]))
    assert sub.subscribe(session.id) == {"type": "subscribed", "session_id": session.id}  # still usable
