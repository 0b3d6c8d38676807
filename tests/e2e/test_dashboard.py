"""The operator console (dashboard/index.html) in headless Chromium on the local stack (Debian chromium
driven by Playwright): deep links, answering a pending call through its form, the live Session list,
recovery after the WebSocket drops, sending and steering, cancelling, official error messages, a
workspace Session's Environment (its status, the connection action, Connect minting an enrollment whose
command connects the reference Runtime), and a fixed 1280x800 layout whose text passes WCAG AA
contrast. The page is never given a URL or a key: the local stack hands them over (`/local-stack.json`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

import pytest
from openai import OpenAI

from tests.e2e.conftest import BEAT, ROOT
from tests.e2e.test_streaming import other_tenant_key

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None,
                                    reason="no Chromium installed (make test installs Debian's chromium as root)")
FN = {"type": "function", "name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
WAIT_MS = 10_000


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (make test installs Debian's chromium as root)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, local_stack):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    # A route handler may still be fetching the stack's answer for a read the page made last: let it go
    # quietly, or its "response disposed" surfaces in the next test's setup.
    page.unroute_all(behavior="ignoreErrors")
    context.close()
    assert not errors, f"the page raised: {errors}"


@pytest.fixture
def tenant_page(browser, local_stack):
    """The page as another tenant's operator: the local stack hands over that tenant's key. The local
    stack connects the dev tenant's self_hosted Environments by itself (unless
    AGENTS_CORE_CONNECT_ENVIRONMENTS=0), never another tenant's: this one's stay offline until connected."""
    key = other_tenant_key(local_stack, "dashboard-operator")
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.route("**/local-stack.json", lambda route: route.fulfill(
        status=200, content_type="application/json", body=json.dumps({"base_url": local_stack["base_url"], "api_key": key})))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page, OpenAI(base_url=local_stack["base_url"], api_key=key, max_retries=0, _strict_response_validation=True)
    context.close()
    assert not errors, f"the page raised: {errors}"


def wait_for(predicate, timeout=WAIT_MS / 1000):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def pending_session(client, script):
    """A Session whose first Turn made a function call that now waits for a result."""
    session = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "gpt-5", "tools": [FN]},
                                                 input=script, extra_body={"x_agents_core": {"harness": "scripted"}})
    actions = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions)
    return session, actions[0]


def idle_session(client):
    """A Session whose first Turn said "ready" and ended. On `environment: none`, which the shared Runtime
    serves, so no Environment needs connecting (a self_hosted Session runs only on its own Environment)."""
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [FN]}, input="say ready",
        extra_body={"x_agents_core": {"harness": "scripted"}})
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle")
    return session


def workspace_session(client):
    return client.beta.agents.sessions.create(
        environment={"type": "self_hosted", "workspace_directory": "/workspace"}, agent={"model": "gpt-5"},
        extra_body={"x_agents_core": {"harness": "scripted"}})


def message(text):
    return {"type": "agent.session.input.message", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": text}]}]}


def enrollment_token(command: str) -> str:
    """The token of the enrollment command the dashboard shows (it travels in the environment)."""
    name, _, token = shlex.split(command)[0].partition("=")
    assert name == "AGENTS_CORE_ENROLLMENT_TOKEN"
    return token


def answer(client, session_id, action, output):
    client.beta.agents.sessions.events.create(session_id, events=[{
        "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
        "success": True, "output": output}])


def open_session(page, local_stack, session_id, turn_id=None):
    page.goto(local_stack["dashboard_url"] + f"#session={session_id}" + (f"&turn={turn_id}" if turn_id else ""))


@needs_chromium
def test_a_deep_link_opens_a_pending_call_and_answering_its_form_completes_the_turn(client, page, local_stack):
    from playwright.sync_api import expect

    session, action = pending_session(client, 'call get_weather {"city": "Paris"}\nsay It is sunny in Paris.')
    open_session(page, local_stack, session.id, action.turn_id)

    # Given the deep link: no settings were typed, the Session and its pending call are on screen
    expect(page.locator("#where")).to_contain_text("local stack")
    assert not page.locator("#settings").is_visible()
    expect(page.locator("#sid")).to_have_text(session.id)
    expect(page.locator("#sstatus")).to_have_text("requires_action")
    form = page.locator(f".action-form[data-call-id='{action.call_id}']")
    expect(form.locator(".fname")).to_have_text("get_weather")
    assert json.loads(form.locator(".args").inner_text()) == {"city": "Paris"}
    turn = page.locator(f".turn[data-turn-id='{action.turn_id}']")
    expect(turn).to_have_class(re.compile(r"\bfocused\b"))
    expect(turn).to_have_attribute("data-status", "waiting")  # as the API says: no Turn `waiting` event exists
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    page.evaluate("window.__sameDocument = true")

    # When the operator answers through the form
    form.locator("textarea").fill("sunny, 21 C")
    form.locator("button[type=submit]").click()

    # Then the Turn completes and the transcript shows the output and the final message, without a reload
    expect(turn).to_have_attribute("data-status", "completed")
    expect(turn.locator(".item[data-type=function_call_output] .output")).to_have_text("sunny, 21 C")
    expect(turn.locator(".item[data-type=message][data-phase=final_answer] .text")).to_have_text("It is sunny in Paris.")
    expect(page.locator("#sstatus")).to_have_text("idle")
    expect(form).to_have_count(0)
    assert page.evaluate("window.__sameDocument") is True
    outputs = [i for i in client.beta.agents.sessions.items.list(session.id, order="asc").data
               if i.type == "function_call_output"]
    assert [(o.call_id, o.output) for o in outputs] == [(action.call_id, "sunny, 21 C")]


@needs_chromium
def test_a_session_created_elsewhere_appears_in_the_list_and_its_status_follows(client, page, local_stack):
    from playwright.sync_api import expect

    page.goto(local_stack["dashboard_url"])
    expect(page.locator("#list-meta")).to_contain_text("Sessions shown")

    # When another client creates a Session
    session = idle_session(client)
    row = page.locator(f"#sessions li[data-id='{session.id}']")

    # Then it appears, and its status follows its Turn (requires_action, then idle)
    expect(row).to_have_attribute("data-status", "idle")
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": 'call get_weather {"city": "Rome"}\nsay done'}]}]}])
    expect(row).to_have_attribute("data-status", "requires_action")
    expect(row).to_contain_text("1 pending")

    # Filters and search narrow the list
    page.select_option("#status-filter", "requires_action")
    expect(row).to_have_count(1)
    page.fill("#search", session.id)
    expect(page.locator("#sessions li")).to_have_count(1)
    action = client.beta.agents.sessions.retrieve(session.id).required_actions[0]
    answer(client, session.id, action, "warm")
    expect(row).to_have_count(0)  # no longer requires_action
    page.select_option("#status-filter", "")
    expect(row).to_have_attribute("data-status", "idle")

    # A click opens it, and the URL becomes its deep link
    row.click()
    expect(page.locator("#sid")).to_have_text(session.id)
    assert f"session={session.id}" in page.url


@needs_chromium
def test_after_the_websocket_drops_and_returns_the_view_recovers_what_happened_meanwhile(client, page, local_stack):
    from playwright.sync_api import expect

    # The network between the browser and the stack's WebSocket API, under the test's control
    sockets, down = [], {"on": False}

    def route(ws):
        if down["on"]:
            ws.close(code=1011, reason="unreachable")
            return
        sockets.append(ws)
        ws.connect_to_server()

    page.route_web_socket(re.compile(r"^wss?://"), route)
    session, action = pending_session(client, 'call get_weather {"city": "Lima"}\nsay Lima is sunny.')
    open_session(page, local_stack, session.id)
    form = page.locator(f".action-form[data-call-id='{action.call_id}']")
    expect(form).to_have_count(1)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")

    # When the WebSocket drops and stays down while the Turn goes on elsewhere
    down["on"] = True
    for ws in sockets:
        ws.close(code=1001, reason="going away")
    expect(page.locator("#conn")).to_have_attribute("data-state", "reconnecting")
    expect(page.locator("#conn-text")).to_contain_text("Retrying in")
    answer(client, session.id, action, "sunny")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle")
    page.wait_for_timeout(300)
    expect(page.locator(".item[data-phase=final_answer]")).to_have_count(0)  # the page cannot know yet

    # A stale form answered with another result gets the official conflict message
    form.locator("textarea").fill("cloudy")
    form.locator("button[type=submit]").click()
    expect(form.locator(".form-error")).to_have_text("The tool call already has a different result.")

    # Then, when it returns, the page reconnects by itself and re-reads what it missed
    down["on"] = False
    expect(page.locator("#conn")).to_have_attribute("data-state", "live", timeout=15_000)
    turn = page.locator(f".turn[data-turn-id='{action.turn_id}']")
    expect(turn).to_have_attribute("data-status", "completed")
    expect(turn.locator(".item[data-type=function_call_output] .output")).to_have_text("sunny")
    expect(turn.locator(".item[data-phase=final_answer] .text")).to_have_text("Lima is sunny.")
    expect(page.locator("#sstatus")).to_have_text("idle")
    expect(form).to_have_count(0)

    # And it is live again: a new Turn started elsewhere shows up without a reload
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "say back online"}]}]}])
    expect(page.locator(".item[data-phase=final_answer] .text", has_text="back online")).to_have_count(1)


@needs_chromium
def test_the_composer_starts_and_steers_turns_and_cancel_ends_one(client, page, local_stack):
    from playwright.sync_api import expect

    session = idle_session(client)
    open_session(page, local_stack, session.id)
    expect(page.locator("#send")).to_have_text("Send")
    expect(page.locator("#cancel")).to_be_disabled()

    # Send starts a Turn; while it runs, the same box steers it
    page.fill("#message", "wait 20")
    page.click("#send")
    expect(page.locator("#send")).to_have_text("Steer")
    expect(page.locator(".turn").nth(1)).to_have_attribute("data-status", "in_progress")  # the Runtime runs it
    page.fill("#message", "say steered in")
    page.click("#send")
    steered = page.locator(".turn").nth(1)
    expect(steered.locator(".item[data-type=message][data-role=user]")).to_have_count(2)
    expect(steered.locator(".item[data-type=message][data-role=assistant] .text")).to_have_text("steered in")
    expect(steered).to_have_attribute("data-status", "completed")
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 2  # steering joined the running Turn

    # Cancel ends a Turn that waits for a result
    page.fill("#message", 'call get_weather {"city": "Oslo"}\nsay never')
    page.keyboard.press("Control+Enter")
    expect(page.locator(".action-form .fname")).to_have_text("get_weather")
    page.click("#cancel")
    expect(page.locator(".turn").nth(2)).to_have_attribute("data-status", "cancelled")
    expect(page.locator(".action-form")).to_have_count(0)
    expect(page.locator("#sstatus")).to_have_text("idle")
    assert page.locator(".item[data-phase=final_answer] .text", has_text="never").count() == 0

    # An empty message is refused before any request
    page.fill("#message", "")
    page.click("#send")
    expect(page.locator("#composer-status")).to_have_text("Type a message first.")


@needs_chromium
def test_elsewhere_the_page_asks_once_and_shows_the_official_error_for_a_wrong_key(browser, local_stack):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    # A deployed copy has no /local-stack.json
    page.route("**/local-stack.json", lambda r: r.fulfill(status=404, body="Not Found"))
    page.goto(local_stack["dashboard_url"])
    expect(page.locator("#settings")).to_be_visible()
    page.fill("#base", local_stack["base_url"])
    page.fill("#key", "sk-agents-wrong")
    page.click("#connect")
    expect(page.locator("#settings-error")).to_have_text(
        "Incorrect API key provided. Send 'Authorization: Bearer <your API key>'.")
    page.fill("#key", local_stack["api_key"])
    page.click("#connect")
    expect(page.locator("#settings")).to_be_hidden()
    expect(page.locator("#list-meta")).to_contain_text("Sessions shown")
    page.reload()  # once per browser session: a reload does not ask again
    expect(page.locator("#list-meta")).to_contain_text("Sessions shown")
    assert not page.locator("#settings").is_visible()
    expect(page.locator("#where")).to_contain_text("this browser session")
    context.close()


CONTRAST = """() => {
  const parse = (c) => { const p = (c.match(/rgba?\\(([^)]+)\\)/) || [, ""])[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
                         return p.length >= 3 ? { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 } : null; };
  const lum = ({ r, g, b }) => [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
                                    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  const background = (node) => { for (let n = node; n; n = n.parentElement) { const c = parse(getComputedStyle(n).backgroundColor);
                                  if (c && c.a > 0) return c; } return { r: 255, g: 255, b: 255, a: 1 }; };
  const failures = []; let checked = 0;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const text = walker.currentNode, node = text.parentElement;
    if (!text.textContent.trim() || !node || node.closest("script, style, option, [hidden], button:disabled")) continue;
    const box = node.getBoundingClientRect(), style = getComputedStyle(node);
    if (!box.width || !box.height || style.visibility === "hidden" || box.bottom < 0 || box.top > innerHeight) continue;
    const fg = lum(parse(style.color)), bg = lum(background(node));
    const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
    const size = parseFloat(style.fontSize), large = size >= 24 || (Number(style.fontWeight) >= 700 && size >= 18.66);
    checked++;
    if (ratio < (large ? 3 : 4.5)) failures.push(`${text.textContent.trim().slice(0, 30)}: ${ratio.toFixed(2)}`);
  }
  return { checked, failures };
}"""
BOXES = """() => Object.fromEntries(["#topbar", "#sidebar", "#session-head", "#tabs", "#composer"].map((s) => {
  const b = document.querySelector(s).getBoundingClientRect(); return [s, [b.x, b.y, b.width, b.height]]; }))"""


@needs_chromium
def test_the_layout_is_fixed_at_1280x800_and_its_text_passes_wcag_aa_contrast(client, page, local_stack):
    from playwright.sync_api import expect

    session = idle_session(client)
    open_session(page, local_stack, session.id)
    expect(page.locator(".item[data-phase=final_answer] .text")).to_have_text("ready")
    before = page.evaluate(BOXES)

    # When the transcript grows well past the screen and a call is pending
    script = "\n".join(f"say line {n} of a long transcript" for n in range(24)) + '\ncall get_weather {"city": "Nice"}'
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": script}]}]}])
    expect(page.locator(".action-form")).to_have_count(1)
    expect(page.locator(".item[data-type=message][data-role=assistant]")).to_have_count(25)

    # Then nothing outside the panes moved, only the panes scroll, and the page itself does not
    assert page.evaluate(BOXES) == before
    assert page.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]") == [1280, 800]
    assert page.evaluate("(() => { const t = document.getElementById('transcript'); return t.scrollHeight > t.clientHeight; })()")
    for tab in ("#tab-transcript", "#tab-events", "#tab-config"):
        page.click(tab)
        result = page.evaluate(CONTRAST)
        assert result["checked"] > 20 and not result["failures"], (tab, result)
    page.click("#show-config")  # the frozen configuration toggles with one click
    expect(page.locator("#transcript")).to_be_visible()
    page.click("#show-config")
    expect(page.locator("#config")).to_contain_text("get_weather")
    expect(page.locator("#config")).to_contain_text("scripted")


@needs_chromium
def test_a_workspace_session_shows_its_environment_and_connect_shows_the_command_that_enrolls_a_machine(
        client, page, local_stack):
    from playwright.sync_api import expect

    session = workspace_session(client)
    env_id, remote_url = session.environment.id, session.environment.remote_url
    assert env_id.startswith("env_") and remote_url
    open_session(page, local_stack, session.id)

    # The Environment is shown with its status as environments.retrieve answers it (pending, or connected
    # when the local stack connects the dev tenant's Environments by itself)
    expect(page.locator("#env-id")).to_have_text(env_id)
    expect(page.locator("#env-type")).to_have_text("self_hosted")
    wait_for(lambda: page.locator("#env-status").inner_text() == client.beta.agents.environments.retrieve(env_id).status)

    # When the operator presses Connect
    page.click("#env-connect")

    # Then a single-use enrollment's command is shown: the token in an environment variable, the remote URL
    dialog = page.locator("#enroll")
    expect(dialog).to_be_visible()
    command = page.locator("#enroll-command")
    expect(command).to_contain_text("AGENTS_CORE_ENROLLMENT_TOKEN=")
    expect(command).to_contain_text(remote_url)
    expect(page.locator("#enroll-expiry")).to_contain_text("expires at")
    text = command.inner_text()
    token = enrollment_token(text)
    assert token.startswith("enr-") and f"--url {remote_url}" in text
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("#enroll-copy")
    expect(page.locator("#enroll-copied")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == text

    # ... and, for a Codex Session, the stock exec-server's command with this Environment's fresh key pair
    exec_command = page.locator("#enroll-exec-command")
    expect(exec_command).to_be_visible()
    exec_text = exec_command.inner_text()
    assert exec_text.endswith(f"codex exec-server --remote {remote_url} --remote-transport direct --aws-sigv4 "
                              f"--environment-id {env_id}"), exec_text
    secret = exec_text.split("AWS_SECRET_ACCESS_KEY=", 1)[1].split()[0]
    assert len(secret) >= 32
    page.click("#enroll-exec-copy")
    expect(page.locator("#enroll-exec-copied")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == exec_text

    # The page keeps no copy: not in storage, the URL or the live event log, and closing forgets it
    kept = page.evaluate("JSON.stringify([Object.entries(sessionStorage), Object.entries(localStorage), location.href])")
    for shown in (token, secret):
        assert shown not in kept and shown not in page.locator("#events-list").inner_text()
    page.click("#enroll-close")
    expect(dialog).to_be_hidden()
    assert token not in page.content() and secret not in page.content()


@needs_chromium
def test_input_on_an_offline_environment_shows_the_connection_action_until_the_enrolled_machine_runs_it(
        tenant_page, local_stack, tmp_path):
    from playwright.sync_api import expect

    page, client = tenant_page
    session = workspace_session(client)
    env_id = session.environment.id
    open_session(page, local_stack, session.id)
    expect(page.locator("#env-status")).to_have_text("pending")
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    before = page.evaluate(BOXES)

    # When input arrives while no machine is connected
    client.beta.agents.sessions.events.create(session.id, events=[message("say ran on the enrolled machine")])

    # Then the Session requires the Environment's connection, and says so
    card = page.locator(f".env-action[data-environment-id='{env_id}']")
    expect(card).to_contain_text("Environment connection needed")
    expect(page.locator("#sstatus")).to_have_text("requires_action")
    expect(page.locator(f"#sessions li[data-id='{session.id}']")).to_contain_text("needs its Environment")
    assert [a.type for a in client.beta.agents.sessions.retrieve(session.id).required_actions] == ["environment_connection"]
    assert page.evaluate(BOXES) == before  # the Environment's line is part of the fixed layout
    result = page.evaluate(CONTRAST)
    assert result["checked"] > 20 and not result["failures"], result

    # When the operator connects it from the action and a machine runs the command shown
    card.locator("button", has_text="Connect").click()
    expect(page.locator("#enroll-command")).to_contain_text("AGENTS_CORE_ENROLLMENT_TOKEN=")
    token = enrollment_token(page.locator("#enroll-command").inner_text())
    machine = subprocess.Popen(  # noqa: S603 - the reference Runtime, bound to a workspace of its own
        [sys.executable, "-m", "runtime", "--url", session.environment.remote_url, "--workspace", str(tmp_path / "ws"),
         "--state-dir", str(tmp_path / "state"), "--harness", "scripted", "--heartbeat", BEAT],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}", "AGENTS_CORE_ENROLLMENT_TOKEN": token})
    try:
        # Then the page follows the connection events: connected, the action gone, the input run there
        expect(page.locator("#enroll-live")).to_have_text(f"{env_id} is connected.")
        page.click("#enroll-close")
        expect(page.locator("#env-status")).to_have_text("connected")
        expect(card).to_have_count(0)
        expect(page.locator(".item[data-phase=final_answer] .text")).to_have_text("ran on the enrolled machine")
        expect(page.locator("#sstatus")).to_have_text("idle")
    finally:
        machine.terminate()
        machine.wait(timeout=10)

    # And when the machine goes away, the Environment shows disconnected
    expect(page.locator("#env-status")).to_have_text("disconnected")
    expect(page.locator("#events-list")).to_contain_text("agent.session.environment.disconnected")
    assert client.beta.agents.environments.retrieve(env_id).status == "disconnected"
