"""Input decisions: the spec's Results table and the contract notes' Session input table."""

import pytest

from agents_contract import decisions as d
from agents_contract import harnessconfig, validation, wire
from agents_contract.errors import Conflict, InvalidRequest, UnsupportedConfiguration


def result(call_id="call_1", turn_id="turn_1", **extra):
    event = {"type": "agent.session.input.tool_result", "call_id": call_id, "turn_id": turn_id, "success": True,
             **extra}
    return validation.parse(wire.EventBatch, {"events": [event]}).events[0]


def call(state=d.CallState.PENDING, digest=None, child=None):
    return d.CallRecord("call_1", "turn_1", state, child_turn_id=child, result_digest=digest)


OUT = result(output="42")
OUT_DIGEST = d.result_digest(OUT)

TABLE = [
    ("first result for a pending call is accepted", OUT, call(), d.Outcome.ACCEPT, None),
    ("identical retry is accepted", OUT, call(d.CallState.SUBMITTED, OUT_DIGEST), d.Outcome.IDENTICAL, None),
    ("identical retry after the Turn ends", OUT, call(d.CallState.SETTLED, OUT_DIGEST), d.Outcome.IDENTICAL, None),
    ("identical retry after the call is abandoned", OUT, call(d.CallState.ABANDONED, OUT_DIGEST),
     d.Outcome.IDENTICAL, None),
    ("identical retry after the receipt", OUT, call(d.CallState.APPLIED, OUT_DIGEST), d.Outcome.IDENTICAL, None),
    ("different result for the same call", result(output="43"), call(d.CallState.SUBMITTED, OUT_DIGEST), None,
     (Conflict, d.DIFFERENT_RESULT, 409)),
    ("presence matters: explicit null error differs", result(output="42", error=None),
     call(d.CallState.SUBMITTED, OUT_DIGEST), None, (Conflict, d.DIFFERENT_RESULT, 409)),
    ("first result after the Turn was cancelled", OUT, call(d.CallState.CANCELLED), None,
     (Conflict, d.CANNOT_ACCEPT, 409)),
    ("first result for an abandoned call", OUT, call(d.CallState.ABANDONED), None, (Conflict, d.CANNOT_ACCEPT, 409)),
    ("first result after the Turn ended", OUT, call(d.CallState.SETTLED), None, (Conflict, d.CANNOT_ACCEPT, 409)),
    ("unknown call", OUT, None, None, (InvalidRequest, d.UNKNOWN_CALL, 400)),
    ("a call of another Turn", result(turn_id="turn_2", output="42"), call(), None,
     (InvalidRequest, d.OTHER_TURN, 400)),
    ("a Subagent call answered under the root Turn id", OUT, call(child="turn_child"), d.Outcome.ACCEPT, None),
    ("a Subagent call answered under the child Turn id", result(turn_id="turn_child", output="42"),
     call(child="turn_child"), d.Outcome.ACCEPT, None),
    ("a Subagent call answered under another Turn id", result(turn_id="turn_x", output="42"), call(child="turn_child"),
     None, (InvalidRequest, d.OTHER_TURN, 400)),
]


@pytest.mark.parametrize("case,event,record,outcome,error", TABLE, ids=[t[0] for t in TABLE])
def test_classify(case, event, record, outcome, error):
    if error is None:
        assert d.classify(event, record).outcome is outcome
    else:
        kind, message, status = error
        with pytest.raises(kind) as err:
            d.classify(event, record)
        assert (err.value.message, err.value.status) == (message, status)


def test_conflict_types_and_codes():
    with pytest.raises(Conflict) as err:
        d.classify(result(output="x"), call(d.CallState.SUBMITTED, OUT_DIGEST))
    assert err.value.envelope()["error"]["type"] == "conflict_error"
    assert err.value.envelope()["error"]["code"] == "conflict_error"


def test_a_batch_is_all_or_nothing_and_an_unknown_call_has_the_official_null_param():
    calls = {"call_1": call()}
    with pytest.raises(InvalidRequest) as err:
        d.classify_batch([OUT, result(call_id="call_9")], calls)
    assert (err.value.message, err.value.param) == ("Unknown pending tool call.", None)


def test_same_call_twice_in_one_batch():
    calls = {"call_1": call()}
    decisions = d.classify_batch([OUT, OUT], calls)
    assert [x.outcome for x in decisions] == [d.Outcome.ACCEPT, d.Outcome.IDENTICAL]
    with pytest.raises(Conflict):
        d.classify_batch([OUT, result(output="other")], calls)


def test_digest_preserves_presence_and_content_not_turn_id():
    assert d.result_digest(result(output="42")) == d.result_digest(result(turn_id="turn_child", output="42"))
    assert d.result_digest(result()) != d.result_digest(result(output=None))
    parts = [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]
    assert d.result_digest(result(output=parts)) != d.result_digest(result(output=parts[::-1]))


IMG = {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="}


@pytest.mark.parametrize("harness,event,ok", [
    ("codex", result(output=[IMG]), True),
    ("minimax_code", result(output=[IMG]), False),
    ("minimax_code", result(output="text"), True),
    ("claude_code", result(output=[IMG]), True),
    ("claude_code", result(output=[IMG], success=False), False),
    ("claude_code", result(output=[{"type": "input_image", "image_url": "https://x/y.png"}]), False),
    ("claude_code", result(output=[{"type": "input_image", "image_url": "data:image/gif;base64,R0lG"}]), False),
])
def test_result_content_is_subject_to_the_harness(harness, event, ok):
    decl = harnessconfig.declaration(harness)
    if ok:
        d.check_result_content(decl, event, 0)
    else:
        with pytest.raises(UnsupportedConfiguration):
            d.check_result_content(decl, event, 0)
