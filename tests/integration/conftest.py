"""Integration fixtures: moto DynamoDB with the table from template.yaml, the real authorizer and
handlers behind the HTTP API v2 translation, and the official SDK talking to them in-process."""

from __future__ import annotations

import os

import boto3
import httpx2
import pytest
from moto import mock_aws

os.environ.update({
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "TABLE_NAME": "agents-core-test",
    "DEFAULT_HARNESS": "scripted", "POWERTOOLS_TRACE_DISABLED": "1", "POWERTOOLS_SERVICE_NAME": "agents-core",
    "POWERTOOLS_METRICS_NAMESPACE": "AgentsCore", "POWERTOOLS_LOG_LEVEL": "WARNING",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled", "POWERTOOLS_METRICS_DISABLED": "true",
})

from openai import OpenAI  # noqa: E402

from agents_core import settings as settings_module  # noqa: E402
from agents_core import store as store_module  # noqa: E402
from agents_core.apikeys import create_key  # noqa: E402
from local import apigw, iam, motofix, template  # noqa: E402

TABLE = os.environ["TABLE_NAME"]
iam.install()  # every handler's AWS calls are checked against its function's policies (local/iam.py)


# moto's Step Functions parses each ASL definition once per test process (~0.1 s of CPU saved per Turn).
motofix.parse_each_definition_once()
# moto replaces boto3's default session at every start, so every test's boto3 clients would load and parse
# botocore's service models again (~0.2 s a client). One default session per test process, as a Lambda
# execution environment keeps one; moto's stubber still serves every client created while it is active.
KEEP_BOTO3_SESSION = {"core": {"mock_credentials": True, "passthrough": {"urls": [], "services": []},
                               "reset_boto3_session": False, "service_whitelist": None}}


@pytest.fixture
def aws():
    motofix.install()
    with mock_aws(config=KEEP_BOTO3_SESSION):
        settings_module.get_settings.cache_clear()
        store_module.default_store.cache_clear()
        client = boto3.client("dynamodb", region_name="us-east-1")
        template.create_table(client, TABLE)
        yield client
        store_module.default_store.cache_clear()


@pytest.fixture
def store(aws):
    return store_module.default_store()


@pytest.fixture(scope="session")
def handlers():
    return apigw.load_handlers()


@pytest.fixture
def gateway(aws, handlers):
    return apigw.Gateway(handlers)


@pytest.fixture
def keys(store):
    return {"a": create_key(store, "tenant-a"), "b": create_key(store, "tenant-b")}


def sdk(gateway, key: str, **kwargs) -> OpenAI:
    return OpenAI(api_key=key, base_url="http://agents.local/v1", max_retries=0, _strict_response_validation=True,
                  http_client=httpx2.Client(transport=apigw.sdk_transport(gateway)), **kwargs)


@pytest.fixture
def client(gateway, keys) -> OpenAI:
    return sdk(gateway, keys["a"])


@pytest.fixture
def other(gateway, keys) -> OpenAI:
    return sdk(gateway, keys["b"])


def scan(aws_client) -> list[dict]:
    """Every item of the table, for 'a rejected request writes nothing' checks."""
    items, kwargs = [], {"TableName": TABLE, "ConsistentRead": True}
    while True:
        out = aws_client.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]
