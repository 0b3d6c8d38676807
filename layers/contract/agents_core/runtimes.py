"""Runtimes: tokens, connections, capability declarations, claiming Turns, and observations.

A Runtime connects over the WebSocket API with a Runtime token (hashed, separate from API keys),
says `runtime.hello` with one complete capability declaration per Harness, receives Turn work
(`turn.start`, `turn.input`, `turn.tool_result`, `turn.cancel`) and reports observations, each with
`(turn_id, seq)`; duplicates are ignored. "An advertisement alone never enables an operation":
admission already checked the Harness declaration, dispatch checks the Runtime's capabilities.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any, Optional

from agents_contract import capabilities, jsonutil, resources
from agents_contract.errors import AgentsError, InvalidRequest, NotFound
from agents_contract.harnessconfig import HARNESS_NAMES

from . import engine
from .aws import ConnectionGone, Messenger, Workflow
from .ids import new_id, now
from .observability import logger
from .store import DynamoStore, TransactionConflict, item_sk, session_pk

PLACEMENTS = ("environment_none", "local_environment")
ENGINE_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,40}( [A-Za-z0-9_.+\-]{1,40})?")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_runtime_token(store: DynamoStore, name: str, token: Optional[str] = None) -> str:
    token = token or "rt-" + secrets.token_urlsafe(32)
    store.put({"PK": f"RT#{hash_token(token)}", "SK": "R", "kind": "runtime_token", "name": name,
               "runtime_id": new_id("rt"), "created_at": now()}, condition="attribute_not_exists(PK)")
    return token


def runtime_for_token(store: DynamoStore, token: str) -> Optional[dict[str, Any]]:
    item = store.get({"PK": f"RT#{hash_token(token)}", "SK": "R"}, consistent=False)
    return item if item and not item.get("revoked") else None


# ---- connections -------------------------------------------------------------------------------

def conn_key(connection_id: str, sk: str = "C") -> dict[str, str]:
    return {"PK": f"CONN#{connection_id}", "SK": sk}


def register_connection(store: DynamoStore, connection_id: str, role: str, **attrs: Any) -> None:
    store.put({**conn_key(connection_id), "kind": "connection", "role": role, "connection_id": connection_id,
               "connected_at": now(), "ttl": now() + 2 * 3600, **attrs})


_ROLES: dict[str, dict[str, Any]] = {}  # warm-container cache: a connection's role never changes


def connection(store: DynamoStore, connection_id: str) -> Optional[dict[str, Any]]:
    cached = _ROLES.get(connection_id)
    if cached is not None:
        return cached
    item = store.get(conn_key(connection_id))
    if item is not None:
        if len(_ROLES) > 10_000:
            _ROLES.clear()
        _ROLES[connection_id] = item
    return item


def forget_connection(store: DynamoStore, connection_id: str) -> None:
    _ROLES.pop(connection_id, None)
    store.delete_partition(f"CONN#{connection_id}")


def hello(store: DynamoStore, connection_id: str, message: dict[str, Any]) -> list[str]:
    """Record one complete declaration per Harness; returns the Harnesses now served."""
    harnesses = message.get("harnesses")
    if not isinstance(harnesses, list) or not harnesses:
        raise InvalidRequest("runtime.hello needs a nonempty 'harnesses' list.", param="harnesses")
    served = []
    for i, entry in enumerate(harnesses):
        where = f"harnesses[{i}]"
        if not isinstance(entry, dict) or set(entry) - {"harness", "capabilities", "engine"}:
            raise InvalidRequest(f"Invalid '{where}': expected {{harness, capabilities, engine}}.", param=where)
        harness = entry.get("harness")
        if harness not in HARNESS_NAMES:
            raise InvalidRequest(f"Invalid value for '{where}.harness'.", param=f"{where}.harness")
        advertised = capabilities.parse_declaration(entry.get("capabilities"), where=f"{where}.capabilities")
        engine_name = entry.get("engine", "unknown")
        if not isinstance(engine_name, str) or not ENGINE_NAME.fullmatch(engine_name):
            raise InvalidRequest(f"Invalid value for '{where}.engine': expected a name and version such as "
                                 "'codex 0.163.0'.", param=f"{where}.engine")
        store.put({**conn_key(connection_id, f"H#{harness}"), "kind": "runtime_harness", "harness": harness,
                   "engine": engine_name, "connection_id": connection_id, "capabilities": sorted(advertised),
                   "GSI1PK": f"RUNTIME#{harness}", "GSI1SK": f"{now():012d}#{connection_id}", "ttl": now() + 2 * 3600})
        served.append(harness)
    return served


def eligible_runtimes(store: DynamoStore, harness: str, required: frozenset[str]) -> list[dict[str, Any]]:
    """The connected Runtimes serving `harness` whose capabilities cover `required` (newest first)."""
    page = store.query(pk=f"RUNTIME#{harness}", index="GSI1", limit=100, ascending=False)
    return [i for i in page.items if capabilities.covers(frozenset(i["capabilities"]), required)]


# ---- claiming Turns ------------------------------------------------------------------------------

def dispatch(store: DynamoStore, workflow: Workflow, tenant: str, session_id: str, turn_id: str,
             only: Optional[str] = None) -> Optional[str]:
    """Claim a queued Turn for a connected Runtime whose capabilities cover the Session, then start
    its execution. With no eligible Runtime the Turn stays queued until one says hello."""

    def work(draft: engine.Draft) -> Optional[str]:
        turn = draft.turn(turn_id)
        if turn is None or turn.status != "queued":
            return turn.claimed_by if turn is not None and turn.status not in engine.TERMINAL else None
        snapshot = draft.snapshot
        messages = [jsonutil.loads(i["doc"])["content"] for i in _turn_items(store, tenant, session_id, turn_id)]
        required = capabilities.required_capabilities(snapshot, messages=[{"content": c} for c in messages])
        candidates = eligible_runtimes(store, snapshot.harness, required)
        if only is not None:
            candidates = [c for c in candidates if c["connection_id"] == only]
        if not candidates:
            logger.info("no eligible runtime; turn stays queued", extra={"turn_id": turn_id})
            return None
        chosen = candidates[0]["connection_id"]
        # Provenance: which engine runs this Turn (`scripted`, or the native engine and version).
        turn.set(status="in_progress", started_at=now(), claimed_by=chosen,
                 x_agents_core={"engine": candidates[0].get("engine", "unknown")})
        # The connection remembers what it claimed, so losing it fails those Turns at once.
        draft.tx.put({**conn_key(chosen, f"CLAIM#{turn_id}"), "kind": "claim", "tenant": tenant,
                      "session_id": session_id, "turn_id": turn_id, "ttl": now() + 2 * 3600})
        draft.active_turn = {**(draft.active_turn or {}), "id": turn_id, "status": "in_progress",
                             "claimed_by": chosen}
        draft.emit_turn("agent.session.turn.in_progress", turn)
        draft.command({"type": "start_execution", "turn_id": turn_id})
        return chosen

    claimed = engine.run(store, tenant, session_id, work)
    if claimed:
        # Start now for latency; the claim's outbox command starts it again if this process dies
        # between the claim and the start. Both are idempotent (execution name = Turn id).
        workflow.start(tenant, session_id, turn_id)
    return claimed


def queued_turns(store: DynamoStore, harness: str) -> list[dict[str, Any]]:
    return store.query(pk=f"QUEUE#{harness}", index="GSI1", limit=100, ascending=True).items


def _turn_items(store: DynamoStore, tenant: str, session_id: str, turn_id: str) -> list[dict[str, Any]]:
    return store.query(pk=session_pk(tenant, session_id), sk_prefix="ITEM#", limit=1000, consistent=True,
                       filter_expression="turn_id = :t", values={":t": turn_id}).items


def start_message(store: DynamoStore, tenant: str, session_id: str, turn_id: str) -> dict[str, Any]:
    """turn.start: the frozen configuration (schema included, on every Turn) and the Turn's input."""
    session = store.get({"PK": session_pk(tenant, session_id), "SK": "S"})
    if session is None:
        raise ConnectionError("session vanished")
    snapshot = engine.Snapshot.from_json(session["snapshot"])
    items = [jsonutil.loads(i["doc"]) for i in _turn_items(store, tenant, session_id, turn_id)]
    agent = snapshot.agent
    return {
        "type": "turn.start", "tenant": tenant, "session_id": session_id, "turn_id": turn_id,
        "harness": snapshot.harness, "impersonate": snapshot.impersonate,
        "agent": agent, "environment": snapshot.environment,
        "input": [i for i in items if i.get("role") == "user"],
        "execution_controls": {
            "output_format": agent["text"]["format"],
            "verbosity": agent["text"]["verbosity"],
            "reasoning": agent["reasoning"],
            "service_tier": agent["service_tier"],
            "tool_search": any(t["type"] == "tool_search" for t in agent["tools"]),
        },
    }


def begin(store: DynamoStore, messenger: Messenger, tenant: str, session_id: str, turn_id: str,
          task_token: str) -> None:
    """The Dispatch task: store the task token on the claimed Turn and send turn.start."""
    key = engine.turn_key(tenant, session_id, turn_id)
    item = store.get(key)
    if item is None or not item.get("claimed_by") or item.get("status") in engine.TERMINAL:
        raise RuntimeError("Turn is not claimed or already settled")  # the task fails; Settle is a no-op
    tx = store.new_transaction().update(key, "SET task_token = :t",
                                        "attribute_exists(claimed_by) AND NOT #st IN (:c, :f, :x)",
                                        names={"#st": "status"},
                                        values={":t": task_token, ":c": "completed", ":f": "failed", ":x": "cancelled"})
    store.transact(tx)
    messenger.post(item["claimed_by"], start_message(store, tenant, session_id, turn_id))


# ---- observations --------------------------------------------------------------------------------

OBSERVATIONS = ("turn.item.added", "turn.item.done", "turn.output_text.delta", "turn.function_call",
                "turn.tool_result.applied", "turn.call.abandoned", "turn.heartbeat", "turn.completed",
                "turn.failed", "turn.cancelled")


def observe(store: DynamoStore, workflow: Workflow, connection_id: str, message: dict[str, Any]) -> str:
    """Apply one observation - or a `turn.batch` of observations of one Turn, in one commit - of a
    Runtime; returns 'applied', 'duplicate' or 'ignored'."""
    action = message.get("action")
    if action != "turn.batch" and action not in OBSERVATIONS:
        raise InvalidRequest(f"Unknown action '{action}'.", param="action")
    try:
        tenant, session_id, turn_id = message["tenant"], message["session_id"], message["turn_id"]
        batch = message["observations"] if action == "turn.batch" else [message]
        if not isinstance(batch, list) or not batch:
            raise TypeError
        observations = [(o["action"], int(o["seq"]), o) for o in batch]
    except (KeyError, TypeError, ValueError):
        raise InvalidRequest("Observations carry tenant, session_id, turn_id and an integer seq.") from None
    for kind, _, _ in observations:
        if kind not in OBSERVATIONS:
            raise InvalidRequest(f"Unknown action '{kind}'.", param="action")
    if all(kind == "turn.heartbeat" for kind, _, _ in observations):
        item = store.get(engine.turn_key(tenant, session_id, turn_id), consistent=False)
        if item and item.get("claimed_by") == connection_id and item.get("task_token"):
            workflow.heartbeat(item["task_token"])
        return "applied"
    outcome: dict[str, Any] = {}

    def work(draft: engine.Draft) -> str:
        outcome.clear()
        turn = draft.turn(turn_id)
        if turn is None or turn.claimed_by != connection_id:
            return "ignored"  # never act on a Turn this connection does not own
        result = "duplicate"
        for kind, seq, observation in observations:
            if seq <= turn.obs_seq or kind == "turn.heartbeat":
                continue  # a duplicate is ignored (the conditional commit below makes it exact)
            if turn.status in engine.TERMINAL or outcome.get("terminal"):
                return "ignored"
            turn.set(obs_seq=seq)
            _APPLY[kind](draft, turn, observation, outcome)
            result = "applied"
        return result

    result = engine.run(store, tenant, session_id, work)
    if result == "applied" and outcome.get("terminal"):
        token = outcome["token"]
        if token:
            workflow.succeed(token, {"status": outcome["terminal"], "final_answer": outcome.get("final_answer")})
    return result


def _item_ref(draft: engine.Draft, turn: engine.TurnState, runtime_id: str, new: bool) -> dict[str, Any]:
    ref = turn.item_map.get(runtime_id)
    if ref is None:
        if not new:
            raise InvalidRequest(f"Unknown item '{runtime_id}'.", param="item.id")
        position = draft.next_position()
        ref = {"id": engine.item_public_id(position), "position": position, "output_index": turn.outputs}
        turn.set(item_map={**turn.item_map, runtime_id: ref}, outputs=turn.outputs + 1)
    return ref


def _public_item(draft: engine.Draft, turn: engine.TurnState, raw: Any, ref: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(raw, dict) or raw.get("type") not in ("message", "reasoning", "mcp_call", "web_search_call"):
        raise InvalidRequest("Observed items are message, reasoning, mcp_call or web_search_call objects.")
    item = {k: v for k, v in raw.items() if k != "id"}
    item.update(id=ref["id"], turn_id=raw.get("turn_id") or turn.id)
    if item["type"] == "message":
        item.setdefault("role", "assistant")
        item.setdefault("content", [])
        item.setdefault("status", "in_progress")
    return item


def _item_added(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: dict[str, Any]) -> None:
    raw = msg.get("item") or {}
    ref = _item_ref(draft, turn, str(raw.get("id")), new=True)
    item = _public_item(draft, turn, raw, ref)
    draft.put_item(ref["position"], item)
    if item.get("status") == "in_progress":
        turn.set(open_items=[*turn.open_items, str(raw.get("id"))])
    draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, item,
                                    ref["output_index"]))


def _item_done(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: dict[str, Any]) -> None:
    raw = msg.get("item") or {}
    runtime_id = str(raw.get("id"))
    ref = _item_ref(draft, turn, runtime_id, new=runtime_id not in turn.item_map)
    item = _public_item(draft, turn, {**raw, "status": raw.get("status", "completed")}, ref)
    draft.put_item(ref["position"], item)
    turn.set(open_items=[i for i in turn.open_items if i != runtime_id])
    if item["type"] == "message" and item.get("phase") == "final_answer" and item["status"] == "completed":
        turn.set(has_final_answer=True)
    draft.emit(resources.item_event("agent.session.turn.item.done", new_id("evt"), draft.session_id, item,
                                    ref["output_index"]))


def _text_delta(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: dict[str, Any]) -> None:
    ref = _item_ref(draft, turn, str(msg.get("item_id")), new=False)
    draft.emit({"type": "agent.session.turn.output_text.delta", "event_id": new_id("evt"),
                "session_id": draft.session_id, "turn_id": turn.id, "item_id": ref["id"],
                "output_index": ref["output_index"], "content_index": int(msg.get("content_index", 0)),
                "delta": str(msg.get("delta", ""))})


def _function_call(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: dict[str, Any]) -> None:
    call_id = str(msg.get("call_id") or "")
    name = str(msg.get("name") or "")
    if not call_id or not name:
        raise InvalidRequest("turn.function_call carries call_id and name.")
    arguments = msg.get("arguments")
    child = msg.get("child_turn_id")
    ref = _item_ref(draft, turn, str(msg.get("item_id") or call_id), new=True)
    item = {"id": ref["id"], "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
            "status": "completed", "turn_id": child or turn.id}
    draft.put_item(ref["position"], item)
    draft.tx.put({**engine.call_key(draft.tenant, draft.session_id, call_id), "kind": "call", "call_id": call_id,
                  "turn_id": turn.id, "child_turn_id": child, "name": name, "arguments": jsonutil.dumps(arguments),
                  "state": "pending", "item_id": ref["id"], "created_at": now()}, "attribute_not_exists(PK)")
    draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, item,
                                    ref["output_index"]))
    if turn.cancel_requested:
        return
    draft.required_actions = [*draft.required_actions,
                              resources.function_call_action(call_id, name, arguments, turn.id)]
    if turn.status != "waiting":
        turn.set(status="waiting")  # there is no Turn waiting event
        draft.active_turn = {**(draft.active_turn or {}), "status": "waiting"}
    if draft.status != "requires_action":
        draft.status = "requires_action"
        draft.emit_session("agent.session.requires_action")


def _close_call(draft: engine.Draft, turn: engine.TurnState, call_id: str, applied: bool) -> Optional[dict]:
    call = draft.store.get(engine.call_key(draft.tenant, draft.session_id, call_id))
    if call is None or call["turn_id"] != turn.id:
        raise InvalidRequest(f"Unknown call '{call_id}'.", param="call_id")
    if applied:
        # The receipt: only a result that was admitted can be applied, and only once.
        draft.tx.update(engine.call_key(draft.tenant, draft.session_id, call_id), "SET #s = :a, applied_at = :n",
                        "#s = :sub", names={"#s": "state"}, values={":a": "applied", ":sub": "submitted", ":n": now()})
    else:
        draft.tx.update(engine.call_key(draft.tenant, draft.session_id, call_id), "SET #s = :ab",
                        "#s IN (:p, :sub)", names={"#s": "state"},
                        values={":ab": "abandoned", ":p": "pending", ":sub": "submitted"})
    engine.drop_actions(draft, turn.id, call_id)
    return call


def _applied(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: dict[str, Any]) -> None:
    call = _close_call(draft, turn, str(msg.get("call_id")), applied=True)
    assert call is not None
    position = draft.next_position()
    sent = jsonutil.loads(call["result"]) if call.get("result") else {}
    item = resources.function_call_output_item(engine.item_public_id(position), call.get("child_turn_id") or turn.id,
                                               call["call_id"], sent)
    draft.put_item(position, item)
    draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, item))
    engine.resume_if_clear(draft, turn)


def _abandoned(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: dict[str, Any]) -> None:
    _close_call(draft, turn, str(msg.get("call_id")), applied=False)
    engine.resume_if_clear(draft, turn)


def _terminal(status: str):
    def apply(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: dict[str, Any]) -> None:
        out.update(terminal=status, token=turn.task_token)
        draft.dirty = True
        error = msg.get("error")
        if status == "failed" and isinstance(error, dict) and isinstance(error.get("message"), str):
            # What the Harness reported (e.g. an MCP server that failed verification), readable on the
            # Turn as x_agents_core.error; the public `error` stays the contract's generic one.
            detail = error["message"].encode("utf-8", "replace").decode()[:500]
            turn.set(x_agents_core={**(turn.doc.get("x_agents_core") or {}), "error": {"message": detail}})
    return apply


_APPLY = {
    "turn.item.added": _item_added,
    "turn.item.done": _item_done,
    "turn.output_text.delta": _text_delta,
    "turn.function_call": _function_call,
    "turn.tool_result.applied": _applied,
    "turn.call.abandoned": _abandoned,
    "turn.completed": _terminal("completed"),
    "turn.failed": _terminal("failed"),
    "turn.cancelled": _terminal("cancelled"),
}


# ---- settlement (the Settle task) ---------------------------------------------------------------

def settle(store: DynamoStore, tenant: str, session_id: str, turn_id: str, outcome: Optional[dict[str, Any]],
           lost: bool) -> str:
    """Execution loss fails the claimed Turn without replay; a missing structured answer fails it."""
    result: dict[str, str] = {}

    def work(draft: engine.Draft) -> None:
        turn = draft.turn(turn_id)
        if turn is None or turn.status in engine.TERMINAL:
            result["status"] = turn.status if turn else "missing"
            return
        if turn.cancel_requested:
            status = "cancelled"
        elif lost:
            status = "failed"
        else:
            status = (outcome or {}).get("status", "failed")
            if status not in engine.TERMINAL:
                status = "failed"
            if status == "completed" and draft.snapshot.output_schema is not None and not turn.has_final_answer:
                status = "failed"
        engine.settle(draft, turn, status, engine.turn_calls(store, tenant, session_id, turn_id))
        result["status"] = status

    try:
        engine.run(store, tenant, session_id, work)
    except NotFound:
        return "missing"  # the Session was deleted: nothing left to settle
    return result["status"]


def fail_claimed_turns(store: DynamoStore, workflow: Workflow, connection_id: str) -> int:
    """A Runtime's connection closed: fail the Turns it claimed now rather than at the heartbeat
    bound (their executions catch the task failure and settle them as failed, without replay)."""
    failed = 0
    claims = store.query(pk=f"CONN#{connection_id}", sk_prefix="CLAIM#", limit=1000, consistent=True).items
    for claim in claims:
        turn = store.get(engine.turn_key(claim["tenant"], claim["session_id"], claim["turn_id"]))
        if turn and turn.get("task_token") and turn.get("status") not in engine.TERMINAL:
            if workflow.fail(turn["task_token"], "RuntimeLost", "The Runtime's connection closed."):
                failed += 1
    return failed


def post_safely(messenger: Messenger, store: DynamoStore, connection_id: str, message: Any) -> bool:
    """Post to a connection; a GoneException deletes *that* connection's items."""
    try:
        messenger.post(connection_id, message)
        return True
    except ConnectionGone:
        forget_connection(store, connection_id)
        return False


__all__ = ["AgentsError", "TransactionConflict", "item_sk"]
