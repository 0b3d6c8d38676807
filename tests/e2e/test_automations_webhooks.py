"""Issue 39 on the real local stack (`python -m local`, the session's shared stack and Runtime), with nothing but
the official SDK: a `once` automation a few seconds ahead produces its Session when its EventBridge Scheduler
schedule fires (the local scheduler: croniter, the stack's own thread), and a webhook endpoint on a loopback
receiver gets that Session's events through the outbox, the delivery queue and its consumer, each verified by
`client.webhooks.unwrap` with the endpoint's secret; and a periodic automation every minute in a non-UTC time
zone, with pause, resume, a manual invocation, an existing_session steer and a failed target (the stack runs the
schedules of SCHEDULES_TENANT's automations at once when created or resumed: tests/e2e/conftest.py)."""

import datetime as dt
import time
from zoneinfo import ZoneInfo

import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import SCHEDULES_TENANT, tenant_client
from tests.integration.test_webhooks import Receiver


def test_a_once_automation_fires_and_its_session_is_pushed_signed(client):
    receiver = Receiver()
    try:
        endpoint = client.webhooks.create(name="e2e", url=receiver.url,
                                          event_types=["agent.session.created", "agent.session.idle"])
        client.beta.agents.automations.list(limit=1)  # the automations function loaded: run_at stays ahead
        run_at = int(time.time()) + 2
        automation = client.beta.agents.automations.create(
            type="once", name="soon", run_at=run_at,
            target={"type": "new_session", "environment": {"type": "none"}, "agent": {"model": "gpt-5"},
                    "input": [{"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": "say Woke up."}]}]})
        invocation = wait_for(lambda: next((i for i in client.beta.agents.automations.invocations.list(
            automation.id).data if i.status == "completed"), None), timeout=30, interval=0.2)
        assert invocation.scheduled_at == run_at and invocation.source.type == "automation"
        assert client.beta.agents.automations.retrieve(automation.id).status == "completed"
        session_id = invocation.session_id

        def pushed():
            events = receiver.events(client, endpoint.signing_secret)
            return {e.type for e in events if e.data.id == session_id} >= {"agent.session.created",
                                                                            "agent.session.idle"}

        wait_for(pushed, timeout=30, interval=0.2)
        assert client.beta.agents.sessions.retrieve(session_id).status == "idle"
    finally:
        receiver.server.shutdown()


@pytest.fixture(scope="module")
def schedules_client(local_stack, runtime_process):
    """The tenant whose schedules the shared stack runs at once when created or resumed (SCHEDULES_TENANT)."""
    return tenant_client(local_stack, SCHEDULES_TENANT)


def _scheduled(client, automation_id, status="completed"):
    return [i for i in client.beta.agents.automations.invocations.list(automation_id, order="asc").data
            if i.source.type == "automation" and i.status == status]


def _assistant_texts(client, session_id):
    return [i.content[0].text for i in client.beta.agents.sessions.items.list(session_id, order="asc")
            if i.type == "message" and i.role == "assistant"]


def test_a_periodic_automation_every_minute_in_kolkata_pauses_resumes_steers_and_pauses_on_a_failed_target(
        schedules_client):
    """Issue 39's periodic flow on the real stack, SDK only: every minute of the current and the next hour in
    Asia/Kolkata (UTC+5:30, so a runner reading the expression in UTC would find no occurrence within the
    hour); its occurrence makes its Session; invocations.create delivers at once; paused, it gets no occurrence
    while another automation's does; resumed, it gets its next one; an existing_session automation steers the
    running Turn of its Session; a failed target Session pauses its automation with target_session_failed."""
    client = schedules_client
    kolkata = ZoneInfo("Asia/Kolkata")
    hour = dt.datetime.now(kolkata).hour
    every_minute = f"* {hour},{(hour + 1) % 24} * * *"
    automations = client.beta.agents.automations
    made = []

    def periodic(name, target):
        made.append(automations.create(type="periodic", name=name, expression=every_minute, timezone="Asia/Kolkata",
                                       target=target))
        return made[-1]

    try:
        ticking = periodic("tick", {"type": "new_session", "environment": {"type": "none"},
                                    "agent": {"model": "gpt-5"}, "input": [{"type": "message", "role": "user", "content": [
                                        {"type": "input_text", "text": "say Tick."}]}]})
        first = wait_for(lambda: _scheduled(client, ticking.id), timeout=30, interval=0.2)[0]
        occurred = dt.datetime.fromtimestamp(first.scheduled_at, kolkata)
        assert occurred.second == 0 and occurred.hour in (hour, (hour + 1) % 24)
        assert ticking.created_at < first.scheduled_at <= ticking.created_at + 61  # its next minute, in Kolkata
        assert first.source.automation.timezone == "Asia/Kolkata" and first.session_id.startswith("sess_")
        wait_for(lambda: client.beta.agents.sessions.retrieve(first.session_id).status == "idle", timeout=30)
        assert _assistant_texts(client, first.session_id) == ["Tick."]

        manual = automations.invocations.create(ticking.id)  # delivered at once, the schedule unchanged
        assert (manual.status, manual.source.type, manual.scheduled_at) == ("completed", "manual", None)
        assert manual.session_id not in (None, first.session_id)

        assert automations.pause(ticking.id).status == "paused"
        before = len(_scheduled(client, ticking.id))

        # Another automation steers the running Turn of its Session (which waits for input); its occurrence is
        # also a tick of the scheduler after the pause.
        waiting = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"},
                                                     input="wait 60")
        wait_for(lambda: client.beta.agents.sessions.turns.list(waiting.id).data[0].status == "in_progress",
                 timeout=30, interval=0.2)
        steering = periodic("steer", {"type": "existing_session", "session_id": waiting.id,
                                      "instructions": "say Steered by the automation."})
        delivered = wait_for(lambda: _scheduled(client, steering.id), timeout=30, interval=0.2)[0]
        assert delivered.session_id == waiting.id
        wait_for(lambda: client.beta.agents.sessions.retrieve(waiting.id).status == "idle", timeout=30)
        assert len(client.beta.agents.sessions.turns.list(waiting.id).data) == 1  # a steer, not a new Turn
        assert _assistant_texts(client, waiting.id) == ["Steered by the automation."]
        assert len(_scheduled(client, ticking.id)) == before  # paused: no occurrence delivered

        assert automations.resume(ticking.id).status == "active"
        resumed = wait_for(lambda: _scheduled(client, ticking.id)[before:], timeout=30, interval=0.2)[0]
        assert resumed.scheduled_at > first.scheduled_at and resumed.session_id not in (first.session_id,
                                                                                       manual.session_id)

        failed = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5"},
                                                    input="fail")
        wait_for(lambda: client.beta.agents.sessions.retrieve(failed.id).status == "failed", timeout=30)
        doomed = periodic("doomed", {"type": "existing_session", "session_id": failed.id, "instructions": "say Hi."})
        refused = wait_for(lambda: _scheduled(client, doomed.id, "failed"), timeout=30, interval=0.2)[0]
        assert refused.error.code == "target_session_failed"
        assert (automations.retrieve(doomed.id).status, automations.retrieve(doomed.id).pause_reason) == (
            "paused", "target_session_failed")
    finally:
        for automation in made:  # none keeps making Sessions for the rest of the run
            automations.delete(automation.id)
