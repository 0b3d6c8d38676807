"""Server-sent events of a Session, read from committed state.

"SSE is live only": a stream starts at subscription (the Session's commit sequence when the request
arrives, read with a consistent GetItem, or 0 for a Session this request created) and then delivers
every later commit's events in commit order, exactly once per stream, by reading the Session's OUT#
outbox records with consistent Queries: every commit writes its OUT# records in its own transaction
(parts included), so a read sees a whole commit or none of it, and `SK > OUT#{last}` never repeats or
skips one. Nothing here depends on the stream consumer or on WebSocket fan-out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from agents_contract import jsonutil
from agents_contract.errors import NotFound

from .ids import new_id
from .store import DynamoStore, outbox_sk, session_key, session_pk, unpack

PAGE = 100


def subscribe(store: DynamoStore, tenant: str, session_id: str) -> int:
    """The commit sequence a stream starts after; a foreign or missing Session is 404 (before any byte)."""
    item = store.get(session_key(tenant, session_id), consistent=True)
    if item is None:
        raise NotFound()
    return int(item.get("out_seq") or 0)


def committed_since(store: DynamoStore, tenant: str, session_id: str, after: int) -> tuple[list[dict[str, Any]], int]:
    """Events of the commits after `after`, in order, and the last sequence read (one page of records)."""
    page = store.query(pk=session_pk(tenant, session_id), sk_prefix="OUT#", after=outbox_sk(after), limit=PAGE,
                       consistent=True)
    events: list[dict[str, Any]] = []
    last = after
    for record in page.items:
        events += jsonutil.loads(unpack(record["events"]) if record.get("events") else "[]")  # stored compressed
        last = int(record["seq"])
    return events, last


def session_exists(store: DynamoStore, tenant: str, session_id: str) -> bool:
    return store.get(session_key(tenant, session_id), consistent=True) is not None


def frame(event: dict[str, Any]) -> str:
    """One SSE frame: `event:` is the event's type, `data:` the event object on one line."""
    return f"event: {event.get('type', 'message')}\ndata: {jsonutil.dumps(event)}\n\n"


def error_event(session_id: str, message: str = "The event stream failed; read the Session to recover.",
                code: Optional[str] = "stream_failed") -> dict[str, Any]:
    """The `error` member of the official event union (AgentSessionErrorEvent)."""
    return {"type": "error", "event_id": new_id("evt"), "session_id": session_id,
            "error": {"type": "server_error", "code": code, "message": message, "param": None}}


def frames(events: list[dict[str, Any]]) -> Iterator[str]:
    for event in events:
        yield frame(event)
