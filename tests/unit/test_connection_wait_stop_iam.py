"""template.yaml (issue 36, item 5): only the outbox consumer may stop a ConnectionWait execution, and only one named
wait-*; no function may stop a Turn's execution. Checked with the local IAM evaluator (local/iam.py) as AWS would
decide the calls. Pure."""

from __future__ import annotations

import pytest

from local import iam, template

WAIT = f"arn:aws:states:{template.REGION}:{template.ACCOUNT}:execution:ConnectionWaitStateMachine"
TURN = f"arn:aws:states:{template.REGION}:{template.ACCOUNT}:execution:TurnStateMachine"


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", "agents-core-test")
    monkeypatch.setenv("VAULT_KEY_ID", "1234abcd-12ab-34cd-56ef-1234567890ab")


def test_the_outbox_consumer_stops_only_connection_waits(env):
    stream = iam.policy("StreamFunction")
    assert iam.evaluate(stream, "states:StopExecution", f"{WAIT}:wait-turn_1", {}) == "Allow"
    assert iam.evaluate(stream, "states:StopExecution", f"{WAIT}:other", {}) != "Allow"
    assert iam.evaluate(stream, "states:StopExecution", f"{TURN}:turn_1", {}) != "Allow"


def test_no_other_function_may_stop_an_execution(env):
    others = [name for name in template.resources("AWS::Serverless::Function") if name != "StreamFunction"]
    assert others
    for name in others:
        assert iam.evaluate(iam.policy(name), "states:StopExecution", f"{WAIT}:wait-turn_1", {}) != "Allow", name
