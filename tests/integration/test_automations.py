"""Automations through the official SDK (client.beta.agents.automations), in process: the real handlers, moto's
DynamoDB, KMS and EventBridge Scheduler (one schedule per automation, checked as the automations function's IAM
allows), the local scheduler running an occurrence (`fire_next`) and the scripted Runtime running the Sessions."""

import json

import boto3
import openai
import pytest

from local import scheduler as local_scheduler
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures

ENV = {"type": "none"}
AGENT = {"model": "gpt-5", "instructions": "be brief"}


def user(text):
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]


def new_session(text="say Good morning.", **extra):
    return {"type": "new_session", "environment": ENV, "agent": AGENT, "input": user(text), **extra}


def periodic(client, target=None, expression="0 9 * * 1-5", timezone="Europe/Paris", **extra):
    return client.beta.agents.automations.create(type="periodic", name="morning", expression=expression,
                                                 timezone=timezone, target=target or new_session(), **extra)


def schedule(name):
    return boto3.client("scheduler", region_name="us-east-1").get_schedule(Name=name,
                                                                          GroupName=local_scheduler.GROUP)


def items_of(stack, prefix="T#tenant-a#AUTO"):
    out = stack.dynamodb.scan(TableName=stack.table, ConsistentRead=True)["Items"]
    return [i for i in out if i["PK"]["S"].startswith(prefix)]


def test_periodic_automation_crud_and_its_schedule(stack, client):
    created = periodic(client, metadata={"team": "core"})
    assert created.object == "agent.automation" and created.id.startswith("auto_")
    assert (created.type, created.status, created.pause_reason) == ("periodic", "active", None)
    assert (created.expression, created.timezone, created.created_by.type) == ("0 9 * * 1-5", "Europe/Paris",
                                                                               "developer")
    assert created.target.type == "new_session" and created.target.agent.model == "gpt-5"
    assert created.target.agent_id is None and created.target.environment.type == "none"
    # one schedule, in the automations' group, in the automation's time zone
    found = schedule(created.id)
    assert (found["ScheduleExpression"], found["ScheduleExpressionTimezone"], found["State"]) == (
        "cron(0 9 ? * 2-6 *)", "Europe/Paris", "ENABLED")
    assert json.loads(found["Target"]["Input"])["automation_id"] == created.id
    assert client.beta.agents.automations.retrieve(created.id) == created

    updated = client.beta.agents.automations.update(created.id, expression="30 7 * * *", timezone="Asia/Tokyo",
                                                    name="early", metadata={"team": "x"})
    assert (updated.expression, updated.timezone, updated.name, updated.metadata) == (
        "30 7 * * *", "Asia/Tokyo", "early", {"team": "x"})
    assert schedule(created.id)["ScheduleExpression"] == "cron(30 7 * * ? *)"

    paused = client.beta.agents.automations.pause(created.id)
    assert paused.status == "paused" and schedule(created.id)["State"] == "DISABLED"
    resumed = client.beta.agents.automations.resume(created.id)
    assert resumed.status == "active" and schedule(created.id)["State"] == "ENABLED"

    second = periodic(client)
    assert [a.id for a in client.beta.agents.automations.list(order="asc")] == [created.id, second.id]
    assert [a.id for a in client.beta.agents.automations.list(limit=1).data] == [second.id]

    deleted = client.beta.agents.automations.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (created.id, True, "agent.automation.deleted")
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.automations.retrieve(created.id)
    with pytest.raises(Exception, match="ResourceNotFound"):
        schedule(created.id)


def test_an_occurrence_creates_its_session_once_and_a_retry_creates_no_second(stack, client, runtime):
    automation = periodic(client, expression="* * * * *", timezone="America/New_York")
    occurrence = stack.scheduler.fire_next(automation.id)
    invocations = client.beta.agents.automations.invocations.list(automation.id).data
    assert len(invocations) == 1
    invocation = invocations[0]
    assert (invocation.status, invocation.scheduled_at, invocation.source.type) == (
        "completed", int(occurrence.timestamp()), "automation")
    assert invocation.source.automation.id == automation.id and invocation.session_id.startswith("sess_")
    session = wait_for(lambda: (s := client.beta.agents.sessions.retrieve(invocation.session_id)).status == "idle"
                       and s)
    assert session.agent.model == "gpt-5"
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(session.id, order="asc")
             if i.type == "message" and i.role == "assistant"]
    assert texts == ["Good morning."]

    # EventBridge Scheduler retries the same occurrence (at least once): the same invocation, no second Session
    handler = stack.handlers["AutomationsFunction"]
    payload = {"tenant": "tenant-a", "automation_id": automation.id,
               "scheduled_time": occurrence.strftime("%Y-%m-%dT%H:%M:%SZ")}
    from local.apigw import LambdaContext

    assert handler(payload, LambdaContext("AutomationsFunction"))["invocation_id"] == invocation.id
    assert len(client.beta.agents.automations.invocations.list(automation.id).data) == 1
    assert len(client.beta.agents.sessions.list().data) == 1
    assert client.beta.agents.automations.invocations.retrieve(invocation.id, automation_id=automation.id) \
        == invocation


def test_manual_invocation_and_existing_session_target(stack, client, runtime):
    target_session = client.beta.agents.sessions.create(environment=ENV, agent=AGENT, input="say Ready.")
    wait_for(lambda: client.beta.agents.sessions.retrieve(target_session.id).status == "idle")
    automation = periodic(client, target={"type": "existing_session", "session_id": target_session.id,
                                          "instructions": "say Checked in."})
    assert [a.id for a in client.beta.agents.automations.list(session_id=target_session.id)] == [automation.id]
    assert client.beta.agents.automations.list(session_id="sess_other").data == []
    invocation = client.beta.agents.automations.invocations.create(automation.id)
    assert (invocation.status, invocation.source.type, invocation.scheduled_at, invocation.session_id) == (
        "completed", "manual", None, target_session.id)
    wait_for(lambda: len(client.beta.agents.sessions.turns.list(target_session.id).data) == 2
             and client.beta.agents.sessions.retrieve(target_session.id).status == "idle")
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(target_session.id, order="asc")
             if i.type == "message" and i.role == "assistant"]
    assert texts == ["Ready.", "Checked in."]


def test_a_failed_target_session_pauses_the_automation(stack, client, runtime):
    target_session = client.beta.agents.sessions.create(environment=ENV, agent=AGENT, input="fail")
    wait_for(lambda: client.beta.agents.sessions.retrieve(target_session.id).status == "failed")
    automation = periodic(client, target={"type": "existing_session", "session_id": target_session.id,
                                          "instructions": "say Again."})
    stack.scheduler.fire_next(automation.id)
    invocation = client.beta.agents.automations.invocations.list(automation.id).data[0]
    assert invocation.status == "failed" and invocation.error.code == "target_session_failed"
    paused = client.beta.agents.automations.retrieve(automation.id)
    assert (paused.status, paused.pause_reason) == ("paused", "target_session_failed")
    assert schedule(automation.id)["State"] == "DISABLED"


def test_once_automation_runs_at_and_completes(stack, client, runtime):
    import time

    run_at = int(time.time()) + 3600
    automation = client.beta.agents.automations.create(type="once", name="later", run_at=run_at,
                                                       target=new_session("say Later."))
    assert automation.type == "once" and automation.run_at == run_at
    found = schedule(automation.id)
    assert found["ScheduleExpression"] == "at(" + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(run_at)) + ")"
    with pytest.raises(openai.BadRequestError, match="only accepted for periodic"):
        client.beta.agents.automations.update(automation.id, expression="* * * * *")
    assert stack.scheduler.fire_next(automation.id).timestamp() == run_at
    assert client.beta.agents.automations.retrieve(automation.id).status == "completed"
    invocation = client.beta.agents.automations.invocations.list(automation.id).data[0]
    assert invocation.status == "completed" and invocation.scheduled_at == run_at
    with pytest.raises(openai.BadRequestError, match="before the one-time scheduled invocation"):
        client.beta.agents.automations.update(automation.id, run_at=run_at + 60)


BAD_INPUT = [
    ({"type": "periodic", "name": "x", "expression": "* * * *", "timezone": "UTC", "target": new_session()},
     "expression", "has 4 fields"),
    ({"type": "periodic", "name": "x", "expression": "0 0 1 * 1", "timezone": "UTC", "target": new_session()},
     "expression", "restricts both day-of-month and day-of-week"),
    ({"type": "periodic", "name": "x", "expression": "* * * * *", "timezone": "Mars/Olympus",
      "target": new_session()}, "timezone", "IANA"),
    ({"type": "once", "name": "x", "run_at": 1000, "target": new_session()}, "run_at", "not in the future"),
    ({"type": "weekly", "name": "x", "target": new_session()}, "type", "Supported values"),
    ({"type": "periodic", "name": "", "expression": "* * * * *", "timezone": "UTC", "target": new_session()},
     "name", "at least 1"),
    ({"type": "periodic", "name": "x", "expression": "* * * * *", "timezone": "UTC", "target": new_session(),
      "created_by": {"type": "developer"}}, "created_by", "Unknown parameter"),
]


def test_bad_input_is_a_400_that_writes_nothing(stack, client):
    for body, param, message in BAD_INPUT:  # one stack for every case (each stack costs a second)
        with pytest.raises(openai.BadRequestError) as caught:
            client.post("/agents/automations", body=body, cast_to=object,
                        options={"headers": {"OpenAI-Beta": "agents=v1"}})
        assert caught.value.body["param"] == param and message in caught.value.body["message"], body
    assert items_of(stack) == []
    assert boto3.client("scheduler", region_name="us-east-1").list_schedules(
        GroupName=local_scheduler.GROUP)["Schedules"] == []


def test_a_new_session_target_is_admitted_as_sessions_create_admits_it(stack, client):
    bad_target = {"type": "new_session", "environment": ENV, "input": user("hi"),
                  "agent": {"model": "gpt-5", "tools": [{"type": "function", "name": "f"}]}}
    with pytest.raises(openai.BadRequestError) as as_automation:
        periodic(client, target=bad_target)
    with pytest.raises(openai.BadRequestError) as as_session:
        client.beta.agents.sessions.create(**{k: v for k, v in bad_target.items() if k != "type"})
    assert as_automation.value.body == as_session.value.body  # the same message and param
    with pytest.raises(openai.NotFoundError):
        periodic(client, target={"type": "new_session", "environment": ENV, "input": user("hi"),
                                 "agent_id": "agent_missing"})
    with pytest.raises(openai.NotFoundError):
        periodic(client, target={"type": "existing_session", "session_id": "sess_missing", "instructions": "x"})
    assert items_of(stack) == []


def test_confidential_target_parts_are_sealed_and_never_shown(stack, client):
    secret = "s3cr3t-env-value-9c1"
    target = new_session(environment={"type": "openai_hosted", "env": {"TOKEN": secret}})
    automation = periodic(client, target=target)  # the in-process stack admits hosted Environments
    assert secret not in automation.model_dump_json()
    assert secret not in json.dumps(items_of(stack), default=str)


def test_tenants_are_isolated(stack, client):
    from agents_core.apikeys import create_key

    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    automation = periodic(client)
    for call in (lambda: other.beta.agents.automations.retrieve(automation.id),
                 lambda: other.beta.agents.automations.update(automation.id, name="mine"),
                 lambda: other.beta.agents.automations.pause(automation.id),
                 lambda: other.beta.agents.automations.delete(automation.id),
                 lambda: other.beta.agents.automations.invocations.create(automation.id),
                 lambda: other.beta.agents.automations.invocations.list(automation.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert other.beta.agents.automations.list().data == []
    assert client.beta.agents.automations.retrieve(automation.id) == automation


def test_a_busy_delivery_is_retried_as_the_same_occurrence_and_makes_one_session(stack, client, runtime,
                                                                                 monkeypatch):
    """At least once: an occurrence refused for load (429) stays queued and raises, so EventBridge Scheduler
    retries it; the retry delivers that same invocation and its one Session. A manual run fails instead."""
    from agents_contract.errors import Unavailable
    from agents_core import sessions
    from local.apigw import LambdaContext

    automation = periodic(client, expression="*/5 * * * *", timezone="Europe/Berlin")
    real_create = sessions.create

    def busy(*args, **kwargs):
        raise Unavailable()

    monkeypatch.setattr(sessions, "create", busy)
    payload = {"tenant": "tenant-a", "automation_id": automation.id, "scheduled_time": "2030-01-01T10:05:00Z"}
    with pytest.raises(Exception, match="busy"):
        stack.handlers["AutomationsFunction"](payload, LambdaContext("AutomationsFunction"))
    [queued] = client.beta.agents.automations.invocations.list(automation.id).data
    assert queued.status == "queued" and queued.session_id is None
    manual = client.beta.agents.automations.invocations.create(automation.id)
    assert (manual.status, manual.skip_reason) == ("skipped", "pending_delivery")  # the occurrence is pending

    monkeypatch.setattr(sessions, "create", real_create)
    stack.handlers["AutomationsFunction"](payload, LambdaContext("AutomationsFunction"))
    done = client.beta.agents.automations.invocations.retrieve(queued.id, automation_id=automation.id)
    assert done.status == "completed" and done.session_id.startswith("sess_")
    assert [s.id for s in client.beta.agents.sessions.list()] == [done.session_id]
    monkeypatch.setattr(sessions, "create", busy)
    failed = client.beta.agents.automations.invocations.create(automation.id)
    assert failed.status == "failed" and failed.error.code == "rate_limit_exceeded"


def test_an_agent_schedules_its_own_wake_up_with_the_automations_tool(stack, client, runtime):
    """The `automations` Agent tool: Core serves the call (no required action), the automation targets the calling
    Session with created_by agent, and its occurrence wakes that Session. A native Harness cannot run it: 400."""
    script = ('call automations {"action": "create", "name": "wake", "expression": "*/30 * * * *", '
              '"timezone": "Asia/Tokyo", "instructions": "say Woke up."}\nsay Scheduled.')
    session = client.beta.agents.sessions.create(environment=ENV, agent={"model": "gpt-5",
                                                                         "tools": [{"type": "automations"}]},
                                                 input=script)
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle")
    [automation] = client.beta.agents.automations.list(session_id=session.id).data
    assert (automation.created_by.type, automation.created_by.session_id) == ("agent", session.id)
    assert automation.created_by.tool_call_id.startswith("call_")
    assert (automation.expression, automation.timezone, automation.target.type) == ("*/30 * * * *", "Asia/Tokyo",
                                                                                   "existing_session")
    items = list(client.beta.agents.sessions.items.list(session.id, order="asc"))
    output = next(i for i in items if i.type == "function_call_output")
    assert automation.id in str(output.output)
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []

    stack.scheduler.fire_next(automation.id)  # its occurrence wakes the Session: a second Turn
    wait_for(lambda: len(client.beta.agents.sessions.turns.list(session.id).data) == 2
             and client.beta.agents.sessions.retrieve(session.id).status == "idle")
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(session.id, order="asc")
             if i.type == "message" and i.role == "assistant"]
    assert texts == ["Scheduled.", "Woke up."]
    before = len(client.beta.agents.sessions.list().data)
    own = {"type": "function", "name": "automations", "description": "mine", "parameters": {"type": "object"}}
    with pytest.raises(openai.BadRequestError) as refused:  # a function of that name beside it: 400, nothing written
        client.beta.agents.sessions.create(environment=ENV, agent={"model": "gpt-5", "tools": [{"type": "automations"},
                                                                                            own]},
                                           input="hi", extra_body={"x_agents_core": {"harness": "codex"}})
    assert refused.value.body["message"] == "A function named 'automations' conflicts with the automations tool."
    assert len(client.beta.agents.sessions.list().data) == before
