"""The dashboard page in headless Chromium: a Session's required action appears and disappears live
during a scripted Turn, and the Turn's state follows (Debian chromium driven by Playwright)."""

import shutil

import pytest

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FN = {"type": "function", "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {}}}


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (make test installs Debian's chromium as root)")
def test_dashboard_shows_required_action_appear_and_disappear(client, local_stack):
    from playwright.sync_api import sync_playwright

    session = client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/work"}, agent={"model": "gpt-5", "tools": [FN]},
        extra_body={"x_agents_core": {"harness": "scripted"}})
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        page = browser.new_page()
        page.goto(local_stack["dashboard_url"])
        page.fill("#base", local_stack["base_url"])
        page.fill("#key", local_stack["api_key"])
        page.click("#connect")
        page.click(f"#sessions li[data-id='{session.id}']")
        page.wait_for_selector("body[data-live='1']", timeout=10_000)
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.message", "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "call get_weather {}\nsay done"}]}]}])
        action = page.wait_for_selector("#actions li.action", timeout=10_000)
        call_id = action.get_attribute("data-call-id")
        assert call_id and "get_weather" in action.inner_text()
        assert page.inner_text("#sstatus") == "requires_action"
        pending = client.beta.agents.sessions.retrieve(session.id).required_actions[0]
        assert pending.call_id == call_id
        client.beta.agents.sessions.events.create(session.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": pending.turn_id, "call_id": call_id,
            "success": True, "output": "ok"}])
        page.wait_for_selector("#actions li.action", state="detached", timeout=10_000)
        page.wait_for_selector("#turns li.turn[data-status='completed']", timeout=10_000)
        assert page.inner_text("#sstatus") == "idle"
        browser.close()
