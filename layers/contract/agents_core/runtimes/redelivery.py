"""A tool result reaches the Runtime once, and its heartbeat is the backstop (issue 36: a WebSocket message, an outbox
record and a stream invocation fewer per result).

By default a result admitted by the Results function is posted straight after its commit and again by the outbox
consumer from the commit's outbox record (at least once; the Runtime drops the repeat by its `delivery_id`). A Runtime
that beats may say `waiting_calls: true` in its hello; the welcome says it back, and its pool declarations remember it.
Its `runtime.heartbeat` then names, in each Turn's entry, the calls it waits on (`waiting_calls`: call ids whose
`turn.tool_result` it has not received). For the Turns it claimed, a result admitted while such a Runtime holds the
Turn is posted once, straight after the commit, and the commit carries no outbox command for it (with nothing else to
publish it writes no outbox record at all: there is nothing to publish). A post that never arrived (the function died
between its commit and its post, the connection rotated, a post that failed) is repaired by the next beat: a call it
names whose result was submitted REPOST_AFTER_SECONDS ago or more is posted again, with the same `delivery_id`.

A Runtime that does not say so gets today's two posts: nothing changes for other Runtimes.
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import jsonutil, protocol
from agents_contract.errors import InvalidRequest

from .. import keys
from ..ids import now

REPOST_AFTER_SECONDS = 5  # a result submitted this long ago and still awaited was lost on the way
MAX_WAITING = 128  # call ids named in one Turn's entry
MAX_ID = 256


def asked(message: dict[str, Any]) -> bool:
    """A hello's `waiting_calls` (a boolean; absent: False), checked before the hello writes anything."""
    value = message.get(protocol.WAITING_CALLS, False)
    if not isinstance(value, bool):
        raise InvalidRequest("Invalid 'waiting_calls': expected a boolean.", param=protocol.WAITING_CALLS)
    return value and protocol.HEARTBEAT_SECONDS_FIELD in message  # granted to a Runtime that beats


def welcome(message: dict[str, Any]) -> dict[str, Any]:
    return {protocol.WAITING_CALLS: True} if asked(message) else {}


def declared(message: dict[str, Any]) -> dict[str, Any]:
    """What the hello's pool declarations carry: the Results function reads it there (it reads the declaration of
    the connection that claimed the Turn)."""
    return {protocol.WAITING_CALLS: True} if asked(message) else {}


def parse(message: dict[str, Any]) -> dict[tuple[str, str, str], list[str]]:
    """A `runtime.heartbeat`'s waiting calls: route -> call ids, shape-checked (the Turns' routes are `liveness.parse`'s)."""
    out: dict[tuple[str, str, str], list[str]] = {}
    turns = message.get(protocol.TURNS, [])
    for i, turn in enumerate(turns if isinstance(turns, list) else []):
        if not isinstance(turn, dict) or protocol.WAITING_CALLS not in turn:
            continue
        calls = turn[protocol.WAITING_CALLS]
        if not isinstance(calls, list) or len(calls) > MAX_WAITING or \
                not all(isinstance(c, str) and 0 < len(c) <= MAX_ID for c in calls):
            raise InvalidRequest(f"Invalid 'turns[{i}].waiting_calls': expected a list of at most {MAX_WAITING} call "
                                 f"ids, each a string of 1 to {MAX_ID} characters.", param=f"turns[{i}].waiting_calls")
        route = tuple(turn.get(f) for f in protocol.ROUTE)
        if calls:
            out[route] = list(dict.fromkeys(calls))  # type: ignore[index]
    return out


def call_keys(waiting: dict[tuple[str, str, str], list[str]]) -> list[dict[str, str]]:
    return [keys.call(route[0], route[1], call_id) for route, calls in waiting.items() for call_id in calls]


def reposts(connection_id: str, waiting: dict[tuple[str, str, str], list[str]],
            found: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    """The `turn.tool_result` messages to post again: each named call of a Turn this connection claimed whose result
    was submitted REPOST_AFTER_SECONDS ago or more (one submitted just now is on its way)."""
    out = []
    due = now() - REPOST_AFTER_SECONDS
    for route, calls in waiting.items():
        turn = found.get(keys.address(keys.turn(*route)))
        if turn is None or turn.get("claimed_by") != connection_id:
            continue
        for call_id in calls:
            call = found.get(keys.address(keys.call(route[0], route[1], call_id)))
            if call is None or call.get("state") != "submitted" or not call.get("result") or \
                    call.get("turn_id") != route[2] or float(call.get("submitted_at") or 0) > due:
                continue
            out.append({protocol.TYPE: protocol.TURN_TOOL_RESULT, protocol.CALL_ID: call_id,
                        "result": jsonutil.loads(call["result"]), protocol.TENANT: route[0],
                        protocol.SESSION_ID: route[1], protocol.TURN_ID: route[2],
                        protocol.DELIVERY_ID: call.get("delivery_id") or f"dlv_{call_id}"[:64]})
    return out


def posts_once(row: Optional[dict[str, Any]]) -> bool:
    """Whether the connection this declaration row is of takes a result's single post (its beat is the backstop)."""
    return bool(row and row.get(protocol.WAITING_CALLS))
