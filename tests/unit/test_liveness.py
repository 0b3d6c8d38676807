"""Liveness (issue 35, item 4; issue 36, item 5): "A connection whose last heartbeat is older than the bound is not
eligible", and one `runtime.heartbeat` per cadence carries a Runtime connection and every Turn it runs.

The freshness rule, the hello's and the heartbeat's shape checks, the cadence and bound as one set of constants
the template, the settings and the Runtime agree on, and the reference Runtime's side (pure: a fake `send`)."""

from __future__ import annotations

import pytest

from agents_contract import protocol
from agents_contract.errors import InvalidRequest
from agents_core.runtimes import liveness
from agents_core.settings import Settings
from local import template
from runtime.protocol import TurnChannel
from runtime.router import Runtime

BOUND = 45


# ---- the freshness rule ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("row", "age", "eligible"), [
    ({"seen_at": 1000}, 0, True),  # just seen
    ({"seen_at": 1000}, BOUND, True),  # at the bound: still fresh
    ({"seen_at": 1000}, BOUND + 1, False),  # "older than the bound is not eligible"
    ({"seen_at": 1000}, 3600, False),  # vanished long ago, its $disconnect never came
    ({}, 10_000, True),  # a Runtime that does not beat (the older protocol): trusted as before
])
def test_a_connection_whose_last_heartbeat_is_older_than_the_bound_is_not_eligible(row, age, eligible):
    assert liveness.fresh(row, 1000 + age, BOUND) is eligible


def test_a_live_runtime_beating_at_the_cadence_is_never_stale_even_with_one_beat_lost():
    """Rows are rewritten once half the bound old, so at the cadence (a third of the bound) every other beat
    writes, and a live row is at most two cadences old: one lost beat still leaves it within the bound."""
    cadence = liveness.cadence(BOUND)
    written, worst = 0.0, 0.0
    for beat in range(1, 40):
        at = beat * cadence
        if beat == 7:
            continue  # lost
        worst = max(worst, at - written)
        if at - written >= liveness.refresh_after(BOUND):
            written = at
    assert worst <= BOUND
    assert liveness.refresh_after(BOUND) > cadence  # never a write at every beat


# ---- the constants: one place, the template and the settings agree ------------------------------------------

def test_the_cadence_is_a_third_of_the_bound_everywhere():
    assert protocol.HEARTBEAT_BOUND_SECONDS == 3 * protocol.HEARTBEAT_CADENCE_SECONDS
    assert liveness.cadence(protocol.HEARTBEAT_BOUND_SECONDS) == protocol.HEARTBEAT_CADENCE_SECONDS
    assert int(template.load()["Parameters"]["HeartbeatSeconds"]["Default"]) == protocol.HEARTBEAT_BOUND_SECONDS
    assert Settings().heartbeat_seconds == protocol.HEARTBEAT_BOUND_SECONDS


def test_a_waiting_turn_costs_at_most_a_third_of_the_per_turn_heartbeats_per_minute():
    """Before: each Turn sent turn.heartbeat every 5 s (12 messages and 12 invocations a Turn-minute). Now one
    runtime.heartbeat every cadence carries the connection and all its Turns."""
    per_minute = 60 / protocol.HEARTBEAT_CADENCE_SECONDS
    assert per_minute * protocol.HEARTBEAT_COST["websocket_messages"] <= 12 / 3
    assert per_minute * protocol.HEARTBEAT_COST["lambda_invocations"] <= 12 / 3


# ---- shape checks (before anything is written) ------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -1, 3601, True, "15", None, [15]])
def test_a_hello_with_a_malformed_heartbeat_seconds_is_refused_naming_it(value):
    with pytest.raises(InvalidRequest) as caught:
        liveness.asked({"heartbeat_seconds": value})
    assert caught.value.param == "heartbeat_seconds"


def test_a_hello_that_asks_is_answered_with_the_cadence_and_the_bound(monkeypatch):
    monkeypatch.setattr(liveness, "bound", lambda: 45)
    assert liveness.welcome({"heartbeat_seconds": 60}) == {"heartbeat_seconds": 15, "heartbeat_bound_seconds": 45}
    assert liveness.welcome({"heartbeat_seconds": 5}) == {"heartbeat_seconds": 5, "heartbeat_bound_seconds": 45}
    assert liveness.welcome({}) == {}
    assert liveness.declared({}) == {}
    assert set(liveness.declared({"heartbeat_seconds": 15})) == {"seen_at"}


ROUTE = {"tenant": "t", "session_id": "sess_1", "turn_id": "turn_1"}


@pytest.mark.parametrize(("turns", "param"), [
    ("turn_1", "turns"),
    ([ROUTE] * (protocol.MAX_HEARTBEAT_TURNS + 1), "turns"),
    ([ROUTE, "turn_2"], "turns[1]"),
    ([{"tenant": "t", "session_id": "sess_1"}], "turns[0]"),
    ([{**ROUTE, "turn_id": ""}], "turns[0]"),
    ([{**ROUTE, "turn_id": "x" * 257}], "turns[0]"),
    ([{**ROUTE, "turn_id": 7}], "turns[0]"),
])
def test_a_malformed_runtime_heartbeat_is_refused_naming_the_field(turns, param):
    with pytest.raises(InvalidRequest) as caught:
        liveness.parse({"action": protocol.RUNTIME_HEARTBEAT, "turns": turns})
    assert caught.value.param == param


def test_a_runtime_heartbeat_names_each_turn_once_and_may_name_none():
    assert liveness.parse({"turns": [ROUTE, dict(ROUTE)]}) == [("t", "sess_1", "turn_1")]
    assert liveness.parse({}) == []


# ---- Core's side of a beat: only this connection's running Turns are kept alive -------------------------------

class _Store:
    def __init__(self, turns):
        self.turns = {(t["PK"], t["SK"]): t for t in turns}
        self.reads = []

    def batch_get(self, wanted, consistent=True):
        self.reads.append((len(wanted), consistent))
        return {(k["PK"], k["SK"]): self.turns[(k["PK"], k["SK"])] for k in wanted if (k["PK"], k["SK"]) in self.turns}


class _Workflow:
    def __init__(self):
        self.beats = []

    def heartbeat(self, token):
        self.beats.append(token)
        return True


def _turn(turn_id, **fields):
    from agents_core import keys

    return {**keys.turn("t", "sess_1", turn_id), "id": turn_id, "task_token": f"token-{turn_id}", **fields}


def test_a_beat_keeps_alive_only_the_turns_this_connection_claimed_that_still_run():
    """A Turn claimed by another connection (a forged or stale route), one not dispatched yet (no task token) and
    one being settled get no task heartbeat: a Runtime keeps alive only its own running Turns."""
    store, workflow = _Store([_turn("mine", claimed_by="conn-a"), _turn("theirs", claimed_by="conn-b"),
                              _turn("unstarted", claimed_by="conn-a", task_token=None),
                              _turn("closing", claimed_by="conn-a", closing="completed")]), _Workflow()
    routes = [("t", "sess_1", t) for t in ("mine", "theirs", "unstarted", "closing", "unknown")]
    assert liveness.heartbeat_turns(store, workflow, "conn-a", routes) == 1
    assert workflow.beats == ["token-mine"]
    assert store.reads == [(5, False)]  # one eventually consistent batch read for all of them


# ---- the reference Runtime's side ------------------------------------------------------------------------------

def _runtime():
    sent: list[dict] = []
    runtime = Runtime(sent.append, {}, heartbeat_seconds=5.0)
    return runtime, sent


def _running(runtime, turn_id):
    channel = TurnChannel({**ROUTE, "turn_id": turn_id}, runtime.send, 5.0)
    channel._beating = True  # its heartbeats started (the driver runs it)
    runtime.channels[turn_id] = channel
    return channel


def test_one_runtime_heartbeat_names_every_turn_that_runs_and_none_that_ended():
    runtime, sent = _runtime()
    running = [_running(runtime, f"turn_{i}") for i in range(3)]
    running[1].done.set()
    assert runtime.heartbeat() == 1
    assert sent == [{"action": "runtime.heartbeat", "turns": [running[0].route, running[2].route]}]


def test_an_idle_runtime_still_beats_and_many_turns_go_in_several_messages():
    runtime, sent = _runtime()
    assert runtime.heartbeat() == 1 and sent[-1]["turns"] == []  # idle: the connection alone
    for i in range(protocol.MAX_HEARTBEAT_TURNS + 1):
        _running(runtime, f"turn_{i}")
    sent.clear()
    assert runtime.heartbeat() == 2
    assert [len(m["turns"]) for m in sent] == [protocol.MAX_HEARTBEAT_TURNS, 1]


def test_the_welcome_decides_whether_turns_beat_on_their_own():
    """Against a Core whose welcome names a cadence each Turn's heartbeat rides in runtime.heartbeat; against an
    older Core each Turn keeps sending turn.heartbeat."""
    older, _ = _runtime()
    channel = _running(older, "turn_old")
    older.on_message({"type": "runtime.welcome", "harnesses": []})
    assert older.beat_seconds is None and channel.per_turn_heartbeats
    newer, _ = _runtime()
    channel = _running(newer, "turn_new")
    newer.on_message({"type": "runtime.welcome", "harnesses": [], "heartbeat_seconds": 15,
                      "heartbeat_bound_seconds": 45})
    try:
        assert newer.beat_seconds == 15 and not channel.per_turn_heartbeats
    finally:
        newer.close()
