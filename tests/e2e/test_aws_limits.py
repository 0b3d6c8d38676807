"""Issue 13 on the real local stack (`make dev`): API Gateway's WebSocket quotas on real sockets (a
frame over 32 KB or a message over 128 KB closes the connection with 1009), a 300 KB tool result
reaching the Runtime process in chunks, an SSE subscriber unlisted once its client goes away, and a
stack file only its owner can read."""

from __future__ import annotations

import json
import os
import stat
import threading
import time

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.e2e.conftest import aws_client

FN = {"type": "function", "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {}}}


def runtime_socket(info):
    socket = connect(info["websocket_url"], additional_headers={"Authorization": f"Bearer {info['runtime_token']}"},
                     max_size=2**22)
    socket.send(json.dumps({"action": "runtime.hello", "harnesses": []}))  # any message; the answer is an error
    socket.recv(timeout=10)
    return socket


def closed_with(socket) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            socket.recv(timeout=10)
    return closed.value.rcvd.code if closed.value.rcvd else -1


def test_a_frame_over_32_kb_closes_the_connection_with_1009(local_stack):
    socket = runtime_socket(local_stack)
    socket.send(json.dumps({"action": "turn.heartbeat", "pad": "p" * 40_000}))  # one frame
    assert closed_with(socket) == 1009


def test_a_message_over_128_kb_in_small_frames_closes_the_connection_with_1009(local_stack):
    socket = runtime_socket(local_stack)
    text = json.dumps({"action": "turn.heartbeat", "pad": "p" * 140_000})
    try:
        socket.send([text[i:i + 30_000] for i in range(0, len(text), 30_000)])  # frames within 32 KB
    except ConnectionClosed as closed:  # the gateway may close before the last frame is sent
        assert closed.rcvd is not None and closed.rcvd.code == 1009
        return
    assert closed_with(socket) == 1009


def test_a_message_over_32_kb_in_small_frames_reaches_core(local_stack):
    socket = runtime_socket(local_stack)
    text = json.dumps({"action": "turn.heartbeat", "pad": "p" * 100_000})
    socket.send([text[i:i + 30_000] for i in range(0, len(text), 30_000)])
    answer = json.loads(socket.recv(timeout=10))
    assert answer["type"] == "error" and answer["error"]["param"] == "tenant"  # Core read it and answered
    socket.close()


def _subscriber(info: dict, api_key: str, session_id: str) -> tuple[list[dict], threading.Thread]:
    """A WebSocket subscriber of the Session: the events it receives, chunks reassembled (docs/runtime-protocol.md,
    "Message size")."""
    socket = connect(info["websocket_url"], additional_headers={"Authorization": f"Bearer {api_key}"}, max_size=2**22)
    socket.send(json.dumps({"action": "subscribe", "session_id": session_id}))
    events: list[dict] = []
    parts: dict[str, dict[int, str]] = {}

    def read() -> None:
        with socket:
            while True:
                try:
                    message = json.loads(socket.recv(timeout=30))
                except (TimeoutError, ConnectionClosed):
                    return
                if message.get("type") == "chunk":
                    got = parts.setdefault(message["id"], {})
                    got[message["part"]] = message["data"]
                    if len(got) < message["parts"]:
                        continue
                    message = json.loads("".join(got[i] for i in range(message["parts"])))
                events.append(message)
                if message.get("type") == "agent.session.turn.completed":
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return events, reader


def test_a_300_kb_tool_result_reaches_the_runtime_process_and_every_subscriber_through_the_gateway(client,
                                                                                                   local_stack):
    """Issue 13, and issue 35 with IAM on: the commit applying a 300 KB result is over one outbox record, so the
    stream function reads its parts back (dynamodb:BatchGetItem under its own policy) for WebSocket subscribers
    and the SSE stream reads them for its client."""
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, input="call get_weather {}\nsay done",
        agent={"model": "gpt-5", "tools": [FN]}, extra_body={"x_agents_core": {"harness": "scripted"}})
    end = time.time() + 20
    while not (actions := client.beta.agents.sessions.retrieve(session.id).required_actions):
        assert time.time() < end
        time.sleep(0.1)
    ws_events, ws_reader = _subscriber(local_stack, client.api_key, session.id)
    sse_events: list[dict] = []
    sse_open = threading.Event()
    headers = {"Authorization": f"Bearer {client.api_key}", "OpenAI-Beta": "agents=v1", "Accept": "text/event-stream"}

    def read_sse() -> None:
        with httpx2.Client(timeout=30) as http, http.stream(
                "GET", f"{local_stack['base_url']}/agents/sessions/{session.id}/events", headers=headers) as response:
            for line in response.iter_lines():
                sse_open.set()
                if line.startswith("data: "):
                    sse_events.append(json.loads(line[6:]))
                    if sse_events[-1].get("type") == "agent.session.turn.completed":
                        return

    sse_reader = threading.Thread(target=read_sse, daemon=True)
    sse_reader.start()
    end = time.time() + 10  # both listening before the result is sent
    while not any(e.get("type") == "subscribed" for e in ws_events):
        assert time.time() < end, ws_events
        time.sleep(0.05)
    assert sse_open.wait(timeout=10)
    output = "r" * 300_000
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": actions[0].turn_id, "call_id": actions[0].call_id,
        "success": True, "output": output}])
    end = time.time() + 30
    while client.beta.agents.sessions.retrieve(session.id).status != "idle":
        assert time.time() < end
        time.sleep(0.1)
    # The scripted harness sends the receipt only once the result was applied to its Turn.
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "message"]
    assert items[2].output == output
    ws_reader.join(timeout=30)
    sse_reader.join(timeout=30)
    for events in (ws_events, sse_events):
        outputs = [e["item"] for e in events if e.get("type") == "agent.session.turn.item.added"
                   and e["item"]["type"] == "function_call_output"]  # the Item as applied, whole
        assert [o["output"] for o in outputs] == [output], [(e.get("type"), e.get("item", {}).get("type"), len(json.dumps(e))) for e in events]


def test_an_sse_stream_leaves_no_subscriber_behind_once_its_client_goes_away(client, local_stack):
    """SSE reads the Session's committed outbox itself: it never lists a subscriber, so an ended
    client cannot stay listed (issue 13, case 10)."""
    session = client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/work"}, agent={"model": "gpt-5"},
        extra_body={"x_agents_core": {"harness": "scripted"}})
    dynamodb = aws_client(local_stack, "dynamodb")

    def subscribers():
        return dynamodb.scan(TableName=local_stack["table"], ConsistentRead=True, FilterExpression="SK = :sk",
                             ExpressionAttributeValues={":sk": {"S": f"SUB#{session.id}"}})["Items"]

    headers = {"Authorization": f"Bearer {client.api_key}", "OpenAI-Beta": "agents=v1", "Accept": "text/event-stream"}
    with httpx2.Client(timeout=10) as http, http.stream(
            "GET", f"{local_stack['base_url']}/agents/sessions/{session.id}/events", headers=headers) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines) == ": stream open"
        assert subscribers() == []
    assert subscribers() == []


def test_the_stack_file_holding_the_dev_key_and_runtime_token_is_readable_by_its_owner_only(local_stack):
    mode = stat.S_IMODE(os.stat(local_stack["stack_file"]).st_mode)
    assert mode == 0o600
