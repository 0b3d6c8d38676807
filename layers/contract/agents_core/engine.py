"""The Session engine: every state change of a Session, its Turns, Items and function calls.

Each change is one TransactWriteItems guarded by the Session's commit sequence (`out_seq`) and
carrying its outbox record (events + commands), so commits per Session are totally ordered and
nothing is published that was not committed. A lost race re-reads and re-decides.

One commit sequence (`attempt`): read and decide (a `Draft`, agents_core.draft), the Draft's
before-commit steps (the claim of the Turn it starts), its transaction, its after-commit hooks (direct
sends and starts); a lost race waits `backoff` and decides again. Work larger than one commit
(settling a Turn with many calls or unfinished Items) runs as idempotent steps that converge.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Optional, TypeVar

from agents_contract import jsonutil, resources
from agents_contract.errors import InvalidRequest, NotFound, Unavailable
from agents_contract.parser import Snapshot

from . import keys, metrics
from .draft import Draft, TurnState, item_public_id
from .environments import placement
from .ids import new_id, now
from .quotas import check as check_quota
from .running_turns import live_turn  # noqa: F401 - for the Runtime gateway (observations)
from .store import Contention, DynamoStore, Transaction, TransactionConflict

T = TypeVar("T")
TERMINAL = ("completed", "failed", "cancelled")
SETTLE_CHUNK = 40  # open calls or unfinished Items closed per settlement step (far inside 100 writes, 4 MB)
MAX_INPUT_MESSAGES = 64  # user messages one request adds (each is an Item written in the request's commit)
PREFETCH_KEYS = 23  # 25 items per TransactGetItems as moto enforces it (DynamoDB allows 100), Session and Turn besides


def run(store: DynamoStore, tenant: str, session_id: str, work: Callable[[Draft], T], *,
        item: Optional[dict[str, Any]] = None, attempts: int = 50, turn_id: Optional[str] = None,
        prefetch: Sequence[dict[str, str]] = ()) -> T:
    """Read the Session, let `work` decide, commit; on a lost race re-read and decide again.

    `turn_id` and `prefetch` (the keys of, e.g., the CALL items the work will look at): read with the Session in one
    TransactGetItems (one request, one instant: nothing older than the Session it is decided with);
    `Draft.get` answers them without another request."""
    first = [item]

    def decide() -> tuple[Draft, T]:
        draft = read(store, tenant, session_id, first.pop() if first else None, turn_id, prefetch)
        return draft, work(draft)

    return attempt(decide, attempts)


def read(store: DynamoStore, tenant: str, session_id: str, item: Optional[dict[str, Any]] = None,
         turn_id: Optional[str] = None, prefetch: Sequence[dict[str, str]] = ()) -> Draft:
    """A Draft of the Session as stored now (`item`: as the caller just read it), with `run`'s prefetched keys."""
    turn_item, prefetched = None, {}
    if item is None:
        wanted = ([keys.turn(tenant, session_id, turn_id)] if turn_id else []) + list(prefetch)[:PREFETCH_KEYS]
        found = store.transact_get([keys.session(tenant, session_id), *wanted]) if wanted else None
        if found is None:
            item = store.get(keys.session(tenant, session_id))
        else:
            item, rest = found[0], found[1:]
            if turn_id:
                turn_item, rest = rest[0], rest[1:]
            prefetched = {keys.address(k): v for k, v in zip(wanted[1 if turn_id else 0:], rest, strict=True)}
        if item is None:
            raise NotFound()
    draft = Draft(store, tenant, item)
    draft.prefetched = prefetched
    if turn_item is not None and turn_id:
        draft.turns[turn_id] = TurnState.from_item(turn_item, draft.active_turn)
    return draft


def attempt(decide: Callable[[], tuple[Optional[Draft], T]], attempts: int = 50) -> T:
    """The one commit sequence: `decide` reads and decides (a Draft, or None when nothing is to be written), the
    Draft's before-commit steps run (the claim of the Turn it starts), its transaction commits, then its
    after-commit hooks (direct sends and starts). A lost race (TransactionConflict, Contention) decides again
    after `backoff`; `attempts` lost races are a 429 (Unavailable)."""
    for lost in range(attempts):
        draft, result = decide()
        if draft is None:
            return result
        for step in draft._before:
            step(draft)
        facts = metrics.TurnFacts(draft)  # read before the commit: building the transaction forgets what changed
        try:
            committed = draft.commit()
        except TransactionConflict as conflict:
            check_quota(draft.tx, conflict, draft.tenant)  # over the running-Turn limit: 429, nothing written
            backoff(lost)
            continue
        except Contention:
            backoff(lost)
            continue
        if committed:
            for hook in draft._after:
                hook()
            facts.emit()
        return result
    raise Unavailable()


def backoff(attempt: int) -> None:
    """The pause after a lost race: jittered exponential, at most 0.3 s (every commit retry waits this way)."""
    time.sleep(min(0.3, 0.005 * (2 ** min(attempt, 6))) * random.random())  # noqa: S311 - jitter


def create(draft: Draft, transaction: Callable[[Draft], Transaction], attempts: int = 5) -> None:
    """A new Session's first commit: its before-commit steps (the claim of the Turn its input starts), then the
    `transaction` it builds (the Session put, conditioned on not existing), then its after-commit hooks. Nothing in
    that transaction can change meanwhile, so only throttling is retried (the same transaction, `attempts` times);
    a TransactionConflict is the caller's to name."""
    for step in draft._before:
        step(draft)
    facts = metrics.TurnFacts(draft)
    tx = transaction(draft)
    for throttled in range(attempts):
        try:
            draft.store.transact(tx)
            break
        except TransactionConflict as conflict:
            check_quota(tx, conflict, draft.tenant)  # over the running-Turn limit: 429, nothing written
            raise
        except Contention:
            if throttled == attempts - 1:
                raise Unavailable() from None
            time.sleep(0.02 * (2 ** throttled))
    for hook in draft._after:
        hook()
    facts.emit()


# ---- Turn lifecycle ------------------------------------------------------------------------------

def start_turn(draft: Draft, messages: list[list[dict[str, Any]]]) -> TurnState:
    """A new Turn, queued: turn.created -> user item.added -> agent.session.in_progress; dispatch."""
    ts = now()
    turn_id = new_id("turn")
    snapshot: Snapshot = draft.snapshot
    turn = TurnState(doc={"id": turn_id, "agent_id": snapshot.agent_id, "session_id": draft.session_id,
                          "created_at": ts, "status": "queued"}, accepted_ms=metrics.now_ms())
    turn.set(slot=True)  # released by `settle`, in the commit that ends it (agents_core/quotas.py)
    draft.slots += 1
    draft.add_turn(turn, {**keys.turn(draft.tenant, draft.session_id, turn_id), "kind": "turn", "id": turn_id,
                          "tenant": draft.tenant, "session_id": draft.session_id, "harness": snapshot.harness,
                          "accepted_ms": turn.accepted_ms,  # the queue wait's start (metrics.TURN_QUEUE_WAIT)
                          **keys.queued_turn(placement.queue(snapshot.environment["type"], snapshot.harness,
                                                             placement.environment_id(draft.session_id)), turn_id)})
    draft.emit_turn("agent.session.turn.created", turn)
    turn.set(input_from=draft.item_seq + 1)
    for content in messages:
        add_user_message(draft, turn, content)
    draft.active_turn = {"id": turn_id, "status": "queued", "claimed_by": None, "cancel_requested": False}
    draft.status = "in_progress"
    draft.emit_session("agent.session.in_progress")
    draft.command({"type": "dispatch", "turn_id": turn_id, "harness": snapshot.harness})
    draft.started = turn
    return turn


def add_user_message(draft: Draft, turn: TurnState, content: list[dict[str, Any]]) -> dict[str, Any]:
    draft.messages_added += 1
    if draft.messages_added > MAX_INPUT_MESSAGES:
        raise InvalidRequest(f"One request can add at most {MAX_INPUT_MESSAGES} input messages.", param="input")
    position = draft.next_position()
    message = resources.user_message_item(item_public_id(position), turn.id, content)
    draft.put_item(position, message)
    draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, message))
    return message


def runtime_context(draft: Draft, turn: TurnState) -> dict[str, str]:
    """Routing fields a Runtime echoes on every observation of the Turn."""
    return {"tenant": draft.tenant, "session_id": draft.session_id, "turn_id": turn.id}


def deliver(draft: Draft, turn: TurnState, message: dict[str, Any]) -> None:
    if turn.claimed_by:
        deliver_to(draft, turn.id, turn.claimed_by, message)


def deliver_to(draft: Draft, turn_id: str, connection_id: str, message: dict[str, Any]) -> None:
    """A message for the Runtime that owns the Turn. The committing Lambda posts it straight after its
    commit (`send_now`); the outbox command is the at-least-once path behind it, so a Runtime can get
    it twice and drops the repeat by its `delivery_id`."""
    draft.command({"type": "deliver", "connection_id": connection_id,
                   "message": {**message, "tenant": draft.tenant, "session_id": draft.session_id, "turn_id": turn_id,
                               "delivery_id": new_id("dlv")}})


def pending_actions_of(draft: Draft, turn_id: str) -> list[dict[str, Any]]:
    return [a for a in draft.required_actions if a.get("turn_id") == turn_id]


def drop_actions(draft: Draft, turn_id: str, call_id: Optional[str] = None) -> None:
    draft.required_actions = [
        a for a in draft.required_actions
        if not (a.get("turn_id") == turn_id and (call_id is None or a.get("call_id") == call_id))
    ]


def resume_if_clear(draft: Draft, turn: TurnState) -> None:
    """The Turn continues and returns to in_progress when no required action is left."""
    if turn.status == "waiting" and not pending_actions_of(draft, turn.id):
        turn.set(status="in_progress")
        draft.active_turn = {**(draft.active_turn or {}), "status": "in_progress"}
        draft.emit_turn("agent.session.turn.in_progress", turn)
        if draft.status != "in_progress":
            draft.status = "in_progress"
            draft.emit_session("agent.session.in_progress")


def settle(draft: Draft, turn: TurnState, status: str) -> None:
    """The final settlement commit: Turn status, required actions cleared, Session idle or failed,
    events. Open calls and unfinished Items are closed before it in bounded steps
    (`close_open_calls`, `close_open_items`), so this commit is small for every Turn shape. A claimed
    Turn's Subagent child Turns end first, with it (runtimes.settlement.end_turn)."""
    if turn.status in TERMINAL:
        return
    drop_actions(draft, turn.id)
    # input waiting for an Environment connection ends with its Turn
    draft.required_actions = [a for a in draft.required_actions if a.get("type") != "environment_connection"]
    turn.set(status=status, completed_at=now(), task_token=None, closing=status)
    if turn.slot:  # its running-Turn slot goes back in the commit that ends it, so exactly once
        turn.set(slot=None)
        draft.slots -= 1
    draft.emit_turn(f"agent.session.turn.{status}", turn)
    draft.active_turn = None
    draft.status = "failed" if status == "failed" else "idle"
    draft.error = ((turn.doc.get("error") or {}).get("message") or None) if status == "failed" else None
    draft.emit_session("agent.session.failed" if status == "failed" else "agent.session.idle")


def open_calls(store: DynamoStore, tenant: str, session_id: str, turn_id: str,
               limit: int = SETTLE_CHUNK) -> list[dict[str, Any]]:
    page = store.query(**keys.calls_of_session(tenant, session_id), limit=limit, consistent=True,
                       filter_expression="turn_id = :t AND #s IN (:p, :sub)", names={"#s": "state"},
                       values={":t": turn_id, ":p": "pending", ":sub": "submitted"})
    return page.items


def close_open_calls(store: DynamoStore, tenant: str, session_id: str, turn_id: str, state: str) -> int:
    """Close every open call of a Turn (`cancelled` or `settled`), SETTLE_CHUNK per transaction.
    Each update is conditional on the call still being open, so a retried step, or one racing a
    result or a receipt, converges: a lost race re-reads the calls still open."""
    closed = 0
    for attempt in range(1000):
        calls = open_calls(store, tenant, session_id, turn_id, limit=10_000)  # one pass, chunked below
        if not calls:
            return closed
        try:
            for start in range(0, len(calls), SETTLE_CHUNK):
                tx = store.new_transaction()
                for call in calls[start:start + SETTLE_CHUNK]:
                    tx.update(keys.call(tenant, session_id, call["call_id"]), "SET #s = :s", "#s IN (:p, :sub)",
                              names={"#s": "state"}, values={":s": state, ":p": "pending", ":sub": "submitted"})
                store.transact(tx)
                closed += len(calls[start:start + SETTLE_CHUNK])
        except (TransactionConflict, Contention):  # a call changed meanwhile: read what is still open
            backoff(attempt)
    raise Unavailable()


def open_item_refs(store: DynamoStore, tenant: str, session_id: str, turn_id: str,
                   limit: int = SETTLE_CHUNK) -> list[dict[str, Any]]:
    page = store.query(**keys.item_refs_of_turn(tenant, session_id, turn_id), limit=limit,
                       consistent=True, filter_expression="#s = :open", names={"#s": "state"},
                       values={":open": "open"})
    return page.items


def close_open_items(draft: Draft, turn: TurnState, refs: list[dict[str, Any]]) -> None:
    """Unfinished Items become incomplete (item.done): one bounded step of at most SETTLE_CHUNK."""
    if not refs:
        return
    wanted = [keys.item(draft.tenant, draft.session_id, int(r["position"])) for r in refs]
    found = draft.store.batch_get(wanted)
    for ref, key in zip(refs, wanted, strict=True):
        runtime_id = keys.runtime_item_id(keys.sort_key(ref))
        draft.item_ref(turn.id, runtime_id)
        draft.set_ref_state(turn.id, runtime_id, "done")
        stored = found.get(keys.address(key))
        if stored is None:
            continue
        doc = jsonutil.loads(stored["doc"])
        doc["status"] = "incomplete"
        draft.put_item(int(ref["position"]), doc, stored.get("subagent_id"))
        draft.emit(resources.item_event("agent.session.turn.item.done", new_id("evt"), draft.session_id, doc,
                                        int(ref["output_index"])))
