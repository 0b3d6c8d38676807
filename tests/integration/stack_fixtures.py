"""Fixtures for tests that run the whole system in one process (imported by those modules): the
in-process stack, a tenant's official SDK client against it, and the scripted Runtime."""

import pytest
from moto import mock_aws

from agents_core.apikeys import create_key
from agents_core.runtimes import create_runtime_token
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


@pytest.fixture
def client(stack):
    return sdk(stack.http, create_key(stack.store, "tenant-a"))


@pytest.fixture
def runtime(stack):
    return stack.connect_runtime(create_runtime_token(stack.store, "test"), ["scripted", "codex", "claude_code"])
