"""The streaming function's app (functions/session_stream) behind the REST API gateway, in process:
streamed Session creation, live-only SSE from committed outbox records, pings, the clean end at the
maximum duration, the official `error` event, tenant isolation before any byte."""

import dataclasses
import json
import sys
import threading
import time

import pytest
from openai.types.beta.agent_session_event import AgentSessionEvent
from pydantic import TypeAdapter

from agents_core import session_events as sse
from agents_core import settings as settings_module
from tests.integration.conftest import scan

EVENT = TypeAdapter(AgentSessionEvent)
APP = "functions_session_stream_app"


@pytest.fixture
def short_streams(monkeypatch, handlers):
    """Streams end after 1 s (STREAM_MAX_SECONDS) so a test reads a whole stream."""
    def configure(**values):
        settings = dataclasses.replace(settings_module.get_settings(), **{"stream_max_seconds": 1, **values})
        monkeypatch.setattr(sys.modules[APP], "get_settings", lambda: settings)
    configure()
    return configure


def headers(key, **extra):
    return {"Authorization": f"Bearer {key}", "openai-beta": "agents=v1", "content-type": "application/json", **extra}


def parse(body: bytes) -> tuple[list[str], list[dict]]:
    """SSE frames -> (comments, events); every event's `event:` line names its type."""
    comments, events = [], []
    for frame in body.decode().split("\n\n"):
        if not frame:
            continue
        if frame.startswith(":"):
            comments.append(frame[1:].strip())
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        data = json.loads(lines["data"])
        assert lines["event"] == data["type"]
        events.append(data)
    return comments, events


CREATE = {"environment": {"type": "none"}, "input": "say Hello", "agent": {"model": "gpt-5"},
          "x_agents_core": {"harness": "scripted"}}


def test_streamed_create_opens_with_the_created_session_then_the_first_turns_events(gateway, keys, short_streams):
    started = time.monotonic()
    response = gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]),
                              json.dumps({**CREATE, "stream": True}).encode())
    assert response.status == 201 and response.headers["content-type"].startswith("text/event-stream")
    assert time.monotonic() - started < 5  # it ended by itself at the maximum duration
    comments, events = parse(response.body)
    assert comments[0] == "stream open"
    parsed = [EVENT.validate_python(e) for e in events]
    assert parsed[0].type == "agent.session.created" and parsed[0].session.id.startswith("sess_")
    session_id = parsed[0].session.id
    assert [e.type for e in parsed[1:4]] == ["agent.session.turn.created", "agent.session.turn.item.added",
                                             "agent.session.in_progress"]
    assert all(getattr(e, "session_id", None) in (None, session_id) for e in parsed[1:])
    assert len({e["event_id"] for e in events}) == len(events)  # once each


def test_create_without_stream_is_the_json_session(gateway, keys):
    response = gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]), json.dumps(CREATE).encode())
    assert response.status == 201 and json.loads(response.body)["object"] == "agent.session"


def test_a_rejected_streamed_create_is_a_json_400_and_writes_nothing(gateway, keys, aws):
    before = scan(aws)
    for body in (b"{not json", json.dumps({**CREATE, "stream": True, "agent": {"model": 5}}).encode(),
                 json.dumps({**CREATE, "stream": "yes"}).encode()):
        response = gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]), body)
        assert response.status == 400 and response.headers["x-should-retry"] == "false"
        assert response.headers["content-type"] == "application/json"
        assert set(json.loads(response.body)["error"]) == {"message", "type", "param", "code"}
    assert scan(aws) == before


def test_a_foreign_or_missing_session_is_404_before_any_byte(gateway, keys, short_streams):
    created = json.loads(gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]),
                                        json.dumps(CREATE).encode()).body)
    for key, session_id in ((keys["b"], created["id"]), (keys["a"], "sess_missing")):
        response = gateway.handle("GET", f"/v1/agents/sessions/{session_id}/events", "",
                                  headers(key, accept="text/event-stream"), b"")
        assert response.status == 404 and response.headers["content-type"] == "application/json"
        assert json.loads(response.body)["error"]["type"] == "not_found_error"


def test_the_beta_header_is_required_on_streams(gateway, keys):
    response = gateway.handle("GET", "/v1/agents/sessions/sess_1/events", "",
                              {"Authorization": f"Bearer {keys['a']}"}, b"")
    assert response.status == 400 and json.loads(response.body)["error"]["code"] == "invalid_beta"


def test_a_stream_is_live_only_and_delivers_later_commits_in_order_once(gateway, keys, short_streams):
    short_streams(stream_max_seconds=2)
    created = json.loads(gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]), json.dumps(
        {**CREATE, "input": None, "environment": {"type": "self_hosted", "workspace_directory": "/w"}}).encode()).body)
    out = {}
    reader = threading.Thread(target=lambda: out.update(r=gateway.handle(
        "GET", f"/v1/agents/sessions/{created['id']}/events", "", headers(keys["a"]), b"")))
    reader.start()
    time.sleep(0.5)
    for text in ("say one", "say two"):
        message = {"type": "agent.session.input.message",
                   "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}
        assert gateway.handle("POST", f"/v1/agents/sessions/{created['id']}/events", "", headers(keys["a"]),
                              json.dumps({"events": [message]}).encode()).status == 202
    reader.join(10)
    _, events = parse(out["r"].body)
    types = [e["type"] for e in events]
    assert "agent.session.created" not in types  # committed before the subscription: not replayed
    assert types[:3] == ["agent.session.turn.created", "agent.session.turn.item.added", "agent.session.in_progress"]
    assert types.count("agent.session.turn.created") == 1  # the second input steers the same Turn or queues
    assert len({e["event_id"] for e in events}) == len(events)


def test_an_idle_stream_sends_comment_pings(gateway, keys, short_streams):
    short_streams(stream_max_seconds=2, stream_ping_seconds=0)
    created = json.loads(gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]), json.dumps(
        {**CREATE, "input": None, "environment": {"type": "self_hosted", "workspace_directory": "/w"}}).encode()).body)
    comments, events = parse(gateway.handle("GET", f"/v1/agents/sessions/{created['id']}/events", "",
                                            headers(keys["a"]), b"").body)
    assert events == [] and comments.count("ping") >= 2


def test_a_failing_stream_sends_the_official_error_event_and_ends(gateway, keys, short_streams, monkeypatch):
    short_streams(stream_max_seconds=30)
    created = json.loads(gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]),
                                        json.dumps(CREATE).encode()).body)
    monkeypatch.setattr(sse, "committed_since", lambda *a: 1 / 0)
    started = time.monotonic()
    response = gateway.handle("GET", f"/v1/agents/sessions/{created['id']}/events", "", headers(keys["a"]), b"")
    assert time.monotonic() - started < 5
    _, events = parse(response.body)
    error = EVENT.validate_python(events[-1])
    assert error.type == "error" and error.session_id == created["id"] and error.error.type == "server_error"


def test_a_client_that_goes_away_ends_the_stream_and_its_reads(gateway, keys, short_streams, monkeypatch):
    import asyncio

    from local import apigw
    short_streams(stream_max_seconds=60)
    created = json.loads(gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]),
                                        json.dumps(CREATE).encode()).body)
    admitted, _ = gateway.admit("GET", f"/v1/agents/sessions/{created['id']}/events", "", headers(keys["a"]), b"")
    reads = []
    real = sse.committed_since
    monkeypatch.setattr(sse, "committed_since", lambda *a: reads.append(time.monotonic()) or real(*a))
    sent = []

    async def run():
        calls = 0

        async def receive():
            nonlocal calls
            calls += 1
            if calls == 1:
                return {"type": "http.request", "body": b"", "more_body": False}
            await asyncio.sleep(0.5)  # the client reads for half a second, then goes away
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        await asyncio.wait_for(gateway.handlers["SessionStreamFunction"](apigw.asgi_scope(admitted.event), receive,
                                                                         send), timeout=10)

    started = time.monotonic()
    asyncio.run(run())
    assert time.monotonic() - started < 3  # not the 60 s maximum
    assert sent[0]["status"] == 200 and reads
    count = len(reads)
    time.sleep(1)
    assert len(reads) == count  # nothing polls for a client that left


def test_a_stream_of_a_deleted_session_ends(gateway, keys, short_streams):
    short_streams(stream_max_seconds=30, stream_ping_seconds=0)
    created = json.loads(gateway.handle("POST", "/v1/agents/sessions", "", headers(keys["a"]), json.dumps(
        {**CREATE, "input": None, "environment": {"type": "self_hosted", "workspace_directory": "/w"}}).encode()).body)
    out = {}
    reader = threading.Thread(target=lambda: out.update(r=gateway.handle(
        "GET", f"/v1/agents/sessions/{created['id']}/events", "", headers(keys["a"]), b"")))
    started = time.monotonic()
    reader.start()
    time.sleep(0.3)
    assert gateway.handle("DELETE", f"/v1/agents/sessions/{created['id']}", "", headers(keys["a"]), b"").status == 200
    reader.join(10)
    assert not reader.is_alive() and time.monotonic() - started < 5
