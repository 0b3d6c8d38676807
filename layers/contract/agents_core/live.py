"""Live events: stream tickets, client subscriptions and fan-out of committed events.

Live means live: a subscription starts at the Session's current commit, so reconnecting never
replays; callers recover through reads. Each subscription remembers the last commit delivered,
so a redelivered stream batch posts nothing twice. A GoneException deletes *that* connection.
"""

from __future__ import annotations

import hashlib
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from agents_contract.errors import InvalidRequest, NotFound

from . import keys
from .aws import Messenger
from .ids import now
from .runtimes import connections
from .settings import get_settings
from .store import DynamoStore, TransactionConflict

TICKET_SECONDS = 60
SUBSCRIPTION_SECONDS = 2 * 3600  # API Gateway closes a WebSocket connection after 2 hours


def _ticket_key(ticket: str) -> dict[str, str]:
    return keys.ticket(hashlib.sha256(ticket.encode()).hexdigest())


def create_ticket(store: DynamoStore, tenant: str, session_id: str) -> dict[str, Any]:
    """A short-lived, single-use connection ticket for browsers (which cannot set WebSocket headers)."""
    if store.get(keys.session(tenant, session_id)) is None:
        raise NotFound()
    ticket = "tk_" + secrets.token_urlsafe(24)
    expires_at = now() + TICKET_SECONDS
    store.put({**_ticket_key(ticket), "kind": "ticket", "tenant": tenant, "session_id": session_id,
               "expires_at": expires_at, "ttl": expires_at + 60}, condition="attribute_not_exists(PK)")
    return {"object": "agent.session.stream_ticket", "ticket": ticket, "session_id": session_id,
            "expires_at": expires_at, "websocket_url": get_settings().websocket_url}


def redeem_ticket(store: DynamoStore, ticket: str) -> Optional[tuple[str, str]]:
    """Single use: the ticket is deleted by the redemption that reads it."""
    key = _ticket_key(ticket)
    item = store.get(key)
    if item is None or not store.delete(key, "attribute_exists(PK)"):
        return None
    if int(item["expires_at"]) < now():
        return None
    return item["tenant"], item["session_id"]


def subscribe(store: DynamoStore, connection_id: str, session_id: str) -> dict[str, Any]:
    conn = connections.connection(store, connection_id)
    if conn is None or conn.get("role") != "client":
        raise InvalidRequest("Only client connections subscribe to Sessions.", param="action")
    tenant = conn["tenant"]
    # Mark the Session first ("subscribers may exist until") and advance its commit sequence in the
    # same write, as a commit would: a commit decided on the Session as it was before fails its
    # `out_seq` condition and is decided again, so every commit from here on sees the mark and its
    # outbox record asks for fan-out. Without a mark the stream consumer skips the subscriber query.
    # The subscription starts at the advanced sequence: live only, nothing before it is replayed.
    session = store.update_returning(keys.session(tenant, session_id), "SET sub_until = :until ADD out_seq :one",
                                     "attribute_exists(PK)",
                                     values={":until": now() + SUBSCRIPTION_SECONDS + 60, ":one": 1})
    if session is None:
        raise NotFound()  # another tenant's id is as absent as a missing one
    store.put({**keys.subscription(connection_id, session_id), "kind": "subscription",
               "connection_id": connection_id, "tenant": tenant, "session_id": session_id,
               "delivered_seq": int(session.get("out_seq", 0)),
               **keys.listed_subscriber(tenant, session_id, connection_id),
               "ttl": now() + SUBSCRIPTION_SECONDS})
    return {"type": "subscribed", "session_id": session_id}


def unsubscribe(store: DynamoStore, connection_id: str, session_id: str) -> dict[str, Any]:
    store.delete(keys.subscription(connection_id, session_id))
    return {"type": "unsubscribed", "session_id": session_id}


FANOUT_WORKERS = 16
SUBSCRIBER_PAGE = 1000
CLAIM_CHUNK = 100  # TransactWriteItems' limit
_pool = ThreadPoolExecutor(max_workers=FANOUT_WORKERS, thread_name_prefix="fanout")


def _claim_one(store: DynamoStore, connection_id: str, session_id: str, seq: int) -> bool:
    """Claim this commit for one subscriber (conditional write); False when it already had it (a
    redelivered batch) or unsubscribed."""
    try:
        store.transact(store.new_transaction().update(
            keys.subscription(connection_id, session_id), "SET delivered_seq = :s",
            "attribute_exists(PK) AND delivered_seq < :s", values={":s": seq}))
        return True
    except TransactionConflict:
        return False


def _claim(store: DynamoStore, connection_ids: list[str], session_id: str, seq: int) -> list[str]:
    """Claim this commit for a page of subscribers: one transaction of up to 100 conditional writes in
    the common case; when any condition fails (a redelivered batch, an unsubscribe meanwhile), each
    subscriber of the page is claimed on its own, so exactly the ones that had not got it get it."""
    if len(connection_ids) > 1:
        tx = store.new_transaction()
        for connection_id in connection_ids:
            tx.update(keys.subscription(connection_id, session_id), "SET delivered_seq = :s",
                      "attribute_exists(PK) AND delivered_seq < :s", values={":s": seq})
        try:
            store.transact(tx)
            return connection_ids
        except TransactionConflict:
            pass
    claimed = _pool.map(lambda c: _claim_one(store, c, session_id, seq), connection_ids)
    return [c for c, ok in zip(connection_ids, claimed, strict=True) if ok]


def _post_all(store: DynamoStore, messenger: Messenger, connection_id: str, events: list[dict[str, Any]]) -> bool:
    """One subscriber's events of this commit, in order."""
    for event in events:
        if not connections.post_safely(messenger, store, connection_id, event):
            return False  # GoneException: that connection was deleted
    return True


def fanout(store: DynamoStore, messenger: Messenger, tenant: str, session_id: str, seq: int,
           events: list[dict[str, Any]]) -> int:
    """Post one commit's events to every subscriber; returns connections reached. Per page of up to
    1,000 subscribers (one Query; a subscription item is ~200 B, well inside a 1 MB page): claim
    transactions of 100 in parallel, then the posts in parallel; each subscriber gets
    the commit's events in order, and the next commit only after this one finished (the stream
    handler processes a Session's records one by one)."""
    reached = 0
    after: Optional[str] = None
    while True:
        page = store.query(**keys.subscribers_of_session(tenant, session_id), after=after, limit=SUBSCRIBER_PAGE)
        ids = [sub["connection_id"] for sub in page.items]
        claims = _pool.map(lambda chunk: _claim(store, chunk, session_id, seq),
                           [ids[i:i + CLAIM_CHUNK] for i in range(0, len(ids), CLAIM_CHUNK)])
        claimed = [c for chunk in claims for c in chunk]
        reached += sum(1 for ok in _pool.map(lambda c: _post_all(store, messenger, c, events), claimed) if ok)
        if not page.has_more:
            return reached
        after = keys.list_position(page.items[-1])
