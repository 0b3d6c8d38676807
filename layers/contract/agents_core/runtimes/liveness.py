"""Liveness: a Runtime connection proves it is alive, and Dispatch never trusts one that stopped (issue 35, item 4).

API Gateway delivers `$disconnect` on a best-effort basis, and a process that vanished (killed, frozen, cut off)
may leave a connection that API Gateway still holds open, so a post to it succeeds and nothing answers. So a
Runtime whose `runtime.hello` asks for it (`heartbeat_seconds`) sends one `runtime.heartbeat` every cadence (the
welcome says it: a third of the bound), idle or busy, naming every Turn it runs. One message and one invocation
carry them all: the connection's pool rows get a fresh `seen_at`, and each named Turn claimed by this connection
gets its Step Functions task heartbeat. A pool row whose `seen_at` is older than the bound (the template's
HeartbeatSeconds, 3 cadences) is stale: Dispatch passes it by, so a vanished Runtime is never chosen; when its
beats come back, the Turns queued meanwhile are offered to it, as at a hello.

A hello that does not ask (a Runtime that only sends `turn.heartbeat`, the older protocol) writes rows without
`seen_at`: they are trusted as before, until `$disconnect`, a post that meets GoneException, or their TTL.
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import protocol
from agents_contract.errors import InvalidRequest

from .. import keys
from ..aws import Workflow
from ..ids import now
from ..observability import logger
from ..running_turns import live_turns
from ..settings import get_settings
from ..store import DynamoStore
from . import acks, redelivery

SEEN_AT = "seen_at"
MAX_ASKED_SECONDS = 3600
MAX_ID = 256  # a named Turn's routing ids (as observations' routes)


def bound() -> int:
    """Seconds after which a silent connection is stale and a silent Turn lost: HeartbeatSeconds."""
    return get_settings().heartbeat_seconds


def cadence(bound_seconds: float) -> float:
    """The cadence a Runtime beats at: a third of the bound, so one late or lost beat is not a loss."""
    return round(bound_seconds / 3, 2)


def refresh_after(bound_seconds: float) -> float:
    """A beat rewrites a pool row's `seen_at` only once it is this old (half the bound): every other beat at the
    cadence, so a live Runtime's rows are at most about two cadences old, one cadence within the bound."""
    return bound_seconds / 2


def fresh(row: dict[str, Any], at: float, bound_seconds: float) -> bool:
    """Whether a pool row may be chosen: a row without `seen_at` (a Runtime that does not beat) is trusted, one
    with it is fresh while it is at most `bound_seconds` old."""
    seen = row.get(SEEN_AT)
    return seen is None or at - float(seen) <= bound_seconds


def asked(message: dict[str, Any]) -> Optional[float]:
    """A hello's `heartbeat_seconds` (the Runtime sends runtime.heartbeat; the value is the cadence it would beat at
    on its own), or None; checked before the hello writes anything."""
    if protocol.HEARTBEAT_SECONDS_FIELD not in message:
        return None
    value = message[protocol.HEARTBEAT_SECONDS_FIELD]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_ASKED_SECONDS:
        raise InvalidRequest(f"Invalid 'heartbeat_seconds': expected a number of seconds above 0 and at most "
                             f"{MAX_ASKED_SECONDS}.", param=protocol.HEARTBEAT_SECONDS_FIELD)
    return float(value)


def declared(message: dict[str, Any]) -> dict[str, Any]:
    """What a hello's declarations carry for liveness: `seen_at` when the Runtime beats."""
    return {SEEN_AT: now()} if asked(message) is not None else {}


def welcome(message: dict[str, Any]) -> dict[str, Any]:
    """The welcome's liveness fields for a Runtime that beats: the cadence (what it asked, never slower than a third
    of the bound) and the bound."""
    wanted = asked(message)
    if wanted is None:
        return {}
    limit = bound()
    return {protocol.HEARTBEAT_SECONDS_FIELD: min(wanted, cadence(limit)), "heartbeat_bound_seconds": limit}


def parse(message: dict[str, Any]) -> list[tuple[str, str, str]]:
    """A `runtime.heartbeat`'s Turns (their routes, each once), shape-checked before anything is read."""
    turns = message.get(protocol.TURNS, [])
    if not isinstance(turns, list) or len(turns) > protocol.MAX_HEARTBEAT_TURNS:
        raise InvalidRequest(f"Invalid 'turns': expected a list of at most {protocol.MAX_HEARTBEAT_TURNS} Turns "
                             "(send several runtime.heartbeat messages for more).", param=protocol.TURNS)
    routes: dict[tuple[str, str, str], None] = {}
    for i, turn in enumerate(turns):
        values = tuple(turn.get(f) for f in protocol.ROUTE) if isinstance(turn, dict) else ()
        if len(values) != 3 or not all(isinstance(v, str) and 0 < len(v) <= MAX_ID for v in values):
            raise InvalidRequest(f"Invalid 'turns[{i}]': expected {{tenant, session_id, turn_id}}, each a string of "
                                 f"1 to {MAX_ID} characters.", param=f"turns[{i}]")
        routes[values] = None  # type: ignore[index]
    return list(routes)  # type: ignore[arg-type]


def beat(store: DynamoStore, workflow: Workflow, connection_id: str,
         message: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """`runtime.heartbeat`: the connection's pool rows are fresh, and each named Turn this connection claimed gets
    its task heartbeat. Returns the Harnesses whose row was stale until now (their queued Turns are offered), and what
    to post back: the `turn.acks` answering its `acks` (acks.py) and the tool results of the calls it still waits on
    that were lost on the way (redelivery.py); a beat is otherwise unanswered. The Turns it names, those it asks
    about and the calls it waits on are read in eventually consistent batches."""
    routes = parse(message)
    asked_for = acks.parse(message)
    waiting = redelivery.parse(message)
    revived = refresh(store, connection_id)
    wanted = list(dict.fromkeys([*routes, *asked_for]))
    found: dict[Any, dict[str, Any]] = {}
    if asked_for:  # a running Turn's last applied seq is on its Session item (running_turns.py)
        found = live_turns(store, wanted, consistent=False)
    listed = ([] if asked_for else [keys.turn(*route) for route in wanted]) + redelivery.call_keys(waiting)
    for i in range(0, len(listed), 100):  # BatchGetItem reads at most 100 keys
        found.update(store.batch_get(listed[i:i + 100], consistent=False))
    heartbeat_turns(store, workflow, connection_id, routes, found)
    answer = acks.answer(connection_id, asked_for, found)
    return revived, ([answer] if answer is not None else []) + redelivery.reposts(connection_id, waiting, found)


def refresh(store: DynamoStore, connection_id: str) -> list[str]:
    """Rewrite `seen_at` on the connection's pool rows that are half the bound old (never a row that is gone: a
    rotation or a GoneException removed it, and a beat must not bring it back)."""
    limit, at = bound(), now()
    every = keys.declaration(connection_id, "")  # the prefix of its declarations: each Harness's, each Environment's
    rows = store.query(pk=every["PK"], sk_prefix=keys.sort_key(every), limit=200, consistent=False).items
    revived = []
    for row in rows:
        if row.get(SEEN_AT) is None or at - float(row[SEEN_AT]) < refresh_after(limit):
            continue
        written = store.update_returning({"PK": row["PK"], "SK": row["SK"]}, f"SET {SEEN_AT} = :t",
                                         condition="attribute_exists(PK)", values={":t": at})
        if written is not None and not fresh(row, at, limit) and \
                keys.sort_key(row) == keys.sort_key(keys.declaration(connection_id, row.get("harness", ""))):
            revived.append(row["harness"])
    if revived:
        logger.info("runtime connection fresh again", extra={"connection_id": connection_id, "harnesses": revived})
    return revived


def heartbeat_turns(store: DynamoStore, workflow: Workflow, connection_id: str,
                    routes: list[tuple[str, str, str]], found: Optional[dict[Any, dict[str, Any]]] = None) -> int:
    """The task heartbeat of each named Turn this connection claimed (one eventually consistent batch read; a Turn
    claimed elsewhere, ended or closing gets none, so a Runtime keeps alive only its own running Turns)."""
    if not routes:
        return 0
    if found is None:
        found = store.batch_get([keys.turn(*route) for route in routes], consistent=False)
    sent = 0
    for item in (found.get(keys.address(keys.turn(*route))) for route in routes):
        if item is None:
            continue
        if item.get("claimed_by") != connection_id or not item.get("task_token") or item.get("closing"):
            continue
        try:
            sent += bool(workflow.heartbeat(item["task_token"]))
        except Exception:  # noqa: BLE001 - one Turn's refused heartbeat never stops the others'
            logger.exception("task heartbeat failed", extra={"turn_id": item.get("id"), "connection_id": connection_id})
    return sent
