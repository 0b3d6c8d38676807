"""A short Turn settles in the commit of its terminal observation: with no open call and no unfinished
Item there is nothing to close in bounded steps, so the Runtime gateway makes the same settlement the
Settle task would, and the Session is idle without waiting for the workflow. The workflow is still
told, and its Settle task then finds the Turn settled. A Turn with an unfinished Item (or a long one)
is left to the Settle task, which closes its Items first."""

import json

from agents_core.store import unpack
from local import lambdas
from local.apigw import LambdaContext
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, result, session_with, status, turn_status


def without_settle(monkeypatch):
    calls = []
    monkeypatch.setitem(lambdas._handlers, "SettleFunction", lambda event, context: calls.append(event) or {})
    return calls


def test_a_turn_with_a_call_settles_in_its_completion_commit(client, runtime, stack, monkeypatch):
    settles = without_settle(monkeypatch)  # the workflow's Settle task does nothing here
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed", timeout=20)
    assert status(client, session.id) == "idle"
    assert not stack.store.query(pk=f"CONN#{runtime.connection_id}", sk_prefix="CLAIM#", limit=10,
                                 consistent=True).items  # the claim row went with the settlement
    wait_for(lambda: settles, timeout=20)  # the workflow was still told, and ran its Settle task
    assert settles[0]["outcome"]["status"] == "completed"


def test_settling_again_after_the_completion_commit_changes_nothing(client, runtime, stack):
    session = session_with(client, "say hello")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    wait_for(lambda: turn_status(client, session.id, turn_id) == "completed", timeout=20)
    out_seq = stack.store.get({"PK": f"T#tenant-a#SESSION#{session.id}", "SK": "S"})["out_seq"]
    settle = lambdas._handlers["SettleFunction"]
    event = {"tenant": "tenant-a", "session_id": session.id, "turn_id": turn_id, "outcome": {"status": "completed"}}
    assert settle(event, LambdaContext("settle"))["status"] == "completed"
    assert stack.store.get({"PK": f"T#tenant-a#SESSION#{session.id}", "SK": "S"})["out_seq"] == out_seq


def test_a_turn_ending_with_an_unfinished_item_is_left_to_the_settle_task(client, stack):
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    raw.observe(route, "turn.item.added", item={"id": "m1", "type": "message", "role": "assistant",
                                                 "content": [{"type": "output_text", "text": "half"}]})
    raw.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed", timeout=20)
    items = client.beta.agents.sessions.items.list(session.id, limit=10).data
    assert [i.status for i in items if i.type == "message" and i.role == "assistant"] == ["incomplete"]
    events = [e["type"] for i in stack.store.query(pk=f"T#tenant-a#SESSION#{session.id}", sk_prefix="OUT#",
                                                   limit=100, consistent=True).items
              for e in json.loads(unpack(i["events"]))]
    assert events.index("agent.session.turn.item.done") < events.index("agent.session.turn.completed")
