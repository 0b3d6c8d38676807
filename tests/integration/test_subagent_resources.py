"""Issue 25: Subagents as resources, in one process (the real handlers, moto, the Turn ASL, the stream
poller and Runtimes over the WebSocket gateway).

"A function call made by a Subagent is a required action of the root Turn that runs the child. Its
turn_id is that root Turn, and its call_id equals the call_id of the child's function_call Item on the
Subagent routes." Session Turn routes are root-only: "a child Turn id is 404 there, also as a cursor".
"""

import json

import openai
import pytest

from agents_core.store import unpack
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import HEARTBEAT_SECONDS, client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import conflict, pending, result, session_with, turn_status


def events_of(stack, session_id, kind=None):
    items = stack.store.query(pk=f"T#tenant-a#SESSION#{session_id}", sk_prefix="OUT#", limit=100,
                              consistent=True).items
    events = [e for i in items for e in json.loads(unpack(i["events"]))]
    return [e for e in events if kind is None or e["type"] == kind]


def only_subagent(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.subagents.list(session_id).data)[0]


def not_found(call):
    with pytest.raises(openai.NotFoundError) as err:
        call()
    assert err.value.body["type"] == "not_found_error" and err.value.body["message"] == "Resource not found."


# ---- the scripted harness's `subagent call` -------------------------------------------------------

def test_a_subagent_call_is_a_required_action_of_the_root_turn_and_the_child_shows_on_the_subagent_routes(
        client, runtime):
    sessions = client.beta.agents.sessions
    session = session_with(client, 'subagent call get_weather {"city": "Paris"}\nsay done')
    action = pending(client, session.id)
    root = sessions.turns.list(session.id).data
    assert [t.id for t in root] == [action.turn_id] and root[0].subagent_id is None  # root-only

    subagent = only_subagent(client, session.id)
    assert subagent.object == "agent.session.subagent" and subagent.session_id == session.id
    assert subagent.parent_agent_id == session.agent.id and subagent.status == "active"
    assert subagent.name == "get_weather worker" and subagent.closed_at is None
    assert subagent.instructions[0].text == 'call get_weather {"city": "Paris"}'
    assert sessions.subagents.retrieve(subagent.id, session_id=session.id) == subagent

    child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data
    assert len(child) == 1 and child[0].subagent_id == subagent.id and child[0].agent_id == session.agent.id
    assert child[0].status == "in_progress" and child[0].id != action.turn_id
    call = sessions.subagents.items.list(subagent.id, session_id=session.id).data
    assert [(i.type, i.call_id, i.turn_id) for i in call] == [("function_call", action.call_id, child[0].id)]
    # Session Items stay root-only; a child Turn id is the official 404 on Session routes, also as a cursor.
    assert "function_call" not in [i.type for i in sessions.items.list(session.id).data]
    not_found(lambda: sessions.turns.retrieve(child[0].id, session_id=session.id))
    not_found(lambda: sessions.turns.items.list(child[0].id, session_id=session.id))
    not_found(lambda: sessions.turns.list(session.id, after=child[0].id))
    with pytest.raises(openai.BadRequestError) as err:  # a child Item as a Session Items cursor
        sessions.items.list(session.id, after=call[0].id)
    assert err.value.body["message"] == "Invalid session item ID in `after`"

    sessions.events.create(session.id, events=[{**result(action, output="sunny"), "turn_id": child[0].id}])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")
    done = sessions.subagents.retrieve(subagent.id, session_id=session.id)
    assert done.status == "closed" and done.closed_at >= done.opened_at
    turn = sessions.subagents.turns.retrieve(child[0].id, session_id=session.id, subagent_id=subagent.id)
    assert turn.status == "completed" and turn.completed_at is not None
    history = sessions.subagents.turns.items.list(child[0].id, session_id=session.id, subagent_id=subagent.id,
                                                  order="asc").data
    assert [i.type for i in history] == ["function_call", "function_call_output", "message"]
    assert history[1].output == "sunny" and {i.turn_id for i in history} == {child[0].id}
    assert sessions.subagents.items.list(subagent.id, session_id=session.id, order="asc").data == history
    # paging with a cursor inside the child's history
    page = sessions.subagents.items.list(subagent.id, session_id=session.id, order="asc", limit=1,
                                         after=history[0].id)
    assert [i.id for i in page.data] == [history[1].id] and page.has_more
    assert [i.type for i in sessions.items.list(session.id, order="asc").data] == ["message", "message"]


def test_subagent_events_are_emitted_once_each_and_the_call_item_names_the_child_turn(client, runtime, stack):
    session = session_with(client, "subagent call get_weather {}\nsay done")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action)])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")
    events = events_of(stack, session.id)
    kinds = [e["type"] for e in events]
    assert kinds.count("agent.session.subagent.created") == 1 and kinds.count("agent.session.subagent.closed") == 1
    assert "agent.session.subagent.active" not in kinds
    created = next(e for e in events if e["type"] == "agent.session.subagent.created")["subagent"]
    child = [e for e in events if e["type"] == "agent.session.turn.created" and e["turn"]["subagent_id"]]
    assert len(child) == 1 and child[0]["turn"]["subagent_id"] == created["id"]
    added = [e for e in events if e["type"] == "agent.session.turn.item.added"
             and e["item"]["type"] == "function_call"]
    assert added[0]["turn_id"] == added[0]["item"]["turn_id"] == child[0]["turn_id"] != action.turn_id
    # the child's terminal event comes before the root's
    ends = [e["turn_id"] for e in events if e["type"] == "agent.session.turn.completed"]
    assert ends == [child[0]["turn_id"], action.turn_id]


def test_cancel_of_the_root_turn_ends_the_child_turn_cancelled_and_a_late_result_is_409(client, runtime):
    sessions = client.beta.agents.sessions
    session = session_with(client, "subagent call get_weather {}\nsay done")
    action = pending(client, session.id)
    subagent = only_subagent(client, session.id)
    child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
    sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "cancelled")
    assert sessions.subagents.turns.retrieve(child.id, session_id=session.id,
                                             subagent_id=subagent.id).status == "cancelled"
    for turn_id in (action.turn_id, child.id):
        conflict(lambda t=turn_id: sessions.events.create(session.id, events=[{**result(action), "turn_id": t}]),
                 "The Turn cannot accept this input in its current state.")
    assert sessions.retrieve(session.id).status == "idle"


def test_subagent_routes_answer_the_official_errors_and_write_nothing(client, runtime, stack):
    sessions = client.beta.agents.sessions
    session = session_with(client, "say hello")
    wait_for(lambda: sessions.retrieve(session.id).status == "idle")
    assert sessions.subagents.list(session.id).data == []
    not_found(lambda: sessions.subagents.retrieve("subagent_missing", session_id=session.id))
    not_found(lambda: sessions.subagents.list(session.id, after="subagent_missing"))
    not_found(lambda: sessions.subagents.turns.list("subagent_missing", session_id=session.id))
    not_found(lambda: sessions.subagents.items.list("subagent_missing", session_id=session.id))
    not_found(lambda: sessions.subagents.list("sess_missing"))
    root = sessions.turns.list(session.id).data[0]
    not_found(lambda: sessions.subagents.turns.retrieve(root.id, session_id=session.id, subagent_id="subagent_x"))
    with pytest.raises(openai.BadRequestError) as err:
        sessions.subagents.list(session.id, limit=0)
    assert err.value.body["param"] == "limit"
    with pytest.raises(openai.BadRequestError) as err:
        sessions.subagents.list(session.id, order="sideways")  # type: ignore[arg-type]
    assert err.value.body["param"] == "order"


# ---- the Runtime protocol, by hand ---------------------------------------------------------------

@pytest.fixture
def raw(stack):
    r = RawRuntime(stack)
    yield r
    r.drop()


def opened_turn(client, raw, stack):
    session = session_with(client, "sleep 30")
    route = raw.start()
    return session, route


def acked(raw, turn_id, seq):
    wait_for(lambda: any(f.get("type") == "turn.ack" and f["turn_id"] == turn_id and f["seq"] >= seq
                         for f in raw.frames))


def test_observations_are_idempotent_under_redelivery_and_out_of_order_delivery(client, raw, stack):
    session, route = opened_turn(client, raw, stack)
    first = {"action": "turn.subagent.opened", **route, "seq": 1, "subagent_id": "thread-c", "name": "worker"}
    started = {"action": "turn.subagent.turn.started", **route, "seq": 2, "subagent_id": "thread-c",
               "child_turn_id": "ct-1"}
    message = {"action": "turn.item.added", **route, "seq": 3, "child_turn_id": "ct-1",
               "item": {"id": "m1", "type": "message", "role": "assistant", "status": "completed",
                        "phase": "final_answer", "content": [{"type": "output_text", "text": "hi"}]}}
    for frame in (message, started, first, first, message, started):  # out of order, then again
        raw.send(frame)
    acked(raw, route["turn_id"], 3)
    kinds = [e["type"] for e in events_of(stack, session.id)]
    assert kinds.count("agent.session.subagent.created") == 1
    subagent = client.beta.agents.sessions.subagents.list(session.id).data
    assert len(subagent) == 1
    items = client.beta.agents.sessions.subagents.items.list(subagent[0].id, session_id=session.id).data
    assert len(items) == 1 and items[0].content[0].text == "hi"
    assert raw.errors(route["turn_id"]) == []


def test_resume_nesting_and_a_root_turn_that_ends_first(client, raw, stack):
    sessions = client.beta.agents.sessions
    session, route = opened_turn(client, raw, stack)
    raw.seq[route["turn_id"]] = 0
    raw.observe(route, "turn.subagent.opened", subagent_id="a")
    raw.observe(route, "turn.subagent.opened", subagent_id="a")  # already open: no effect
    raw.observe(route, "turn.subagent.opened", subagent_id="b", parent_subagent_id="a", instructions=None)
    raw.observe(route, "turn.subagent.closed", subagent_id="a")
    raw.observe(route, "turn.subagent.closed", subagent_id="a")  # already closed: no effect
    raw.observe(route, "turn.subagent.opened", subagent_id="a")  # resumed
    raw.observe(route, "turn.subagent.turn.started", subagent_id="b", child_turn_id="b-1")
    seq = raw.observe(route, "turn.completed")  # the Runtime left b's turn open
    acked(raw, route["turn_id"], seq)
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed")
    kinds = [e["type"] for e in events_of(stack, session.id) if e["type"].startswith("agent.session.subagent.")]
    assert kinds == ["agent.session.subagent.created", "agent.session.subagent.created",
                     "agent.session.subagent.closed", "agent.session.subagent.active"]
    a, b = sessions.subagents.list(session.id, order="asc").data
    assert (a.status, a.closed_at, b.parent_agent_id, b.instructions) == ("active", None, a.id, None)
    child = sessions.subagents.turns.list(b.id, session_id=session.id).data[0]
    assert child.status == "cancelled"  # ended with its root Turn
    assert raw.errors(route["turn_id"]) == []


@pytest.mark.parametrize("observation, param", [
    ({"action": "turn.subagent.turn.started", "subagent_id": "nobody", "child_turn_id": "x"}, "subagent_id"),
    ({"action": "turn.subagent.closed", "subagent_id": "nobody"}, "subagent_id"),
    ({"action": "turn.subagent.opened", "subagent_id": "c", "parent_subagent_id": "nobody"}, "parent_subagent_id"),
    ({"action": "turn.subagent.opened", "subagent_id": ""}, "subagent_id"),
    ({"action": "turn.subagent.turn.ended", "child_turn_id": "never", "status": "completed"}, "child_turn_id"),
    ({"action": "turn.item.added", "child_turn_id": "never", "item": {
        "id": "m", "type": "message", "role": "assistant", "status": "in_progress", "content": []}}, "child_turn_id"),
], ids=["turn of an unknown subagent", "close of an unknown subagent", "unknown parent", "empty id",
        "end of an unknown child turn", "item of an unknown child turn"])
def test_an_observation_about_an_unknown_subagent_or_child_turn_gets_an_error_frame_naming_the_field(
        client, raw, stack, observation, param):
    session, route = opened_turn(client, raw, stack)
    raw.observe(route, observation["action"], **{k: v for k, v in observation.items() if k != "action"})
    frame = wait_for(lambda: raw.errors(route["turn_id"]))[0]
    assert frame["error"]["param"] == param and frame["error"]["type"] == "invalid_request_error"
    assert client.beta.agents.sessions.subagents.list(session.id).data == [] or param != "subagent_id"
    assert turn_status(client, session.id, route["turn_id"]) == "in_progress"


def test_a_call_from_an_unknown_child_turn_fails_the_turn(client, raw, stack):
    session, route = opened_turn(client, raw, stack)
    raw.observe(route, "turn.function_call", call_id="c1", name="get_weather", arguments={}, child_turn_id="ghost")
    assert wait_for(lambda: raw.errors(route["turn_id"]))[0]["error"]["param"] == "child_turn_id"
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "failed", timeout=HEARTBEAT_SECONDS * 5)


def test_a_child_item_finished_in_a_later_message_stays_the_childs_and_its_deltas_name_the_child_turn(
        client, raw, stack):
    schema = {"type": "json_schema", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}
    session = session_with(client, "sleep 30", agent={"text": {"format": schema}})
    route = raw.start()
    raw.observe(route, "turn.subagent.opened", subagent_id="c")
    raw.observe(route, "turn.subagent.turn.started", subagent_id="c", child_turn_id="c-1")
    raw.observe(route, "turn.item.added", child_turn_id="c-1", item={
        "id": "m1", "type": "message", "role": "assistant", "status": "in_progress", "phase": "final_answer",
        "content": []})
    raw.observe(route, "turn.output_text.delta", item_id="m1", content_index=0, delta="hel")
    seq = raw.observe(route, "turn.item.done", item={  # no child_turn_id: the Item is known as the child's
        "id": "m1", "type": "message", "role": "assistant", "status": "completed", "phase": "final_answer",
        "content": [{"type": "output_text", "text": "hello"}]})
    acked(raw, route["turn_id"], seq)
    subagent = client.beta.agents.sessions.subagents.list(session.id).data[0]
    child = client.beta.agents.sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
    items = client.beta.agents.sessions.subagents.items.list(subagent.id, session_id=session.id).data
    assert [(i.turn_id, i.status, i.content[0].text) for i in items] == [(child.id, "completed", "hello")]
    assert client.beta.agents.sessions.items.list(session.id).data[0].role == "user"  # root-only
    events = events_of(stack, session.id)
    parts = [e for e in events if e["type"].startswith(("agent.session.turn.output_text", "agent.session.turn.content_part",
                                                        "agent.session.turn.item"))]
    assert {e["turn_id"] for e in parts if e.get("item", {}).get("role") != "user"} == {child.id}
    seq = raw.observe(route, "turn.completed")
    acked(raw, route["turn_id"], seq)
    # The root's structured output needs the root's own final answer: a child's is not it.
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) in ("completed", "failed"))
    assert turn_status(client, session.id, route["turn_id"]) == "failed"


def test_a_subagent_stays_active_across_root_turns_and_runs_a_child_turn_in_the_next_one(client, raw, stack):
    sessions = client.beta.agents.sessions
    session, first = opened_turn(client, raw, stack)
    raw.observe(first, "turn.subagent.opened", subagent_id="worker", name="worker")
    acked(raw, first["turn_id"], raw.observe(first, "turn.completed"))
    wait_for(lambda: sessions.retrieve(session.id).status == "idle")
    sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "sleep 30"}]}]}])
    second = raw.start()
    raw.observe(second, "turn.subagent.turn.started", subagent_id="worker", child_turn_id="w-2")
    raw.observe(second, "turn.subagent.turn.ended", child_turn_id="w-2", status="failed")
    acked(raw, second["turn_id"], raw.observe(second, "turn.subagent.closed", subagent_id="worker"))
    subagent = sessions.subagents.list(session.id).data[0]
    assert (subagent.name, subagent.status) == ("worker", "closed")
    child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data
    assert [(t.status, t.error.code if t.error else None) for t in child] == [("failed", "internal_error")]
    assert len(sessions.turns.list(session.id).data) == 2 and raw.errors() == []


def test_an_id_longer_than_any_core_assigns_is_a_404(client, runtime):
    sessions = client.beta.agents.sessions
    session = session_with(client, "say hello")
    wait_for(lambda: sessions.retrieve(session.id).status == "idle")
    long = "x" * 1500  # DynamoDB refuses a sort key over 1024 bytes: never sent to it
    for call in (lambda: sessions.subagents.retrieve(long, session_id=session.id),
                 lambda: sessions.subagents.list(session.id, after=long),
                 lambda: sessions.subagents.turns.list(long, session_id=session.id),
                 lambda: sessions.subagents.turns.retrieve(long, session_id=session.id, subagent_id="subagent_x")):
        not_found(call)
