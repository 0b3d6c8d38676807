"""Items a Runtime reports (agents_contract.runtime_items.parse): validated strictly against the pinned SDK Item
union, Core's identity fields never taken from a Runtime, statuses Core's. Table-driven; pure."""

from __future__ import annotations

import pytest

from agents_contract import runtime_items
from agents_contract.errors import InvalidRequest

MCP = {"type": "mcp_call", "name": "lookup", "server_label": "tickets"}


def item(kind, **members):
    base = MCP if kind == "mcp_call" else {"type": kind}
    return {"id": "rt_1", **base, **members}


# (what, raw Item, done, the public Item Core stores)
ACCEPTED = [
    ("a bare added message is in progress and the assistant's", item("message"), False,
     {"type": "message", "role": "assistant", "phase": None, "status": "in_progress", "content": []}),
    ("a bare finished message is completed", item("message"), True,
     {"type": "message", "role": "assistant", "phase": None, "status": "completed", "content": []}),
    ("a final answer with text",
     item("message", role="assistant", phase="final_answer", status="completed",
          content=[{"type": "output_text", "text": "Hi"}, {"type": "output_text", "text": ""}]), True,
     {"type": "message", "role": "assistant", "phase": "final_answer", "status": "completed",
      "content": [{"type": "output_text", "text": "Hi"}, {"type": "output_text", "text": ""}]}),
    ("an added Item may already be completed", item("message", status="completed"), False,
     {"type": "message", "role": "assistant", "phase": None, "status": "completed", "content": []}),
    ("an explicit null status takes the default", item("reasoning", status=None), False,
     {"type": "reasoning", "status": "in_progress", "summary": []}),
    ("reasoning with a summary", item("reasoning", summary=[{"type": "summary_text", "text": "thinking"}]), True,
     {"type": "reasoning", "status": "completed", "summary": [{"type": "summary_text", "text": "thinking"}]}),
    ("an incomplete reasoning Item", item("reasoning", status="incomplete"), True,
     {"type": "reasoning", "status": "incomplete", "summary": []}),
    ("an MCP call always carries arguments, output and error", item("mcp_call"), False,
     {**MCP, "arguments": None, "output": None, "error": None, "status": "in_progress"}),
    ("an MCP call's payloads are kept as sent",
     item("mcp_call", arguments={"q": [1, 2.5, None]}, output="found", error=None), True,
     {**MCP, "arguments": {"q": [1, 2.5, None]}, "output": "found", "error": None, "status": "completed"}),
    ("a finished MCP call may have failed", item("mcp_call", status="failed", error={"message": "boom"}), True,
     {**MCP, "arguments": None, "output": None, "error": {"message": "boom"}, "status": "failed"}),
    ("a web search without an action", item("web_search_call"), False,
     {"type": "web_search_call", "action": None, "status": "in_progress"}),
    ("a search action", item("web_search_call", action={"type": "search", "query": "q", "queries": ["q", "r"]}), True,
     {"type": "web_search_call", "action": {"type": "search", "queries": ["q", "r"], "query": "q"},
      "status": "completed"}),
    ("an open_page action", item("web_search_call", action={"type": "open_page", "url": "https://x.example"}), True,
     {"type": "web_search_call", "action": {"type": "open_page", "url": "https://x.example"}, "status": "completed"}),
    ("a find_in_page action", item("web_search_call", action={"type": "find_in_page", "pattern": "p"}), True,
     {"type": "web_search_call", "action": {"type": "find_in_page", "pattern": "p", "url": None},
      "status": "completed"}),
    ("an other action", item("web_search_call", action={"type": "other"}), True,
     {"type": "web_search_call", "action": {"type": "other"}, "status": "completed"}),
]


@pytest.mark.parametrize("what, raw, done, public", ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_accepted_items_become_the_public_item_without_the_runtime_id(what, raw, done, public):
    assert runtime_items.parse(raw, done=done) == ("rt_1", public)


def test_the_runtime_id_may_be_128_characters():
    runtime_id = "r" * runtime_items.RUNTIME_ID_MAX
    assert runtime_items.parse({"id": runtime_id, "type": "reasoning"}, done=True)[0] == runtime_id


# (what, raw Item, done, message, param)
REJECTED = [
    ("not an object", ["message"], False, "Invalid 'item': expected an object.", "item"),
    ("null", None, True, "Invalid 'item': expected an object.", "item"),
    ("Core assigns turn_id", item("message", turn_id="turn_1"), False,
     "Invalid 'item.turn_id': Core assigns it; a Runtime does not send it.", "item.turn_id"),
    ("Core assigns session_id", item("reasoning", session_id="sess_1"), True,
     "Invalid 'item.session_id': Core assigns it; a Runtime does not send it.", "item.session_id"),
    ("Core's identity fields before the type", {"turn_id": None, "type": "nope"}, False,
     "Invalid 'item.turn_id': Core assigns it; a Runtime does not send it.", "item.turn_id"),
    ("a type a Runtime does not report", item("function_call"), False,
     "Invalid 'item.type': a Runtime reports message, reasoning, mcp_call, web_search_call Items.", "item.type"),
    ("no type", {"id": "rt_1"}, False,
     "Invalid 'item.type': a Runtime reports message, reasoning, mcp_call, web_search_call Items.", "item.type"),
    ("no id", {"type": "message"}, False, "Invalid 'item.id': Field required.", "item.id"),
    ("an id that is not a string", {"id": 7, "type": "message"}, False,
     "Invalid 'item.id': Input should be a valid string.", "item.id"),
    ("an empty id", {"id": "", "type": "message"}, False, "Invalid 'item.id': 1 to 128 characters.", "item.id"),
    ("an id of 129 characters", {"id": "r" * 129, "type": "message"}, True,
     "Invalid 'item.id': 1 to 128 characters.", "item.id"),
    ("a Runtime message is the assistant's", item("message", role="user"), False,
     "Invalid 'item.role': Input should be 'assistant'.", "item.role"),
    ("an unknown member", item("message", created_at=1), False,
     "Invalid 'item.created_at': Extra inputs are not permitted.", "item.created_at"),
    ("an unknown member of a content part", item("message", content=[{"type": "output_text", "text": "a",
                                                                      "annotations": []}]), True,
     "Invalid 'item.content[0].annotations': Extra inputs are not permitted.", "item.content[0].annotations"),
    ("strict strings", item("message", content=[{"type": "output_text", "text": 1}]), True,
     "Invalid 'item.content[0].text': Input should be a valid string.", "item.content[0].text"),
    ("an unknown phase", item("message", phase="final"), True,
     "Invalid 'item.phase': Input should be 'commentary' or 'final_answer'.", "item.phase"),
    ("a summary part type", item("reasoning", summary=[{"type": "output_text", "text": "x"}]), True,
     "Invalid 'item.summary[0].type': Input should be 'summary_text'.", "item.summary[0].type"),
    ("an MCP call names its server", {"id": "rt_1", "type": "mcp_call", "name": "lookup"}, True,
     "Invalid 'item.server_label': Field required.", "item.server_label"),
    ("failed is for MCP calls only", item("message", status="failed"), True,
     "Invalid 'item.status': Input should be 'in_progress', 'completed' or 'incomplete'.", "item.status"),
    ("an added Item is not failed", item("mcp_call", status="failed"), False,
     "Invalid 'item.status': an added Item is in_progress or completed.", "item.status"),
    ("an added Item is not incomplete", item("message", status="incomplete"), False,
     "Invalid 'item.status': an added Item is in_progress or completed.", "item.status"),
    ("a finished Item is not in progress", item("reasoning", status="in_progress"), True,
     "Invalid 'item.status': a finished Item is completed or incomplete.", "item.status"),
    ("a finished MCP call is not in progress", item("mcp_call", status="in_progress"), True,
     "Invalid 'item.status': a finished Item is completed or incomplete or failed.", "item.status"),
    ("an unknown web search action", item("web_search_call", action={"type": "click"}), True,
     "Invalid 'item.action': Input tag 'click' found using 'type' does not match any of the expected tags: "
     "'search', 'open_page', 'find_in_page', 'other'.", "item.action"),
]


@pytest.mark.parametrize("what, raw, done, message, param", REJECTED, ids=[r[0] for r in REJECTED])
def test_rejected_items_name_the_offending_field(what, raw, done, message, param):
    with pytest.raises(InvalidRequest) as err:
        runtime_items.parse(raw, done=done)
    assert (err.value.message, err.value.param) == (message, param)
    assert err.value.envelope()["error"]["code"] == "invalid_request_error"


def test_the_caller_chooses_the_name_of_the_item_in_messages():
    with pytest.raises(InvalidRequest) as err:
        runtime_items.parse({"id": "rt_1", "type": "message", "turn_id": "t"}, done=True, where="items[3]")
    assert (err.value.message, err.value.param) == (
        "Invalid 'items[3].turn_id': Core assigns it; a Runtime does not send it.", "items[3].turn_id")
    with pytest.raises(InvalidRequest) as err:
        runtime_items.parse(item("reasoning", summary=[{"type": "summary_text"}]), done=True, where="items[3]")
    assert (err.value.message, err.value.param) == ("Invalid 'items[3].summary[0].text': Field required.",
                                                    "items[3].summary[0].text")


def test_the_raw_item_is_not_changed():
    raw = item("mcp_call", arguments={"a": 1})
    before = {**raw, "arguments": {"a": 1}}
    runtime_items.parse(raw, done=True)
    assert raw == before


@pytest.mark.parametrize("action, param", [
    ({"type": "find_in_page", "pattern": 3}, "item.action.pattern"),
    ({"type": "search", "queries": ["a", 2]}, "item.action.queries[1]"),
    ({"type": "search", "query": 2}, "item.action.query"),
    ({"type": "open_page", "url": 2}, "item.action.url"),
    ({"type": "other", "search": 1}, "item.action.search"),  # an unknown member named like a tag is still named
])
def test_an_action_member_is_named_by_its_field_path(action, param):
    with pytest.raises(InvalidRequest) as err:
        runtime_items.parse(item("web_search_call", action=action), done=True)
    assert err.value.param == param
    assert err.value.message.startswith(f"Invalid '{param}': ")
