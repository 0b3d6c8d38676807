"""The operator console's Subagents and MCP views (issue 25 item 6, issue 24 item 6) in headless Chromium on
the local stack, the reference Runtime on the scripted harness (whose `subagent call` reports a real Subagent,
its child Turn and the child's function call).

"A function call made by a Subagent is a required action of the root Turn that runs the child. Its turn_id is
that root Turn, and its call_id equals the call_id of the child's function_call Item on the Subagent routes."
The page shows a Session's Subagents as a tree beside the transcript (parent_agent_id gives the nesting), each
child's Turns and Items, and answers a child's pending call through the same required-action form as a root
call. The Configuration shows each MCP server's selected credential_id, never a secret.

Two checks render shapes the scripted harness cannot produce yet (a nested Subagent; an `mcp_call` Item, until
the scripted harness plays `mcp LABEL TOOL {json}`): they answer the page's reads with the real answer plus one
record of the SDK's shape, through Playwright's routing, and say so."""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.test_dashboard import (  # noqa: F401 - browser and page are fixtures
    BOXES,
    CONTRAST,
    FN,
    WAIT_MS,
    browser,
    idle_session,
    message,
    needs_chromium,
    open_session,
    page,
    wait_for,
)

pytestmark = pytest.mark.e2e

SUBAGENT_SCRIPT = 'subagent call get_weather {"city": "Oslo"}\nsay Cold in Oslo.'


@needs_chromium
def test_a_subagents_call_shows_in_its_tree_and_answering_it_from_the_page_completes_the_turn(client, page, local_stack):
    from playwright.sync_api import expect

    sessions = client.beta.agents.sessions
    session = idle_session(client)
    open_session(page, local_stack, session.id)
    expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    expect(page.locator("#subagents")).to_be_hidden()  # no Subagents: the transcript keeps the whole width
    before = page.evaluate(BOXES)
    page.evaluate("window.__sameDocument = true")

    # When a Turn's script spawns a Subagent that calls a declared function (sent elsewhere: the page learns it live)
    sessions.events.create(session.id, events=[message(SUBAGENT_SCRIPT)])
    action = wait_for(lambda: sessions.retrieve(session.id).required_actions)[0]
    subagent = wait_for(lambda: sessions.subagents.list(session.id).data)[0]
    child = sessions.subagents.turns.list(subagent.id, session_id=session.id).data[0]
    assert action.turn_id != child.id  # the required action names the root Turn

    # Then the Subagent is a node of the tree beside the transcript, with its child Turn and the pending call
    aside = page.locator("#subagents")
    expect(aside).to_be_visible()
    node = aside.locator(f"li.subagent[data-subagent-id='{subagent.id}']")
    expect(node).to_have_attribute("data-status", "active")
    expect(node.locator(".sname")).to_have_text("get_weather worker")
    expect(node.locator(".sub-meta")).to_contain_text(session.agent.id)  # a direct child: the Session's Agent
    expect(node.locator(".sub-meta .instructions")).to_have_text('call get_weather {"city": "Oslo"}')
    expect(node.locator("summary")).to_contain_text("1 pending")
    turn = node.locator(f".turn[data-turn-id='{child.id}']")
    call = turn.locator(".item[data-type=function_call]")
    expect(call).to_contain_text(action.call_id)
    assert json.loads(call.locator(".args").inner_text()) == {"city": "Oslo"}
    expect(call.locator(".badge[data-status=waiting]")).to_have_count(1)
    # The Session's transcript stays root-only: the root Turn waits, the child's Items are not in it
    root = page.locator(f"#transcript .turn[data-turn-id='{action.turn_id}']")
    expect(root).to_have_attribute("data-status", "waiting")
    expect(page.locator("#transcript .item[data-type=function_call]")).to_have_count(0)
    expect(page.locator(f"#transcript .turn[data-turn-id='{child.id}']")).to_have_count(0)
    # The required action's form says which child made the call and answers under the root Turn id
    form = page.locator(f".action-form[data-call-id='{action.call_id}']")
    expect(form).to_have_attribute("data-turn-id", action.turn_id)
    expect(form.locator(".by")).to_have_text(f"by Subagent get_weather worker (child Turn {child.id})")
    expect(form).to_have_attribute("data-subagent-id", subagent.id)
    expect(form.locator(".by a")).to_have_attribute("href", f"#session={session.id}&turn={child.id}")
    assert page.evaluate(BOXES) == before  # the tree lives inside the panes: the fixed layout holds
    result = page.evaluate(CONTRAST)
    assert result["checked"] > 20 and not result["failures"], result

    # When the operator answers from the child's call
    call.locator("button.answer").click()
    expect(form.locator("textarea")).to_be_focused()
    page.keyboard.type("cold, -3 C")
    form.locator("button[type=submit]").click()

    # Then the child's Turn completes with the output and its answer, the Subagent closes, the root Turn completes
    expect(turn).to_have_attribute("data-status", "completed")
    expect(turn.locator(".item[data-type=function_call_output] .output")).to_have_text("cold, -3 C")
    expect(turn.locator(".item[data-type=message][data-phase=final_answer] .text")).to_have_text("child done")
    expect(node).to_have_attribute("data-status", "closed")
    expect(root).to_have_attribute("data-status", "completed")
    expect(root.locator(".item[data-phase=final_answer] .text")).to_have_text("Cold in Oslo.")
    expect(page.locator("#sstatus")).to_have_text("idle")
    expect(form).to_have_count(0)
    assert page.evaluate("window.__sameDocument") is True
    expect(page.locator("#events-list")).to_contain_text("agent.session.subagent.closed")
    history = sessions.subagents.items.list(subagent.id, session_id=session.id, order="asc").data
    assert [(i.type, i.turn_id) for i in history] == [
        ("function_call", child.id), ("function_call_output", child.id), ("message", child.id)]
    assert history[1].output == "cold, -3 C"

    # And the reads show the same tree: a deep link to the child Turn marks it there
    page.goto(local_stack["dashboard_url"] + f"#session={session.id}&turn={child.id}")
    page.reload()
    node = page.locator(f"#subagents li.subagent[data-subagent-id='{subagent.id}']")
    expect(node).to_have_attribute("data-status", "closed")
    turn = node.locator(f".turn[data-turn-id='{child.id}']")
    expect(turn).to_have_class(re.compile(r"\bfocused\b"))
    expect(turn.locator(".item")).to_have_count(3)
    expect(page.locator("#transcript .item[data-type=function_call]")).to_have_count(0)

    # Collapsing a node is kept across live updates; other tabs take the whole width
    node.locator("summary").click()
    expect(turn).to_be_hidden()
    sessions.events.create(session.id, events=[message("say still here")])
    expect(page.locator("#transcript .item[data-phase=final_answer] .text", has_text="still here")).to_have_count(1)
    expect(turn).to_be_hidden()
    page.click("#tab-config")
    expect(page.locator("#subagents")).to_be_hidden()
    page.click("#tab-transcript")
    expect(page.locator("#subagents")).to_be_visible()


def _with_extra(route, extra):
    """The stack's real answer to a list read, with `extra` records added (of the SDK's shapes)."""
    from playwright.sync_api import Error

    try:
        response = route.fetch()
        body = response.json()
    except Error:  # the page (or its test) ended while this read was in flight
        return
    body["data"] = body["data"] + extra
    route.fulfill(response=response, body=json.dumps(body), content_type="application/json")


@needs_chromium
def test_a_subagent_whose_parent_is_another_subagent_nests_under_it(client, page, local_stack):
    """Render check: the scripted harness spawns direct children only, so the Subagents list read is answered
    with the stack's real child plus a nested one whose parent_agent_id is that child (its own Turns and
    Items routes answer empty lists)."""
    from playwright.sync_api import expect

    sessions = client.beta.agents.sessions
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [FN]}, input=SUBAGENT_SCRIPT,
        extra_body={"x_agents_core": {"harness": "scripted"}})
    action = wait_for(lambda: sessions.retrieve(session.id).required_actions)[0]
    parent = wait_for(lambda: sessions.subagents.list(session.id).data)[0]
    nested = {"id": "subagent_nestedrendercheck", "object": "agent.session.subagent", "session_id": session.id,
              "parent_agent_id": parent.id, "name": "reviewer", "instructions": [{"type": "output_text", "text": "review"}],
              "status": "active", "opened_at": parent.opened_at + 1, "closed_at": None}
    base = re.escape(f"/agents/sessions/{session.id}/subagents")
    page.route(re.compile(base + r"\?"), lambda route: _with_extra(route, [nested]))
    page.route(re.compile(base + "/" + nested["id"] + r"/(turns|items)\?"), lambda route: route.fulfill(
        status=200, content_type="application/json",
        body=json.dumps({"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False})))
    open_session(page, local_stack, session.id)

    top = page.locator("#subagent-tree > li.subagent")
    expect(top).to_have_count(1)
    expect(top).to_have_attribute("data-subagent-id", parent.id)
    child = top.locator(f"ul.nested > li.subagent[data-subagent-id='{nested['id']}']")
    expect(child).to_have_attribute("data-parent-agent-id", parent.id)
    expect(child.locator(".sub-meta")).to_contain_text("parent get_weather worker")
    expect(child.locator(".no-items")).to_have_text("No Turns yet.")
    expect(page.locator("#subagents-title")).to_have_text("Subagents (2)")
    sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(lambda: sessions.turns.retrieve(action.turn_id, session_id=session.id).status == "cancelled")


@needs_chromium
def test_the_configuration_shows_each_mcp_servers_selected_credential_and_never_its_secret(client, page, local_stack):
    from playwright.sync_api import expect

    token = "mcp-dashboard-secret-token-7"  # noqa: S105 - a test value, asserted absent from the page
    url, other = "http://127.0.0.1:9/mcp", "http://127.0.0.1:9/other"
    vault = client.beta.agents.vaults.create(name="dashboard")
    credential = client.beta.agents.vaults.credentials.create(vault.id, name="tickets", auth={
        "type": "static_bearer", "mcp_server_url": url, "token": token})
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, vault_ids=[vault.id], input="say ready",
        extra_body={"x_agents_core": {"harness": "scripted"}},
        agent={"model": "gpt-5", "tools": [
            {"type": "mcp", "server_label": "tickets", "transport": {"type": "http", "server_url": url}},
            {"type": "mcp", "server_label": "wiki", "transport": {"type": "http", "server_url": other}}]})
    assert [t.credential_id for t in session.agent.tools] == [credential.id, None]
    open_session(page, local_stack, session.id)
    page.click("#tab-config")

    rows = page.locator("#config table.tools tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("tickets")
    expect(rows.nth(0).locator(".credential")).to_have_text(f"credential {credential.id}")
    expect(rows.nth(1)).to_contain_text("wiki")
    expect(rows.nth(1).locator(".credential")).to_have_text("credential none (anonymous)")
    assert token not in page.content()


@needs_chromium
def test_an_mcp_call_item_shows_its_server_tool_arguments_and_output_or_error(client, page, local_stack):
    """Render check: until the scripted harness plays `mcp LABEL TOOL {json}`, the Items read of a real Session
    is answered with its real Items plus two mcp_call Items of the SDK's shape (AgentMcpCallItem)."""
    from playwright.sync_api import expect

    session = idle_session(client)
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    calls = [
        {"id": "item_zz1", "type": "mcp_call", "turn_id": turn_id, "server_label": "tickets", "name": "lookup_ticket",
         "arguments": '{"id": "7"}', "output": "ticket 7: open", "error": None, "status": "completed"},
        {"id": "item_zz2", "type": "mcp_call", "turn_id": turn_id, "server_label": "tickets", "name": "fail_ticket",
         "arguments": {"id": "8"}, "output": None, "error": "ticket 8 is locked", "status": "failed"}]
    page.route(re.compile(re.escape(f"/agents/sessions/{session.id}/items") + r"\?"),
               lambda route: _with_extra(route, calls))
    open_session(page, local_stack, session.id)

    done, failed = (page.locator(f".item[data-type=mcp_call][data-item-id='{c['id']}']") for c in calls)
    expect(done.locator(".server")).to_have_text("tickets")
    expect(done.locator(".tool")).to_have_text("lookup_ticket")
    expect(done.locator(".badge")).to_have_text("completed")
    assert json.loads(done.locator(".args").inner_text()) == {"id": "7"}
    expect(done.locator(".output")).to_have_text("ticket 7: open")
    expect(done.locator(".error-text")).to_have_count(0)
    expect(failed.locator(".tool")).to_have_text("fail_ticket")
    expect(failed.locator(".badge")).to_have_text("failed")
    assert json.loads(failed.locator(".args").inner_text()) == {"id": "8"}
    expect(failed.locator(".error-text")).to_have_text("ticket 8 is locked")
    expect(failed.locator(".output")).to_have_count(0)
    result = page.evaluate(CONTRAST)
    assert result["checked"] > 20 and not result["failures"], result
