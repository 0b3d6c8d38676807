"""Issue 25, pure: the Subagent resource and events are the pinned SDK's shapes (strict), a child Turn is an
SDK Turn with `subagent_id`, and the scripted harness reports a Subagent the way the Runtime protocol says
(opened, child turn started, the call in the child, the child's answer after the receipt, ended, closed;
on a cancel the child ends cancelled before the root)."""

import contextlib
import threading
import time

import pytest
from openai.types.beta import (
    AgentSessionSubagentActiveEvent,
    AgentSessionSubagentClosedEvent,
    AgentSessionSubagentCreatedEvent,
    Subagent,
)
from openai.types.beta.agents.sessions import Turn

from agents_contract import resources
from runtime.harnesses.scripted.driver import TurnRunner

STORED = {"id": "subagent_1", "session_id": "sess_1", "parent_agent_id": "agent_1", "name": "worker",
          "instructions": "call get_weather {}", "status": "active", "opened_at": 10, "closed_at": None}
EVENTS = {"agent.session.subagent.created": AgentSessionSubagentCreatedEvent,
          "agent.session.subagent.active": AgentSessionSubagentActiveEvent,
          "agent.session.subagent.closed": AgentSessionSubagentClosedEvent}


def strict(model, data):
    parsed = model.model_validate(data, strict=True)
    assert parsed.model_dump(mode="json", exclude_unset=True) == data
    return parsed


@pytest.mark.parametrize("stored", [
    STORED,
    {**STORED, "instructions": None, "name": None},
    {**STORED, "status": "closed", "closed_at": 12},
], ids=["active with instructions", "nothing reported", "closed"])
def test_a_subagent_is_the_sdk_subagent(stored):
    subagent = strict(Subagent, resources.subagent_resource(stored))
    assert subagent.object == "agent.session.subagent"
    assert subagent.instructions is None or subagent.instructions[0].text == stored["instructions"]
    assert "runtime_id" not in resources.subagent_resource({**stored, "runtime_id": "thread-1"})


@pytest.mark.parametrize("kind", sorted(EVENTS))
def test_subagent_events_are_the_sdk_events(kind):
    event = resources.subagent_event(kind, "evt_1", resources.subagent_resource(STORED))
    assert strict(EVENTS[kind], event).subagent.id == "subagent_1"


def test_a_child_turn_is_an_sdk_turn_naming_its_subagent():
    doc = {"id": "turn_c", "agent_id": "agent_1", "session_id": "sess_1", "created_at": 1, "started_at": 1,
           "status": "in_progress", "subagent_id": "subagent_1", "x_agents_core": {"engine": "scripted"}}
    turn = Turn.model_validate(resources.turn_resource(doc))
    assert turn.subagent_id == "subagent_1" and turn.agent_id == "agent_1"
    event = resources.turn_event("agent.session.turn.created", "evt_1", resources.turn_resource(doc))
    assert event["turn_id"] == "turn_c" and event["turn"]["subagent_id"] == "subagent_1"


class Channel:
    """What the scripted harness reports, in order (batches flattened)."""

    turn_id = "turn_root"

    def __init__(self):
        self.sent: list[tuple[str, dict]] = []
        self.done = threading.Event()

    def emit(self, action, **fields):
        self.sent.append((action, fields))

    def emit_batch(self, observations):
        self.sent += observations

    def finish(self, action, **fields):
        self.sent.append((action, fields))

    def message(self, item_id, text, phase):
        self.sent.append(("message", {"text": text, "phase": phase}))

    def start_heartbeats(self):
        pass

    @contextlib.contextmanager
    def together(self):  # TurnChannel.together(): one message on the wire; the same order here
        yield

    def actions(self):
        return [a for a, _ in self.sent]


def run(script):
    channel = Channel()
    runner = TurnRunner({"input": [{"content": [{"type": "input_text", "text": script}]}]}, channel)
    runner.start()
    return runner, channel


def wait(condition, timeout=5.0):
    end = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)
    return value


def test_the_scripted_subagent_call_reports_a_subagent_its_child_turn_the_call_and_the_child_answer():
    runner, channel = run('subagent call get_weather {"city": "Paris"}\nsay done')
    call = wait(lambda: [f for a, f in channel.sent if a == "turn.function_call"])[0]
    opened = dict(channel.sent)["turn.subagent.opened"]
    started = dict(channel.sent)["turn.subagent.turn.started"]
    assert opened == {"subagent_id": started["subagent_id"], "name": "get_weather worker",
                      "instructions": 'call get_weather {"city": "Paris"}'}
    assert call["child_turn_id"] == started["child_turn_id"] and call["arguments"] == {"city": "Paris"}
    runner.deliver_result(call["call_id"], {"success": True, "output": "sunny"})
    wait(channel.done.is_set)
    assert channel.actions() == ["turn.subagent.opened", "turn.subagent.turn.started", "turn.function_call",
                                 "turn.tool_result.applied", "turn.item.added", "turn.item.done",
                                 "turn.subagent.turn.ended", "turn.subagent.closed", "message", "turn.completed"]
    child = [f for a, f in channel.sent if a in ("turn.item.added", "turn.item.done", "turn.subagent.turn.ended")]
    assert {f["child_turn_id"] for f in child} == {started["child_turn_id"]}
    assert dict(channel.sent)["turn.subagent.turn.ended"]["status"] == "completed"


def test_a_cancel_ends_the_child_turn_cancelled_and_closes_the_subagent_before_the_root_is_cancelled():
    runner, channel = run("subagent call get_weather {}\nsay never")
    wait(lambda: "turn.function_call" in channel.actions())
    runner.cancel()
    wait(channel.done.is_set)
    assert channel.actions()[-3:] == ["turn.subagent.turn.ended", "turn.subagent.closed", "turn.cancelled"]
    assert dict(channel.sent)["turn.subagent.turn.ended"]["status"] == "cancelled"
    assert "turn.tool_result.applied" not in channel.actions()
