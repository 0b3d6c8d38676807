"""Issue 25 end to end on the local stack: the official SDK over real HTTP and SSE, the reference Runtime as
its own process on the scripted harness, whose `subagent call` reports a real Subagent and child Turn.

"A function call made by a Subagent is a required action of the root Turn that runs the child ... Answer
it ... under that call_id and either the root Turn ID or the child Turn ID that the call's
agent.session.turn.item.added event names, which is what the official SDK sends."
"""

import openai
import pytest

from local.inprocess import wait_for
from tests.e2e.test_streaming import FN, SCRIPTED, idle_session

pytestmark = pytest.mark.e2e


def not_found(call):
    with pytest.raises(openai.NotFoundError) as err:
        call()
    assert err.value.body["message"] == "Resource not found."


def test_the_sdk_stream_helper_answers_a_subagent_call_and_the_subagent_routes_show_the_child(client):
    sessions = client.beta.agents.sessions
    session = idle_session(client, tools=[FN])
    seen, events = [], []
    with sessions.stream(session.id, input='subagent call get_weather {"city": "Oslo"}\nsay Cold.',
                         tool_handlers={"get_weather": lambda args: seen.append(args) or "cold"}) as stream:
        stream.with_result_collection()
        for event in stream:
            events.append(event)
            if event.type in ("agent.session.idle", "agent.session.failed"):
                break
        result = stream.get_final_result()
    assert seen == [{"city": "Oslo"}] and result.output_text == "Cold."

    created = [e.subagent for e in events if e.type == "agent.session.subagent.created"]
    closed = [e.subagent for e in events if e.type == "agent.session.subagent.closed"]
    assert len(created) == 1 and len(closed) == 1 and closed[0].id == created[0].id
    child_turns = [e.turn for e in events if e.type == "agent.session.turn.created" and e.turn.subagent_id]
    assert [t.subagent_id for t in child_turns] == [created[0].id]
    child_id, root_id = child_turns[0].id, result.turn_id
    call = [e for e in events if e.type == "agent.session.turn.item.added" and e.item.type == "function_call"]
    assert call[0].turn_id == call[0].item.turn_id == child_id != root_id  # the SSE item.added names the child

    subagent = sessions.subagents.retrieve(created[0].id, session_id=session.id)
    assert sessions.subagents.list(session.id).data == [subagent]
    assert (subagent.status, subagent.parent_agent_id, subagent.session_id) == ("closed", session.agent.id,
                                                                                 session.id)
    turn = sessions.subagents.turns.retrieve(child_id, session_id=session.id, subagent_id=subagent.id)
    assert sessions.subagents.turns.list(subagent.id, session_id=session.id).data == [turn]
    assert (turn.status, turn.subagent_id, turn.agent_id) == ("completed", subagent.id, session.agent.id)
    history = sessions.subagents.items.list(subagent.id, session_id=session.id, order="asc").data
    assert [(i.type, i.turn_id) for i in history] == [("function_call", child_id), ("function_call_output", child_id),
                                                      ("message", child_id)]
    assert history[0].call_id == history[1].call_id == call[0].item.call_id and history[1].output == "cold"
    assert sessions.subagents.turns.items.list(child_id, session_id=session.id, subagent_id=subagent.id,
                                               order="asc").data == history

    # Session Turns and Items stay root-only: the child Turn id is a 404 there, also as a cursor.
    assert [t.id for t in sessions.turns.list(session.id).data] == [root_id]
    assert {i.turn_id for i in sessions.items.list(session.id).data} == {root_id}
    not_found(lambda: sessions.turns.retrieve(child_id, session_id=session.id))
    not_found(lambda: sessions.turns.list(session.id, after=child_id))


def test_cancel_while_a_subagent_call_is_pending_abandons_it(client):
    sessions = client.beta.agents.sessions
    session = sessions.create(environment={"type": "none"}, agent={"model": "gpt-5", "tools": [FN]},
                              input="subagent call get_weather {}\nsay never", extra_body=SCRIPTED)
    action = wait_for(lambda: sessions.retrieve(session.id).required_actions)[0]
    subagent = wait_for(lambda: sessions.subagents.list(session.id).data)[0]
    child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
    assert action.turn_id != child.id and action.type == "function_call"
    sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: sessions.turns.retrieve(action.turn_id, session_id=session.id).status == "cancelled")
    assert sessions.subagents.turns.retrieve(child.id, session_id=session.id,
                                             subagent_id=subagent.id).status == "cancelled"
    assert sessions.subagents.retrieve(subagent.id, session_id=session.id).status == "closed"
    with pytest.raises(openai.ConflictError) as err:  # a late first result, under the child Turn id
        sessions.events.create(session.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": child.id, "call_id": action.call_id,
            "success": True, "output": "late"}])
    assert err.value.body["message"] == "The Turn cannot accept this input in its current state."
    assert sessions.retrieve(session.id).status == "idle"
