"""A Runtime instance across its connections (issue 35, item 3).

API Gateway closes every WebSocket connection at 2 hours, so a Runtime process rotates its connection
before that: it opens a new one and says `runtime.hello` with the same `instance` (a random id of the
process). The hello moves the Turns the instance claimed on its earlier connection to the new one (each in
its Session's commit: `claimed_by` and the claim row), so their observations, results, heartbeats and
cancellation go on over the new connection. An instance is bound to the identity it connected with (its
Runtime token, or its Environment), so no other Runtime can take its Turns over by naming it.

A connection of an instance that closes keeps its claims: the instance may come back (a planned rotation
took them already; an unplanned loss within the heartbeat bound finds them). Only the heartbeat bound
passing with no connection of the instance fails them (the Dispatch task's heartbeat timeout, then
SettleLost, without replay). A Runtime that names no instance cannot come back to its Turns: its
`$disconnect` fails them at once, as before.

The same holds when a post meets GoneException before (or instead of) the `$disconnect` (`forget`): the
claims stay, marked with their instance. A result, input or cancellation posted to the gone connection while
no connection of the instance is open is held on the Turn's claim (`hold`) and posted again on the connection
that takes the claim over (`move_claims`), each once by its `delivery_id`.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Optional

from agents_contract import jsonutil, protocol
from agents_contract.errors import InvalidRequest, NotFound

from .. import engine, keys
from ..aws import Messenger
from ..ids import now
from ..observability import logger
from ..settings import get_settings
from ..store import DynamoStore, pack, unpack

INSTANCE = "instance"  # the hello's field
INSTANCE_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")
ROW_TTL = 3 * 3600  # past the maximum duration: an instance row outlives its newest connection a while
HELD = "held"  # a kept claim's deliveries posted while no connection of its instance was open (packed JSON)
MAX_HELD_BYTES = 256 * 1024  # what one claim holds at most (past it a delivery is dropped, and logged)


def parse(message: dict[str, Any]) -> Optional[str]:
    """A hello's `instance` (16-128 of A-Z a-z 0-9 _ -), or None; checked before the hello writes anything."""
    if INSTANCE not in message:
        return None
    value = message[INSTANCE]
    if not isinstance(value, str) or not INSTANCE_ID.fullmatch(value):
        raise InvalidRequest("Invalid 'instance': expected 16 to 128 characters of A-Z, a-z, 0-9, '_' and '-'.",
                             param=INSTANCE)
    return value


def _identity(conn: dict[str, Any]) -> str:
    kind = conn.get("runtime_kind") or "shared"
    who = conn.get("environment_id") if kind == "enrolled" else conn.get("runtime_id")
    return f"{kind}|{who}|{conn.get('host_id') or ''}"


def instance_key(conn: dict[str, Any], instance: str) -> dict[str, str]:
    digest = hashlib.sha256(f"{_identity(conn)}|{instance}".encode()).hexdigest()
    return keys.runtime_instance(digest)


def welcome(store: DynamoStore, connection_id: str, conn: dict[str, Any], instance: Optional[str],
            messenger: Optional[Messenger] = None) -> dict[str, Any]:
    """The welcome's fields for rotation: the connection's maximum duration, and (with an instance) the
    Turns this connection took over from the instance's earlier connection."""
    fields: dict[str, Any] = {"max_connection_seconds": get_settings().websocket_max_connection_seconds}
    if instance is None:
        return fields
    key = instance_key(conn, instance)
    row = store.get(key)
    store.put({**key, "kind": "runtime_instance", "connection_id": connection_id, "ttl": now() + ROW_TTL})
    store.put({**conn, "instance": key["PK"]})  # its $disconnect keeps its claims for the instance
    from . import connections

    if connection_id in connections._ROLES:
        connections._ROLES[connection_id] = {**conn, "instance": key["PK"]}
    previous = (row or {}).get("connection_id")
    fields["resumed_turns"] = move_claims(store, previous, connection_id, messenger) \
        if previous and previous != connection_id else []
    return fields


def move_claims(store: DynamoStore, old: str, new: str, messenger: Optional[Messenger] = None) -> list[str]:
    """The old connection's claimed Turns go on over the new one. The old connection leaves the pools
    first, so no Turn is claimed for it from now on. What was held for a moved Turn while no connection of the
    instance was open is posted to the new connection now (the Runtime applies each `delivery_id` once)."""
    for row in store.query(pk=keys.connection_partition(old), limit=200, consistent=True).items:
        if row.get("kind") == "runtime_harness":
            store.delete({"PK": row["PK"], "SK": row["SK"]})
    moved = []
    for claim in store.query(**keys.claims_of_connection(old), limit=1000, consistent=True).items:
        if _move(store, old, new, claim["tenant"], claim["session_id"], claim["turn_id"]):
            moved.append(claim["turn_id"])
            if messenger is not None:
                for message in _held(claim):
                    from .connections import post_safely

                    post_safely(messenger, store, new, message)
    if moved:
        logger.info("runtime connection rotated", extra={"connection_id": new, "previous": old, "turns": moved})
    return moved


def _move(store: DynamoStore, old: str, new: str, tenant: str, session_id: str, turn_id: str) -> bool:
    def work(draft: engine.Draft) -> bool:
        turn = draft.turn(turn_id)
        draft.tx.delete(keys.claim(old, turn_id))
        if turn is None or turn.claimed_by != old or turn.status in engine.TERMINAL:
            return False  # a stale claim row: only deleted
        turn.set(claimed_by=new)
        draft.tx.put({**keys.claim(new, turn_id), "kind": "claim", "tenant": tenant, "session_id": session_id,
                      "turn_id": turn_id, "ttl": now() + 2 * 3600})
        if (draft.active_turn or {}).get("id") == turn_id:
            draft.active_turn = {**draft.active_turn, "claimed_by": new}  # type: ignore[dict-item]
        draft.dirty = True
        return True

    try:
        return engine.run(store, tenant, session_id, work, turn_id=turn_id)
    except NotFound:
        store.delete(keys.claim(old, turn_id))
        return False


def _held(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return [jsonutil.loads(unpack(packed)) for packed in claim.get(HELD) or []]


def forget(store: DynamoStore, connection_id: str, instance_pk: Optional[str] = None) -> None:
    """A gone connection (its `$disconnect`, or a post that met GoneException first): its rows go, but an
    instance's connection keeps its claims (marked with the instance, so a later GoneException keeps them too)
    for the instance to take back within the heartbeat bound; a Turn claimed on it after its instance rotated
    goes to the newer connection."""
    from .connections import forget_keeping_claims

    instance_pk = instance_pk or outlives(store, connection_id)
    kept = closed(store, connection_id, instance_pk) if instance_pk else None
    forget_keeping_claims(store, connection_id, instance_pk, kept)


def hold(store: DynamoStore, command: dict[str, Any]) -> bool:
    """A delivery that met its gone connection while the Turn is still claimed there, by a Runtime instance that
    may come back: kept on the claim, posted again on the connection that takes the claim over."""
    message, gone = command["message"], command["connection_id"]
    turn_id = message.get(protocol.TURN_ID)
    if not isinstance(turn_id, str):
        return False
    packed = pack(jsonutil.dumps(message))
    if len(packed) > MAX_HELD_BYTES:
        logger.warning("delivery too large to hold for a returning Runtime", extra={"turn_id": turn_id})
        return False
    try:
        held = store.update_returning(keys.claim(gone, turn_id), f"SET {HELD} = list_append(if_not_exists({HELD}, "
                                      ":none), :m)", condition=f"attribute_exists({INSTANCE})",
                                      values={":none": [], ":m": [packed]})
    except Exception:  # noqa: BLE001 - the claim holds no more (400 KB): this delivery is not re-sent
        logger.exception("delivery could not be held for a returning Runtime", extra={"turn_id": turn_id})
        return False
    if held is not None:
        logger.info("delivery held for a returning Runtime instance", extra={"turn_id": turn_id, "connection_id": gone})
    return held is not None


def outlives(store: DynamoStore, connection_id: str) -> Optional[str]:
    """A closing Runtime connection: the PK of its instance's row when it said hello as an instance."""
    conn = store.get(keys.connection(connection_id))
    return (conn or {}).get("instance")


def closed(store: DynamoStore, connection_id: str, instance_pk: str) -> list[dict[str, Any]]:
    """`$disconnect` of an instance's connection: a Turn claimed on it after its instance rotated goes to the
    newer connection; the claims left are kept (returned, to be written again once the connection's rows
    are gone) for the instance to take back within the heartbeat bound."""
    row = store.get({"PK": instance_pk, "SK": "I"})
    newer = (row or {}).get("connection_id")
    if newer and newer != connection_id and store.get(keys.connection(newer)) is not None:
        move_claims(store, connection_id, newer)
    return store.query(**keys.claims_of_connection(connection_id), limit=1000, consistent=True).items


def follow(store: DynamoStore, messenger: Messenger, command: dict[str, Any]) -> bool:
    """A delivery that met a gone connection: when its Turn now runs on another connection of the same
    instance (a rotation), it goes there."""
    message = command["message"]
    route = [message.get(f) for f in protocol.ROUTE]
    if not all(isinstance(v, str) for v in route):
        return False
    turn = store.get(keys.turn(*route))
    owner = (turn or {}).get("claimed_by")
    if not owner or owner == command["connection_id"] or (turn or {}).get("status") in engine.TERMINAL:
        return False
    from .connections import post_safely

    return post_safely(messenger, store, owner, message)
