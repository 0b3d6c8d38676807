"""Session input (`POST /v1/agents/sessions/{id}/events`): messages, cancel and tool_result batches.

Check order: request shape -> Session lookup -> Idempotency-Key lookup -> each event in order.
A batch is all or nothing; a rejected batch writes nothing and changes no pending action.
Results are admitted by conditional writes on the CALL items in one TransactWriteItems; a lost race
is re-read and re-classified. An identical retry writes nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from agents_contract import capabilities, decisions, jsonutil, limits, parser, protocol, wire
from agents_contract.errors import IdempotencyConflict, InvalidRequest, NotFound, UnsupportedConfiguration
from agents_contract.harnessconfig import declaration

from . import engine, keys
from .ids import new_id, now
from .observability import logger
from .runtimes import redelivery
from .settings import get_settings
from .store import DynamoStore

MAX_EVENTS = limits.MAX_EVENTS_PER_BATCH
CALL_ITEM_BUDGET = 399 * 1024  # a call item (arguments and result) within DynamoDB's 400 KB


def call_record(item: dict[str, Any]) -> decisions.CallRecord:
    return decisions.CallRecord(item["call_id"], item["turn_id"], decisions.CallState(item["state"]),
                                child_turn_id=item.get("child_turn_id"), result_digest=item.get("digest"))


def submit(store: DynamoStore, tenant: str, session_id: str, body: Any, idempotency_key: Optional[str]) -> None:
    batch = parser.parse_event_batch(body)
    if len(batch.events) > MAX_EVENTS:
        raise InvalidRequest(f"A batch holds at most {MAX_EVENTS} events.", param="events")
    if idempotency_key is not None and not 1 <= len(idempotency_key) <= 255:
        raise InvalidRequest("The Idempotency-Key header must be 1 to 255 characters.", param="Idempotency-Key")
    batch_digest = jsonutil.digest(body["events"]) if idempotency_key else ""
    call_ids = list(dict.fromkeys(e.call_id for e in batch.events if isinstance(e, wire.ToolResultEvent)))
    wanted = [keys.session(tenant, session_id)]
    wanted += [keys.call(tenant, session_id, c) for c in call_ids]
    if idempotency_key:
        wanted.append(keys.idempotency_record(tenant, idempotency_key))

    def decide() -> tuple[Optional[engine.Draft], None]:
        found = store.batch_get(wanted)
        session_item = found.get(keys.address(wanted[0]))
        if session_item is None:
            raise NotFound()
        if idempotency_key:
            idem = found.get(keys.address(wanted[-1]))
            if idem is not None:
                if idem["digest"] != batch_digest or idem["session_id"] != session_id:
                    raise IdempotencyConflict()
                return None, None  # the same batch under the same key: already admitted
        calls = {item["call_id"]: item for item in found.values() if item.get("kind") == "call"}
        draft = engine.Draft(store, tenant, session_item)
        direct = _Direct()  # results posted once, after the commit (no outbox command)
        _apply(draft, batch.events, calls, direct)
        if idempotency_key:
            draft.idempotency = {**keys.idempotency_record(tenant, idempotency_key), "kind": "idempotency",
                                 "digest": batch_digest, "session_id": session_id,
                                 "ttl": now() + get_settings().idempotency_ttl_seconds}
        draft.after_commit(lambda: send_now(draft.commands + direct.posts))
        return draft, None

    engine.attempt(decide)


def send_now(commands: list[dict[str, Any]]) -> None:
    """After the commit, post its Runtime-bound messages at once (no Streams hop between a result and
    the Runtime). Best effort: the commit's outbox record delivers them again (at least once), or, for a
    result to a Runtime that names the calls it waits on in its heartbeat, that heartbeat has it posted
    again (runtimes/redelivery.py), so a failed post here loses nothing and never fails the request."""
    deliveries = [c for c in commands if c.get("type") == "deliver"]
    if not deliveries:
        return
    from .aws import default_messenger

    for command in deliveries:
        try:  # a gone connection is left to the outbox consumer, which forgets it (least privilege here)
            default_messenger().post(command["connection_id"], command["message"])
        except Exception:  # noqa: BLE001 - the outbox delivers it
            logger.warning("direct delivery failed; the outbox delivers it", extra={"turn_id": command["message"].get(
                "turn_id")})


@dataclasses.dataclass
class _Direct:
    """One decision's results posted only after the commit, and the claiming connection's declaration row."""

    posts: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    rows: dict[str, Optional[dict[str, Any]]] = dataclasses.field(default_factory=dict)


def _apply(draft: engine.Draft, events: list[Any], calls: dict[str, dict[str, Any]], direct: _Direct) -> None:
    records = {cid: call_record(item) for cid, item in calls.items()}
    decl = declaration(draft.snapshot.harness, draft.snapshot.impersonate)
    content = 0
    for index, event in enumerate(events):
        content += _check_content_size(event, index, content)
        if isinstance(event, wire.ToolResultEvent):
            decisions.check_result_content(decl, event, index)
            record = records.get(event.call_id)
            if record is not None and event.call_id in draft.call_states:  # an earlier event of this batch
                record = dataclasses.replace(record, state=decisions.CallState(draft.call_states[event.call_id]))
            if record is not None and record.state is decisions.CallState.PENDING and not _accepting(draft, record):
                # Cancelling closes no call item (a Turn may hold hundreds): a pending call of a Turn that
                # was cancelled, or that ended, takes no first result. Settle closes the items later.
                record = dataclasses.replace(record, state=decisions.CallState.CANCELLED)
            decision = decisions.classify(event, record)
            if decision.outcome is decisions.Outcome.ACCEPT:
                stored = len(calls[event.call_id].get("arguments") or "") + _json_bytes(
                    decisions.result_as_sent(event)) + 2048
                if stored > CALL_ITEM_BUDGET:
                    raise InvalidRequest(
                        "The tool result is too large to store with its call: the call's arguments and result "
                        f"together may hold at most {CALL_ITEM_BUDGET - 2048} bytes of JSON.",
                        param=_content_param(event, index))
                _check_runtime_capabilities(draft, event, index, direct)
                _admit_result(draft, event, calls[event.call_id], decision.digest, direct)
                records[event.call_id] = decisions.CallRecord(
                    event.call_id, decision.call.turn_id, decisions.CallState.SUBMITTED,
                    decision.call.child_turn_id, decision.digest)
        elif isinstance(event, wire.MessageEvent):
            parser.check_input(decl, event.input)
            messages = [[part.model_dump() for part in m.content] for m in event.input]
            _message(draft, messages)
        elif isinstance(event, wire.CancelEvent):
            _cancel(draft)
        else:
            raise UnsupportedConfiguration(f"{event.type} is not supported yet.", param=f"events[{index}].type")


def _json_bytes(value: Any) -> int:
    return len(jsonutil.dumps(value).encode())


def _content_param(event: Any, index: int) -> str:
    if isinstance(event, wire.MessageEvent):
        return f"events[{index}].input"
    return f"events[{index}].{'output' if event.given('output') or not event.given('error') else 'error'}"


def _check_content_size(event: Any, index: int, used: int) -> int:
    """The batch's tool results and messages within MAX_BATCH_CONTENT_BYTES (a message counts twice:
    it is stored as an Item and carried as an event); returns this event's share."""
    if isinstance(event, wire.ToolResultEvent):
        size, what = _json_bytes(decisions.result_as_sent(event)), "tool result"
    elif isinstance(event, wire.MessageEvent):
        size, what = 2 * _json_bytes([[p.model_dump() for p in m.content] for m in event.input]), "message"
    else:
        return 0
    if used + size > limits.MAX_BATCH_CONTENT_BYTES:
        raise InvalidRequest(
            f"The {what} is too large: the tool results and messages of one batch may hold at most "
            f"{limits.MAX_BATCH_CONTENT_BYTES} bytes of JSON (a message counts twice); send it in its own batch "
            "or make it smaller.", param=_content_param(event, index))
    return size


def _check_runtime_capabilities(draft: engine.Draft, event: wire.ToolResultEvent, index: int, direct: _Direct) -> None:
    """A new result needs what the Runtime running its Turn advertised for it (`function_result_images` for
    image parts): otherwise a 400 that leaves the call pending. Read only for such a result: the claiming
    connection's declaration of this Harness (an exec-server host's is its Environment's)."""
    needed = capabilities.result_capabilities([decisions.result_as_sent(event)])
    if not needed:
        return
    row = _declaration(draft, direct, consistent=True)
    advertised = frozenset(row.get("capabilities") or ()) if row else frozenset()
    lacking = capabilities.missing(advertised, needed)
    if lacking:
        raise UnsupportedConfiguration(
            f"The Runtime running this Turn does not advertise {', '.join(lacking)}: it cannot take images in "
            "function results. Send the result without image parts.", param=f"events[{index}].output")


def _declaration(draft: engine.Draft, direct: _Direct, consistent: bool = False) -> Optional[dict[str, Any]]:
    """The declaration of the Session's Harness by the connection that claimed the active Turn (an exec-server host's
    is its Environment's), read once per decision (eventually consistent: it was written at the connection's hello,
    before the Turn was claimed; the image check reads again, consistently, when that found none); None without a
    claim or a row."""
    connection = (draft.active_turn or {}).get("claimed_by")
    if not connection:
        return None
    cache = direct.rows
    if connection in cache and (cache[connection] is not None or not consistent):
        return cache[connection]
    harness = draft.snapshot.harness
    wanted = [keys.declaration(connection, harness)]
    if draft.snapshot.environment.get("type") == "self_hosted":
        from .environments import placement

        env_id = placement.session_environment_id(draft.session_id, draft.snapshot.environment)
        wanted.append(keys.environment_declaration(connection, env_id, harness))  # type: ignore[arg-type]
    found = draft.store.batch_get(wanted, consistent=consistent)
    cache[connection] = next((found[keys.address(k)] for k in wanted if keys.address(k) in found), None)
    return cache[connection]


def _admit_result(draft: engine.Draft, event: wire.ToolResultEvent, call: dict[str, Any], digest: str,
                  direct: _Direct) -> None:
    """Conditional on the call still pending with no stored result (ALL_OLD re-classifies on a race). The result is
    posted straight after the commit and again from its outbox record; to a Runtime whose heartbeat names the calls
    it waits on, only straight after the commit (its heartbeat has a lost post made again: runtimes/redelivery.py)."""
    sent = decisions.result_as_sent(event)
    delivery_id = new_id("dlv")
    draft.update_call(
        event.call_id,
        {"state": "submitted", "digest": digest, "result": jsonutil.dumps(sent), "submitted_at": now(),
         "delivery_id": delivery_id},
        "#s = :pending AND attribute_not_exists(digest)",
        names={"#s": "state"}, values={":pending": "pending"}, return_old=True,
    )
    # A pending call belongs to the active Turn, whose owner the Session item already names: no read.
    active = draft.active_turn or {}
    if active.get("id") == call["turn_id"] and active.get("claimed_by"):
        message = {"type": protocol.TURN_TOOL_RESULT, "call_id": event.call_id, "result": sent}
        if redelivery.posts_once(_declaration(draft, direct)):
            direct.posts.append({"type": "deliver", "connection_id": active["claimed_by"], "message": {
                **message, "tenant": draft.tenant, "session_id": draft.session_id, "turn_id": call["turn_id"],
                "delivery_id": delivery_id}})
        else:
            engine.deliver_to(draft, call["turn_id"], active["claimed_by"], message)
    draft.dirty = True


def _message(draft: engine.Draft, messages: list[list[dict[str, Any]]]) -> None:
    """Starts a Turn when the Session is idle; steers the active Turn otherwise. Input to a Session whose
    hosted Environment is expired or failed can never run: 409 naming it, nothing written."""
    from . import environments

    environments.refuse_input(draft.store, draft.tenant, draft.session_id, draft.snapshot.environment)
    active = draft.active_turn
    if active is None:
        from .runtimes import dispatch  # only a message to an idle Session starts (and claims) a Turn

        dispatch.start_turn(draft, messages)
        return
    turn = draft.turn(active["id"])
    assert turn is not None
    for content in messages:
        message = engine.add_user_message(draft, turn, content)
        engine.deliver(draft, turn, {"type": protocol.TURN_INPUT, "item": message})


def _accepting(draft: engine.Draft, record: decisions.CallRecord) -> bool:
    """Whether the call's Turn still takes a first result: it is the active Turn, not cancelled."""
    active = draft.active_turn or {}
    return active.get("id") == record.turn_id and not active.get("cancel_requested")


def _cancel(draft: engine.Draft) -> None:
    """Bounded whatever the Turn holds: the Turn is marked, its required actions leave, the Runtime is
    told; its call items are closed by Settle in bounded steps (results meanwhile get the 409)."""
    active = draft.active_turn
    if active is None:
        return  # nothing to cancel: cancelling is idempotent
    turn = draft.turn(active["id"])
    assert turn is not None
    if not turn.claimed_by:
        # never started: no calls, no Subagent child Turns, nothing to tell a Runtime
        engine.settle(draft, turn, "cancelled")
        return
    if turn.cancel_requested:
        return
    turn.set(cancel_requested=True)
    engine.drop_actions(draft, turn.id)
    draft.active_turn = {**active, "cancel_requested": True}
    if draft.status == "requires_action":
        draft.status = "in_progress"
        draft.emit_session("agent.session.in_progress")
    engine.deliver(draft, turn, {"type": protocol.TURN_CANCEL})
    draft.dirty = True

