"""The Session engine: every state change of a Session, its Turns, Items and function calls.

Each change is one TransactWriteItems guarded by the Session's commit sequence (`out_seq`) and
carrying its outbox record (events + commands), so commits per Session are totally ordered and
nothing is published that was not committed. A lost race re-reads and re-decides.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar

from agents_contract import jsonutil, resources
from agents_contract.errors import NotFound, Unavailable
from agents_contract.parser import Snapshot

from .ids import new_id, now
from .settings import get_settings
from .store import Contention, DynamoStore, TransactionConflict, item_sk, outbox_sk, session_key, session_pk

T = TypeVar("T")
TERMINAL = ("completed", "failed", "cancelled")


def item_public_id(position: int) -> str:
    """Item ids carry their position, so list `after` needs no lookup."""
    return f"item_{position:08d}{new_id('x')[-12:]}"


def turn_key(tenant: str, session_id: str, turn_id: str) -> dict[str, str]:
    return {"PK": session_pk(tenant, session_id), "SK": f"TURN#{turn_id}"}


def call_key(tenant: str, session_id: str, call_id: str) -> dict[str, str]:
    return {"PK": session_pk(tenant, session_id), "SK": f"CALL#{call_id}"}


@dataclass
class TurnState:
    """A Turn as stored: the public document plus the execution bookkeeping."""

    doc: dict[str, Any]
    claimed_by: Optional[str] = None
    task_token: Optional[str] = None
    obs_seq: int = 0
    item_map: dict[str, Any] = field(default_factory=dict)  # runtime item id -> {id, position, output_index}
    open_items: list[str] = field(default_factory=list)  # runtime ids of items not yet done
    outputs: int = 0
    has_final_answer: bool = False
    cancel_requested: bool = False
    changed: set[str] = field(default_factory=set)

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def status(self) -> str:
        return self.doc["status"]

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> TurnState:
        return cls(
            doc=jsonutil.loads(item["doc"]),
            claimed_by=item.get("claimed_by"),
            task_token=item.get("task_token"),
            obs_seq=int(item.get("obs_seq", 0)),
            item_map=jsonutil.loads(item.get("item_map") or "{}"),
            open_items=jsonutil.loads(item.get("open_items") or "[]"),
            outputs=int(item.get("outputs", 0)),
            has_final_answer=bool(item.get("has_final_answer", False)),
            cancel_requested=bool(item.get("cancel_requested", False)),
        )

    def set(self, **values: Any) -> None:
        for name, value in values.items():
            if name in ("status", "started_at", "completed_at", "x_agents_core"):
                self.doc[name] = value
                self.changed.add("doc")
            else:
                setattr(self, name, value)
                self.changed.add(name)


class Draft:
    """One commit in the making: the Session's new state, extra writes, events and commands."""

    def __init__(self, store: DynamoStore, tenant: str, item: dict[str, Any]):
        self.store = store
        self.tenant = tenant
        self.item = item
        self.session_id: str = item["id"]
        self.status: str = item["status"]
        self.required_actions: list[dict[str, Any]] = jsonutil.loads(item.get("required_actions") or "[]")
        self.active_turn: Optional[dict[str, Any]] = jsonutil.loads(item.get("active_turn") or "null")
        self.item_seq = int(item.get("item_seq", 0))
        self.out_seq = int(item.get("out_seq", 0))
        self.tx = store.new_transaction()
        self.events: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        self.turns: dict[str, TurnState] = {}
        self._snapshot: Optional[Snapshot] = None
        self._items: dict[int, dict[str, Any]] = {}
        # A batch may mix events that touch the same item (a result then a cancel, a message then a
        # cancel); DynamoDB allows one operation per item in a transaction, so writes are composed:
        # a Turn created here is put once in its final state, and a call's writes become one update.
        self._new_turns: dict[str, dict[str, Any]] = {}
        self._call_writes: dict[str, dict[str, Any]] = {}
        self.call_states: dict[str, str] = {}  # call id -> state this commit gives it
        self.dirty = False

    # -- reads ---------------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = Snapshot.from_json(self.item["snapshot"])
        return self._snapshot

    def turn(self, turn_id: str) -> Optional[TurnState]:
        if turn_id not in self.turns:
            item = self.store.get(turn_key(self.tenant, self.session_id, turn_id))
            if item is None:
                return None
            self.turns[turn_id] = TurnState.from_item(item)
        return self.turns[turn_id]

    def add_turn(self, turn: TurnState, new_item: Optional[dict[str, Any]] = None) -> None:
        """`new_item`: the stored attributes of a Turn this commit creates (put once, at flush)."""
        self.turns[turn.id] = turn
        if new_item is not None:
            self._new_turns[turn.id] = new_item

    def call_state(self, call: dict[str, Any]) -> str:
        """A call's state as this commit sees it (its own earlier events included)."""
        return self.call_states.get(call["call_id"], call["state"])

    def update_call(self, call_id: str, sets: dict[str, Any], condition: Optional[str] = None,
                    names: Optional[dict[str, str]] = None, values: Optional[dict[str, Any]] = None,
                    return_old: bool = False) -> None:
        """One write per call per commit: a later write's members join the first one's, and only the
        first condition guards the stored item (later writes were decided on this commit's state)."""
        write = self._call_writes.setdefault(call_id, {"sets": {}, "condition": condition, "names": names or {},
                                                       "values": values or {}, "return_old": return_old})
        write["sets"].update(sets)
        if "state" in sets:
            self.call_states[call_id] = sets["state"]
        self.dirty = True

    def session_resource(self) -> dict[str, Any]:
        state = {
            "id": self.session_id,
            "created_at": int(self.item["created_at"]),
            "last_active_at": now(),
            "metadata": jsonutil.loads(self.item.get("metadata") or "{}"),
            "status": self.status,
            "required_actions": self.required_actions,
            "error": None,
            "review": self.item.get("review"),
            "prompt_cache_options": jsonutil.loads(self.item["prompt_cache_options"])
            if self.item.get("prompt_cache_options") else None,
        }
        return resources.session_resource(state, self.snapshot)

    # -- writes --------------------------------------------------------------------------------
    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self.dirty = True

    def emit_session(self, kind: str) -> None:
        self.emit(resources.session_event(kind, new_id("evt"), self.session_resource()))

    def emit_turn(self, kind: str, turn: TurnState) -> None:
        self.emit(resources.turn_event(kind, new_id("evt"), resources.turn_resource(turn.doc)))

    def command(self, command: dict[str, Any]) -> None:
        self.commands.append(command)
        self.dirty = True

    def next_position(self) -> int:
        self.item_seq += 1
        self.dirty = True
        return self.item_seq

    def put_item(self, position: int, item: dict[str, Any]) -> None:
        """The Item's latest state in this commit (a batch may add and finish it: one write)."""
        self._items[position] = item
        self.dirty = True

    def commit(self) -> bool:
        if not self.dirty and not self.tx.entries:
            return False
        self.flush()
        seq = self.out_seq + 1
        session_update = self.store.new_transaction().update(
            session_key(self.tenant, self.session_id),
            "SET #status = :status, required_actions = :ra, active_turn = :at, item_seq = :is, out_seq = :next, "
            "last_active_at = :now",
            "out_seq = :cur",
            names={"#status": "status"},
            values={":status": self.status, ":ra": jsonutil.dumps(self.required_actions),
                    ":at": jsonutil.dumps(self.active_turn), ":is": self.item_seq, ":next": seq,
                    ":cur": self.out_seq, ":now": now()},
        )
        self.tx.entries.insert(0, session_update.entries[0])
        if self.events or self.commands:
            self.tx.put({"PK": session_pk(self.tenant, self.session_id), "SK": outbox_sk(seq), "kind": "outbox",
                         "tenant": self.tenant, "session_id": self.session_id, "seq": seq,
                         "events": jsonutil.dumps(self.events), "commands": jsonutil.dumps(self.commands),
                         "ttl": now() + get_settings().outbox_ttl_seconds})
        self.store.transact(self.tx)
        self.out_seq = seq
        return True

    def flush(self) -> None:
        """Every composed write of this commit into its transaction."""
        self.flush_items()
        for turn in self.turns.values():
            self._write_turn(turn)
        for call_id, write in self._call_writes.items():
            names = dict(write["names"])
            values = dict(write["values"])
            sets = []
            for i, (name, value) in enumerate(write["sets"].items()):
                names[f"#w{i}"] = name
                values[f":w{i}"] = value
                sets.append(f"#w{i} = :w{i}")
            self.tx.update(call_key(self.tenant, self.session_id, call_id), "SET " + ", ".join(sets),
                           write["condition"], names=names, values=values, return_old=write["return_old"])
        self._call_writes.clear()

    def flush_items(self) -> None:
        for position, item in sorted(self._items.items()):
            self.tx.put({"PK": session_pk(self.tenant, self.session_id), "SK": item_sk(position), "kind": "item",
                         "id": item["id"], "turn_id": item["turn_id"], "doc": jsonutil.dumps(item)})
        self._items.clear()

    def _write_turn(self, turn: TurnState) -> None:
        new_item = self._new_turns.pop(turn.id, None)
        if new_item is not None:  # created in this commit: one put of its final state
            item = {**new_item, "status": turn.status, "doc": jsonutil.dumps(turn.doc)}
            for name in turn.changed - {"doc"}:
                value = getattr(turn, name)
                item[name] = jsonutil.dumps(value) if name in ("item_map", "open_items") else value
            if turn.status != "queued":
                item.pop("GSI1PK", None)
                item.pop("GSI1SK", None)
            self.tx.put(item, "attribute_not_exists(PK)")
            turn.changed = set()
            return
        if not turn.changed:
            return
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets: list[str] = []
        removes: list[str] = []
        for name in sorted(turn.changed):
            attr = f"#a_{name}"
            names[attr] = name
            if name == "doc":
                value: Any = jsonutil.dumps(turn.doc)
            elif name in ("item_map", "open_items"):
                value = jsonutil.dumps(getattr(turn, name))
            else:
                value = getattr(turn, name)
            if value is None:
                removes.append(attr)
            else:
                sets.append(f"{attr} = :v_{name}")
                values[f":v_{name}"] = value
        if "doc" in turn.changed:
            names["#st"] = "status"
            sets.append("#st = :st")
            values[":st"] = turn.status
            if turn.status != "queued":
                removes += ["GSI1PK", "GSI1SK"]
        expression = ""
        if sets:
            expression += "SET " + ", ".join(sets)
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        self.tx.update(turn_key(self.tenant, self.session_id, turn.id), expression.strip(), "attribute_exists(PK)",
                       names=names, values=values or None)
        turn.changed = set()


def run(store: DynamoStore, tenant: str, session_id: str, work: Callable[[Draft], T], *,
        item: Optional[dict[str, Any]] = None, attempts: int = 50) -> T:
    """Read the Session, let `work` decide, commit; on a lost race re-read and decide again."""
    for attempt in range(attempts):
        if item is None:
            item = store.get(session_key(tenant, session_id))
            if item is None:
                raise NotFound()
        draft = Draft(store, tenant, item)
        result = work(draft)
        try:
            draft.commit()
            return result
        except (TransactionConflict, Contention):
            item = None
            time.sleep(min(0.3, 0.005 * (2 ** min(attempt, 6))) * random.random())  # noqa: S311 - jitter
    raise Unavailable()


# ---- Turn lifecycle ------------------------------------------------------------------------------

def start_turn(draft: Draft, messages: list[list[dict[str, Any]]]) -> TurnState:
    """A new Turn, queued: turn.created -> user item.added -> agent.session.in_progress; dispatch."""
    ts = now()
    turn_id = new_id("turn")
    snapshot = draft.snapshot
    turn = TurnState(doc={"id": turn_id, "agent_id": snapshot.agent_id, "session_id": draft.session_id,
                          "created_at": ts, "status": "queued"})
    draft.add_turn(turn, {**turn_key(draft.tenant, draft.session_id, turn_id), "kind": "turn", "id": turn_id,
                          "tenant": draft.tenant, "session_id": draft.session_id, "harness": snapshot.harness,
                          "GSI1PK": f"QUEUE#{snapshot.harness}", "GSI1SK": turn_id})
    draft.emit_turn("agent.session.turn.created", turn)
    for content in messages:
        add_user_message(draft, turn, content)
    draft.active_turn = {"id": turn_id, "status": "queued", "claimed_by": None, "cancel_requested": False}
    draft.status = "in_progress"
    draft.emit_session("agent.session.in_progress")
    draft.command({"type": "dispatch", "turn_id": turn_id, "harness": snapshot.harness})
    return turn


def add_user_message(draft: Draft, turn: TurnState, content: list[dict[str, Any]]) -> dict[str, Any]:
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
    """An outbox command: the stream handler posts it to the Runtime that owns the Turn."""
    draft.command({"type": "deliver", "connection_id": connection_id,
                   "message": {**message, "tenant": draft.tenant, "session_id": draft.session_id, "turn_id": turn_id}})


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


def settle(draft: Draft, turn: TurnState, status: str, calls: list[dict[str, Any]]) -> None:
    """Terminal state in one transaction: Turn status, unfinished Items incomplete, open calls
    closed, required actions cleared, Session idle or failed, events."""
    if turn.status in TERMINAL:
        return
    ts = now()
    for runtime_id in list(turn.open_items):
        ref = turn.item_map.get(runtime_id)
        if ref is None:
            continue
        doc = jsonutil.loads(draft.store.get({"PK": session_pk(draft.tenant, draft.session_id),
                                              "SK": item_sk(ref["position"])})["doc"])
        doc["status"] = "incomplete"
        draft.put_item(ref["position"], doc)
        draft.emit(resources.item_event("agent.session.turn.item.done", new_id("evt"), draft.session_id, doc,
                                        ref.get("output_index")))
    turn.set(open_items=[])
    for call in calls:
        if draft.call_state(call) in ("pending", "submitted"):
            draft.update_call(call["call_id"], {"state": "cancelled" if status == "cancelled" else "settled"})
    drop_actions(draft, turn.id)
    turn.set(status=status, completed_at=ts, task_token=None)
    draft.emit_turn(f"agent.session.turn.{status}", turn)
    draft.active_turn = None
    draft.status = "failed" if status == "failed" else "idle"
    draft.emit_session("agent.session.failed" if status == "failed" else "agent.session.idle")


def turn_calls(store: DynamoStore, tenant: str, session_id: str, turn_id: str) -> list[dict[str, Any]]:
    page = store.query(pk=session_pk(tenant, session_id), sk_prefix="CALL#", limit=1000, consistent=True,
                       filter_expression="turn_id = :t", values={":t": turn_id})
    return page.items
