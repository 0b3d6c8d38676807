"""Issue 39 on the real local stack (`python -m local`, the session's shared stack and Runtime), with nothing but
the official SDK: a `once` automation a few seconds ahead produces its Session when its EventBridge Scheduler
schedule fires (the local scheduler: croniter, the stack's own thread), and a webhook endpoint on a loopback
receiver gets that Session's events through the outbox, the delivery queue and its consumer, each verified by
`client.webhooks.unwrap` with the endpoint's secret."""

import time

from local.inprocess import wait_for
from tests.integration.test_webhooks import Receiver


def test_a_once_automation_fires_and_its_session_is_pushed_signed(client):
    receiver = Receiver()
    try:
        endpoint = client.webhooks.create(name="e2e", url=receiver.url,
                                          event_types=["agent.session.created", "agent.session.idle"])
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
