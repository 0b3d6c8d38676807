"""Session logic: create (resolve, admit, write in one transaction), read, update metadata, list,
delete; Turns and Items reads.

"Session creation resolves saved references and inline declarations with the execution parser into
the immutable Session snapshot, then checks the combination against the selected Harness's
declaration ... before anything is written."
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Optional

from agents_contract import admission, jsonutil, parser, resources
from agents_contract.errors import Conflict, InvalidRequest, NotFound, Unavailable
from agents_contract.parser import Snapshot

from . import engine, environments, keys, quotas
from .draft import LIVE_STATUSES, outbox_record
from .ids import new_id, now
from .pagination import ListParams, page
from .running_turns import live_turn
from .settings import get_settings
from .store import (
    Contention,
    DynamoStore,
    Transaction,
    TransactionConflict,
    pack,
    unpack,
)

IMMUTABLE = "The Session configuration is immutable; only metadata can be updated."


# ---- stored item <-> resource -------------------------------------------------------------------

def session_state(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item["id"],
        "created_at": int(item["created_at"]),
        "last_active_at": int(item["last_active_at"]),
        "metadata": jsonutil.loads(item.get("metadata") or "{}"),
        "status": item["status"],
        "required_actions": jsonutil.loads(item.get("required_actions") or "[]"),
        "review": item.get("review"),
        "prompt_cache_options": jsonutil.loads(item["prompt_cache_options"]) if item.get("prompt_cache_options")
        else None,
        "remote_url": environments.remote_url(),
        "error": item.get("error"),
    }


def session_view(item: dict[str, Any]) -> dict[str, Any]:
    return resources.session_resource(session_state(item), Snapshot.from_json(unpack(item["snapshot"])))


def _position(item_identifier: str) -> Optional[int]:
    digits = item_identifier.removeprefix("item_")[:8]
    return int(digits) if digits.isdigit() else None


# ---- create -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Admitted:
    """A Session create body admitted: parsed, its references resolved, checked against its Harness."""
    request: Any
    saved: Optional[admission.SavedAgent]
    agent_id: str
    snapshot: Snapshot
    reused: Any


def admit(store: DynamoStore, tenant: str, body: Any) -> Admitted:
    """Everything `create` checks before it writes (automations admit their `new_session` target here)."""
    request = parser.parse_session_create(body)
    if request.stream and request.input is None and request.environment.type != "self_hosted":
        # contract notes: `input` is required when `stream` is true for a non-self-hosted environment
        raise InvalidRequest("Missing required parameter: 'input'.", param="input")
    saved: Optional[admission.SavedAgent] = None
    if request.given("agent_id"):
        item = store.get(keys.agent(tenant, request.agent_id))
        if item is None:
            raise NotFound()
        record = jsonutil.loads(item["doc"])
        saved = admission.SavedAgent(record["id"], record.get("name"), record["config"], record.get("harness"))
        agent_id = record["id"]
    else:
        agent_id = new_id("agent")  # an inline-only Agent: resolved into the snapshot, not saved
    attached = None
    if request.vault_ids:
        from agents_contract.vaults import check_vault_ids

        from .vaults import attached_credentials  # only a Session that attaches Vaults reads them

        attached = attached_credentials(store, tenant, check_vault_ids(request.vault_ids))
    snapshot = admission.resolve_session(
        request, saved, default_harness=get_settings().default_harness, agent_id=agent_id, body=body,
        attached=attached,
    )
    # `openai_hosted.environment_id` names an existing Environment of the tenant (404, or 409 when final):
    # the Session runs in it, with its configuration.
    snapshot, reused = environments.for_session(store, tenant, request.environment, snapshot)
    return Admitted(request, saved, agent_id, snapshot, reused)


def create(store: DynamoStore, tenant: str, body: Any, session_id: Optional[str] = None) -> dict[str, Any]:
    """`session_id` names the Session to create (an automation's occurrence: created once, whoever retries)."""
    admitted = admit(store, tenant, body)
    request, saved, agent_id = admitted.request, admitted.saved, admitted.agent_id
    snapshot, reused = admitted.snapshot, admitted.reused
    ts = now()
    admitted_id = session_id is not None
    session_id = session_id or new_id("sess")
    item: dict[str, Any] = {
        **keys.session(tenant, session_id),  # listed by an entry of its own (`list_entry`), not by this item
        "kind": "session", "id": session_id, "tenant": tenant, "agent_id": agent_id,
        "created_at": ts, "last_active_at": ts, "status": "idle",
        "metadata": jsonutil.dumps(body.get("metadata") or {}), "meta": dict(body.get("metadata") or {}),
        "required_actions": "[]", "active_turn": "null",
        "snapshot": pack(snapshot.to_json()), "review": request.review,
        "prompt_cache_options": jsonutil.dumps(body["prompt_cache_options"]) if body.get("prompt_cache_options")
        else None,
        "item_seq": 0, "out_seq": 0,
    }
    draft = engine.Draft(store, tenant, item)
    draft.emit_session("agent.session.created")
    environments.announce(draft, snapshot.environment, reused)
    if request.input is not None:
        from .runtimes import dispatch  # only a create with input claims a Turn

        dispatch.start_turn(draft, resources.input_messages(request.input))

    def transaction(draft: engine.Draft) -> Transaction:  # once the Turn its input starts is claimed (or not)
        if draft.started is not None:
            # `agent.session.created` carries the Session as this commit leaves it (the 201 body's status,
            # in_progress with initial input), though it comes first among the commit's events.
            draft.events[0]["session"] = draft.session_resource()
        item.update(status=draft.status, active_turn=jsonutil.dumps(draft.active_turn), item_seq=draft.item_seq,
                    out_seq=1, required_actions=jsonutil.dumps(draft.required_actions))
        tx = store.new_transaction()
        if saved is not None:
            tx.check(keys.agent(tenant, agent_id), "attribute_exists(PK)")
        entry = listing(tenant, session_id, agent_id, body.get("metadata"))
        first = _first_input_position(draft)
        if first is not None:  # the first input message's Item (written once, never again) carries the entry
            draft.item_attrs[first] = {k: v for k, v in entry.items() if k not in (keys.PK, keys.SK, "kind", "id")}
            item["list_item"] = first
        else:
            tx.put(entry, "attribute_not_exists(PK)")
        tx.put(item, "attribute_not_exists(PK)")
        # a workspace Session's own Environment, created with it (or the named one it now uses)
        environments.write_for_session(tx, draft, snapshot.environment, ts, request.environment, reused)
        draft.flush()
        tx.entries += draft.tx.entries
        # nobody can have subscribed to a Session that does not exist yet: no subscriber query for it
        tx.put(outbox_record(tenant, session_id, 1, draft.events, draft.commands, fanout=False))
        return tx

    try:
        engine.create(draft, transaction)
    except TransactionConflict:
        if admitted_id and (existing := store.get(keys.session(tenant, session_id))) is not None:
            return session_view(existing)  # created before, by an earlier attempt of the same occurrence
        raise NotFound() from None  # the saved Agent was deleted meanwhile
    return session_view(item)


def listing(tenant: str, session_id: str, agent_id: str, metadata: Any) -> dict[str, Any]:
    """The Session's list entry on GSI1 (issue 36: no commit of the Session then rewrites an index entry): what a
    list filters on (`agent_id`, `meta`) and the Session it names (`listed`); the page is read from the Sessions.
    A create with input folds it into its first message's Item, which no later commit writes; otherwise it is a
    row of its own (keys.session_listing). A Session created before list entries is listed by its own item."""
    return {**keys.session_listing(tenant, session_id), **keys.listed_session(tenant, session_id),
            "kind": "session_listing", "listed": session_id, "agent_id": agent_id, "meta": dict(metadata or {})}


def _first_input_position(draft: engine.Draft) -> Optional[int]:
    users = [p for p, doc in draft.pending_items().items() if doc.get("type") == "message" and doc.get("role") == "user"]
    return min(users) if users else None


def list_entry(tenant: str, session_id: str, stored: dict[str, Any]) -> dict[str, str]:
    """The key of the row that lists a Session (`listing`), from its stored item."""
    if stored.get("list_item"):
        return keys.item(tenant, session_id, int(stored["list_item"]))
    return keys.session_listing(tenant, session_id)


# ---- read / update / delete / list ------------------------------------------------------------

def load(store: DynamoStore, tenant: str, session_id: str) -> dict[str, Any]:
    item = store.get(keys.session(tenant, session_id))
    if item is None:
        raise NotFound()
    return item


def retrieve(store: DynamoStore, tenant: str, session_id: str) -> dict[str, Any]:
    return session_view(load(store, tenant, session_id))


def update(store: DynamoStore, tenant: str, session_id: str, body: Any) -> dict[str, Any]:
    """Metadata only: omitted keeps, null or {} clears, an object replaces."""
    request = parser.parse_session_update(body)
    for member in ("agent", "prompt_cache_options", "review"):
        if request.given(member):
            raise InvalidRequest(IMMUTABLE, param=member)
    if not request.given("metadata"):
        return retrieve(store, tenant, session_id)
    metadata = jsonutil.dumps(request.metadata or {})
    tx = store.new_transaction().update(
        keys.session(tenant, session_id), "SET metadata = :m, meta = :map", "attribute_exists(PK)",
        values={":m": metadata, ":map": dict(request.metadata or {})},
    )
    stored = load(store, tenant, session_id)
    if keys.GSI1PK not in stored:  # listed by an entry of its own, which a list filters on `meta`
        tx.update(list_entry(tenant, session_id, stored), "SET meta = :map", "attribute_exists(PK)",
                  values={":map": dict(request.metadata or {})})
    try:
        store.transact(tx)
    except TransactionConflict:
        raise NotFound() from None
    return retrieve(store, tenant, session_id)


RUNNING = ("The Session has running execution; cancel it first (an agent.session.input.cancel event), then "
           "delete the Session once it is idle.")


def delete(store: DynamoStore, tenant: str, session_id: str) -> dict[str, Any]:
    """"Running execution must be cancelled first" (the SDK's sessions.delete): a Turn a Runtime
    claimed and that has not settled is a 409. A queued Turn never started, so deleting cancels it.

    The Session item goes first, conditioned on its commit sequence: every commit to the Session is
    conditioned on that item, so once it is gone nothing more lands in the partition, and the rest
    of the partition is then deleted without leaving orphans."""
    for attempt in range(5):
        item = load(store, tenant, session_id)
        active = jsonutil.loads(item.get("active_turn") or "null")
        if active and active.get("claimed_by"):
            raise Conflict(RUNNING)
        tx = store.new_transaction().delete(keys.session(tenant, session_id), "out_seq = :seq",
                                            values={":seq": int(item.get("out_seq", 0))})
        if active:  # its queued Turn ends with it: the Turn's running-Turn slot goes back in this commit
            turn = store.get(keys.turn(tenant, session_id, active["id"]))
            if turn is not None and turn.get("slot") and turn.get("status") not in engine.TERMINAL:
                quotas.add(tx, tenant, -1)
        try:
            store.transact(tx)
            break
        except (TransactionConflict, Contention):
            time.sleep(0.01 * (2 ** attempt))  # a commit landed meanwhile: decide again
    else:
        raise Unavailable()
    from .files import artifacts  # its artifacts' bytes go with it (their rows are in its partition)

    published = artifacts.object_keys(store, tenant, session_id)
    store.delete_partition(keys.session_partition(tenant, session_id))
    environments.delete_for_session(store, tenant, session_id)
    artifacts.forget_session(tenant, published)
    return {"id": session_id, "object": "agent.session.deleted", "deleted": True}


def list_page(store: DynamoStore, tenant: str, params: ListParams, query: dict[str, str]) -> dict[str, Any]:
    filters: list[str] = []
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    if query.get("agent_id"):
        filters.append("agent_id = :agent")
        values[":agent"] = query["agent_id"]
    wanted = {k[len("metadata["):-1]: v for k, v in query.items() if k.startswith("metadata[") and k.endswith("]")}
    parser.check_metadata(wanted or None)
    if params.after is not None and store.get(keys.session(tenant, params.after)) is None:
        raise NotFound()  # a cursor that names no Session of this tenant
    for i, (key, value) in enumerate(sorted(wanted.items())):
        # `meta` mirrors the metadata as a map, so the filter runs inside the query and pages stay full.
        filters.append(f"meta.#m{i} = :m{i}")
        names[f"#m{i}"] = key
        values[f":m{i}"] = value
    result = store.query(**keys.sessions_of_tenant(tenant), after=params.after, limit=params.limit,
                         ascending=params.ascending, filter_expression=" AND ".join(filters) or None,
                         names=names or None, values=values or None)
    # A list entry names its Session (read in one BatchGetItem); a Session created before list entries existed is
    # its own entry. One deleted meanwhile (its entry goes with its partition, just after it) is left out.
    named = [keys.session(tenant, i["listed"]) for i in result.items if i.get("listed")]
    sessions = store.batch_get(named) if named else {}
    items = [sessions.get(keys.address(keys.session(tenant, i["listed"]))) if i.get("listed") else i
             for i in result.items]
    return page([session_view(i) for i in items if i is not None], result.has_more)


# ---- Turns and Items ------------------------------------------------------------------------------

def list_turns(store: DynamoStore, tenant: str, session_id: str, params: ListParams) -> dict[str, Any]:
    load(store, tenant, session_id)
    after = keys.turn_sk(params.after) if params.after else None
    if after is not None and store.get(keys.turn(tenant, session_id, params.after)) is None:
        raise NotFound()  # a cursor that names no Turn of this Session
    result = store.query(**keys.turns_of_session(tenant, session_id), after=after, limit=params.limit,
                         ascending=params.ascending, consistent=True)
    return page([resources.turn_resource(_turn_doc(store, tenant, session_id, i)) for i in result.items],
                result.has_more)


def retrieve_turn(store: DynamoStore, tenant: str, session_id: str, turn_id: str) -> dict[str, Any]:
    item = store.get(keys.turn(tenant, session_id, turn_id))
    if item is None:
        raise NotFound()
    return resources.turn_resource(_turn_doc(store, tenant, session_id, item))


def _turn_doc(store: DynamoStore, tenant: str, session_id: str, item: dict[str, Any]) -> dict[str, Any]:
    """A Turn as it stands: a queued or ended Turn is all in its item; a running one's status (in_progress or
    waiting) may be kept on its Session item (agents_core.draft.LIVE_FIELDS): the two are read as of one instant."""
    doc = jsonutil.loads(item["doc"])
    if doc.get("status") not in LIVE_STATUSES:
        return doc
    fresh = live_turn(store, tenant, session_id, doc["id"])
    return jsonutil.loads(fresh["doc"]) if fresh is not None else doc


def list_items(store: DynamoStore, tenant: str, session_id: str, params: ListParams,
               turn_id: Optional[str] = None) -> dict[str, Any]:
    if turn_id is not None:
        if store.get(keys.turn(tenant, session_id, turn_id)) is None:
            raise NotFound()
    else:
        load(store, tenant, session_id)
    after = None
    if params.after:
        # A cursor that names no Item of this list (malformed, of another Session or Turn, foreign) is
        # the official Items cursor 400 whatever the reason (Agent, Session and Turn cursors are 404s).
        position = _position(params.after)
        cursor = store.get(keys.item(tenant, session_id, position)) \
            if position is not None else None
        if cursor is None or cursor.get("id") != params.after or cursor.get("subagent_id") or (
                turn_id is not None and cursor.get("turn_id") != turn_id):
            raise InvalidRequest("Invalid session item ID in `after`", param=None)
        after = keys.item_sk(position)
    # Root-only: a Subagent's Items (rows with subagent_id) are listed on its own routes.
    result = store.query(**keys.items_of_session(tenant, session_id), after=after, limit=params.limit,
                         ascending=params.ascending, consistent=True,
                         filter_expression="turn_id = :t" if turn_id else "attribute_not_exists(#sub)",
                         names=None if turn_id else {"#sub": "subagent_id"},
                         values={":t": turn_id} if turn_id else None)
    return page([jsonutil.loads(i["doc"]) for i in result.items], result.has_more)
