"""Issue 14, the cases that need a running Turn: the whole system in one process (real handlers,
moto executing the Turn ASL, the stream poller, the reference scripted Runtime), driven with the
official SDK (strict response validation)."""

import json

import openai
import pytest

from agents_contract import limits
from local.inprocess import wait_for
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures

FN = {"type": "function", "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {}}}
CANCEL = {"type": "agent.session.input.cancel"}


def session_with(client, script):
    return client.beta.agents.sessions.create(environment={"type": "none"}, input=script,
                                              agent={"model": "gpt-5", "tools": [FN]},
                                              extra_body={"x_agents_core": {"harness": "scripted"}})


def idle_session(client):
    return client.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/w"},
                                              agent={"model": "gpt-5", "tools": [FN]},
                                              extra_body={"x_agents_core": {"harness": "scripted"}})


def message(text):
    return {"type": "agent.session.input.message",
            "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}


def result(action, **extra):
    return {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, **extra}


def pending(client, session_id):
    return wait_for(lambda: client.beta.agents.sessions.retrieve(session_id).required_actions)[0]


def turn_status(client, session_id, turn_id):
    return client.beta.agents.sessions.turns.retrieve(turn_id, session_id=session_id).status


def written_by_input(stack):
    """Every row a batch could write (Session, calls, Items, outbox, idempotency keys), as stored.
    Turn rows are left out: the Runtime's heartbeats keep touching them while a Turn waits."""
    items = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return sorted(json.dumps(i, sort_keys=True, default=bytes.hex) for i in items  # packed (B) values as hex
                  if i["SK"]["S"] == "S" or i["SK"]["S"].split("#")[0] in ("CALL", "ITEM", "OUT", "I")
                  or "#IDEM#" in i["PK"]["S"])


def rejected(call, stack, status, message):
    before = written_by_input(stack)
    with pytest.raises(openai.APIStatusError) as err:
        call()
    assert err.value.status_code == status and err.value.body["message"] == message
    assert err.value.response.headers["x-should-retry"] == "false"
    assert written_by_input(stack) == before
    return err.value.body


# ---- 1. a batch may mix event types; it applies in order and is atomic ---------------------------

def test_a_result_then_a_cancel_in_one_batch_admits_the_result_and_cancels(client, runtime):
    session = session_with(client, "call get_weather {}\nwait 30\nsay never")
    action = pending(client, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny"), CANCEL])
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "cancelled")
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"
    # The result was admitted before the cancel: an identical retry is accepted, a different one is not.
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
    with pytest.raises(openai.ConflictError) as err:
        client.beta.agents.sessions.events.create(session.id, events=[result(action, output="rain")])
    assert err.value.body["message"] == "The tool call already has a different result."


def test_a_cancel_then_a_result_in_one_batch_is_a_result_after_cancellation(client, runtime, stack):
    session = session_with(client, "call get_weather {}\nsay never")
    action = pending(client, session.id)
    body = rejected(lambda: client.beta.agents.sessions.events.create(
        session.id, events=[CANCEL, result(action, output="sunny")]), stack, 409,
        "The Turn cannot accept this input in its current state.")
    assert body["type"] == "conflict_error"
    # Rejected whole: the cancel did not happen either, so the call is still a required action.
    assert [a.call_id for a in client.beta.agents.sessions.retrieve(session.id).required_actions] == [action.call_id]
    client.beta.agents.sessions.events.create(session.id, events=[result(action, output="sunny")])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")


def test_a_message_then_a_cancel_on_an_idle_session_cancels_the_new_turn(client, stack):
    session = idle_session(client)
    client.beta.agents.sessions.events.create(session.id, events=[message("say hi"), CANCEL])
    turns = client.beta.agents.sessions.turns.list(session.id).data
    assert [t.status for t in turns] == ["cancelled"]
    after = client.beta.agents.sessions.retrieve(session.id)
    assert after.status == "idle" and after.required_actions == []
    items = client.beta.agents.sessions.items.list(session.id).data
    assert [(i.type, i.content[0].text) for i in items] == [("message", "say hi")]
    queued = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    assert not [i for i in queued if i.get("GSI1PK", {}).get("S", "").startswith("QUEUE#")]  # not left queued
    # The Session takes the next message as a new Turn.
    client.beta.agents.sessions.events.create(session.id, events=[CANCEL, message("say again"), message("say more")])
    turns = client.beta.agents.sessions.turns.list(session.id, order="asc").data
    assert [t.status for t in turns] == ["cancelled", "queued"]
    assert len(client.beta.agents.sessions.turns.items.list(turns[1].id, session_id=session.id).data) == 2


# ---- 8. an Idempotency-Key of a batch that wrote nothing still names it ---------------------------

def test_the_key_of_an_identical_retry_that_wrote_nothing_names_that_batch(client, runtime, stack):
    session = session_with(client, "call get_weather {}\nwait 30\nsay done")
    action = pending(client, session.id)
    submit = client.beta.agents.sessions.events.create
    submit(session.id, events=[result(action, output="42")])  # admitted without a key
    wait_for(lambda: [i for i in client.beta.agents.sessions.items.list(session.id).data
                      if i.type == "function_call_output"])  # applied: the Turn now waits for input
    submit(session.id, events=[result(action, output="42")], extra_headers={"Idempotency-Key": "retry-1"})
    rejected(lambda: submit(session.id, events=[CANCEL], extra_headers={"Idempotency-Key": "retry-1"}), stack, 409,
             "This idempotency key was used with different input.")
    submit(session.id, events=[result(action, output="42")], extra_headers={"Idempotency-Key": "retry-1"})


# ---- 9. oversized tool results: a message about the result and a param naming it -----------------

def test_an_oversized_tool_result_is_a_400_naming_its_output(client, runtime, stack):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    submit = client.beta.agents.sessions.events.create
    big = "x" * (limits.MAX_BATCH_CONTENT_BYTES + 1)
    body = rejected(lambda: submit(session.id, events=[result(action, output=big)]), stack, 400,
                    f"The tool result is too large: the tool results and messages of one batch may hold at most "
                    f"{limits.MAX_BATCH_CONTENT_BYTES} bytes of JSON (a message counts twice); send it in its own "
                    "batch or make it smaller.")
    assert body["param"] == "events[0].output" and body["code"] == "invalid_request_error"
    body = rejected(lambda: submit(session.id, events=[result(action, success=False, error=big)]), stack, 400,
                    body["message"])
    assert body["param"] == "events[0].error"
    half = "y" * (limits.MAX_BATCH_CONTENT_BYTES // 2)
    body = rejected(lambda: submit(session.id, events=[message(half), result(action, output="ok")]), stack, 400,
                    body["message"].replace("The tool result", "The message"))
    assert body["param"] == "events[0].input"
    # A large result under the limit is admitted and reaches the Runtime.
    submit(session.id, events=[result(action, output="z" * 300_000)])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")


def test_an_image_that_can_never_be_an_image_is_a_400_and_the_call_stays_pending(client, runtime, stack):
    """Invalid content cannot consume a pending call: an image must be an http(s) URL or a base64 data URL."""
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    submit = client.beta.agents.sessions.events.create
    for url, reason in [("data:image/png;base64,@@@", "the data URL's base64 data is not valid"),
                        ("data:text/plain;base64,aGk=", "expected a base64 data URL of an image "
                                                         "(data:image/<type>;base64,...)"),
                        ("file:///etc/passwd", "expected an absolute http or https URL, or a base64 data URL")]:
        output = [{"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": url}]
        body = rejected(lambda output=output: submit(session.id, events=[result(action, output=output)]), stack, 400,
                        f"Invalid 'events[0].output[1].image_url': {reason}.")
        assert body["param"] == "events[0].output[1].image_url"
    body = rejected(lambda: submit(session.id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,@@@"}]}]}]), stack, 400,
        "Invalid 'events[0].input[0].content[0].image_url': the data URL's base64 data is not valid.")
    assert client.beta.agents.sessions.retrieve(session.id).required_actions[0].call_id == action.call_id
    submit(session.id, events=[result(action, output=[{"type": "input_image",
                                                       "image_url": "data:image/png;base64,iVBORw0KGgo="}])])
    wait_for(lambda: turn_status(client, session.id, action.turn_id) == "completed")


def test_an_empty_or_harness_blank_message_is_a_400_and_writes_nothing(client, runtime, stack, tmp_path):
    session = client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/workspace"}, agent={"model": "gpt-5"},
        extra_body={"x_agents_core": {"harness": "claude_code"}})
    submit = client.beta.agents.sessions.events.create
    blank = ("This Session's harness does not accept a message whose text is only whitespace. Include "
             "non-whitespace text or an image, or use a harness that supports whitespace-only text.")
    body = rejected(lambda: submit(session.id, events=[message(" \n\u3000")]), stack, 400, blank)
    assert body["code"] == "unsupported_or_invalid_configuration" and body["param"] is None
    body = rejected(lambda: submit(session.id, events=[message("")]), stack, 400,
                    "Invalid 'events[0].input[0].content': a message needs an image or a non-empty text part.")
    assert body["code"] == "invalid_request_error"
    from agents_core import environments

    token = environments.enroll(stack.store, "tenant-a", session.environment.id, None)["token"]
    stack.connect_runtime(token, ["claude_code"], workspace=str(tmp_path))
    submit(session.id, events=[message("say  fine ")])  # whitespace beside text: admitted as sent
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle")


# ---- 11. deleting a Session: running execution must be cancelled first ----------------------------

def test_deleting_a_session_with_running_execution_is_a_409_until_it_is_cancelled(client, runtime, stack):
    session = session_with(client, "call get_weather {}\nsay done")
    action = pending(client, session.id)
    rejected(lambda: client.beta.agents.sessions.delete(session.id), stack, 409,
             "The Session has running execution; cancel it first (an agent.session.input.cancel event), then "
             "delete the Session once it is idle.")
    client.beta.agents.sessions.events.create(session.id, events=[CANCEL])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle")
    assert client.beta.agents.sessions.delete(session.id).deleted
    rows = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    assert not [r for r in rows if session.id in r["PK"]["S"]]  # no orphan rows
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.retrieve(session.id)
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id)


def test_deleting_a_session_whose_turn_never_started_cancels_it_and_leaves_no_rows(client, stack):
    session = client.beta.agents.sessions.create(environment={"type": "none"}, input="say hi",
                                                 agent={"model": "gpt-5"},
                                                 extra_body={"x_agents_core": {"harness": "claude_code"}})
    assert client.beta.agents.sessions.turns.list(session.id).data[0].status == "queued"  # no Runtime
    assert client.beta.agents.sessions.delete(session.id).deleted
    rows = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    assert not [r for r in rows if session.id in r["PK"]["S"] or session.id in r.get("GSI1SK", {}).get("S", "")]
