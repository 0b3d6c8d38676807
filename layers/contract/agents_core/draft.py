"""One commit in the making (the unit of work): a Session's new state, the Turns, Items, calls and rows it writes,
its events and commands, and how they become one TransactWriteItems with its outbox record.

Every commit stays inside DynamoDB's limits (100 writes, 4 MB, 400 KB per item): a commit's events and commands
are split into outbox parts of at most OUTBOX_PART_BYTES. The engine (agents_core.engine) decides when a Draft
commits: its before-commit steps, the transaction, its after-commit hooks, and the retry of a lost race.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from agents_contract import jsonutil, resources
from agents_contract.parser import Snapshot

from . import keys, quotas
from .environments import placement
from .ids import new_id, now
from .settings import get_settings
from .store import (
    ITEM_LIMIT_BYTES,
    ITEM_TOO_LARGE,
    CommitTooLarge,
    DynamoStore,
    item_size,
    marshal,
    pack,
    unpack,
)

OUTBOX_PART_BYTES = 300 * 1024  # one OUT# record; a larger commit writes several parts
_UNREAD = object()
# A running Turn's live fields (issue 36, cost): while it is its Session's active Turn, claimed and in_progress or
# waiting, a commit that changes only these keeps them on the Session item (`active_turn`, which every commit
# rewrites) instead of writing the Turn item; the next commit that writes the Turn item (its claim moved, a
# cancellation, its end, ...) brings them there. Readers of a running Turn read both (agents_core.running_turns).
LIVE_FIELDS = frozenset({"status", "obs_seq", "outputs", "has_final_answer"})
LIVE_STATUSES = ("in_progress", "waiting")


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
    slot: Optional[bool] = None  # holds one of its tenant's running-Turn slots (agents_core/quotas.py)
    accepted_ms: int = 0  # when the input that created it was accepted (ms; 0: before this was recorded)
    live: bool = False  # its live fields are kept on the Session item (LIVE_FIELDS): the Turn item's may be older
    changed: set[str] = field(default_factory=set)

    @property
    def id(self) -> str:
        return self.doc["id"]

    @property
    def status(self) -> str:
        return self.doc["status"]

    @classmethod
    def from_item(cls, item: dict[str, Any], active: Optional[dict[str, Any]] = None) -> TurnState:
        """`active`: the Session's `active_turn` as read with the item; its live fields win (LIVE_FIELDS)."""
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
            slot=bool(item.get("slot")) or None,
            accepted_ms=int(item.get("accepted_ms", 0)),
        ).overlay(active)

    def overlay(self, active: Optional[dict[str, Any]]) -> TurnState:
        """The live fields the Session item keeps for its running Turn (`Draft._keep_live`), over the Turn item's."""
        if not active or active.get("id") != self.id or "obs_seq" not in active:
            return self
        self.live = True
        self.obs_seq, self.outputs = int(active["obs_seq"]), int(active.get("outputs", 0))
        self.has_final_answer = bool(active.get("final"))
        if self.doc.get("status") in LIVE_STATUSES and active.get("status") in LIVE_STATUSES:
            self.doc["status"] = active["status"]
        return self

    def set(self, **values: Any) -> None:
        for name, value in values.items():
            if name in ("status", "started_at", "completed_at", "x_agents_core", "error"):
                self.doc[name] = value
                self.changed.add("status" if name == "status" else "doc")
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
        # New refs whose row is not written (issue 36, cost): a function call's Item named by its call id (the
        # CALL row this commit puts holds its ref), or an Item opened and finished in the commit that ends its Turn
        # (every later observation of the Turn is ignored, and settlement reads only open refs).
        self._implied_refs: set[tuple[str, str]] = set()
        self._changed_refs: set[tuple[str, str]] = set()
        self._owners: dict[int, str] = {}  # Item position -> the Subagent whose history holds it
        self.item_attrs: dict[int, dict[str, Any]] = {}  # Item position -> more attributes of its row (a list entry)
        self._rows: dict[tuple[str, str], tuple[dict[str, Any], bool]] = {}  # other rows this commit puts
        self.messages_added = 0
        self.started: Optional[TurnState] = None  # the Turn this commit starts, if any
        self.slots = 0  # the net change of the tenant's running-Turn count in this commit (agents_core/quotas.py)
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
            self.turns[turn_id] = TurnState.from_item(item, self.active_turn)
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

    def pending_items(self) -> dict[int, dict[str, Any]]:
        """The Items this commit writes so far, by position."""
        return dict(self._items)

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
            state = row and row["state"]
            if row is None:  # a function call's Item named by its call id: its ref (done) lives in the CALL row
                call = self.get(keys.call(self.tenant, self.session_id, runtime_id))
                if call is not None and call.get("turn_id") == turn_id and call.get("ref"):
                    row, state = {**call, "id": call["item_id"], "position": call["item_position"]}, "done"
            self._refs[key] = {"id": row["id"], "position": int(row["position"]),
                               "output_index": int(row["output_index"]), "state": state,
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

    def imply_ref(self, turn_id: str, runtime_id: str, call_id: str) -> dict[str, Any]:
        """A function call's new ref, kept in its CALL row (no RID row) when its call id names its Item: the
        attributes the CALL row carries for it (`item_ref` reads them there)."""
        if runtime_id != call_id:
            return {}
        self._implied_refs.add((turn_id, runtime_id))
        ref = self._refs[(turn_id, runtime_id)]
        assert ref is not None
        return {"ref": True, "item_position": ref["position"], "output_index": ref["output_index"]}

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
            if new and ref.get("state") == "done" and ((turn_id, runtime_id) in self._implied_refs or (
                    turn_id in self.turns and self.turns[turn_id].closing)):
                continue
            self.tx.put({**keys.item_ref(self.tenant, self.session_id, turn_id, runtime_id), "kind": "item_ref",
                         "turn_id": turn_id, **ref}, "attribute_not_exists(PK)" if new else None)
        self._changed_refs.clear()
        self._new_refs.clear()
        self._implied_refs.clear()
        for row, new in self._rows.values():
            self.tx.put(row, "attribute_not_exists(PK)" if new else None)
        self._rows.clear()
        for turn in self.turns.values():
            self._write_turn(turn)
        quotas.add(self.tx, self.tenant, self.slots)
        self.slots = 0
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
                         "doc": jsonutil.dumps(item), **self.item_attrs.pop(position, {})})
        self._items.clear()

    def _keep_live(self, turn: TurnState) -> bool:
        """Whether the Turn is its Session's running Turn (active, claimed, in_progress or waiting, not created in
        this commit): the Session item then keeps its live fields (LIVE_FIELDS), written with every commit."""
        active = self.active_turn or {}
        if active.get("id") != turn.id or not turn.claimed_by or turn.status not in LIVE_STATUSES \
                or turn.id in self._new_turns or not (turn.live or turn.changed <= LIVE_FIELDS):
            return False
        self.active_turn = {**active, "status": turn.status, "obs_seq": turn.obs_seq, "outputs": turn.outputs}
        self.active_turn.pop("final", None)
        if turn.has_final_answer:
            self.active_turn["final"] = True
        turn.live = True
        return True

    def _write_turn(self, turn: TurnState) -> None:
        new_item = self._new_turns.pop(turn.id, None)
        if new_item is not None:  # created in this commit: one put of its final state
            item = {**new_item, "status": turn.status, "doc": jsonutil.dumps(turn.doc)}
            for name in turn.changed - {"doc", "status"}:
                item[name] = getattr(turn, name)
            if turn.status != "queued":
                item.pop(keys.GSI1PK, None)
                item.pop(keys.GSI1SK, None)
            self.tx.put(item, "attribute_not_exists(PK)")
            turn.changed = set()
            return
        if self._keep_live(turn) and turn.changed <= LIVE_FIELDS:  # on the Session item: no Turn write
            turn.changed = set()
            return
        if not turn.changed:
            return
        written = set(turn.changed)
        if turn.live:  # the live fields the Session item kept come to the Turn item with this write
            written |= {"doc", "obs_seq", "outputs"} | ({"has_final_answer"} if turn.has_final_answer else set())
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        sets: list[str] = []
        removes: list[str] = []
        for name in sorted(written - {"status"}):
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
        if written & {"doc", "status"}:  # the public document with its status beside it
            if "doc" not in written:
                names["#a_doc"] = "doc"
                sets.append("#a_doc = :v_doc")
                values[":v_doc"] = jsonutil.dumps(turn.doc)
            names["#st"] = "status"
            sets.append("#st = :st")
            values[":st"] = turn.status
        if turn.changed & {"doc", "status"}:
            if turn.status != "queued":
                removes += [keys.GSI1PK, keys.GSI1SK]
            else:  # back in its queue (its Runtime was gone before turn.start reached it: dispatch.requeue)
                for attr, value in keys.queued_turn(placement.queue(
                        self.snapshot.environment["type"], self.snapshot.harness,
                        placement.environment_id(self.session_id)), turn.id).items():
                    names[f"#q_{attr}"] = attr
                    values[f":q_{attr}"] = value
                    sets.append(f"#q_{attr} = :q_{attr}")
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


