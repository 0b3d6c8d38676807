"""Deferred acknowledgements (issue 36: a WebSocket message costs as much as a Step Functions transition's 1/25).

By default Core answers every observation message of a Turn with a cumulative `turn.ack` (observations.py). A Runtime
that beats (`heartbeat_seconds`) may say `deferred_acks: true` in its hello; the welcome says it back. From then on an
observation message it marks `ack: false` gets no `turn.ack` (an error frame still answers a rejection at once), and
the Runtime asks when it wants to know: its `runtime.heartbeat`, sent anyway every cadence, names in `acks` the Turns
whose observations it holds unacknowledged (`{tenant, session_id, turn_id, seq}`, `seq` the highest it sent), and Core
answers all of them in one `{"type": "turn.acks", "acks": [{"turn_id", "seq"}]}`, read from the same eventually
consistent batch read as the beat's Turns. A message the Runtime leaves unmarked (it wants the ack now: its window of
unacknowledged observations is half full) is acknowledged at once, as before.

A Runtime or a message that does not say so gets today's immediate acks: nothing changes for other Runtimes.
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import protocol
from agents_contract.errors import InvalidRequest

from .. import keys
from ..aws import Messenger
from ..draft import TurnState

TERMINAL = ("completed", "failed", "cancelled")  # engine.TERMINAL (not imported: the engine imports much more)

MAX_ID = 256
MAX_SEQ = 2**53


def asked(message: dict[str, Any]) -> bool:
    """A hello's `deferred_acks` (a boolean; absent: False), checked before the hello writes anything."""
    value = message.get(protocol.DEFERRED_ACKS_FIELD, False)
    if not isinstance(value, bool):
        raise InvalidRequest("Invalid 'deferred_acks': expected a boolean.", param=protocol.DEFERRED_ACKS_FIELD)
    return value


def welcome(message: dict[str, Any]) -> dict[str, Any]:
    """The welcome's `deferred_acks`: granted to a Runtime that beats (its heartbeat is where it asks)."""
    if asked(message) and protocol.HEARTBEAT_SECONDS_FIELD in message:
        return {protocol.DEFERRED_ACKS_FIELD: True}
    return {}


def unmarked(message: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """An observation message without its `ack` field, and whether its `turn.ack` is deferred (`ack: false`)."""
    if protocol.ACK not in message:
        return message, False
    value = message[protocol.ACK]
    if not isinstance(value, bool):
        raise InvalidRequest("Invalid 'ack': expected a boolean (false: no turn.ack; the Runtime's heartbeat asks).",
                             param=protocol.ACK)
    return {k: v for k, v in message.items() if k != protocol.ACK}, value is False


class WithoutAcks:
    """A messenger that posts everything but `turn.ack`: what a message marked `ack: false` is answered with."""

    def __init__(self, messenger: Messenger):
        self.messenger = messenger

    def post(self, connection_id: str, message: Any) -> Any:
        if isinstance(message, dict) and message.get(protocol.TYPE) == protocol.TURN_ACK:
            return None
        return self.messenger.post(connection_id, message)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.messenger, name)


def parse(message: dict[str, Any]) -> dict[tuple[str, str, str], int]:
    """A `runtime.heartbeat`'s `acks`: route -> the highest seq the Runtime sent, shape-checked."""
    entries = message.get(protocol.ACKS, [])
    if not isinstance(entries, list) or len(entries) > protocol.MAX_HEARTBEAT_TURNS:
        raise InvalidRequest(f"Invalid 'acks': expected a list of at most {protocol.MAX_HEARTBEAT_TURNS} Turns.",
                             param=protocol.ACKS)
    out: dict[tuple[str, str, str], int] = {}
    for i, entry in enumerate(entries):
        route = tuple(entry.get(f) for f in protocol.ROUTE) if isinstance(entry, dict) else ()
        seq = entry.get(protocol.SEQ) if isinstance(entry, dict) else None
        if len(route) != 3 or not all(isinstance(v, str) and 0 < len(v) <= MAX_ID for v in route) or \
                isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= MAX_SEQ:
            raise InvalidRequest(f"Invalid 'acks[{i}]': expected {{tenant, session_id, turn_id, seq}}, the ids strings "
                                 f"of 1 to {MAX_ID} characters and seq an integer from 1 to 2**53.", param=f"acks[{i}]")
        out[route] = max(seq, out.get(route, 0))  # type: ignore[index]
    return out


def answer(connection_id: str, asked_for: dict[tuple[str, str, str], int],
           found: dict[Any, dict[str, Any]]) -> Optional[dict[str, Any]]:
    """`turn.acks` for the Turns a heartbeat asked about, from their items (as a `turn.ack` would say: the last seq
    applied; for a Turn that ended or is closing, the highest seq asked, nothing of it needs sending again). A Turn
    this connection did not claim, or that is gone, is left out (as its observations are ignored). None: no ask."""
    if not asked_for:
        return None
    out = []
    for route, highest in asked_for.items():
        item = found.get(keys.address(keys.turn(*route)))
        if item is None or item.get("claimed_by") != connection_id:
            continue
        turn = TurnState.from_item(item)
        ended = turn.status in TERMINAL or turn.closing
        out.append({protocol.TURN_ID: route[2], protocol.SEQ: max(turn.obs_seq, highest) if ended else turn.obs_seq})
    return {protocol.TYPE: protocol.TURN_ACKS, protocol.ACKS: out}
