"""The Turn flows of tests/integration/test_turns.py, run again end to end on the local stack: the
official SDK over real HTTP, the reference Runtime as its own process over a real WebSocket."""

import time

import pytest

from tests.e2e.conftest import start_runtime
from tests.integration.test_turns import (  # noqa: F401 - collected here with the e2e fixtures
    session_with,
    test_call_round_trip,
    test_idempotency_key_names_the_whole_batch,
    test_identical_retry_before_and_after_the_turn_ends_and_different_result,
    test_missing_structured_answer_fails_the_turn,
    test_mixed_batch_is_rejected_whole,
    test_result_after_abandon_is_409,
    test_result_after_cancel_is_409,
    test_steering_message_joins_the_running_turn,
    test_structured_output_answer_is_published_unchanged,
    test_subagent_call_answered_under_root_or_child_turn,
    test_unknown_call_and_other_turn_leave_the_action_unchanged,
    turn_status,
)

pytestmark = pytest.mark.e2e


def test_a_turn_queued_with_no_runtime_starts_when_one_connects(client, local_stack):
    session = session_with(client, "say hello", harness="minimax_code")
    turn_id = client.beta.agents.sessions.turns.list(session.id).data[0].id
    time.sleep(0.5)
    assert turn_status(client, session.id, turn_id) == "queued"
    late = start_runtime(local_stack, ["minimax_code"])
    try:
        end = time.time() + 20
        while turn_status(client, session.id, turn_id) != "completed" and time.time() < end:
            time.sleep(0.05)
        assert turn_status(client, session.id, turn_id) == "completed"
    finally:
        late.terminate()
        late.wait(timeout=10)
