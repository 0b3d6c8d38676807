"""The local WebSocket API keeps API Gateway's clock (issue 35, item 2): every connection ends with 1001
at its maximum duration, or after the idle timeout with no message either way; `$disconnect` is not
delivered with AGENTS_CORE_WS_DISCONNECT=never."""

from __future__ import annotations

import time

import pytest

from local import websocket


def gateway(monkeypatch, **env: str) -> tuple[websocket.WebSocketGateway, list[dict]]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    seen: list[dict] = []

    def handler(event, context):
        seen.append(event)
        return {"statusCode": 200}

    routes = {"$connect": "fn", "$disconnect": "fn", "$default": "fn"}
    return websocket.WebSocketGateway({"fn": handler}, routes=routes), seen


def connect(gw: websocket.WebSocketGateway) -> tuple[str, list[int]]:
    closes: list[int] = []
    connection_id = gw.connect(lambda text: None, {}, close=closes.append)
    assert connection_id is not None
    return connection_id, closes


def disconnects(seen: list[dict]) -> list[dict]:
    return [e["requestContext"] for e in seen if e["requestContext"]["routeKey"] == "$disconnect"]


def test_the_defaults_are_api_gateways_quotas(monkeypatch):
    for name in ("AGENTS_CORE_WS_MAX_CONNECTION_SECONDS", "AGENTS_CORE_WS_IDLE_SECONDS", "AGENTS_CORE_WS_DISCONNECT"):
        monkeypatch.delenv(name, raising=False)
    gw, _ = gateway(monkeypatch)
    assert (gw.max_connection_seconds, gw.idle_seconds, gw.deliver_disconnect) == (7200, 600, True)
    monkeypatch.setenv("AGENTS_CORE_WS_DISCONNECT", "sometimes")
    with pytest.raises(ValueError, match="always or never"):
        websocket.delivers_disconnect()
    monkeypatch.setenv("AGENTS_CORE_WS_IDLE_SECONDS", "-1")
    with pytest.raises(ValueError, match="positive"):
        websocket.idle_seconds()


def test_a_busy_connection_ends_with_1001_at_its_maximum_duration(monkeypatch):
    gw, seen = gateway(monkeypatch, AGENTS_CORE_WS_MAX_CONNECTION_SECONDS="0.6", AGENTS_CORE_WS_IDLE_SECONDS="0.4")
    connection_id, closes = connect(gw)
    started = time.monotonic()
    while not closes and time.monotonic() - started < 3:
        gw.receive(connection_id, '{"action": "ping"}')  # a message every 0.1 s: never idle
        time.sleep(0.1)
    elapsed = time.monotonic() - started
    assert closes == [1001] and 0.55 <= elapsed < 1.0
    assert [(d["disconnectStatusCode"], d["disconnectReason"]) for d in disconnects(seen)] == [(1001, "Going away")]
    assert connection_id not in gw.connections and gw.going_away == 1
    gw.shutdown()


def test_an_idle_connection_ends_with_1001_and_a_post_counts_as_activity(monkeypatch):
    gw, seen = gateway(monkeypatch, AGENTS_CORE_WS_MAX_CONNECTION_SECONDS="60", AGENTS_CORE_WS_IDLE_SECONDS="0.5")
    idle, idle_closes = connect(gw)
    posted, posted_closes = connect(gw)
    started = time.monotonic()
    while not idle_closes and time.monotonic() - started < 3:
        assert gw.post(posted, "{}")  # Core -> client messages count too ("no message either way")
        time.sleep(0.1)
    assert idle_closes == [1001] and 0.45 <= time.monotonic() - started < 1.0
    assert posted_closes == [] and posted in gw.connections
    time.sleep(0.7)  # the posts stopped: now it is idle too
    assert posted_closes == [1001]
    assert gw.post(idle, "{}") is False  # gone: GoneException
    gw.shutdown()


def test_disconnect_never_closes_the_socket_but_delivers_no_disconnect(monkeypatch):
    gw, seen = gateway(monkeypatch, AGENTS_CORE_WS_DISCONNECT="never", AGENTS_CORE_WS_IDLE_SECONDS="0.3")
    connection_id, closes = connect(gw)
    other, _ = connect(gw)
    gw.disconnect(other, code=1000)  # the client went away
    wait = time.monotonic() + 2
    while not closes and time.monotonic() < wait:
        time.sleep(0.02)
    assert closes == [1001] and connection_id not in gw.connections and other not in gw.connections
    assert disconnects(seen) == []  # API Gateway's $disconnect is best effort: here, never
    gw.shutdown()
