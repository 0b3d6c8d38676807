"""A short Turn settles in the commit of its terminal observation: with no open call and no unfinished
Item there is nothing to close in bounded steps, so the Runtime gateway makes the same settlement the
Settle task would, and the Session is idle without waiting for the workflow. The workflow is told it
succeeded and ends with its Dispatch task (two state transitions: issue 36, item 5). A Turn with an
unfinished Item (or a long one) is left to the Settle task, which closes its Items first: the task
failure SettleNeeded enters it through Dispatch's first Catch, with the reported outcome."""

import json

from agents_core.store import unpack
from local import lambdas
from local.apigw import LambdaContext
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, result, session_with, status, turn_status
from tests.integration.test_workflow_retries import entered, failures, history


def succeeded(stack, turn_id):
    return wait_for(lambda: any(e["type"] == "ExecutionSucceeded" for e in history(stack, turn_id)) and
                    history(stack, turn_id), timeout=20)


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
    events = succeeded(stack, action.turn_id)  # the workflow was told, and ended with Dispatch
    assert entered(events) == ["Dispatch"] and failures(events) == []
    assert settles == []  # Settle never ran: two state transitions (the start and Dispatch)


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


def test_the_settle_task_runs_only_when_the_terminal_commit_left_something(client, stack, monkeypatch):
    """Given a Turn that ends with an unfinished Item, the gateway fails the task with SettleNeeded and the
    Settle task (not SettleLost) closes the Item and settles with the outcome the Runtime reported."""
    calls = []
    real = lambdas._handlers["SettleFunction"]
    monkeypatch.setitem(lambdas._handlers, "SettleFunction", lambda event, context: calls.append(event) or
                        real(event, context))
    raw = RawRuntime(stack)
    session = session_with(client, "say anything")
    route = raw.start()
    raw.observe(route, "turn.item.added", item={"id": "m1", "type": "message", "role": "assistant",
                                                 "content": [{"type": "output_text", "text": "half"}]})
    raw.observe(route, "turn.completed")
    events = succeeded(stack, route["turn_id"])
    assert entered(events) == ["Dispatch", "Settle"] and failures(events) == ["SettleNeeded"]
    assert [c["outcome"]["status"] for c in calls] == ["completed"] and not any(c.get("lost") for c in calls)
    assert turn_status(client, session.id, route["turn_id"]) == "completed"
    assert status(client, session.id) == "idle"


def test_dispatch_ends_the_execution_and_only_settle_needed_enters_settle():
    """What the ASL says: Dispatch is the last state of a settled Turn; its first Catch, before the one that
    fails the Turn (SettleLost), names the gateway's SettleNeeded and hands Settle the reported outcome."""
    from agents_core.runtimes.settlement import SETTLE_NEEDED
    from local import template

    machine = next(m for m in template.state_machines() if "Dispatch" in json.loads(m.definition)["States"])
    states = json.loads(machine.definition)["States"]
    dispatch = states["Dispatch"]
    assert dispatch.get("End") is True and "Next" not in dispatch
    first, rest = dispatch["Catch"][0], dispatch["Catch"][1:]
    assert first["ErrorEquals"] == [SETTLE_NEEDED] and first["Next"] == "Settle"
    assert [c["Next"] for c in rest] == ["SettleLost"]
    assert states["Settle"]["Parameters"]["Payload"]["outcome.$"] == f"States.StringToJson({first['ResultPath']}.Cause)"
