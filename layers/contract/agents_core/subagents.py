"""Subagents: observed, not orchestrated (DESIGN 8b). The native Harness spawns children; its Runtime
reports them in the root Turn's observations; Core stores Subagents, their child Turns and Items,
assigns their public ids, and routes a child's function calls as required actions of the root Turn.

"A function call made by a Subagent is a required action of the root Turn that runs the child. Its
turn_id is that root Turn, and its call_id equals the call_id of the child's function_call Item on the
Subagent routes." Session Turn and Item routes stay root-only: child Turns live under their own keys
(a child Turn id is a 404 there, also as a cursor) and child Items carry `subagent_id` on their rows.

Rows (Session partition):
  SUBAGENT#{id}                     the Subagent (`doc`)
  SUBAGENTN#{runtime id}            the Runtime's identity -> the public id (written once)
  CTURN#{subagent id}#{turn id}     a child Turn (`doc`, `root_turn_id`)
  CTURNN#{runtime id}               the Runtime's child turn id -> the public child Turn (written once)
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import jsonutil, resources
from agents_contract.errors import InvalidRequest, NotFound

from . import engine, keys
from .ids import new_id, now
from .pagination import ListParams, page
from .store import DynamoStore

MAX_ID = 128
MAX_NAME = 256
MAX_INSTRUCTIONS = 32 * 1024
CHILD_END = ("completed", "failed", "cancelled")


class Rejected(InvalidRequest):
    """An observation about Subagents that can never succeed (the Runtime gets an error frame)."""


def _runtime_id(msg: dict[str, Any], param: str, optional: bool = False) -> Optional[str]:
    value = msg.get(param)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_ID:
        raise Rejected(f"Invalid '{param}': expected a string of 1 to {MAX_ID} characters.", param=param)
    return value


def _text(msg: dict[str, Any], param: str, limit: int) -> Optional[str]:
    value = msg.get(param)
    if value is None:
        return None
    if not isinstance(value, str) or len(value.encode()) > limit:
        raise Rejected(f"Invalid '{param}': expected a string of at most {limit} bytes.", param=param)
    return value


# ---- lookups inside a commit ---------------------------------------------------------------------

def _subagent_row(draft: engine.Draft, runtime_id: str) -> Optional[dict[str, Any]]:
    ref = draft.row(keys.subagent_name(draft.tenant, draft.session_id, runtime_id))
    return draft.row(keys.subagent(draft.tenant, draft.session_id, ref["subagent_id"])) if ref else None


def _child_row(draft: engine.Draft, runtime_id: str) -> Optional[dict[str, Any]]:
    ref = draft.row(keys.child_turn_name(draft.tenant, draft.session_id, runtime_id))
    return draft.row(keys.child_turn(draft.tenant, draft.session_id, ref["subagent_id"], ref["turn_id"])) \
        if ref else None


def child_of(draft: engine.Draft, msg: dict[str, Any]) -> Optional[dict[str, str]]:
    """The public child Turn an observation's `child_turn_id` (the Runtime's id) names, or None for a
    root observation: {"turn_id", "subagent_id"}. A child Turn never started, or already ended, is
    rejected."""
    runtime_id = _runtime_id(msg, "child_turn_id", optional=True)
    if runtime_id is None:
        return None
    row = _child_row(draft, runtime_id)
    if row is None:
        raise Rejected(f"Invalid 'child_turn_id': no child Turn '{runtime_id}' was started "
                       "(turn.subagent.turn.started comes first).", param="child_turn_id")
    if row["status"] in CHILD_END:
        raise Rejected(f"Invalid 'child_turn_id': the child Turn '{runtime_id}' has ended.", param="child_turn_id")
    return {"turn_id": row["id"], "subagent_id": row["subagent_id"]}


# ---- observations ------------------------------------------------------------------------------

def _put_subagent(draft: engine.Draft, row: dict[str, Any], doc: dict[str, Any], kind: str, new: bool) -> None:
    draft.put_row({**row, "status": doc["status"], "doc": jsonutil.dumps(doc)}, new=new)
    draft.emit(resources.subagent_event(kind, new_id("evt"), resources.subagent_resource(doc)))


def opened(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Any) -> None:
    """`turn.subagent.opened`: a new Subagent (agent.session.subagent.created), or a closed one
    resumed (agent.session.subagent.active); an open one again changes nothing."""
    runtime_id = _runtime_id(msg, "subagent_id")
    parent = _runtime_id(msg, "parent_subagent_id", optional=True)
    name = _text(msg, "name", MAX_NAME)
    instructions = _text(msg, "instructions", MAX_INSTRUCTIONS)
    existing = _subagent_row(draft, runtime_id)  # type: ignore[arg-type]
    if existing is not None:
        doc = jsonutil.loads(existing["doc"])
        if doc["status"] == "closed":  # resumed: opened_at stays, closed_at is null again
            _put_subagent(draft, existing, {**doc, "status": "active", "closed_at": None},
                          "agent.session.subagent.active", new=False)
        return
    parent_agent_id = draft.snapshot.agent_id
    if parent is not None:
        parent_row = _subagent_row(draft, parent)
        if parent_row is None:
            raise Rejected(f"Invalid 'parent_subagent_id': no Subagent '{parent}' was opened.",
                           param="parent_subagent_id")
        parent_agent_id = parent_row["id"]
    public = new_id("subagent")
    doc = {"id": public, "session_id": draft.session_id, "parent_agent_id": parent_agent_id, "name": name,
           "instructions": instructions, "status": "active", "opened_at": now(), "closed_at": None}
    draft.put_row({**keys.subagent_name(draft.tenant, draft.session_id, runtime_id),  # type: ignore[arg-type]
                   "kind": "subagent_ref", "subagent_id": public}, new=True)
    _put_subagent(draft, {**keys.subagent(draft.tenant, draft.session_id, public), "kind": "subagent", "id": public,
                          "runtime_id": runtime_id, "root_turn_id": turn.id}, doc,
                  "agent.session.subagent.created", new=True)


def closed(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Any) -> None:
    """`turn.subagent.closed`: agent.session.subagent.closed once; closing a closed one changes nothing."""
    runtime_id = _runtime_id(msg, "subagent_id")
    row = _subagent_row(draft, runtime_id)  # type: ignore[arg-type]
    if row is None:
        raise Rejected(f"Invalid 'subagent_id': no Subagent '{runtime_id}' was opened.", param="subagent_id")
    doc = jsonutil.loads(row["doc"])
    if doc["status"] == "active":
        _put_subagent(draft, row, {**doc, "status": "closed", "closed_at": now()}, "agent.session.subagent.closed",
                      new=False)


def _put_child(draft: engine.Draft, row: dict[str, Any], doc: dict[str, Any], new: bool) -> None:
    draft.put_row({**row, "status": doc["status"], "doc": jsonutil.dumps(doc)}, new=new)


def turn_started(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Any) -> None:
    """`turn.subagent.turn.started`: a child Turn of an open Subagent (`subagent_id` set, `agent_id`
    the Session's Agent), in_progress at once: turn.created, turn.in_progress."""
    runtime_id = _runtime_id(msg, "subagent_id")
    child_runtime_id = _runtime_id(msg, "child_turn_id")
    row = _subagent_row(draft, runtime_id)  # type: ignore[arg-type]
    if row is None:
        raise Rejected(f"Invalid 'subagent_id': no Subagent '{runtime_id}' was opened.", param="subagent_id")
    if draft.row(keys.child_turn_name(draft.tenant, draft.session_id, child_runtime_id)) is not None:  # type: ignore[arg-type]
        raise Rejected(f"Invalid 'child_turn_id': the child Turn '{child_runtime_id}' was already started.",
                       param="child_turn_id")
    if row["status"] != "active":
        raise Rejected(f"Invalid 'subagent_id': the Subagent '{runtime_id}' is closed.", param="subagent_id")
    ts = now()
    public = new_id("turn")
    doc = {"id": public, "agent_id": draft.snapshot.agent_id, "session_id": draft.session_id, "created_at": ts,
           "started_at": ts, "status": "in_progress", "subagent_id": row["id"],
           "x_agents_core": {"engine": (turn.doc.get("x_agents_core") or {}).get("engine")}}
    draft.put_row({**keys.child_turn_name(draft.tenant, draft.session_id, child_runtime_id),  # type: ignore[arg-type]
                   "kind": "child_turn_ref", "turn_id": public, "subagent_id": row["id"]}, new=True)
    _put_child(draft, {**keys.child_turn(draft.tenant, draft.session_id, row["id"], public), "kind": "child_turn",
                       "id": public, "subagent_id": row["id"], "root_turn_id": turn.id}, doc, new=True)
    turn.set(children=[*turn.children, {"id": public, "subagent_id": row["id"]}])
    for kind in ("agent.session.turn.created", "agent.session.turn.in_progress"):
        draft.emit(resources.turn_event(kind, new_id("evt"), resources.turn_resource(doc)))


def _end(draft: engine.Draft, row: dict[str, Any], status: str) -> None:
    doc = {**jsonutil.loads(row["doc"]), "status": status, "completed_at": now()}
    _put_child(draft, row, doc, new=False)
    draft.emit(resources.turn_event(f"agent.session.turn.{status}", new_id("evt"), resources.turn_resource(doc)))


def turn_ended(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Any) -> None:
    """`turn.subagent.turn.ended` with `status` completed, failed or cancelled: the child Turn's
    terminal state and event, once."""
    child_runtime_id = _runtime_id(msg, "child_turn_id")
    status = msg.get("status")
    if status not in CHILD_END:
        raise Rejected("Invalid 'status': expected 'completed', 'failed' or 'cancelled'.", param="status")
    row = _child_row(draft, child_runtime_id)  # type: ignore[arg-type]
    if row is None:
        raise Rejected(f"Invalid 'child_turn_id': no child Turn '{child_runtime_id}' was started.",
                       param="child_turn_id")
    if row["status"] in CHILD_END:
        raise Rejected(f"Invalid 'child_turn_id': the child Turn '{child_runtime_id}' has ended.",
                       param="child_turn_id")
    _end(draft, row, status)
    turn.set(children=[c for c in turn.children if c["id"] != row["id"]])


def end_children(draft: engine.Draft, turn: engine.TurnState, status: str) -> None:
    """A root Turn's child Turns end with it: cancelled when it was cancelled (its children's pending
    calls are abandoned with it), failed when it failed, cancelled when it completed while the
    Runtime left a child running."""
    if not turn.children:
        return
    for child in turn.children:
        row = draft.row(keys.child_turn(draft.tenant, draft.session_id, child["subagent_id"], child["id"]))
        if row is not None and row["status"] not in CHILD_END:
            _end(draft, row, "failed" if status == "failed" else "cancelled")
    turn.set(children=[])


# ---- reads ---------------------------------------------------------------------------------------

MAX_PUBLIC_ID = 256  # no id Core assigns is longer; a longer one names nothing (and never reaches a key)


def _known(*ids: Optional[str]) -> None:
    if any(i is not None and len(i) > MAX_PUBLIC_ID for i in ids):
        raise NotFound()


def _load_session(store: DynamoStore, tenant: str, session_id: str) -> None:
    if store.get(keys.session(tenant, session_id)) is None:
        raise NotFound()


def retrieve(store: DynamoStore, tenant: str, session_id: str, subagent_id: str) -> dict[str, Any]:
    _known(session_id, subagent_id)
    row = store.get(keys.subagent(tenant, session_id, subagent_id))
    if row is None:
        raise NotFound()
    return resources.subagent_resource(jsonutil.loads(row["doc"]))


def list_page(store: DynamoStore, tenant: str, session_id: str, params: ListParams) -> dict[str, Any]:
    _known(session_id, params.after)
    _load_session(store, tenant, session_id)
    after = keys.subagent_sk(params.after) if params.after else None
    if after is not None and store.get(keys.subagent(tenant, session_id, params.after)) is None:
        raise NotFound()  # a cursor that names no Subagent of this Session
    result = store.query(**keys.subagents_of_session(tenant, session_id), after=after, limit=params.limit,
                         ascending=params.ascending, consistent=True)
    return page([resources.subagent_resource(jsonutil.loads(i["doc"])) for i in result.items], result.has_more)


def retrieve_turn(store: DynamoStore, tenant: str, session_id: str, subagent_id: str, turn_id: str) -> dict[str, Any]:
    _known(session_id, subagent_id, turn_id)
    row = store.get(keys.child_turn(tenant, session_id, subagent_id, turn_id))
    if row is None:
        raise NotFound()
    return resources.turn_resource(jsonutil.loads(row["doc"]))


def list_turns(store: DynamoStore, tenant: str, session_id: str, subagent_id: str,
               params: ListParams) -> dict[str, Any]:
    retrieve(store, tenant, session_id, subagent_id)
    _known(params.after)
    after = keys.child_turn_sk(subagent_id, params.after) if params.after else None
    if after is not None and store.get(keys.child_turn(tenant, session_id, subagent_id, params.after)) is None:
        raise NotFound()  # a cursor that names no Turn of this Subagent (a root Turn included)
    result = store.query(**keys.child_turns_of_subagent(tenant, session_id, subagent_id), after=after,
                         limit=params.limit, ascending=params.ascending, consistent=True)
    return page([resources.turn_resource(jsonutil.loads(i["doc"])) for i in result.items], result.has_more)


def list_items(store: DynamoStore, tenant: str, session_id: str, subagent_id: str, params: ListParams,
               turn_id: Optional[str] = None) -> dict[str, Any]:
    """A Subagent's history (or one child Turn's): its Items in position order, as the Session's
    Item list pages them (the same cursor rule: an Item of another list is the Items cursor 400)."""
    if turn_id is not None:
        retrieve_turn(store, tenant, session_id, subagent_id, turn_id)
    else:
        retrieve(store, tenant, session_id, subagent_id)
    after = None
    if params.after:
        digits = params.after.removeprefix("item_")[:8]
        cursor = store.get(keys.item(tenant, session_id, int(digits))) \
            if digits.isdigit() else None
        if cursor is None or cursor.get("id") != params.after or cursor.get("subagent_id") != subagent_id or (
                turn_id is not None and cursor.get("turn_id") != turn_id):
            raise InvalidRequest("Invalid session item ID in `after`", param=None)
        after = keys.item_sk(int(digits))
    names, values = {"#sub": "subagent_id"}, {":sub": subagent_id}
    condition = "#sub = :sub"
    if turn_id is not None:
        condition += " AND turn_id = :t"
        values[":t"] = turn_id
    result = store.query(**keys.items_of_session(tenant, session_id), after=after, limit=params.limit,
                         ascending=params.ascending, consistent=True, filter_expression=condition, names=names,
                         values=values)
    return page([jsonutil.loads(i["doc"]) for i in result.items], result.has_more)
