"""Observations: a Runtime's `turn.*` messages applied in `(turn_id, seq)` order, each once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from agents_contract import jsonutil, protocol, resources, runtime_items
from agents_contract.errors import AgentsError, InvalidRequest

from .. import engine, keys, metrics, subagents
from ..aws import Messenger, Workflow
from ..ids import new_id, now
from ..observability import logger
from ..store import DynamoStore
from .connections import post_safely
from .settlement import SETTLE_NEEDED, end_turn, settlement_status

# ---- observations --------------------------------------------------------------------------------

OBSERVATIONS = protocol.OBSERVATIONS

# Limits of the Runtime protocol (docs/runtime-protocol.md, "Limits").
MAX_SEQ = 2 ** 53  # a JSON number every client represents exactly
MAX_AHEAD = 1000  # an observation at most this far past the last applied seq (a gap buffered)
MAX_BUFFERED = 500  # observations of one Turn waiting in OBS# rows for a gap to fill
MAX_BATCH = 100  # observations in one turn.batch
MAX_ID = 128  # routing ids, call ids, names, Runtime Item ids
MAX_ARGUMENTS_BYTES = 64 * 1024  # one function call's arguments, as JSON
MAX_JSON_DEPTH = 64  # nesting of function call arguments and MCP payloads
DRAIN_ENTRIES = 60  # writes one drain commit may use before it commits and continues


class Rejected(InvalidRequest):
    """A Runtime message that can never succeed: answered at once with an error frame naming the
    field (never retried). Rejecting an observation consumes its seq, so the Turn goes on."""


@dataclass
class Observation:
    kind: str
    seq: int
    fields: dict[str, Any]
    buffered: bool = False  # read back from an OBS# row


@dataclass
class Report:
    """What one observe call decided, acted on after its commit."""

    result: str = "ignored"
    rejections: list[tuple[Observation, AgentsError]] = field(default_factory=list)
    terminal: Optional[str] = None
    token: Optional[str] = None
    final_answer: Optional[bool] = None
    fail_turn: Optional[str] = None  # why Core fails the Turn itself (a function call it cannot accept)
    acked: int = 0
    closed: bool = False  # the Turn has ended: what this message carried is moot, acknowledged as taken
    remaining: list[Observation] = field(default_factory=list)  # next in order, for the next bounded commit
    settled: bool = False  # the terminal observation's commit settled the Turn: the workflow has nothing left

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]


def _depth(value: Any, limit: int) -> bool:
    """Whether a JSON value nests deeper than `limit` (iterative: no recursion on hostile input)."""
    stack = [(value, 1)]
    while stack:
        current, level = stack.pop()
        if isinstance(current, (dict, list)):
            if level > limit:
                return True
            children = current.values() if isinstance(current, dict) else current
            stack.extend((child, level + 1) for child in children)
    return False


def _string(value: Any, param: str, *, limit: int = MAX_ID, optional: bool = False) -> Optional[str]:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise Rejected(f"Invalid '{param}': expected a string of 1 to {limit} characters.", param=param)
    return value


def _seq(value: Any, param: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SEQ:
        raise Rejected(f"Invalid '{param}': expected an integer from 1 to 2**53.", param=param)
    return value


def parse_message(message: dict[str, Any]) -> tuple[str, str, str, list[Observation]]:
    """Routing and observations of a Runtime message, shape-checked (no store access)."""
    action = message.get("action")
    if action != protocol.TURN_BATCH and action not in OBSERVATIONS:
        raise Rejected(f"Unknown action '{str(action)[:64]}'.", param="action")
    tenant = _string(message.get("tenant"), "tenant", limit=256)
    session_id = _string(message.get("session_id"), "session_id", limit=256)
    turn_id = _string(message.get("turn_id"), "turn_id", limit=256)
    if action == protocol.TURN_BATCH:
        batch = message.get("observations")
        if not isinstance(batch, list) or not 1 <= len(batch) <= MAX_BATCH:
            raise Rejected(f"Invalid 'observations': expected a list of 1 to {MAX_BATCH} observations.",
                           param="observations")
        where = "observations[{}]"
    else:
        batch, where = [message], "{}"
    observations = []
    for i, raw in enumerate(batch):
        prefix = where.format(i) + "." if action == protocol.TURN_BATCH else ""
        if not isinstance(raw, dict):
            raise Rejected(f"Invalid '{where.format(i)}': expected an object.", param=where.format(i))
        kind = raw.get("action")
        if kind not in OBSERVATIONS:
            raise Rejected(f"Unknown action '{str(kind)[:64]}'.", param=f"{prefix}action")
        if kind == protocol.TURN_HEARTBEAT and raw.get("seq") is None:
            observations.append(Observation(kind, 0, raw))  # an unnumbered heartbeat takes no place in the order
            continue
        observations.append(Observation(kind, _seq(raw.get("seq"), f"{prefix}seq"), raw))
    seqs = [o.seq for o in observations if o.seq]
    if len(set(seqs)) != len(seqs):
        raise Rejected("Invalid 'observations': each observation has its own seq.", param="observations")
    return tenant, session_id, turn_id, sorted(observations, key=lambda o: o.seq)  # type: ignore[return-value]


def observe(store: DynamoStore, workflow: Workflow, connection_id: str, message: dict[str, Any],
            messenger: Optional[Messenger] = None) -> str:
    """Apply the observations of one Runtime message (one, or a `turn.batch` of one Turn's, in one
    commit); returns 'applied', 'buffered', 'duplicate' or 'ignored'.

    Order tolerant: seq numbers are applied in order; an observation that arrives ahead of a gap
    waits in an OBS# row until the gap fills (a heartbeat's seq fills its own place), so delivery in
    any order loses and duplicates nothing. Each message is answered with a cumulative
    `turn.ack` (the last seq applied); a rejected observation with an error frame naming the field.
    """
    tenant, session_id, turn_id, observations = parse_message(message)
    route = (tenant, session_id, turn_id)
    if all(o.kind == protocol.TURN_HEARTBEAT for o in observations):
        return _heartbeat(store, workflow, connection_id, route, observations, messenger)
    report = Report()
    engine.run(store, tenant, session_id, lambda draft: _drain(draft, connection_id, turn_id, observations, report),
               turn_id=turn_id, prefetch=_call_keys(tenant, session_id, observations))
    _after(store, workflow, messenger, connection_id, route, report)
    while report.result == "more":  # a long drain continues in further bounded commits
        report = _drain_more(store, workflow, messenger, connection_id, route, report.remaining)
    return report.result if report.result != "more" else "applied"


def _call_keys(tenant: str, session_id: str, observations: list[Observation]) -> list[dict[str, str]]:
    """The CALL items these observations name (read with the Session, in the same request)."""
    ids = dict.fromkeys(o.fields["call_id"] for o in observations
                        if isinstance(o.fields.get("call_id"), str) and 0 < len(o.fields["call_id"]) <= MAX_ID)
    return [keys.call(tenant, session_id, call_id) for call_id in ids]


def _drain_more(store: DynamoStore, workflow: Workflow, messenger: Optional[Messenger], connection_id: str,
                route: tuple[str, str, str], fresh: Optional[list[Observation]] = None) -> Report:
    report = Report()
    rest = list(fresh or [])
    engine.run(store, route[0], route[1], lambda draft: _drain(draft, connection_id, route[2], rest, report,
                                                               continuing=True), turn_id=route[2])
    _after(store, workflow, messenger, connection_id, route, report)
    return report


def _heartbeat(store: DynamoStore, workflow: Workflow, connection_id: str, route: tuple[str, str, str],
               observations: list[Observation], messenger: Optional[Messenger]) -> str:
    """Apart from observations, so no other traffic ever delays it: no Session commit, no retry loop.
    Its seq is recorded in an OBS# marker (a plain put on its own key, never contended) so an
    observation after it does not wait for it."""
    tenant, session_id, turn_id = route
    item = store.get(keys.turn(tenant, session_id, turn_id), consistent=False)
    if not item or item.get("claimed_by") != connection_id:
        return "ignored"
    if item.get("task_token") and not item.get("closing"):
        workflow.heartbeat(item["task_token"])
    marked = False
    for o in observations:
        if o.seq and o.seq > int(item.get("obs_seq", 0)):
            store.put({**keys.buffered_observation(tenant, session_id, turn_id, o.seq), "kind": "observation",
                       "turn_id": turn_id, "seq": o.seq, "action": protocol.TURN_HEARTBEAT, "ttl": now() + 86400})
            marked = True
    if marked:  # read again after the marker is down: an observation buffered meanwhile must not wait for it
        item = engine.live_turn(store, tenant, session_id, turn_id) or item  # its obs_seq may be the Session's
        for o in observations:  # a resent heartbeat whose place was taken meanwhile leaves no marker behind
            if o.seq and o.seq <= int(item.get("obs_seq", 0)):
                store.delete(keys.buffered_observation(tenant, session_id, turn_id, o.seq))
    if marked and int(item.get("buffered", 0)) > 0:  # observations wait behind this seq: apply them now
        while _drain_more(store, workflow, messenger, connection_id, route).result == "more":
            pass
    return "applied"


def _drain(draft: engine.Draft, connection_id: str, turn_id: str, fresh: list[Observation],
           report: Report, continuing: bool = False) -> str:
    """Apply every observation that is next in seq order (fresh ones and those waiting in OBS#
    rows); keep the rest waiting. Bounded: past DRAIN_ENTRIES writes it stops and says 'more'."""
    report.reset()
    turn = draft.turn(turn_id)
    if turn is None or turn.claimed_by != connection_id:
        report.result = "ignored"  # never act on a Turn this connection does not own
        return report.result
    if turn.status in engine.TERMINAL or turn.closing:
        report.result, report.closed = "ignored", True
        report.acked = max([turn.obs_seq, *(o.seq for o in fresh)])  # nothing left to resend
        return report.result
    pending = {o.seq: o for o in fresh if o.seq > turn.obs_seq and o.seq}
    if fresh and not pending and not continuing:
        report.result, report.acked = "duplicate", turn.obs_seq
        return report.result
    for o in list(pending.values()):
        if o.seq > turn.obs_seq + MAX_AHEAD:
            pending.pop(o.seq)
            report.rejections.append((o, Rejected(
                f"Invalid 'seq': at most {MAX_AHEAD} past the last applied observation ({turn.obs_seq}).",
                param="seq")))
    waiting: dict[int, Observation] = {}
    if turn.buffered > 0 or (pending and min(pending) != turn.obs_seq + 1) or not pending:
        rows = draft.store.query(**keys.buffered_observations_of_turn(draft.tenant, draft.session_id, turn_id),
                                 after=keys.buffered_observation_sk(turn_id, turn.obs_seq), limit=MAX_BUFFERED + 50,
                                 consistent=True).items
        for row in rows:
            fields = jsonutil.loads(row["fields"]) if row.get("fields") else {}
            waiting[int(row["seq"])] = Observation(row["action"], int(row["seq"]), fields, buffered=True)
    applied = False
    while True:
        following = turn.obs_seq + 1
        o = waiting.get(following) or pending.get(following)
        if o is None:
            break
        if draft.writes() > DRAIN_ENTRIES or len(jsonutil.dumps(draft.events).encode()) > 2 * 1024 * 1024:
            report.result = "more"
            break
        if following in waiting:
            draft.tx.delete(keys.buffered_observation(draft.tenant, draft.session_id, turn_id, following))
            if waiting[following].kind != protocol.TURN_HEARTBEAT:
                turn.set(buffered=max(0, turn.buffered - 1))
            waiting.pop(following)
        pending.pop(following, None)
        turn.set(obs_seq=following)
        draft.dirty = True
        applied = True
        if o.kind == protocol.TURN_HEARTBEAT:
            continue
        try:
            _APPLY[o.kind](draft, turn, o.fields, report)
        except AgentsError as error:
            report.rejections.append((o, error))
            if o.kind == protocol.TURN_FUNCTION_CALL:
                # A call Core cannot accept would leave the Harness waiting for a result that never
                # comes: Core fails the Turn itself, at once.
                report.fail_turn = error.message
                turn.set(closing="failed")
                break
        if report.terminal:
            break
    if report.result == "more":  # the rest goes on in the next bounded commit, in memory
        report.remaining = list(pending.values())
    # What is still ahead of a gap waits for it (unless the Turn just ended).
    gap: Optional[int] = None
    if report.result != "more" and not report.terminal and not report.fail_turn:
        for o in pending.values():
            if o.seq in waiting:
                continue
            if turn.buffered >= MAX_BUFFERED:
                report.rejections.append((o, Rejected(
                    f"Too many observations wait for a missing seq ({turn.obs_seq + 1}); at most {MAX_BUFFERED}.",
                    param="seq")))
                continue
            draft.tx.put({**keys.buffered_observation(draft.tenant, draft.session_id, turn_id, o.seq),
                          "kind": "observation", "turn_id": turn_id, "seq": o.seq, "action": o.kind,
                          "fields": jsonutil.dumps(o.fields), "ttl": now() + 86400}, "attribute_not_exists(PK)")
            turn.set(buffered=turn.buffered + 1)
            draft.dirty = True
            report.result = "buffered" if not applied else "applied"
            gap = turn.obs_seq + 1
        if gap is not None:
            # No lost wake-up: a heartbeat that marks the missing seq while this commit is decided
            # re-reads the Turn only after its marker is down; if it read before this commit landed it
            # saw nothing buffered, so this commit must see its marker instead: it fails and is decided
            # again (the marker then fills the gap and everything behind it applies).
            draft.tx.check(keys.buffered_observation(draft.tenant, draft.session_id, turn_id, gap),
                           "attribute_not_exists(PK)")
    if report.terminal and not report.fail_turn and report.result != "more":
        report.settled = _settle_now(draft, turn, report.terminal)
    if report.result == "ignored":
        report.result = "applied" if applied else ("buffered" if turn.buffered else "duplicate")
    report.acked = turn.obs_seq
    return report.result


def _settle_now(draft: engine.Draft, turn: engine.TurnState, reported: str) -> bool:
    """The common Turn settles in the commit of its terminal observation: with no open call and no
    unfinished Item there is nothing to close in bounded steps, so the settlement (the same one the
    Settle task makes) joins this commit and the Session is idle without waiting for the workflow.
    The workflow is told it succeeded and ends there, its Settle task never entered (two state
    transitions a Turn, issue 36). Only for a Turn of at most SETTLE_CHUNK Items, so the check stays
    one or two small reads: this runs on the Runtime connection's path, where a slow message would
    hold back its heartbeats. Anything else is left to the Settle task (observations are ignored from
    now on: `closing`), which the workflow enters on the task failure SETTLE_NEEDED. Whether it settled."""
    if draft.writes() > DRAIN_ENTRIES - 8 or turn.outputs > engine.SETTLE_CHUNK:
        return False  # a long Turn: its Items are checked in bounded steps by the Settle task, off this path
    if draft.leaves_open(turn.id):
        return False
    if engine.open_calls(draft.store, draft.tenant, draft.session_id, turn.id, limit=1):
        return False
    if engine.open_item_refs(draft.store, draft.tenant, draft.session_id, turn.id, limit=1):
        return False
    if turn.claimed_by:  # the claim row is no longer needed once the Turn ends
        draft.tx.delete(keys.claim(turn.claimed_by, turn.id))
    end_turn(draft, turn, settlement_status(draft, turn, reported, lost=False))
    return True


def _after(store: DynamoStore, workflow: Workflow, messenger: Optional[Messenger], connection_id: str,
           route: tuple[str, str, str], report: Report) -> None:
    """After the commit: rejections answered and logged, the workflow told, the message acked."""
    tenant, session_id, turn_id = route
    for o, error in report.rejections:
        log_rejection(connection_id, turn_id, o.kind, o.seq, error)
        if messenger is not None:
            post_safely(messenger, store, connection_id, error_frame(error, action=o.kind, seq=o.seq,
                                                                     turn_id=turn_id))
    if report.fail_turn is not None:
        item = store.get(keys.turn(tenant, session_id, turn_id))
        if item and item.get("task_token"):
            workflow.fail(item["task_token"], "FunctionCallRejected", report.fail_turn[:200])
        if messenger is not None:  # the Harness stops the Turn; whatever it reports is ignored
            post_safely(messenger, store, connection_id, {"type": protocol.TURN_CANCEL, "tenant": tenant,
                                                          "session_id": session_id, "turn_id": turn_id})
    if report.terminal and report.token:
        outcome = {"status": report.terminal, "final_answer": report.final_answer}
        if report.settled:  # nothing left: the execution ends with its Dispatch task
            workflow.succeed(report.token, outcome)
        else:  # the workflow's Catch for SETTLE_NEEDED enters the Settle task with this outcome
            workflow.fail(report.token, SETTLE_NEEDED, jsonutil.dumps(outcome))
    if messenger is not None and (report.result in ("applied", "buffered", "duplicate") or report.closed):
        post_safely(messenger, store, connection_id, {"type": protocol.TURN_ACK, "turn_id": turn_id, "seq": report.acked})


def error_frame(error: AgentsError, *, action: Optional[str] = None, seq: Optional[int] = None,
                turn_id: Optional[str] = None) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": protocol.ERROR, "ref": seq, "error": error.envelope()["error"]}
    if action is not None:
        frame["action"] = action
    if turn_id is not None:
        frame["turn_id"] = turn_id
    return frame


def log_rejection(connection_id: str, turn_id: Optional[str], action: Optional[str], seq: Optional[int],
                  error: AgentsError) -> None:
    """Connection, Turn and reason; never a payload."""
    logger.warning("rejected runtime message", extra={
        "connection_id": connection_id, "turn_id": turn_id, "action": action, "seq": seq,
        "reason": error.message[:300], "param": error.param})


def _runtime_item(draft: engine.Draft, turn: engine.TurnState, raw: Any, *, done: bool) -> tuple[str, dict]:
    runtime_id, item = runtime_items.parse(raw, done=done)
    if len(jsonutil.dumps(item).encode()) > MAX_ARGUMENTS_BYTES * 2 or _depth(item, MAX_JSON_DEPTH):
        raise Rejected(f"Invalid 'item': at most {MAX_ARGUMENTS_BYTES * 2} bytes of JSON, nested at most "
                       f"{MAX_JSON_DEPTH} deep.", param="item")
    return runtime_id, item


def _item_added(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
    runtime_id, item = _runtime_item(draft, turn, msg.get("item"), done=False)
    if draft.item_ref(turn.id, runtime_id) is not None:
        raise Rejected(f"Invalid 'item.id': the Item '{runtime_id}' was already added.", param="item.id")
    child = subagents.child_of(draft, msg)
    ref = _new_ref(draft, turn, runtime_id, child)
    item = {"id": ref["id"], **item, "turn_id": ref.get("child_turn_id") or turn.id}
    draft.put_item(ref["position"], item, ref.get("subagent_id"))
    if item["status"] != "in_progress":
        draft.set_ref_state(turn.id, runtime_id, "done")
    draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, item,
                                    ref["output_index"]))


def _new_ref(draft: engine.Draft, turn: engine.TurnState, runtime_id: str,
             child: Optional[dict[str, str]]) -> dict[str, Any]:
    """A new Item of the Turn; a child Turn's Item (a Subagent's history) remembers its owner."""
    ref = draft.new_item_ref(turn, runtime_id)
    if child is not None:
        ref.update(child_turn_id=child["turn_id"], subagent_id=child["subagent_id"])
    return ref


def _item_done(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
    runtime_id, item = _runtime_item(draft, turn, msg.get("item"), done=True)
    ref = draft.item_ref(turn.id, runtime_id)
    if ref is None:  # reported finished without an added: subscribers still see it added first
        ref = _new_ref(draft, turn, runtime_id, subagents.child_of(draft, msg))
        added = {"id": ref["id"], **item, "turn_id": ref.get("child_turn_id") or turn.id}
        if "status" in added:
            added["status"] = "in_progress"
        if added.get("type") == "message":
            added["content"] = []
        draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, added,
                                        ref["output_index"]))
    elif ref["state"] == "done":
        raise Rejected(f"Invalid 'item.id': the Item '{runtime_id}' is already done.", param="item.id")
    item = {"id": ref["id"], **item, "turn_id": ref.get("child_turn_id") or turn.id}
    draft.put_item(ref["position"], item, ref.get("subagent_id"))
    draft.set_ref_state(turn.id, runtime_id, "done")
    if item["type"] == "message" and item.get("phase") == "final_answer" and item["status"] == "completed" and \
            not ref.get("child_turn_id"):  # a child's final answer is not the root Turn's
        turn.set(has_final_answer=True)
    _close_parts(draft, turn, runtime_id, ref, item)
    draft.emit(resources.item_event("agent.session.turn.item.done", new_id("evt"), draft.session_id, item,
                                    ref["output_index"]))


def _text_delta(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
    runtime_id = _string(msg.get("item_id"), "item_id")
    index = msg.get("content_index", 0)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1000:
        raise Rejected("Invalid 'content_index': expected an integer from 0 to 999.", param="content_index")
    delta = msg.get("delta", "")
    if not isinstance(delta, str):
        raise Rejected("Invalid 'delta': expected a string.", param="delta")
    ref = draft.item_ref(turn.id, runtime_id)  # type: ignore[arg-type]
    if ref is None:
        raise Rejected(f"Invalid 'item_id': no Item '{runtime_id}' was added in this Turn.", param="item_id")
    if ref["state"] == "done":
        raise Rejected(f"Invalid 'item_id': the Item '{runtime_id}' is already done.", param="item_id")
    if draft.start_part(turn.id, runtime_id, index):  # type: ignore[arg-type]
        _part_event(draft, turn, ref, "agent.session.turn.content_part.added", index, part={"type": "output_text", "text": ""})
    _part_event(draft, turn, ref, "agent.session.turn.output_text.delta", index, delta=delta)


def _part_event(draft: engine.Draft, turn: engine.TurnState, ref: dict[str, Any], kind: str, index: int,
                **fields: Any) -> None:
    draft.emit({"type": kind, "event_id": new_id("evt"), "session_id": draft.session_id,
                "turn_id": ref.get("child_turn_id") or turn.id, "item_id": ref["id"],
                "output_index": ref["output_index"], "content_index": index, **fields})


def _close_parts(draft: engine.Draft, turn: engine.TurnState, runtime_id: str, ref: dict[str, Any],
                 item: dict[str, Any]) -> None:
    """The official message sequence: each output text part of a finished message is announced
    (content_part.added, unless its first delta did) and closed (output_text.done with the whole
    text, content_part.done with the final part) before the message's item.done. A part that was
    never streamed sends its whole text in one output_text.delta."""
    if item.get("type") != "message" or not isinstance(item.get("content"), list):
        return
    for index, part in enumerate(item["content"]):
        if not isinstance(part, dict) or part.get("type") != "output_text" or not isinstance(part.get("text"), str):
            continue
        if draft.start_part(turn.id, runtime_id, index):
            _part_event(draft, turn, ref, "agent.session.turn.content_part.added", index,
                        part={"type": "output_text", "text": ""})
            _part_event(draft, turn, ref, "agent.session.turn.output_text.delta", index, delta=part["text"])
        _part_event(draft, turn, ref, "agent.session.turn.output_text.done", index, text=part["text"])
        _part_event(draft, turn, ref, "agent.session.turn.content_part.done", index,
                    part={"type": "output_text", "text": part["text"]})


def _function_call(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
    call_id = _string(msg.get("call_id"), "call_id")
    name = _string(msg.get("name"), "name")
    runtime_id = _string(msg.get("item_id"), "item_id", optional=True) or call_id
    arguments = msg.get("arguments")
    if _depth(arguments, MAX_JSON_DEPTH):
        raise Rejected(f"Invalid 'arguments': nested more than {MAX_JSON_DEPTH} deep.", param="arguments")
    encoded = jsonutil.dumps(arguments)
    if len(encoded.encode()) > MAX_ARGUMENTS_BYTES:
        raise Rejected(f"Invalid 'arguments': a function call's arguments hold at most {MAX_ARGUMENTS_BYTES} "
                       "bytes of JSON.", param="arguments")
    action = resources.function_call_action(call_id, name, arguments, turn.id)  # type: ignore[arg-type]
    # The pending actions' size so far: the stored JSON plus what this commit added (no re-encoding).
    if draft.required_actions_bytes is None:
        draft.required_actions_bytes = len((draft.item.get("required_actions") or "[]").encode())
    held = draft.required_actions_bytes
    added = len(encoded.encode()) + len(call_id) + len(name) + len(turn.id) + 96  # type: ignore[arg-type]
    if not turn.cancel_requested and held + added > REQUIRED_ACTIONS_BYTES:
        raise Rejected(f"Invalid 'arguments': the Session's pending function calls hold at most "
                       f"{REQUIRED_ACTIONS_BYTES} bytes of JSON together.", param="arguments")
    if draft.get(keys.call(draft.tenant, draft.session_id, call_id)) is not None:  # type: ignore[arg-type]
        raise Rejected(f"Invalid 'call_id': '{call_id}' was already used in this Session.", param="call_id")
    if draft.item_ref(turn.id, runtime_id) is not None:  # type: ignore[arg-type]
        raise Rejected(f"Invalid 'item_id': the Item '{runtime_id}' was already added.", param="item_id")
    # A Subagent's call: its Item is in the child's history and names the child Turn; the required
    # action stays the root Turn's.
    owner = subagents.child_of(draft, msg) or {}
    ref = _new_ref(draft, turn, runtime_id, owner or None)  # type: ignore[arg-type]
    draft.set_ref_state(turn.id, runtime_id, "done")  # type: ignore[arg-type]
    item = {"id": ref["id"], "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
            "status": "completed", "turn_id": owner.get("turn_id") or turn.id}
    draft.put_item(ref["position"], item, owner.get("subagent_id"))
    implied = draft.imply_ref(turn.id, runtime_id, call_id)  # type: ignore[arg-type]
    draft.tx.put({**implied, **keys.call(draft.tenant, draft.session_id, call_id), "kind": "call",  # type: ignore[arg-type]
                  "call_id": call_id, "turn_id": turn.id, "child_turn_id": owner.get("turn_id"),
                  "subagent_id": owner.get("subagent_id"), "name": name, "arguments": encoded,
                  "state": "pending", "item_id": ref["id"], "created_at": now(),
                  "created_ms": metrics.now_ms()}, "attribute_not_exists(PK)")  # FunctionRoundTrip's start
    draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, item,
                                    ref["output_index"]))
    if turn.cancel_requested:
        return
    if name == "automations" and any(t["type"] == "automations" for t in draft.snapshot.tools):  # Core serves it
        return draft.command({"type": "automations_tool", "turn_id": turn.id, "call_id": call_id, "args": arguments})
    draft.required_actions = [*draft.required_actions, action]
    draft.required_actions_bytes = held + added
    if turn.status != "waiting":
        turn.set(status="waiting")  # there is no Turn waiting event
        draft.active_turn = {**(draft.active_turn or {}), "status": "waiting"}
    if draft.status != "requires_action":
        draft.status = "requires_action"
        draft.emit_session("agent.session.requires_action")


REQUIRED_ACTIONS_BYTES = 256 * 1024  # the Session item holds them with its snapshot, within 400 KB


def _close_call(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], applied: bool) -> dict:
    """The receipt (applied) or an abandonment, classified deterministically on the call's state:
    only a submitted result can be applied, only an open call abandoned."""
    call_id = _string(msg.get("call_id"), "call_id")
    key = keys.call(draft.tenant, draft.session_id, call_id)  # type: ignore[arg-type]
    call = draft.get(key)
    if call is None or call["turn_id"] != turn.id:
        raise Rejected(f"Invalid 'call_id': no call '{call_id}' in this Turn.", param="call_id")
    state = draft.call_state(call)
    if applied and state != "submitted":
        raise Rejected(f"Invalid 'call_id': the call '{call_id}' has no submitted result to apply (it is {state}).",
                       param="call_id")
    if not applied and state not in ("pending", "submitted"):
        raise Rejected(f"Invalid 'call_id': the call '{call_id}' can no longer be abandoned (it is {state}).",
                       param="call_id")
    if applied:
        draft.update_call(call_id, {"state": "applied", "applied_at": now()}, "#s = :sub",  # type: ignore[arg-type]
                          names={"#s": "state"}, values={":sub": "submitted"})
    else:
        draft.update_call(call_id, {"state": "abandoned"}, "#s IN (:p, :sub)", names={"#s": "state"},  # type: ignore[arg-type]
                          values={":p": "pending", ":sub": "submitted"})
    engine.drop_actions(draft, turn.id, call_id)
    return call


def _applied(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
    call = _close_call(draft, turn, msg, applied=True)
    position = draft.next_position()
    sent = jsonutil.loads(call["result"]) if call.get("result") else {}
    item = resources.function_call_output_item(engine.item_public_id(position), call.get("child_turn_id") or turn.id,
                                               call["call_id"], sent)
    draft.put_item(position, item, call.get("subagent_id"))
    draft.emit(resources.item_event("agent.session.turn.item.added", new_id("evt"), draft.session_id, item))
    engine.resume_if_clear(draft, turn)


def _abandoned(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
    _close_call(draft, turn, msg, applied=False)
    engine.resume_if_clear(draft, turn)


def _terminal(status: str):
    def apply(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
        out.terminal, out.token = status, turn.task_token
        turn.set(closing=status)  # later observations of the Turn are ignored
        draft.dirty = True
        if status == "completed":  # a hosted Turn's outputs, published in its completion's commit
            from ..files import artifacts

            artifacts.publish(draft, turn, msg)
        error = msg.get("error")
        if status == "failed" and isinstance(error, dict) and isinstance(error.get("message"), str):
            # What the Harness reported (e.g. an MCP server that failed verification), readable on the
            # Turn as x_agents_core.error; the public `error` stays the contract's generic one.
            detail = error["message"].encode("utf-8", "replace").decode()[:500]
            turn.set(x_agents_core={**(turn.doc.get("x_agents_core") or {}), "error": {"message": detail}})
    return apply


_APPLY = {
    protocol.TURN_ITEM_ADDED: _item_added,
    protocol.TURN_ITEM_DONE: _item_done,
    protocol.TURN_OUTPUT_TEXT_DELTA: _text_delta,
    protocol.TURN_FUNCTION_CALL: _function_call,
    protocol.TURN_TOOL_RESULT_APPLIED: _applied,
    protocol.TURN_CALL_ABANDONED: _abandoned,
    protocol.TURN_COMPLETED: _terminal("completed"),
    protocol.TURN_FAILED: _terminal("failed"),
    protocol.TURN_CANCELLED: _terminal("cancelled"),
    protocol.TURN_SUBAGENT_OPENED: subagents.opened,
    protocol.TURN_SUBAGENT_CLOSED: subagents.closed,
    protocol.TURN_SUBAGENT_TURN_STARTED: subagents.turn_started,
    protocol.TURN_SUBAGENT_TURN_ENDED: subagents.turn_ended,
}


def _turn_environment(draft: engine.Draft, turn: engine.TurnState, msg: dict[str, Any], out: Report) -> None:
    from .. import environments  # hosted Environments' state, reported inside the Turn's channel

    environments.observe_turn(draft, turn, msg, out)


_APPLY[protocol.TURN_ENVIRONMENT] = _turn_environment
