"""Issue 36 (cost): rows a commit no longer writes, with every behaviour they carried kept.

- A function call's Item named by its call id keeps its ref in the CALL row (no RID row); the Item id stays
  taken for the Turn (item.added, item.done and deltas naming it are rejected as before).
- An Item opened and finished in the commit that ends its Turn writes no RID row (nothing can name it after);
  one opened earlier and finished there is still written done, so the Turn settles in that commit.
"""

from agents_core import keys
from agents_core.apikeys import create_key
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.raw_runtime import RawRuntime
from tests.integration.stack_fixtures import stack  # noqa: F401 - fixtures

FN = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}


def _session(stack, raw):
    client = sdk(stack.http, create_key(stack.store, "tenant-a"))
    session = client.beta.agents.sessions.create(environment={"type": "none"}, agent={"model": "m", "tools": [FN]},
                                                 input="anything", extra_body={"x_agents_core": {"harness": "scripted"}})
    return client, raw, session, raw.start()


def _refs(stack, session_id, turn_id):
    return {keys.runtime_item_id(r[keys.SK]): r for r in stack.store.query(
        **keys.item_refs_of_turn("tenant-a", session_id, turn_id), consistent=True).items}


def _acked(raw, turn_id, seq):
    wait_for(lambda: any(f.get("type") == "turn.ack" and f["turn_id"] == turn_id and f["seq"] >= seq
                         for f in raw.frames))


def test_refs_a_commit_does_not_write_and_what_they_kept(stack):
    """One stack for both (a stack start is most of a test's time here)."""
    raw = RawRuntime(stack)  # one connection: every Turn here is claimed by it
    _call_ref_in_its_call_row(stack, raw)
    _items_of_the_ending_commit(stack, raw)


def _call_ref_in_its_call_row(stack, raw):
    client, raw, session, route = _session(stack, raw)
    raw.observe(route, "turn.function_call", call_id="c1", name="f", arguments={})
    seq = raw.observe(route, "turn.function_call", call_id="c2", name="f", arguments={}, item_id="fc2")
    _acked(raw, route["turn_id"], seq)
    refs = _refs(stack, session.id, route["turn_id"])
    assert "c1" not in refs and refs["fc2"]["state"] == "done"  # an explicit Item id keeps its RID row
    call = stack.store.get(keys.call("tenant-a", session.id, "c1"))
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    by_call = {i.call_id: i for i in items if i.type == "function_call"}
    assert call["ref"] and call["item_id"] == by_call["c1"].id and int(call["output_index"]) == 0
    raw.observe(route, "turn.item.added", item={"id": "c1", "type": "message", "role": "assistant",
                                                 "status": "in_progress", "content": []})
    raw.observe(route, "turn.item.done", item={"id": "c1", "type": "message", "content": []})
    seq = raw.observe(route, "turn.output_text.delta", item_id="c1", content_index=0, delta="x")
    _acked(raw, route["turn_id"], seq)
    errors = [f["error"]["message"] for f in raw.errors(route["turn_id"])]
    assert len(errors) == 3, errors
    assert "'c1' was already added" in errors[0] and "'c1' is already done" in errors[1]
    assert "'c1' is already done" in errors[2]
    assert len(client.beta.agents.sessions.items.list(session.id).data) == len(items)  # nothing added


def _items_of_the_ending_commit(stack, raw):
    client, raw, session, route = _session(stack, raw)
    seq = raw.observe(route, "turn.item.added", item={"id": "early", "type": "message", "role": "assistant",
                                                       "status": "in_progress", "content": []})
    _acked(raw, route["turn_id"], seq)
    assert _refs(stack, session.id, route["turn_id"])["early"]["state"] == "open"
    raw.batch(route, [
        ("turn.item.done", {"item": {"id": "early", "type": "message", "content": [
            {"type": "output_text", "text": "one"}]}}),
        ("turn.item.added", {"item": {"id": "late", "type": "message", "role": "assistant",
                                      "status": "in_progress", "content": []}}),
        ("turn.item.done", {"item": {"id": "late", "type": "message", "phase": "final_answer", "content": [
            {"type": "output_text", "text": "two"}]}}),
        ("turn.completed", {})])
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle")
    refs = _refs(stack, session.id, route["turn_id"])
    assert set(refs) == {"early"} and refs["early"]["state"] == "done"
    messages = [i for i in client.beta.agents.sessions.items.list(session.id, order="asc").data
                if i.type == "message" and i.role == "assistant"]
    assert [(m.content[0].text, m.status) for m in messages] == [("one", "completed"), ("two", "completed")]
    turn = client.beta.agents.sessions.turns.retrieve(route["turn_id"], session_id=session.id)
    assert turn.status == "completed"
