"""The exec-server host's listener on loopback (runtime/environments/exec_server.py), with stand-ins for the exec-server and the
app-server: the registry's token admits one exec-server connection, frames pass both ways unchanged (one of
400 KB included), either side closing closes the other, the reconnection is a 409 (it registers again), and
Core hears executor.connected once and executor.disconnected after the grace."""

import hashlib
import json
import time

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from local.inprocess import wait_for
from runtime.environments.exec_server import ExecServerHub


@pytest.fixture
def hub():
    told = []
    h = ExecServerHub("127.0.0.1:0", None, told.append, grace_seconds=2.5).start()
    h.told = told
    yield h
    h.stop()


def expect(hub, registration="xreg_1", env_id="env_abc", token="tok-1"):
    hub.on_message({"type": "executor.expect", "registration_id": registration, "environment_id": env_id,
                    "token_sha256": hashlib.sha256(token.encode()).hexdigest()})
    wait_for(lambda: registration in hub.expected, timeout=5)
    return f"{hub.public_url}/{registration}?token={token}"


def app_connect(hub, env_id="env_abc", **kwargs):
    """As the app-server joins: the bound URL, with the bound token as its bearer (`authBearerToken`)."""
    executor = hub.bind({"harness": "codex", "session_id": "sess_" + env_id.removeprefix("env_"),
                         "environment": {"type": "self_hosted", "workspace_directory": "/w"}, "agent": {}})["executor"]
    return connect(executor["url"], additional_headers={"Authorization": f"Bearer {executor['token']}"}, **kwargs)


def test_a_registered_exec_server_is_joined_to_the_app_server_frame_for_frame(hub):
    url = expect(hub)
    with pytest.raises(InvalidStatus) as wrong:
        connect(url.replace("tok-1", "tok-2"), open_timeout=5)
    assert wrong.value.response.status_code == 403
    with pytest.raises(InvalidStatus) as unknown:
        connect(f"{hub.public_url}/xreg_nope?token=tok-1", open_timeout=5)
    assert unknown.value.response.status_code == 409  # not expected here: register again
    with pytest.raises(InvalidStatus) as outsider:
        connect(app_url_for_missing(hub), additional_headers={"Authorization": "Bearer wrong"}, open_timeout=5)
    assert outsider.value.response.status_code == 403
    with pytest.raises(InvalidStatus) as no_bearer:
        connect(app_url_for_missing(hub), open_timeout=5)
    assert no_bearer.value.response.status_code == 403
    executor = connect(url, max_size=None, open_timeout=5)
    wait_for(lambda: hub.told, timeout=5)
    assert hub.told == [{"action": "executor.connected", "registration_id": "xreg_1"}]
    app = app_connect(hub, max_size=None, open_timeout=5)
    big = json.dumps({"id": 1, "result": {"data": "x" * 400_000}})
    app.send(json.dumps({"id": 1, "method": "fs/readFile", "params": {}}))
    assert json.loads(executor.recv(timeout=5))["method"] == "fs/readFile"
    executor.send(big)
    assert app.recv(timeout=5) == big  # unchanged, one frame
    # the exec-server's connection closes: the app-server's closes too; its reconnection is a 409
    executor.close()
    with pytest.raises(ConnectionClosed):
        app.recv(timeout=5)
    with pytest.raises(InvalidStatus) as again:
        connect(url, open_timeout=5)
    assert again.value.response.status_code == 409
    # it registers again (a new token) within the grace: Core hears the new registration, nothing went offline
    executor = connect(expect(hub, "xreg_2", token="tok-3"), max_size=None, open_timeout=5)
    wait_for(lambda: len(hub.told) == 2, timeout=5)
    assert hub.told[1] == {"action": "executor.connected", "registration_id": "xreg_2"}
    executor.close()
    wait_for(lambda: len(hub.told) == 3, timeout=10)
    assert hub.told[2] == {"action": "executor.disconnected", "registration_id": "xreg_2"}
    assert hub.bind({"harness": "codex", "session_id": "sess_abc", "environment": {"type": "self_hosted"},
                     "agent": {}}) is None  # its Turns are no longer bound here


def app_url_for_missing(hub):
    return f"ws://127.0.0.1:{hub.port}/app/env_abc"


def test_an_app_server_waits_for_a_fresh_exec_server_connection(hub):
    url = expect(hub)
    first = connect(url, max_size=None, open_timeout=5)
    wait_for(lambda: hub.told, timeout=5)
    app = app_connect(hub, max_size=None, open_timeout=5)
    app.close()  # the app-server left: that exec-server connection is used up and closed
    with pytest.raises(ConnectionClosed):
        first.recv(timeout=5)
    started = time.monotonic()
    second_app = app_connect(hub, max_size=None, open_timeout=5)
    fresh = connect(expect(hub, "xreg_2", token="tok-2"), max_size=None, open_timeout=5)
    second_app.send("ping-frame")
    assert fresh.recv(timeout=5) == "ping-frame" and time.monotonic() - started < 10
