"""The stock `codex exec-server --remote`, Core side, in process (issue 26): every enrollment of a
self_hosted Environment issues an executor key pair (shown once, stored only sealed, replaced by the next
enrollment, revoked with the Session); the registry verifies the SigV4 signature, its time, a replay, the
Environment and the tenant, and answers a URL on an operator Runtime that hosts exec-server connections;
that host's `executor.connected` makes it serve exactly that Environment's Codex Turns."""

import hashlib
import json
import os
import time
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from agents_core import keys
from agents_core.apikeys import create_key
from agents_core.environments import exec_server
from agents_core.runtimes.connections import create_runtime_token
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures

BETA = {"headers": {"OpenAI-Beta": "agents=v1"}}
REMOTE = "http://agents.local"


@pytest.fixture(autouse=True)
def remote_url(monkeypatch):
    """This deployment's exec-server registry base (REMOTE_URL), read when the stack starts."""
    monkeypatch.setenv("REMOTE_URL", REMOTE)


def self_hosted(client, script=None, harness="codex"):
    body = {"agent": {"model": "gpt-5"}, "extra_body": {"x_agents_core": {"harness": harness}},
            "environment": {"type": "self_hosted", "workspace_directory": "/workspace"}}
    if script is not None:
        body["input"] = script
    return client.beta.agents.sessions.create(**body)


def enroll(client, env_id):
    return client.post(f"/agents/environments/{env_id}/enrollments", body={}, cast_to=object, options=BETA)


def register(stack, env_id, key_id, secret, *, region="us-east-1", body=b'{"transport":"direct_jsonrpc_v1"}',
             when=None, tamper=False, headers=None):
    """What the exec-server sends: a SigV4-signed POST (service execute-api), as botocore signs it."""
    path = f"/cloud/environment/{env_id}/direct/register"
    request = AWSRequest(method="POST", url=f"{REMOTE}{path}", data=body,
                         headers={"content-type": "application/json"})
    SigV4Auth(Credentials(key_id, secret), "execute-api", region).add_auth(request)
    sent = {k.lower(): v for k, v in request.headers.items()}
    sent["host"] = "agents.local"
    if when is not None:  # the same request signed at another time (this deployment's signer, as botocore's)
        amz_date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))
        scope = f"{amz_date[:8]}/{region}/execute-api/aws4_request"
        sent["x-amz-date"] = amz_date
        signed = ["content-type", "host", "x-amz-date"]
        value = exec_server.signature(secret, method="POST", path=path, query="", headers=sent, signed=signed,
                                      body=body, amz_date=amz_date, scope=scope)
        sent["authorization"] = (f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, SignedHeaders={';'.join(signed)}, "
                                 f"Signature={value}")
    if tamper:
        sent["authorization"] = sent["authorization"][:-4] + ("0000" if not sent["authorization"].endswith("0000")
                                                              else "1111")
    sent.update(headers or {})
    return _send(stack, path, sent, body)


def _send(stack, path, headers, body):
    answer = stack.http.handle("POST", path, "", headers, body)
    return answer.status, json.loads(answer.body or b"{}")


def table_dump(stack):
    items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=stack.store.table)["Items"]
    return json.dumps(items, default=str)


@pytest.fixture
def host(stack):
    """An operator's Codex Runtime whose executor listener takes exec-server connections."""
    runtime = stack.connect_runtime(create_runtime_token(stack.store, "executor-host"), ["codex"])
    wait_for(lambda: any(m.get("type") == "runtime.welcome" for m in runtime.inbox), timeout=10)
    runtime.send({"action": "executor.host", "url": "ws://127.0.0.1:9/executor"})
    wait_for(lambda: any(m.get("type") == "executor.host" for m in runtime.inbox), timeout=10)
    return runtime


def expects(runtime):
    return [m for m in runtime.inbox if m.get("type") == "executor.expect"]


def test_an_enrollment_issues_an_executor_key_shown_once_and_stored_only_sealed(client, stack):
    session = self_hosted(client)
    env_id = session.environment.id
    assert session.environment.remote_url == REMOTE  # "Pass this URL unchanged to codex exec-server --remote"
    enrollment = enroll(client, env_id)
    executor = enrollment["exec_server"]
    assert set(executor) == {"access_key_id", "secret_access_key", "region", "command"}
    key_id, secret = executor["access_key_id"], executor["secret_access_key"]
    assert key_id.startswith("AKEX") and len(key_id) == 20 and len(secret) >= 40
    assert executor["region"] == "us-east-1"
    assert executor["command"] == (
        f"AWS_ACCESS_KEY_ID={key_id} AWS_SECRET_ACCESS_KEY={secret} AWS_REGION=us-east-1 codex exec-server "
        f"--remote {REMOTE} --remote-transport direct --aws-sigv4 --environment-id {env_id}")
    dump = table_dump(stack)
    assert key_id in dump and secret not in dump  # sealed: a KMS-wrapped data key and AES-GCM ciphertext
    # never in a read or an event
    assert secret not in json.dumps(client.beta.agents.environments.retrieve(env_id).model_dump())
    assert secret not in json.dumps(client.beta.agents.sessions.retrieve(session.id).model_dump())


def test_the_next_enrollment_replaces_the_executor_key_and_deleting_the_session_revokes_it(client, stack, host):
    session = self_hosted(client)
    env_id = session.environment.id
    first = enroll(client, env_id)["exec_server"]
    second = enroll(client, env_id)["exec_server"]
    assert first["access_key_id"] != second["access_key_id"]
    status, body = register(stack, env_id, first["access_key_id"], first["secret_access_key"])
    assert status == 403 and "replaced" in body["error"]["message"]
    status, body = register(stack, env_id, second["access_key_id"], second["secret_access_key"])
    assert status == 200
    client.beta.agents.sessions.delete(session.id)
    status, body = register(stack, env_id, second["access_key_id"], second["secret_access_key"])
    assert status == 403
    assert stack.store.get(keys.exec_server_key(second["access_key_id"])) is None  # revoked with the Session


def test_a_signed_registration_answers_a_url_on_the_host_that_expects_its_token(client, stack, host):
    session = self_hosted(client)
    env_id = session.environment.id
    key = enroll(client, env_id)["exec_server"]
    status, body = register(stack, env_id, key["access_key_id"], key["secret_access_key"])
    assert status == 200, body
    assert set(body) == {"environment_id", "transport", "registration_id", "url"}
    assert body["environment_id"] == env_id and body["transport"] == "direct_jsonrpc_v1"
    url = urlsplit(body["url"])
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"ws://127.0.0.1:9/executor/{body['registration_id']}"
    token = parse_qs(url.query)["token"][0]
    wait_for(lambda: expects(host), timeout=10)
    expect = expects(host)[0]
    assert expect["registration_id"] == body["registration_id"] and expect["environment_id"] == env_id
    assert expect["token_sha256"] == hashlib.sha256(token.encode()).hexdigest() and token not in json.dumps(expect)
    assert token not in table_dump(stack)


def test_refused_registrations(client, stack, host):
    mine = self_hosted(client)
    sibling = self_hosted(client)
    key = enroll(client, mine.environment.id)["exec_server"]
    enroll(client, sibling.environment.id)
    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    foreign = self_hosted(other)
    foreign_key = enroll(other, foreign.environment.id)["exec_server"]
    key_id, secret = key["access_key_id"], key["secret_access_key"]
    cases = [
        ("a wrong signature", register(stack, mine.environment.id, key_id, secret, tamper=True), 403),
        ("a wrong secret", register(stack, mine.environment.id, key_id, secret[:-1] + "x"), 403),
        ("an unknown key", register(stack, mine.environment.id, "AKEX" + "A" * 16, secret), 403),
        ("a signature 6 minutes old", register(stack, mine.environment.id, key_id, secret, when=time.time() - 360), 403),
        ("another region's signature", register(stack, mine.environment.id, key_id, secret, region="eu-west-1"), 403),
        ("no signature", _send(stack, f"/cloud/environment/{mine.environment.id}/direct/register",
                               {"host": "agents.local"}, b"{}"), 403),
        ("another Environment's id, same tenant", register(stack, sibling.environment.id, key_id, secret), 404),
        ("another tenant's Environment", register(stack, foreign.environment.id, key_id, secret), 404),
        ("another tenant's key for my Environment",
         register(stack, mine.environment.id, foreign_key["access_key_id"], foreign_key["secret_access_key"]), 404),
        ("an Environment that does not exist", register(stack, "env_nope", key_id, secret), 404),
        ("the test's own signer, now (it signs as botocore does)",
         register(stack, mine.environment.id, key_id, secret, when=time.time()), 200),
    ]
    for name, (status, body), expected in cases:
        assert status == expected, (name, body)
        assert set(body) == ({"error"} if expected != 200 else {"environment_id", "transport", "registration_id",
                                                                 "url"}), name
    assert len(expects(host)) == 1  # nothing refused reached the host


def test_a_replayed_signature_is_refused(client, stack, host):
    session = self_hosted(client)
    key = enroll(client, session.environment.id)["exec_server"]
    path = f"/cloud/environment/{session.environment.id}/direct/register"
    body = b'{"transport":"direct_jsonrpc_v1"}'
    request = AWSRequest(method="POST", url=f"{REMOTE}{path}", data=body, headers={"content-type": "application/json"})
    SigV4Auth(Credentials(key["access_key_id"], key["secret_access_key"]), "execute-api", "us-east-1").add_auth(request)
    headers = {**{k.lower(): v for k, v in request.headers.items()}, "host": "agents.local"}
    assert _send(stack, path, headers, body)[0] == 200
    status, answer = _send(stack, path, headers, body)
    assert status == 403 and "already used" in answer["error"]["message"]


def test_without_an_executor_host_the_registration_says_so(client, stack):
    session = self_hosted(client)
    key = enroll(client, session.environment.id)["exec_server"]
    status, body = register(stack, session.environment.id, key["access_key_id"], key["secret_access_key"])
    assert status == 503 and body["error"]["code"] == "no_executor_host"


def test_a_joined_exec_server_lets_its_host_serve_exactly_that_environment(client, stack, host):
    session = self_hosted(client, "say hello")  # input waits for the Environment
    env_id = session.environment.id
    assert client.beta.agents.sessions.retrieve(session.id).required_actions[0].type == "environment_connection"
    key = enroll(client, env_id)["exec_server"]
    status, body = register(stack, env_id, key["access_key_id"], key["secret_access_key"])
    assert status == 200
    other = self_hosted(client, "say not mine")
    host.send({"action": "executor.connected", "registration_id": body["registration_id"]})
    wait_for(lambda: [m for m in host.inbox if m.get("type") == "turn.start"], timeout=10)
    starts = [m for m in host.inbox if m.get("type") == "turn.start"]
    assert [m["session_id"] for m in starts] == [session.id]  # never the other Environment's
    assert client.beta.agents.environments.retrieve(env_id).status == "connected"
    assert client.beta.agents.environments.retrieve(other.environment.id).status == "pending"
    assert all(a.type != "environment_connection" for a in client.beta.agents.sessions.retrieve(session.id).required_actions)
    # a registration of another connection is refused
    intruder = stack.connect_runtime(create_runtime_token(stack.store, "intruder"), ["codex"])
    wait_for(lambda: any(m.get("type") == "runtime.welcome" for m in intruder.inbox), timeout=10)
    intruder.send({"action": "executor.connected", "registration_id": body["registration_id"]})
    wait_for(lambda: [m for m in intruder.inbox if m.get("type") == "error"], timeout=10)
    # the exec-server goes: the Environment is disconnected
    host.send({"action": "executor.disconnected", "registration_id": body["registration_id"]})
    wait_for(lambda: client.beta.agents.environments.retrieve(env_id).status == "disconnected", timeout=10)


def test_only_an_operator_runtime_hosts_exec_server_connections(client, stack, tmp_path):
    session = self_hosted(client)
    enrollment = enroll(client, session.environment.id)
    machine = stack.connect_runtime(enrollment["token"], ["codex"], workspace=str(tmp_path))
    wait_for(lambda: machine.credential, timeout=10)
    machine.send({"action": "executor.host", "url": "ws://127.0.0.1:9/executor"})
    wait_for(lambda: [m for m in machine.inbox if m.get("type") == "error"], timeout=10)
    assert os.environ.get("REMOTE_URL") == REMOTE


def test_a_registration_made_with_a_replaced_key_cannot_join(client, stack, host):
    session = self_hosted(client, "say hello")
    env_id = session.environment.id
    key = enroll(client, env_id)["exec_server"]
    status, body = register(stack, env_id, key["access_key_id"], key["secret_access_key"])
    assert status == 200
    enroll(client, env_id)  # a newer enrollment: the earlier key is gone
    host.send({"action": "executor.connected", "registration_id": body["registration_id"]})
    wait_for(lambda: [m for m in host.inbox if m.get("type") == "error"], timeout=10)
    assert client.beta.agents.environments.retrieve(env_id).status == "pending"
    assert [m for m in host.inbox if m.get("type") == "turn.start"] == []


def test_the_host_that_served_an_environment_keeps_it(client, stack, host):
    session = self_hosted(client)
    env_id = session.environment.id
    key = enroll(client, env_id)["exec_server"]
    assert register(stack, env_id, key["access_key_id"], key["secret_access_key"])[0] == 200
    time.sleep(1.1)  # connections are ordered by their hello's second: the newer host must be a later one
    newer = stack.connect_runtime(create_runtime_token(stack.store, "newer-host"), ["codex"])
    wait_for(lambda: any(m.get("type") == "runtime.welcome" for m in newer.inbox), timeout=10)
    newer.send({"action": "executor.host", "url": "ws://127.0.0.1:10/executor"})
    wait_for(lambda: any(m.get("type") == "executor.host" for m in newer.inbox), timeout=10)
    time.sleep(1.1)  # a new signature (X-Amz-Date has 1 s resolution; the same one again is a replay)
    status, body = register(stack, env_id, key["access_key_id"], key["secret_access_key"])
    assert status == 200 and body["url"].startswith("ws://127.0.0.1:9/executor/")  # not the newest host
    other = self_hosted(client)
    other_key = enroll(client, other.environment.id)["exec_server"]
    status, body = register(stack, other.environment.id, other_key["access_key_id"], other_key["secret_access_key"])
    assert status == 200 and body["url"].startswith("ws://127.0.0.1:10/executor/")  # a new one: the newest
