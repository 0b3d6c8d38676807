"""A running Turn's live fields (status, last observation applied, output count, final answer) live on its Session
item while it runs (agents_core.draft.LIVE_FIELDS, issue 36: cost): the Runtime's function call and receipt commits
do not write the Turn item, yet every read shows the Turn as it stands, and its end brings them to the Turn item."""

import json

from agents_contract import jsonutil
from agents_core.running_turns import live_turn, live_turns
from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from runtime.capabilities import declarations
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import result, session_with


def raw_runtime(stack):
    received = []
    conn = stack.ws.connect(lambda text: received.append(json.loads(text)),
                            {"Authorization": f"Bearer {create_runtime_token(stack.store, 'raw')}"})
    stack.ws.message(conn, json.dumps({"action": "runtime.hello", "harnesses": declarations(["scripted"])}))
    return conn, received


def started_turn(client, stack):
    """A one-call Turn started on a raw Runtime: its connection, what it received, the Session, the Turn's route and
    the Turn item's key."""
    conn, received = raw_runtime(stack)
    session = session_with(client, "call get_weather {}\nsay done")
    start = wait_for(lambda: [m for m in received if m.get("type") == "turn.start"])[0]
    route = {k: start[k] for k in ("tenant", "session_id", "turn_id")}
    turn_key = {"PK": f"T#tenant-a#SESSION#{session.id}", "SK": f"TURN#{route['turn_id']}"}
    return conn, received, session, route, turn_key


def test_the_call_and_its_receipt_leave_the_turn_item_alone_and_reads_show_the_live_status(client, stack):
    conn, received, session, route, turn_key = started_turn(client, stack)
    session_key = {"PK": f"T#tenant-a#SESSION#{session.id}", "SK": "S"}

    def send(message):
        stack.ws.message(conn, json.dumps({**message, **route}))

    def turn_reads():
        retrieved = client.beta.agents.sessions.turns.retrieve(route["turn_id"], session_id=session.id).status
        listed = [t.status for t in client.beta.agents.sessions.turns.list(session.id).data]
        return retrieved, listed

    def active_turn():
        return jsonutil.loads(stack.store.get(session_key)["active_turn"])

    claimed = wait_for(lambda: (item := stack.store.get(turn_key)) and item.get("task_token") and item)
    assert turn_reads() == ("in_progress", ["in_progress"])

    send({"action": "turn.function_call", "seq": 1, "call_id": "call_1", "name": "get_weather", "arguments": {}})
    action = client.beta.agents.sessions.retrieve(session.id).required_actions[0]
    assert stack.store.get(turn_key) == claimed  # the call's commit did not write the Turn item
    assert turn_reads() == ("waiting", ["waiting"])
    assert {k: active_turn()[k] for k in ("status", "obs_seq", "outputs")} == {"status": "waiting", "obs_seq": 1,
                                                                                "outputs": 1}
    for read in (live_turn(stack.store, "tenant-a", session.id, route["turn_id"]),  # one instant
                 live_turns(stack.store, [tuple(route.values())])[(turn_key["PK"], turn_key["SK"])]):  # a batch
        assert (read["status"], read["obs_seq"], read["outputs"], jsonutil.loads(read["doc"])["status"]) == \
            ("waiting", 1, 1, "waiting")

    send({"action": "turn.heartbeat"})  # the task's heartbeat: the Turn outlives a slow machine's pauses
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
    wait_for(lambda: [m for m in received if m.get("type") == "turn.tool_result"])
    send({"action": "turn.tool_result.applied", "seq": 2, "call_id": "call_1"})
    assert stack.store.get(turn_key) == claimed  # nor did the receipt's commit
    assert turn_reads() == ("in_progress", ["in_progress"])
    assert (active_turn()["status"], active_turn()["obs_seq"]) == ("in_progress", 2)

    # A numbered heartbeat whose place was taken leaves no marker behind: its re-read sees the live obs_seq.
    send({"action": "turn.heartbeat", "seq": 2})
    assert not stack.store.query(pk=turn_key["PK"], sk_prefix=f"OBS#{route['turn_id']}#", limit=10,
                                 consistent=True).items

    answer = {"id": "m1", "type": "message", "role": "assistant", "phase": "final_answer", "status": "completed",
              "content": [{"type": "output_text", "text": "done"}]}
    stack.ws.message(conn, json.dumps({"action": "turn.batch", **route, "observations": [
        {"action": "turn.item.done", "seq": 3, "item": answer}, {"action": "turn.completed", "seq": 4}]}))
    assert turn_reads() == ("completed", ["completed"])
    ended = stack.store.get(turn_key)  # the end brings the live fields to the Turn item
    assert (ended["status"], int(ended["obs_seq"]), int(ended["outputs"]), ended["has_final_answer"]) == \
        ("completed", 4, 2, True)
    assert jsonutil.loads(ended["doc"])["status"] == "completed" and active_turn() is None
    acks = [m["seq"] for m in received if m.get("type") == "turn.ack"]
    assert acks[-1] == 4 and acks == sorted(acks)


def test_a_cancellation_while_waiting_brings_the_live_fields_to_the_turn_item(client, stack):
    conn, received, session, route, turn_key = started_turn(client, stack)
    stack.ws.message(conn, json.dumps({"action": "turn.function_call", **route, "seq": 1, "call_id": "call_1",
                                       "name": "get_weather", "arguments": {}}))
    assert client.beta.agents.sessions.turns.retrieve(route["turn_id"], session_id=session.id).status == "waiting"
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    item = stack.store.get(turn_key)  # the cancellation writes the Turn item, with what the Session kept
    assert (item["cancel_requested"], int(item["obs_seq"]), int(item["outputs"])) == (True, 1, 1)
    assert jsonutil.loads(item["doc"])["status"] == "waiting"  # until the Runtime confirms (or the wait ends)
    assert client.beta.agents.sessions.turns.retrieve(route["turn_id"], session_id=session.id).status == "waiting"
    stack.ws.message(conn, json.dumps({"action": "turn.cancelled", **route, "seq": 2}))
    wait_for(lambda: client.beta.agents.sessions.turns.retrieve(route["turn_id"], session_id=session.id).status
             == "cancelled")
    assert [t.status for t in client.beta.agents.sessions.turns.list(session.id).data] == ["cancelled"]
