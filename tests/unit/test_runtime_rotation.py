"""The reference Runtime's connection rotation (issue 35, item 3): before the WebSocket API's maximum
duration it opens its next connection with the same `instance`, keeps sending on the old one until the
new one is welcomed, then sends there (every unacknowledged observation again), still reads the old one
for a while and closes it. An unplanned loss reconnects with the same instance."""

from __future__ import annotations

import json
import queue
import threading
import time

import pytest
from websockets.exceptions import ConnectionClosed

from runtime import client as client_module
from runtime.client import RuntimeClient, rotation_after
from runtime.harnesses.scripted.driver import ScriptedDriver
from runtime.protocol import TurnChannel

START = {"tenant": "t", "session_id": "s", "turn_id": "turn_1"}


class FakeSocket:
    """A websockets sync connection: `recv(timeout)` from an inbox (None closes it), `send` recorded."""

    def __init__(self, name: str):
        self.name = name
        self.inbox: queue.Queue = queue.Queue()
        self.sent: list[dict] = []
        self.closed = threading.Event()

    def send(self, data) -> None:
        if self.closed.is_set():
            raise ConnectionClosed(None, None)
        self.sent.append(json.loads(data if isinstance(data, str) else "".join(data)))

    def recv(self, timeout=None):
        if self.closed.is_set():
            raise ConnectionClosed(None, None)
        try:
            item = self.inbox.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if item is None:
            self.closed.set()
            raise ConnectionClosed(None, None)
        return json.dumps(item)

    def close(self) -> None:
        self.closed.set()

    def actions(self) -> list[str]:
        return [m.get("action") for m in self.sent]


def wait_for(predicate, timeout: float = 10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


@pytest.fixture
def sockets(monkeypatch):
    """Each connect() hands out the next FakeSocket (created on demand)."""
    opened: list[FakeSocket] = []

    def connect(url, **kwargs):
        opened.append(FakeSocket(f"c{len(opened)}"))
        return opened[-1]

    monkeypatch.setattr(client_module, "connect", connect)
    monkeypatch.setattr(client_module, "DRAIN_SECONDS", 0.3)
    monkeypatch.setattr(client_module, "WELCOME_SECONDS", 0.5)
    monkeypatch.setattr(client_module, "RETRY_SECONDS", 0.2)
    return opened


def new_client(**kwargs) -> RuntimeClient:
    return RuntimeClient("ws://core.invalid", "rt-test", {"scripted": ScriptedDriver()}, heartbeat_seconds=30,
                         **kwargs)


def test_rotation_happens_a_margin_before_the_bound_never_more_than_a_quarter_of_it():
    assert rotation_after(7200, 300) == 6900  # production: five minutes before API Gateway's two hours
    assert rotation_after(20, 300) == 15  # a 20 s bound: a quarter of it
    assert rotation_after(20, 2) == 18
    assert rotation_after(2, 0) == 2
    assert rotation_after(1, 300) == 1.0  # never under a second


def test_the_welcome_tells_the_bound_and_a_setting_overrides_it():
    c = new_client(rotation_margin=300)
    assert c.rotation_after() == 6900  # nothing learned yet: API Gateway's 7200
    c._welcomed({"type": "runtime.welcome", "max_connection_seconds": 20})
    assert c.rotation_after() == 15
    assert new_client(max_connection_seconds=100, rotation_margin=10).rotation_after() == 90


def test_a_rotation_moves_sending_to_the_new_connection_only_once_it_is_welcomed(sockets):
    c = new_client(max_connection_seconds=1.2, rotation_margin=0.3)  # rotates 0.9 s after opening
    thread = threading.Thread(target=c.run_forever, daemon=True)
    thread.start()
    first = wait_for(lambda: sockets and sockets[0].sent and sockets[0])
    hello = first.sent[0]
    assert hello["action"] == "runtime.hello" and hello["instance"].startswith("rti_")
    first.inbox.put({"type": "runtime.welcome", "harnesses": ["scripted"], "max_connection_seconds": 1.2})
    channel = TurnChannel(START, c.runtime.send, heartbeat_seconds=30)
    c.runtime.channels["turn_1"] = channel
    channel.emit("turn.item.added", item={"id": "m1"})  # seq 1: acknowledged on the first connection
    first.inbox.put({"type": "turn.ack", "turn_id": "turn_1", "seq": 1})
    wait_for(lambda: channel.acked == 1)

    second = wait_for(lambda: len(sockets) > 1 and sockets[1].sent and sockets[1], timeout=10)
    assert second.sent[0]["action"] == "runtime.hello"
    assert second.sent[0]["instance"] == hello["instance"]  # one identity across its connections
    # Until Core welcomes the new connection (it moves the Turns first), observations go on the old one.
    channel.emit("turn.item.added", item={"id": "m2"})  # seq 2, never acknowledged on the old one
    assert first.sent[-1]["seq"] == 2 and len(second.sent) == 1
    second.inbox.put({"type": "runtime.welcome", "harnesses": ["scripted"], "resumed_turns": ["turn_1"]})
    # Switched: what Core had not acknowledged goes again on the new connection, and new sends go there.
    resent = wait_for(lambda: [m for m in second.sent if m.get("seq") == 2])
    assert resent[0]["item"] == {"id": "m2"} and c.rotations == 1
    channel.emit("turn.item.added", item={"id": "m3"})
    assert second.sent[-1]["seq"] == 3 and not [m for m in first.sent if m.get("seq") == 3]
    # The old connection is still read for a while (a message Core posted to it just before the move) ...
    first.inbox.put({"type": "turn.ack", "turn_id": "turn_1", "seq": 3})
    wait_for(lambda: channel.acked == 3)
    # ... and then closed by the Runtime.
    assert first.closed.wait(2)
    assert not second.closed.is_set()
    # The next rotation comes a bound later, from the new connection.
    third = wait_for(lambda: len(sockets) > 2 and sockets[2].sent and sockets[2], timeout=10)
    assert third.sent[0]["instance"] == hello["instance"]
    c.stop()
    thread.join(timeout=3)
    assert not thread.is_alive()


def test_a_next_connection_never_welcomed_is_closed_and_the_old_one_kept(sockets):
    c = new_client(max_connection_seconds=1.0, rotation_margin=0.5)  # rotates 0.5 s after opening
    thread = threading.Thread(target=c.run_forever, daemon=True)
    thread.start()
    first = wait_for(lambda: sockets and sockets[0].sent and sockets[0])
    first.inbox.put({"type": "runtime.welcome", "harnesses": ["scripted"]})
    second = wait_for(lambda: len(sockets) > 1 and sockets[1].sent and sockets[1], timeout=10)
    assert second.closed.wait(2)  # no welcome within WELCOME_SECONDS
    c.send({"action": "turn.heartbeat", **START})
    assert first.sent[-1]["action"] == "turn.heartbeat"  # still the sending connection
    wait_for(lambda: len(sockets) > 2, timeout=10)  # tried again
    c.stop()
    thread.join(timeout=3)


def test_an_unplanned_loss_reconnects_with_the_same_instance(sockets):
    c = new_client(max_connection_seconds=3600, rotation_margin=60)
    thread = threading.Thread(target=c.run_forever, daemon=True)
    thread.start()
    first = wait_for(lambda: sockets and sockets[0].sent and sockets[0])
    first.inbox.put({"type": "runtime.welcome", "harnesses": ["scripted"]})
    wait_for(lambda: c.connected.is_set())
    first.inbox.put(None)  # the gateway closed it (no rotation was due)
    second = wait_for(lambda: len(sockets) > 1 and sockets[1].sent and sockets[1], timeout=10)
    assert second.sent[0]["instance"] == first.sent[0]["instance"]
    assert c.rotations == 0
    c.stop()
    thread.join(timeout=3)


def test_the_old_connection_closing_while_the_next_waits_for_its_welcome_hands_over(sockets):
    c = new_client(max_connection_seconds=1.0, rotation_margin=0.5)
    thread = threading.Thread(target=c.run_forever, daemon=True)
    thread.start()
    first = wait_for(lambda: sockets and sockets[0].sent and sockets[0])
    first.inbox.put({"type": "runtime.welcome", "harnesses": ["scripted"]})
    second = wait_for(lambda: len(sockets) > 1 and sockets[1].sent and sockets[1], timeout=10)
    first.inbox.put(None)  # the bound passed on the old connection first
    wait_for(lambda: c._socket is second)
    second.inbox.put({"type": "runtime.welcome", "harnesses": ["scripted"]})
    c.send({"action": "turn.heartbeat", **START})
    assert second.sent[-1]["action"] == "turn.heartbeat"
    assert len(sockets) == 2  # no reconnection: the next connection simply became the current one
    c.stop()
    thread.join(timeout=3)
