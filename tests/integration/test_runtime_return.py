"""Issue 35, item 3's loose end: an unplanned loss a Runtime instance comes back from (the same `instance`, within
the heartbeat bound) loses nothing. Its socket dies; whether or not `$disconnect` arrives, a result answered
meanwhile meets GoneException, which keeps the instance's claims (it does not forget them as a plain gone
connection's) and holds the delivery on the Turn's claim; the instance's next hello takes the Turn over and gets
the held result there, once."""

import pytest

from agents_core import keys
from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures
from tests.integration.test_turns import pending, session_with, turn_status

INSTANCE = "rti_test_instance_back"


def frames(raw, kind):
    return [f for f in raw.frames if f.get("type") == kind]


@pytest.mark.parametrize("disconnect", [True, False], ids=["disconnect-delivered", "disconnect-never"])
def test_a_result_answered_while_the_runtime_was_away_reaches_it_on_its_return_once(client, stack, monkeypatch,
                                                                                     disconnect):
    monkeypatch.setattr(stack.ws, "deliver_disconnect", disconnect)
    token = create_runtime_token(stack.store, "returning")
    before = RawRuntime(stack, token=token, instance=INSTANCE)
    session = session_with(client, "anything")
    route = before.start()
    before.observe(route, "turn.function_call", call_id="c1", name="get_weather", arguments={})
    action = pending(client, session.id)
    gone = before.conn
    before.drop()  # the socket dies (a network cut): no goodbye
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": "sunny"}])
    # the outbox's delivery met the gone connection: held on the claim (posted nowhere yet)
    wait_for(lambda: any(c.get("held") for c in stack.store.query(**keys.claims_of_connection(gone), limit=10).items),
             timeout=15)
    back = RawRuntime(stack, token=token, instance=INSTANCE)  # the same process, back within the bound
    welcome = wait_for(lambda: frames(back, "runtime.welcome"))[-1]
    assert welcome["resumed_turns"] == [route["turn_id"]]
    back.routes[route["turn_id"]] = route
    back.seq[route["turn_id"]] = before.seq[route["turn_id"]]
    delivered = wait_for(lambda: frames(back, "turn.tool_result"), timeout=10)
    assert {f["call_id"] for f in delivered} == {"c1"} and len({f["delivery_id"] for f in delivered}) == 1
    back.observe(route, "turn.tool_result.applied", call_id="c1")
    back.observe(route, "turn.item.added", item={"id": "m1", "type": "message", "role": "assistant",
                                                  "phase": "final_answer", "status": "completed",
                                                  "content": [{"type": "output_text", "text": "sunny it is"}]})
    back.observe(route, "turn.completed")
    wait_for(lambda: turn_status(client, session.id, route["turn_id"]) == "completed", timeout=15)
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"

