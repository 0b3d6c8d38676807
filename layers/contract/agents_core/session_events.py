"""A Session's committed events, read back for a live stream (the SSE adapter is transport.sse).

"SSE is live only": a stream starts at subscription (the Session's commit sequence when the request
arrives, read with a consistent GetItem, or 0 for a Session this request created) and then delivers
every later commit's events in commit order, exactly once per stream, by reading the Session's OUT#
outbox records with consistent Queries: every commit writes its OUT# records in its own transaction
(parts included), so a read sees a whole commit or none of it, and `SK > OUT#{last}` never repeats or
skips one. Nothing here depends on the stream consumer or on WebSocket fan-out.
"""

from __future__ import annotations

from typing import Any

from agents_contract import jsonutil
from agents_contract.errors import NotFound

from . import keys
from .store import DynamoStore, unpack

PAGE = 100
# A `stream: true` creation's stream ends right after the first of these, as the official service closes it.
CLOSING = ("agent.session.idle", "agent.session.failed")


def subscribe(store: DynamoStore, tenant: str, session_id: str) -> int:
    """The commit sequence a stream starts after; a foreign or missing Session is 404 (before any byte)."""
    item = store.get(keys.session(tenant, session_id), consistent=True)
    if item is None:
        raise NotFound()
    return int(item.get("out_seq") or 0)


def committed_since(store: DynamoStore, tenant: str, session_id: str, after: int) -> tuple[list[dict[str, Any]], int]:
    """Events of the commits after `after`, in order, and the last sequence read (one page of records)."""
    page = store.query(**keys.outbox_of_session(tenant, session_id), after=keys.outbox_sk(after), limit=PAGE,
                       consistent=True)
    events: list[dict[str, Any]] = []
    last = after
    for record in page.items:
        events += jsonutil.loads(unpack(record["events"]) if record.get("events") else "[]")  # stored compressed
        last = int(record["seq"])
    return events, last


def session_exists(store: DynamoStore, tenant: str, session_id: str) -> bool:
    return store.get(keys.session(tenant, session_id), consistent=True) is not None


def creation_ends_after(session: dict[str, Any]) -> tuple[str, ...]:
    """The event types a streamed creation's stream ends after: the first `agent.session.idle` or
    `agent.session.failed`, or `agent.session.created` itself when the creation started no Turn, so
    iterating the SDK's stream ends."""
    return ("agent.session.created",) if session.get("status") == "idle" else CLOSING
