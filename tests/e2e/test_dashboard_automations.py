"""The dashboard's Automations tab (issue 39, item 6) in headless Chromium on the local stack: a Session's
automations with their latest invocations, and the webhook endpoints with their latest deliveries."""

from __future__ import annotations

import pytest

from tests.e2e.test_dashboard import (  # noqa: F401 - fixtures
    CONTRAST,
    browser,
    idle_session,
    needs_chromium,
    open_session,
    page,
    wait_for,
)
from tests.integration.test_webhooks import Receiver

pytestmark = pytest.mark.e2e


@needs_chromium
def test_the_automations_tab_shows_the_sessions_automations_and_the_webhook_deliveries(client, page, local_stack):
    from playwright.sync_api import expect

    receiver = Receiver()
    try:
        endpoint = client.webhooks.create(name="dashboard hook", url=receiver.url, event_types=["agent.session.idle"])
        session = idle_session(client)
        automation = client.beta.agents.automations.create(
            type="periodic", name="nightly check", expression="0 3 * * *", timezone="Europe/Paris",
            target={"type": "existing_session", "session_id": session.id, "instructions": "say checked"})
        client.beta.agents.automations.invocations.create(automation.id)
        wait_for(lambda: any(e.data.id == session.id for e in receiver.events(client, endpoint.signing_secret)),
                 timeout=30)  # through the outbox stream, the delivery queue and its consumer
        # its record is written once the 200 is back, a moment after the receiver has the request; the page reads
        # deliveries once (they are not live events)
        wait_for(lambda: any(d["status"] == "delivered" for d in client.get(
            f"/webhook_endpoints/{endpoint.id}/deliveries", cast_to=object)["data"]), timeout=30)
        open_session(page, local_stack, session.id)
        expect(page.locator(".item[data-phase=final_answer] .text").first).to_have_text("ready")
        page.click("#tab-automations")
        row = page.locator(f"#automation-list tr[data-automation-id={automation.id}]")
        expect(row).to_contain_text("nightly check")
        expect(row).to_contain_text("0 3 * * * (Europe/Paris)")
        expect(row.locator(".invocation[data-status=completed]")).to_have_count(1)
        hook = page.locator(f"#webhook-list tr[data-endpoint-id={endpoint.id}]")
        expect(hook).to_contain_text(receiver.url)
        expect(hook.locator(".delivery[data-status=delivered]").first).to_contain_text("agent.session.idle")
        page.click("#automations-refresh")  # read again on demand (automations and deliveries are not live events)
        expect(row.locator(".invocation")).to_have_count(1)
        result = page.evaluate(CONTRAST)
        assert result["checked"] > 10 and not result["failures"], result
    finally:
        receiver.server.shutdown()
