"""Fixtures for tests that run the whole system in one process (imported by those modules): the
in-process stack, a tenant's official SDK client against it, and the scripted Runtime."""

import pytest
from moto import mock_aws

from agents_core.apikeys import create_key
from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import InProcessStack
from local.lambdas import MOTO_CONFIG
from tests.integration.conftest import KEEP_BOTO3_SESSION, sdk

# The Turn workflow's heartbeat bound in these tests: a Turn whose Runtime is silent this long fails.
# Short, so loss is detected quickly; long enough that a Runtime starved by a busy 2-core CI machine
# (coverage, the other xdist worker) is not mistaken for a lost one.
HEARTBEAT_SECONDS = 3


@pytest.fixture
def stack(monkeypatch):
    monkeypatch.setenv("HEARTBEAT_SECONDS", str(HEARTBEAT_SECONDS))
    with mock_aws(config={**MOTO_CONFIG, **KEEP_BOTO3_SESSION}):
        s = InProcessStack("agents-core-inprocess").start()
        yield s
        s.stop()
        stop_executions(s)


def stop_executions(stack):
    """A Turn a test left open keeps its workflow running in moto's threads after the test: its heartbeat
    timeout would fire during a later test and run SettleLost there, with that test's settings half
    installed (the in-process stack sets and restores TABLE_NAME and the state machine ARNs, and the
    settings are cached). Stop them with the stack."""
    import boto3

    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    for arn in stack.state_machines.values():
        for page in sfn.get_paginator("list_executions").paginate(stateMachineArn=arn, statusFilter="RUNNING"):
            for execution in page["executions"]:
                sfn.stop_execution(executionArn=execution["executionArn"])


@pytest.fixture
def client(stack):
    return sdk(stack.http, create_key(stack.store, "tenant-a"))


@pytest.fixture
def runtime(stack):
    return stack.connect_runtime(create_runtime_token(stack.store, "test"), ["scripted", "codex", "claude_code"])


def recording(runtime):
    """Every message the Runtime sends from now on (its Turns' channels are made after this)."""
    sent = []
    forward = runtime.runtime.send

    def send(message):
        sent.append(message)
        forward(message)

    runtime.runtime.send = send
    return sent
