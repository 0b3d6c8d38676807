"""An assistant message streams in the official message sequence: item.added -> content_part.added ->
output_text.delta (one or more) -> output_text.done -> content_part.done -> item.done, per output
text part, whether the Runtime streamed the text in deltas across several messages, sent it whole
in one delta, or reported the message finished without an added or any delta (then it is added
first and each part's whole text goes in one delta)."""

from openai.types.beta.agent_session_event import AgentSessionEvent
from pydantic import TypeAdapter

from agents_core.apikeys import create_key
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import stack  # noqa: F401 - fixtures
from tests.integration.test_live import Subscriber, idle_session, send

EVENT = TypeAdapter(AgentSessionEvent)
OFFICIAL = ["agent.session.turn.item.added", "agent.session.turn.content_part.added",
            "agent.session.turn.output_text.delta", "agent.session.turn.output_text.done",
            "agent.session.turn.content_part.done", "agent.session.turn.item.done"]


def message_events(sub, item_id=None):
    kinds = ("item.added", "item.done", "content_part", "output_text")
    events = [e for e in sub.events if any(k in e["type"] for k in kinds)
              and (e.get("item", {}).get("type") == "message" or "item_id" in e)
              and e.get("item", {}).get("role") != "user"]
    if item_id is not None:
        events = [e for e in events if e.get("item_id", e.get("item", {}).get("id")) == item_id]
    return events


def watched(stack, raw=False):
    """A subscribed idle Session whose Environment is connected (by a hand-driven machine with `raw`)."""
    key = create_key(stack.store, "tenant-a")
    client = sdk(stack.http, key)
    session = idle_session(client, stack, raw=raw)
    machine = None
    if raw:
        session, machine = session
    sub = Subscriber(stack, key)
    sub.subscribe(session.id)
    return (client, session, sub, machine) if raw else (client, session, sub)


def test_the_reference_runtime_message_streams_in_the_official_sequence(stack):
    client, session, sub = watched(stack)
    send(client, session.id, "say hello there")
    wait_for(lambda: any(e["type"] == "agent.session.idle" for e in sub.events))
    events = message_events(sub)
    assert [e["type"] for e in events] == OFFICIAL
    added, part_added, delta, text_done, part_done, done = events
    assert part_added["part"] == {"type": "output_text", "text": ""}
    assert delta["delta"] == text_done["text"] == part_done["part"]["text"] == "hello there"
    assert part_done["part"] == {"type": "output_text", "text": "hello there"}
    item_id = done["item"]["id"]
    for event in events[1:]:
        assert (event.get("item_id") or event["item"]["id"]) == item_id
        assert event["output_index"] == added["output_index"] and event["turn_id"] == added["turn_id"]
        EVENT.validate_python(event)


def test_deltas_across_messages_announce_the_part_once_and_a_text_without_deltas_is_still_announced(stack):
    client, session, sub, raw = watched(stack, raw=True)
    send(client, session.id, "anything")
    route = raw.start()
    raw.observe(route, "turn.item.added", item={"id": "m1", "type": "message", "role": "assistant",
                                                "status": "in_progress", "content": []})
    for piece in ("Hel", "lo", "!"):
        raw.observe(route, "turn.output_text.delta", item_id="m1", content_index=0, delta=piece)
    raw.observe(route, "turn.item.done", item={"id": "m1", "type": "message", "content": [
        {"type": "output_text", "text": "Hello!"}]})
    # finished without an added or a delta, with two text parts
    raw.observe(route, "turn.item.done", item={"id": "m2", "type": "message", "phase": "final_answer", "content": [
        {"type": "output_text", "text": "one"}, {"type": "output_text", "text": "two"}]})
    raw.observe(route, "turn.output_text.delta", item_id="m1", content_index=0, delta="late")  # after its done
    raw.observe(route, "turn.completed")
    wait_for(lambda: any(e["type"] == "agent.session.idle" for e in sub.events))
    first = [e["type"].rsplit("turn.", 1)[1] for e in message_events(sub) if e.get("output_index") == 0]
    assert first == ["item.added", "content_part.added", "output_text.delta", "output_text.delta",
                     "output_text.delta", "output_text.done", "content_part.done", "item.done"]
    second = [e for e in message_events(sub) if e.get("output_index") == 1]
    assert [(e["type"].rsplit("turn.", 1)[1], e.get("content_index")) for e in second] == [
        ("item.added", None),
        ("content_part.added", 0), ("output_text.delta", 0), ("output_text.done", 0), ("content_part.done", 0),
        ("content_part.added", 1), ("output_text.delta", 1), ("output_text.done", 1), ("content_part.done", 1),
        ("item.done", None)]
    assert second[0]["item"]["status"] == "in_progress" and second[0]["item"]["content"] == []
    assert [e["delta"] for e in second if e["type"].endswith("output_text.delta")] == ["one", "two"]  # whole texts
    assert [e["text"] for e in second if e["type"].endswith("output_text.done")] == ["one", "two"]
    late = [f for f in raw.errors(route["turn_id"]) if f["error"]["param"] == "item_id"]
    assert "already done" in late[0]["error"]["message"]  # nothing streams after item.done
    for event in sub.events:
        EVENT.validate_python(event)


def test_raw_events_carry_the_fields_the_official_shapes_always_have(stack):
    client, session, sub = watched(stack)
    send(client, session.id, "fail on purpose")
    wait_for(lambda: any(e["type"] == "agent.session.failed" for e in sub.events))
    failed = client.beta.agents.sessions.retrieve(session.id)
    assert failed.status == "failed" and failed.error == "The execution could not complete."
    assert [e for e in sub.events if e["type"] == "agent.session.failed"][0]["session"]["error"] == failed.error
    send(client, session.id, "say again")  # a new Turn: the Session is no longer failed
    wait_for(lambda: any(e["type"] == "agent.session.turn.completed" for e in sub.events))
    assert client.beta.agents.sessions.retrieve(session.id).error is None
    user = [e["item"] for e in sub.events if e["type"] == "agent.session.turn.item.added"
            and e["item"].get("role") == "user"]
    assert user and all("phase" in item and item["phase"] is None for item in user)
    ended = [e for e in sub.events if e["type"] in ("agent.session.turn.failed", "agent.session.turn.completed")]
    assert [e["type"] for e in ended] == ["agent.session.turn.failed", "agent.session.turn.completed"]
    assert all("usage" in e and e["usage"] is None for e in ended)
