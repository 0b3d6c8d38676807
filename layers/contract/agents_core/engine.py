"""The Session engine: every state change of a Session, its Turns, Items and function calls.

Each change is one TransactWriteItems guarded by the Session's commit sequence (`out_seq`) and
carrying its outbox record (events + commands), so commits per Session are totally ordered and
nothing is published that was not committed. A lost race re-reads and re-decides.

Every commit stays inside DynamoDB's limits (100 writes, 4 MB, 400 KB per item): a commit's events
and commands are split into outbox parts of at most OUTBOX_PART_BYTES, and work larger than one
commit (settling a Turn with many calls or unfinished Items) runs as idempotent steps that converge.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, TypeVar

from agents_contract import jsonutil, resources
from agents_contract.errors import InvalidRequest, NotFound, Unavailable
from agents_contract.parser import Snapshot

from . import keys
from .environments import placement
from .ids import new_id, now
from .settings import get_settings
from .store import (
    ITEM_LIMIT_BYTES,
    ITEM_TOO_LARGE,
    CommitTooLarge,
    Contention,
    DynamoStore,
    Transaction,
    TransactionConflict,
    item_size,
    marshal,
    pack,
    unpack,
)

T = TypeVar("T")
TERMINAL = ("completed", "failed", "cancelled")
OUTBOX_PART_BYTES = 300 * 1024  # one OUT# record; a larger commit writes several parts
SETTLE_CHUNK = 40  # open calls or unfinished Items closed per settlement step (far inside 100 writes, 4 MB)
MAX_INPUT_MESSAGES = 64  # user messages one request adds (each is an Item written in the request's commit)


def item_public_id(position: int) -> str:
    """Item ids carry their position, so list `after` needs no lookup."""
    return f"item_{position:08d}{new_id('x')[-12:]}"


@dataclass
class TurnState:
    """A Turn as stored: the public document plus the execution bookkeeping."""

    doc: dict[str, Any]
    claimed_by: Optional[str] = None
    task_token: Optional[str] = None
    obs_seq: int = 0  # every observation seq up to this one is applied (or was rejected and consumed)
    buffered: int = 0  # observations that arrived ahead of a gap, waiting in OBS# rows
    outputs: int = 0
    has_final_answer: bool = False
    cancel_requested: bool = False
    # Positions of the Items turn.start carries: the Turn's first message through the last one added
    # before its claim. Every later message reaches the Runtime as turn.input, never twice.
    input_from: int = 0
    input_through: int = 0
    closing: Optional[str] = None  # the terminal status being settled: observations are ignored from then on
    # Child Turns of Subagents this root Turn runs that have not ended ({"id", "subagent_id"}): they end
    # with it (agents_core.subagents).
    children: list[dict[str, Any]] = field(default_factory=list)
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
            buffered=int(item.get("buffered", 0)),
            outputs=int(item.get("outputs", 0)),
            has_final_answer=bool(item.get("has_final_answer", False)),
            cancel_requested=bool(item.get("cancel_requested", False)),
            input_from=int(item.get("input_from", 0)),
            input_through=int(item.get("input_through", 0)),
            closing=item.get("closing"),
            children=list(item.get("children") or []),
        )

    def set(self, **values: Any) -> None:
        for name, value in values.items():
            if name in ("status", "started_at", "completed_at", "x_agents_core", "error"):
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
        self.prefetched: dict[tuple[str, str], Optional[dict[str, Any]]] = {}
        self._items: dict[int, dict[str, Any]] = {}
        # A batch may mix events that touch the same item (a result then a cancel, a message then a
        # cancel); DynamoDB allows one operation per item in a transaction, so writes are composed:
        # a Turn created here is put once in its final state, and a call's writes become one update.
        self._new_turns: dict[str, dict[str, Any]] = {}
        self._call_writes: dict[str, dict[str, Any]] = {}
        self.call_states: dict[str, str] = {}  # call id -> state this commit gives it
        self._refs: dict[tuple[str, str], Optional[dict[str, Any]]] = {}  # (turn, Runtime Item id) -> ref
        self._new_refs: set[tuple[str, str]] = set()
        self._changed_refs: set[tuple[str, str]] = set()
        self._owners: dict[int, str] = {}  # Item position -> the Subagent whose history holds it
        self._rows: dict[tuple[str, str], tuple[dict[str, Any], bool]] = {}  # other rows this commit puts
        self.messages_added = 0
        self.started: Optional[TurnState] = None  # the Turn this commit starts, if any
        self.dirty = False
        # Why the Session failed, when its failed Turn says (e.g. its Environment's failure); None: the generic one.
        self.error: Optional[str] = item.get("error")
        # A hosted Environment in this commit: the Session create writes its Environment (`environment_in_commit`),
        # dispatch read its row (`hosted_environment`), and a Turn claimed here binds it to a host (`bound_host`).
        self.environment_in_commit = False
        self.hosted_environment: Optional[dict[str, Any]] = None
        self.bound_host: Optional[str] = None
        # The Session's pending function calls' JSON size so far (stored plus added in this commit), once read.
        self.required_actions_bytes: Optional[int] = None
        # The request's Idempotency-Key record (results): written with this commit, or alone when nothing changes.
        self.idempotency: Optional[dict[str, Any]] = None
        # The commit sequence's steps (`attempt`): `before` just ahead of the transaction (the Turn this commit starts is
        # claimed in it), `after` once it committed (direct sends and starts; the outbox repeats them at least once).
        self._before: list[Callable[[Draft], Any]] = []
        self._after: list[Callable[[], Any]] = []

    def before_commit(self, step: Callable[[Draft], Any]) -> None:
        """A step the engine runs once, after every decision of this commit and just before its transaction."""
        if step not in self._before:
            self._before.append(step)

    def after_commit(self, hook: Callable[[], Any]) -> None:
        """A hook the engine runs once the transaction committed (never after a lost race)."""
        self._after.append(hook)

    # -- reads ---------------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = Snapshot.from_json(unpack(self.item["snapshot"]))
        return self._snapshot

    def get(self, key: dict[str, str]) -> Optional[dict[str, Any]]:
        """An item as read with the Session (see `run`), or read now."""
        found = self.prefetched.get(keys.address(key), _UNREAD)
        return self.store.get(key) if found is _UNREAD else found

    def turn(self, turn_id: str) -> Optional[TurnState]:
        if turn_id not in self.turns:
            item = self.store.get(keys.turn(self.tenant, self.session_id, turn_id))
            if item is None:
                return None
            self.turns[turn_id] = TurnState.from_item(item)
        return self.turns[turn_id]

    def add_turn(self, turn: TurnState, new_item: Optional[dict[str, Any]] = None) -> None:
        """`new_item`: the stored attributes of a Turn this commit creates (put once, at flush)."""
        self.turns[turn.id] = turn
        if new_item is not None:
            self._new_turns[turn.id] = new_item

    def row(self, key: dict[str, str]) -> Optional[dict[str, Any]]:
        """A row as this commit leaves it (its own puts first), else as stored."""
        pending = self._rows.get(keys.address(key))
        return dict(pending[0]) if pending is not None else self.get(key)

    def put_row(self, item: dict[str, Any], new: bool = False) -> None:
        """One put per row per commit (a batch may create and change it: the last state wins); a new
        row is conditioned on not existing. Every commit is conditioned on the Session, so a row read
        in it cannot have changed unseen."""
        key = keys.address(item)
        was_new = self._rows[key][1] if key in self._rows else False
        self._rows[key] = (dict(item), new or was_new)
        self.dirty = True

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
            "review": self.item.get("review"),
            "prompt_cache_options": jsonutil.loads(self.item["prompt_cache_options"])
            if self.item.get("prompt_cache_options") else None,
            "remote_url": get_settings().remote_url or get_settings().websocket_url or "",  # environments.remote_url
            "error": self.error,
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

    def items_of(self, turn_id: str) -> list[dict[str, Any]]:
        """The Items of a Turn this commit writes, in position order."""
        return [item for _, item in sorted(self._items.items()) if item.get("turn_id") == turn_id]

    def put_item(self, position: int, item: dict[str, Any], subagent_id: Optional[str] = None) -> None:
        """The Item's latest state in this commit (a batch may add and finish it: one write).
        `subagent_id`: a child Item, listed on that Subagent's routes only (Session lists are root-only)."""
        self._items[position] = item
        if subagent_id:
            self._owners[position] = subagent_id
        self.dirty = True

    # -- Runtime Item ids -------------------------------------------------------------------------
    def item_ref(self, turn_id: str, runtime_id: str) -> Optional[dict[str, Any]]:
        key = (turn_id, runtime_id)
        if key not in self._refs:
            row = self.store.get(keys.item_ref(self.tenant, self.session_id, turn_id, runtime_id))
            self._refs[key] = {"id": row["id"], "position": int(row["position"]),
                               "output_index": int(row["output_index"]), "state": row["state"],
                               "parts": [int(p) for p in row.get("parts") or []],
                               **{k: row[k] for k in ("child_turn_id", "subagent_id") if row.get(k)}} if row else None
        return self._refs[key]

    def new_item_ref(self, turn: TurnState, runtime_id: str) -> dict[str, Any]:
        position = self.next_position()
        ref = {"id": item_public_id(position), "position": position, "output_index": turn.outputs, "state": "open",
               "parts": []}  # content indexes whose content_part.added was sent
        turn.set(outputs=turn.outputs + 1)
        key = (turn.id, runtime_id)
        self._refs[key] = ref
        self._new_refs.add(key)
        self._changed_refs.add(key)
        return ref

    def leaves_open(self, turn_id: str) -> bool:
        """Whether this commit opens an Item of the Turn it does not finish, or makes or leaves open a call."""
        if any(ref is not None and ref["state"] == "open" for (t, _), ref in self._refs.items() if t == turn_id):
            return True
        return any(state in ("pending", "submitted") for state in self.call_states.values()) or any(
            "Put" in entry and keys.is_call(entry["Put"]["Item"][keys.SK]["S"]) for entry in self.tx.entries)

    def writes(self) -> int:
        """Writes this commit will make so far (composed ones included, Session and outbox too)."""
        return (len(self.tx.entries) + len(self._items) + len(self._changed_refs) + len(self._call_writes)
                + len(self.turns) + len(self._rows) + 2)

    def start_part(self, turn_id: str, runtime_id: str, index: int) -> bool:
        """Records that the Item's content part `index` was announced; False when it already was."""
        key = (turn_id, runtime_id)
        ref = self._refs[key]
        assert ref is not None
        if index in ref["parts"]:
            return False
        ref["parts"] = sorted([*ref["parts"], index])
        self._changed_refs.add(key)
        self.dirty = True
        return True

    def set_ref_state(self, turn_id: str, runtime_id: str, state: str) -> None:
        key = (turn_id, runtime_id)
        ref = self._refs[key]
        assert ref is not None
        ref["state"] = state
        self._changed_refs.add(key)
        self.dirty = True

    def commit(self) -> bool:
        if not self.dirty and not self.tx.entries:
            if self.idempotency is not None:
                # Nothing changes (an empty batch or identical retries only), but the key still names this batch,
                # so a different batch under it is a conflict later.
                self.store.transact(self.store.new_transaction()
                                    .check(keys.session(self.tenant, self.session_id), "attribute_exists(PK)")
                                    .put(self.idempotency, "attribute_not_exists(PK)"))
            return False
        if self.idempotency is not None:
            self.tx.put(self.idempotency, "attribute_not_exists(PK)")
        self.flush()
        parts = outbox_parts(self.events, self.commands)
        seq = self.out_seq + 1
        last = self.out_seq + max(1, len(parts))
        ra, at = jsonutil.dumps(self.required_actions), jsonutil.dumps(self.active_turn)
        self._check_session_size(ra, at)
        session_update = self.store.new_transaction().update(
            keys.session(self.tenant, self.session_id),
            "SET #status = :status, required_actions = :ra, active_turn = :at, item_seq = :is, out_seq = :next, "
            "last_active_at = :now" + (", #error = :error" if self.error else " REMOVE #error"),
            "out_seq = :cur",
            names={"#status": "status", "#error": "error"},
            values={":status": self.status, ":ra": ra, ":at": at, ":is": self.item_seq, ":next": last,
                    ":cur": self.out_seq, ":now": now(), **({":error": self.error} if self.error else {})},
        )
        self.tx.entries.insert(0, session_update.entries[0])
        self.tx.bytes += session_update.bytes
        for index, (events, commands) in enumerate(parts):
            self.tx.put(outbox_record(self.tenant, self.session_id, seq + index, events, commands,
                                      parts=len(parts) if index == 0 else None, part_of=seq if index else None,
                                      fanout=int(self.item.get("sub_until") or 0) >= now()))
        self.store.transact(self.tx)
        self.out_seq = last
        return True

    def _check_session_size(self, ra: str, at: str) -> None:
        """The Session item keeps its snapshot and the required actions: it stays within 400 KB."""
        base = self.item.get("_base_size")
        if base is None:
            rest = {k: v for k, v in self.item.items() if k not in ("required_actions", "active_turn")}
            base = item_size(marshal(rest)) + 64
            self.item["_base_size"] = base
        if base + len(ra.encode()) + len(at.encode()) + 40 > ITEM_LIMIT_BYTES:
            raise CommitTooLarge(ITEM_TOO_LARGE, param=None)

    def flush(self) -> None:
        """Every composed write of this commit into its transaction."""
        self.flush_items()
        for turn_id, runtime_id in sorted(self._changed_refs):
            ref = self._refs[(turn_id, runtime_id)] or {}
            new = (turn_id, runtime_id) in self._new_refs
            self.tx.put({**keys.item_ref(self.tenant, self.session_id, turn_id, runtime_id), "kind": "item_ref",
                         "turn_id": turn_id, **ref}, "attribute_not_exists(PK)" if new else None)
        self._changed_refs.clear()
        self._new_refs.clear()
        for row, new in self._rows.values():
            self.tx.put(row, "attribute_not_exists(PK)" if new else None)
        self._rows.clear()
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
            self.tx.update(keys.call(self.tenant, self.session_id, call_id), "SET " + ", ".join(sets),
                           write["condition"], names=names, values=values, return_old=write["return_old"])
        self._call_writes.clear()

    def flush_items(self) -> None:
        for position, item in sorted(self._items.items()):
            self.tx.put({**keys.item(self.tenant, self.session_id, position), "kind": "item",
                         "id": item["id"], "turn_id": item["turn_id"], "subagent_id": self._owners.get(position),
                         "doc": jsonutil.dumps(item)})
        self._items.clear()

    def _write_turn(self, turn: TurnState) -> None:
        new_item = self._new_turns.pop(turn.id, None)
        if new_item is not None:  # created in this commit: one put of its final state
            item = {**new_item, "status": turn.status, "doc": jsonutil.dumps(turn.doc)}
            for name in turn.changed - {"doc"}:
                item[name] = getattr(turn, name)
            if turn.status != "queued":
                item.pop(keys.GSI1PK, None)
                item.pop(keys.GSI1SK, None)
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
                removes += [keys.GSI1PK, keys.GSI1SK]
        expression = ""
        if sets:
            expression += "SET " + ", ".join(sets)
        if removes:
            expression += " REMOVE " + ", ".join(removes)
        self.tx.update(keys.turn(self.tenant, self.session_id, turn.id), expression.strip(), "attribute_exists(PK)",
                       names=names, values=values or None)
        turn.changed = set()


def outbox_record(tenant: str, session_id: str, seq: int, events: list[dict[str, Any]],
                  commands: list[dict[str, Any]], parts: Optional[int] = None,
                  part_of: Optional[int] = None, fanout: bool = True) -> dict[str, Any]:
    """One OUT# record. The first part of a commit says how many parts it has, the others name the
    first: the consumer handles a commit once, at its first part, with every part in order.
    `fanout: false` says the Session had no subscriber when it committed (no subscriber query)."""
    record = {**keys.outbox_record(tenant, session_id, seq), "kind": "outbox", "tenant": tenant,
              "session_id": session_id, "seq": seq, "events": pack(jsonutil.dumps(events)),
              "commands": pack(jsonutil.dumps(commands)), "parts": parts if parts and parts > 1 else None,
              "part_of": part_of, "ttl": now() + get_settings().outbox_ttl_seconds}
    if not fanout:
        record["fanout"] = False
    return record


def outbox_parts(events: list[dict[str, Any]], commands: list[dict[str, Any]]) -> list[tuple[list, list]]:
    """A commit's events and commands, in order, in parts of at most OUTBOX_PART_BYTES each."""
    if not events and not commands:
        return []
    parts: list[tuple[list, list]] = [([], [])]
    size = 0
    for is_event, entry in [(True, e) for e in events] + [(False, c) for c in commands]:
        entry_size = len(jsonutil.dumps(entry).encode()) + 1
        if entry_size > ITEM_LIMIT_BYTES - 2048:
            raise CommitTooLarge(ITEM_TOO_LARGE, param=None)
        if size and size + entry_size > OUTBOX_PART_BYTES:
            parts.append(([], []))
            size = 0
        parts[-1][0 if is_event else 1].append(entry)
        size += entry_size
    return parts


_UNREAD = object()
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
        draft.turns[turn_id] = TurnState.from_item(turn_item)
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
        try:
            committed = draft.commit()
        except (TransactionConflict, Contention):
            backoff(lost)
            continue
        if committed:
            for hook in draft._after:
                hook()
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
    tx = transaction(draft)
    for throttled in range(attempts):
        try:
            draft.store.transact(tx)
            break
        except Contention:
            if throttled == attempts - 1:
                raise Unavailable() from None
            time.sleep(0.02 * (2 ** throttled))
    for hook in draft._after:
        hook()


# ---- Turn lifecycle ------------------------------------------------------------------------------

def start_turn(draft: Draft, messages: list[list[dict[str, Any]]]) -> TurnState:
    """A new Turn, queued: turn.created -> user item.added -> agent.session.in_progress; dispatch."""
    ts = now()
    turn_id = new_id("turn")
    snapshot = draft.snapshot
    turn = TurnState(doc={"id": turn_id, "agent_id": snapshot.agent_id, "session_id": draft.session_id,
                          "created_at": ts, "status": "queued"})
    draft.add_turn(turn, {**keys.turn(draft.tenant, draft.session_id, turn_id), "kind": "turn", "id": turn_id,
                          "tenant": draft.tenant, "session_id": draft.session_id, "harness": snapshot.harness,
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
    (`close_open_calls`, `close_open_items`), so this commit is small for every Turn shape."""
    if turn.status in TERMINAL:
        return
    drop_actions(draft, turn.id)
    # input waiting for an Environment connection ends with its Turn
    draft.required_actions = [a for a in draft.required_actions if a.get("type") != "environment_connection"]
    from . import subagents  # child Turns end before their root Turn does

    subagents.end_children(draft, turn, status)
    turn.set(status=status, completed_at=now(), task_token=None, closing=status)
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
