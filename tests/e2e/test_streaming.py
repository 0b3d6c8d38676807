"""SSE on the local stack, through the REST API gateway and the streaming function's own ASGI app (the
app the Lambda Web Adapter runs in AWS), driven by the official SDK: `events.stream`, the
`sessions.stream` helper (tool handlers, output_type), `create(stream=True)`, tenant isolation before
any byte, a client leaving mid-stream, a stream reaching its maximum duration, and the official
envelope for what the gateway answers itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx2
import openai
import pytest
from openai import OpenAI
from pydantic import BaseModel

from tests.e2e.conftest import ROOT, _wait_file, connected, tenant_client

pytestmark = pytest.mark.e2e
FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
SCRIPTED = {"x_agents_core": {"harness": "scripted"}}


def idle_session(client, **agent):
    return connected(client, client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/work"},
        agent={"model": "gpt-5", **agent}, extra_body=SCRIPTED))


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def test_events_stream_delivers_a_turns_committed_events_in_order_once(client):
    session = idle_session(client)
    stream = client.beta.agents.sessions.events.stream(session.id)  # subscribed when this returns
    client.beta.agents.sessions.events.create(session.id, events=[message("say Hello\nsay Bye")])
    events = []
    for event in stream:
        events.append(event)
        if event.type == "agent.session.idle":
            break
    stream.close()
    types = [e.type for e in events]
    assert types[:4] == ["agent.session.turn.created", "agent.session.turn.item.added",
                         "agent.session.in_progress", "agent.session.turn.in_progress"]
    assert types[-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    assert len({e.event_id for e in events}) == len(events)
    texts = [e.item.content[0].text for e in events if e.type == "agent.session.turn.item.done"
             and e.item.type == "message" and e.item.role == "assistant"]
    assert texts == ["Hello", "Bye"]


def test_sessions_stream_helper_with_output_type(client):
    class Weather(BaseModel):
        city: str
        sunny: bool

    schema = {"type": "object", "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
              "required": ["city", "sunny"], "additionalProperties": False}
    session = idle_session(client, text={"format": {"type": "json_schema", "schema": schema}})
    with client.beta.agents.sessions.stream(session.id, input='answer {"city": "Paris", "sunny": true}',
                                            output_type=Weather) as stream:
        result = stream.get_final_result()
    assert result.output_parsed == Weather(city="Paris", sunny=True)


def test_sessions_stream_helper_with_tool_handlers(client):
    session = idle_session(client, tools=[FN])
    seen = []
    with client.beta.agents.sessions.stream(session.id, input='call get_weather {"city": "Oslo"}\nsay Cold.',
                                            tool_handlers={"get_weather": lambda args: seen.append(args) or "cold"}
                                            ) as stream:
        result = stream.get_final_result()
    assert seen and result.output_text == "Cold."


def test_create_stream_true_opens_with_the_created_session_then_the_first_turn(client):
    stream = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"},
                                                input="say Streamed", stream=True, extra_body=SCRIPTED)
    events = []
    for event in stream:
        events.append(event)
        if event.type == "agent.session.idle" and len(events) > 1:
            break
    stream.close()
    assert events[0].type == "agent.session.created"
    session = events[0].session
    assert client.beta.agents.sessions.retrieve(session.id).id == session.id
    assert [e.type for e in events[1:3]] == ["agent.session.turn.created", "agent.session.turn.item.added"]
    assert events[-1].type == "agent.session.idle"


def drained(stream, seconds=30):
    """Every event of a stream, iterated to its end (not broken off), or an AssertionError when the
    stream does not end by itself within `seconds`."""
    events, done = [], threading.Event()

    def read():
        for event in stream:
            events.append(event)
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(seconds), f"the stream did not end: {[e.type for e in events]}"
    return events


@pytest.mark.parametrize("script,last", [("say Streamed", "agent.session.idle"), ("fail boom", "agent.session.failed")])
def test_a_create_stream_ends_right_after_the_turn_settles(client, script, last):
    stream = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"},
                                                input=script, stream=True, extra_body=SCRIPTED)
    events = drained(stream)
    assert events[0].type == "agent.session.created" and events[-1].type == last
    assert [e.type for e in events].count(last) == 1
    assert events[0].session.status == "in_progress"  # the committed Session, as the JSON create returns it
    if last == "agent.session.failed":
        assert events[-1].session.error == "The execution could not complete."
        assert client.beta.agents.sessions.retrieve(events[0].session.id).error == "The execution could not complete."


def test_a_create_stream_that_starts_no_turn_ends_after_created(client):
    stream = client.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/work"},
                                                agent={"model": "gpt-5"}, stream=True, extra_body=SCRIPTED)
    events = drained(stream, seconds=10)
    assert [e.type for e in events] == ["agent.session.created"] and events[0].session.status == "idle"


def test_create_stream_true_with_tool_handlers_collects_the_first_turns_result(client):
    # environment none: a new self_hosted Environment is offline when its first input arrives, and the
    # helper rightly stops at the environment_connection action it cannot answer
    stream = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [FN]},
        input='call get_weather {"city": "Rome"}\nsay Warm.', stream=True, extra_body=SCRIPTED,
        tool_handlers={"get_weather": lambda args: "warm"})
    assert stream.get_final_result().output_text == "Warm."


def test_a_rejected_streamed_create_is_a_400_with_the_envelope(client):
    with pytest.raises(openai.BadRequestError) as err:
        client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5", "tools": [
            {"type": "code_interpreter"}]}, input="x", stream=True, extra_body=SCRIPTED)
    assert err.value.body["param"] == "agent.tools[0].type"


def other_tenant_key(local_stack, tenant="intruder"):
    return tenant_client(local_stack, tenant).api_key


def sse_headers(key):
    return {"Authorization": f"Bearer {key}", "OpenAI-Beta": "agents=v1", "Accept": "text/event-stream"}


def test_a_foreign_session_is_404_before_any_byte(client, local_stack):
    session = idle_session(client)
    intruder = OpenAI(base_url=local_stack["base_url"], api_key=other_tenant_key(local_stack), max_retries=0)
    with pytest.raises(openai.NotFoundError) as err:
        intruder.beta.agents.sessions.events.stream(session.id)
    assert err.value.body["type"] == "not_found_error"
    with httpx2.Client(timeout=5) as http, http.stream(
            "GET", f"{local_stack['base_url']}/agents/sessions/{session.id}/events",
            headers=sse_headers(intruder.api_key)) as response:
        assert response.status_code == 404 and response.headers["content-type"] == "application/json"
        assert json.loads(response.read())["error"]["message"] == "Resource not found."


def test_a_client_leaving_mid_stream_leaves_the_stack_serving(client, local_stack):
    session = idle_session(client)
    url = f"{local_stack['base_url']}/agents/sessions/{session.id}/events"
    for _ in range(5):  # open, read the first bytes, go away
        with httpx2.Client(timeout=5) as http, http.stream("GET", url, headers=sse_headers(client.api_key)) as response:
            assert response.status_code == 200
            assert next(response.iter_text()).startswith(": stream open")
    stream = client.beta.agents.sessions.events.stream(session.id)
    client.beta.agents.sessions.events.create(session.id, events=[message("say Still here")])
    for event in stream:
        if event.type == "agent.session.idle":
            break
    stream.close()
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert items[-1].content[0].text == "Still here"


GATEWAY_ROUTES = [  # one per route family: Agents, Sessions, a Session, its events (both), Turns, Items
    ("GET", "/agents"), ("POST", "/agents"), ("GET", "/agents/agent_x"), ("GET", "/agents/sessions"),
    ("POST", "/agents/sessions"), ("GET", "/agents/sessions/sess_x"), ("DELETE", "/agents/sessions/sess_x"),
    ("GET", "/agents/sessions/sess_x/events"), ("POST", "/agents/sessions/sess_x/events"),
    ("GET", "/agents/sessions/sess_x/turns"), ("GET", "/agents/sessions/sess_x/turns/turn_x/items"),
    ("GET", "/agents/sessions/sess_x/items"),
]


@pytest.mark.parametrize("method,path", GATEWAY_ROUTES)
def test_a_missing_key_is_the_official_401_on_every_route_family(local_stack, method, path):
    response = httpx2.request(method, local_stack["base_url"] + path, headers={"OpenAI-Beta": "agents=v1"},
                              content=b"{}", timeout=5)
    assert response.status_code == 401 and response.headers["x-should-retry"] == "false"
    assert response.json()["error"]["code"] == "invalid_api_key"
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}


@pytest.mark.parametrize("method,path", [
    ("PUT", "/agents"), ("PATCH", "/agents/agent_x"), ("PUT", "/agents/sessions"), ("PATCH", "/agents/sessions/s"),
    ("PUT", "/agents/sessions/s/events"), ("POST", "/agents/sessions/s/turns"), ("DELETE", "/agents/sessions/s/items"),
    ("POST", "/agents/sessions/s/turns/t/items"),
])
def test_a_known_route_with_another_method_is_the_official_405_on_every_route_family(client, local_stack, method,
                                                                                      path):
    response = httpx2.request(method, local_stack["base_url"] + path, content=b"{}", timeout=5,
                              headers={"Authorization": f"Bearer {client.api_key}", "OpenAI-Beta": "agents=v1"})
    assert response.status_code == 405 and response.headers["x-should-retry"] == "false"
    assert response.json()["error"] == {"message": f"Invalid method for URL ({method} /v1{path}).",
                                        "type": "invalid_request_error", "param": None, "code": "method_not_allowed"}


@pytest.mark.parametrize("path", ["/nothing", "/agents/sessions/s/turns/t/items/i", "/agents/sessions/s/x"])
def test_an_unknown_route_is_the_official_404(client, local_stack, path):
    response = httpx2.request("GET", local_stack["base_url"] + path, timeout=5,
                              headers={"Authorization": f"Bearer {client.api_key}", "OpenAI-Beta": "agents=v1"})
    assert response.status_code == 404 and response.headers["x-should-retry"] == "false"
    assert response.json()["error"] == {"message": "Invalid URL: no route matches this path.",
                                        "type": "not_found_error", "param": None, "code": "invalid_url"}


@pytest.fixture(scope="module")
def short_stack(tmp_path_factory):
    """A second local stack whose streams end after 2 s and ping after 1 s idle (STREAM_MAX_SECONDS,
    STREAM_PING_SECONDS), as the deployed stack's end before API Gateway's 15 minutes."""
    state = tmp_path_factory.mktemp("short") / "stack.json"
    env = {**os.environ, "AGENTS_CORE_HTTP_PORT": "0", "AGENTS_CORE_WS_PORT": "0", "AGENTS_CORE_MOTO_PORT": "0",
           "AGENTS_CORE_STACK_FILE": str(state), "AGENTS_CORE_START_RUNTIME": "0", "STREAM_MAX_SECONDS": "2",
           "STREAM_PING_SECONDS": "1", "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}"}
    process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env,  # noqa: S603
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    info = _wait_file(state, process)
    yield info
    process.send_signal(signal.SIGTERM)  # SIGINT is not always honoured in time: it waited 15 s for the kill
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def test_a_stream_reaching_its_maximum_duration_ends_cleanly(short_stack):
    client = OpenAI(base_url=short_stack["base_url"], api_key=short_stack["api_key"], max_retries=0)
    session = idle_session(client)
    started = time.monotonic()
    assert list(client.beta.agents.sessions.events.stream(session.id)) == []  # ended: no error, no event
    assert 1.5 < time.monotonic() - started < 6
    with httpx2.Client(timeout=10) as http, http.stream(
            "GET", f"{short_stack['base_url']}/agents/sessions/{session.id}/events",
            headers=sse_headers(client.api_key)) as response:
        body = response.read().decode()
    assert body.startswith(": stream open\n\n") and ": ping\n\n" in body  # an idle stream is kept open
    # the caller recovers by reading the Session
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"


def test_events_keep_coming_on_the_next_stream_after_the_maximum(short_stack):
    client = OpenAI(base_url=short_stack["base_url"], api_key=short_stack["api_key"], max_retries=0)
    session = idle_session(client)
    stream = client.beta.agents.sessions.events.stream(session.id)
    client.beta.agents.sessions.events.create(session.id, events=[message("say queued")])
    got = []
    reader = threading.Thread(target=lambda: got.extend(stream), daemon=True)
    reader.start()
    reader.join(10)
    # no Runtime on this stack: the Turn is committed and queued; its events arrive before the clean end
    assert [e.type for e in got][:3] == ["agent.session.turn.created", "agent.session.turn.item.added",
                                         "agent.session.in_progress"]
