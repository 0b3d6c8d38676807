"""Issue 35, items 2 and 3 on the real local stack (`python -m local`, as `make dev`), with API Gateway's
WebSocket clock shortened: every connection ends with 1001 at the maximum duration, or idle after the idle
timeout. A Runtime process rotates its connection before the bound, and a Turn that lasts three maximum
durations, with a function call answered after a rotation, completes with each Item exactly once; idle
and busy subscribers are closed with 1001 at their bounds. (Frames and messages over API Gateway's quotas:
tests/e2e/test_aws_limits.py.)

The maximum duration is E2E_WS_MAX_CONNECTION_SECONDS (4 s by default, to keep `make test` fast; the
issue's 20 s runs with E2E_WS_MAX_CONNECTION_SECONDS=20, about 70 s). The subscribers are watched while the
Turn runs (they start with the stack), so the module costs about the stack's start and the Turn."""

from __future__ import annotations

import datetime
import json
import os
import threading
import time

import pytest
from openai import OpenAI
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from local.inprocess import wait_for
from tests.e2e.conftest import aws_client, start_runtime, start_stack, stop_stack

pytestmark = pytest.mark.e2e
MAX = float(os.environ.get("E2E_WS_MAX_CONNECTION_SECONDS", "4"))
IDLE = MAX / 2
FN = {"type": "function", "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {}}}


@pytest.fixture(scope="module")
def clock_stack(tmp_path_factory):
    process, info = start_stack(tmp_path_factory.mktemp("ws-clock"), AGENTS_CORE_WS_MAX_CONNECTION_SECONDS=str(MAX),
                                AGENTS_CORE_WS_IDLE_SECONDS=str(IDLE))
    info["subscribers"] = watch_subscribers(info)
    yield info
    stop_stack(process)


def closed(socket) -> tuple[int, str, float]:
    """Read until the gateway closes the socket: (code, reason, when)."""
    try:
        while True:
            socket.recv(timeout=MAX * 3)
    except ConnectionClosed as exc:
        return (exc.rcvd.code, exc.rcvd.reason, time.monotonic()) if exc.rcvd else (-1, "", time.monotonic())


def watch_subscribers(info: dict) -> tuple[list[threading.Thread], dict[str, tuple]]:
    """An idle subscriber (subscribes, then no message either way) and a busy one (a message each way every
    IDLE/5 s), each read until the gateway closes it: (code, reason, seconds). Started with the stack."""
    client = OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0)
    # No Runtime serves codex on this stack: the Turn stays queued and the Session sends no event.
    session = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"},
                                                 input="say hi", extra_body={"x_agents_core": {"harness": "codex"}})
    headers = {"Authorization": f"Bearer {info['api_key']}"}
    subscribe = json.dumps({"action": "subscribe", "session_id": session.id})
    results: dict[str, tuple] = {}

    def idle() -> None:
        socket = connect(info["websocket_url"], additional_headers=headers)
        socket.send(subscribe)
        assert json.loads(socket.recv(timeout=5))["type"] == "subscribed"
        quiet_since = time.monotonic()  # no message either way from here on
        code, reason, at = closed(socket)
        results["idle"] = (code, reason, at - quiet_since)

    def busy() -> None:
        opened = time.monotonic()
        socket = connect(info["websocket_url"], additional_headers=headers)
        done = threading.Event()

        def chatter() -> None:
            while not done.wait(IDLE / 5):
                try:
                    socket.send(subscribe)
                except ConnectionClosed:
                    return

        threading.Thread(target=chatter, daemon=True).start()
        code, reason, at = closed(socket)
        done.set()
        results["busy"] = (code, reason, at - opened)

    threads = [threading.Thread(target=idle, daemon=True), threading.Thread(target=busy, daemon=True)]
    for t in threads:
        t.start()
    return threads, results


def _log_times(text: str, needle: str) -> list[float]:
    """Epoch seconds of the Runtime's log lines containing `needle` (its format: '%(asctime)s runtime ...')."""
    out = []
    for line in text.splitlines():
        if needle in line:
            stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
            out.append(stamp.timestamp())
    return out


def test_a_turn_lasting_three_maximum_durations_completes_across_rotations(clock_stack, tmp_path):
    log = tmp_path / "runtime.log"
    with open(log, "w") as err:
        process = start_runtime(clock_stack, ["scripted"], stderr=err)
    try:
        wait_for(lambda: "connected; serving" in log.read_text() or process.poll() is not None, timeout=30)
        client = OpenAI(base_url=clock_stack["base_url"], api_key=clock_stack["api_key"], max_retries=0)
        started = time.time()
        session = client.beta.agents.sessions.create(
            environment={"type": "none"}, agent={"model": "gpt-5", "tools": [FN]},
            input=f"say one\ncall get_weather {{}}\nsleep {MAX}\nsay two\nsleep {MAX}\nsay done",
            extra_body={"x_agents_core": {"harness": "scripted"}})
        action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions, timeout=15)[0]
        # No connection lives longer than MAX: by now the one that claimed the Turn is gone, rotated away.
        time.sleep(MAX + 0.5)
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, "output": "sunny"}])
        wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=MAX * 3 + 15)
        ended = time.time()
        turn = client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id)
        assert turn.status == "completed"
        assert ended - started >= 3 * MAX
        items = client.beta.agents.sessions.items.list(session.id, order="asc").data
        assert [i.type for i in items] == ["message", "message", "function_call", "function_call_output",
                                           "message", "message"]
        assert [i.content[0].text for i in items if i.type == "message"][1:] == ["one", "two", "done"]
        assert len({i.id for i in items}) == len(items)  # each Item exactly once
        assert items[3].output == "sunny"
        history = aws_client(clock_stack, "stepfunctions").get_execution_history(
            executionArn=clock_stack["state_machine_arn"].replace(":stateMachine:", ":execution:") + f":{turn.id}")
        assert not [e for e in history["events"] if e["type"] in ("TaskFailed", "TaskTimedOut")]
        text = log.read_text()
        rotated = [t for t in _log_times(text, "runtime connection rotated") if started <= t <= ended]
        lost = [t for t in _log_times(text, "runtime connection lost") if started <= t <= ended]
        assert len(rotated) >= 3 and lost == [], text[-3000:]  # planned rotations only, none lost
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_idle_and_busy_subscribers_are_closed_with_1001_at_their_bounds(clock_stack):
    threads, results = clock_stack["subscribers"]
    for t in threads:
        t.join(timeout=MAX * 4)
    code, reason, after = results["idle"]
    assert (code, reason) == (1001, "Going away") and IDLE - 0.2 <= after < IDLE + 1.5, results
    code, reason, after = results["busy"]
    assert (code, reason) == (1001, "Going away") and MAX - 0.2 <= after < MAX + 1.5, results  # not idle: at MAX
