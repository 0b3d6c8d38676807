"""The sample events in events/ (for `sam local invoke`) drive the real handlers."""

import json

from agents_core.apikeys import create_key
from local.apigw import LambdaContext, call_asgi
from tests.conftest import load_event


def test_every_function_has_a_sample_event(root):
    names = {p.name.split("-")[0] for p in (root / "events").glob("*.json")}
    functions = {p.name for p in (root / "functions").iterdir() if (p / "app.py").exists()}
    assert functions <= names


def test_authorizer_event(handlers, store):
    event = load_event("authorizer-request.json")
    denied = handlers["AuthorizerFunction"](event, LambdaContext("auth"))
    assert denied["policyDocument"]["Statement"] == [{"Action": "execute-api:Invoke", "Effect": "Deny",
                                                      "Resource": "arn:aws:execute-api:us-east-1:123456789012:abc123/dev/*"}]
    create_key(store, "tenant-example", "sk-agents-example")
    allowed = handlers["AuthorizerFunction"](event, LambdaContext("auth"))
    assert allowed["context"] == {"tenant": "tenant-example"} and allowed["principalId"] == "tenant-example"
    # cached per Authorization header for every route: the policy covers the whole stage, not this method
    assert allowed["policyDocument"]["Statement"][0]["Effect"] == "Allow"
    assert allowed["policyDocument"]["Statement"][0]["Resource"].endswith("abc123/dev/*")


def test_admission_and_reads_events(handlers, store):
    created = handlers["AdmissionFunction"](load_event("admission-create-agent.json"), LambdaContext("a"))
    assert created["statusCode"] == 201 and json.loads(created["body"])["object"] == "agent"
    event = load_event("session_stream-create-session.json")  # the Lambda Web Adapter's function: an ASGI app
    session = call_asgi(handlers["SessionStreamFunction"], event, event["body"].encode())
    assert session.status == 201 and json.loads(session.body)["status"] == "in_progress"
    files = call_asgi(handlers["FilesFunction"], load_event("files-list-files.json"), b"")  # no beta header needed
    assert files.status == 200 and json.loads(files.body) == {"object": "list", "data": [], "first_id": None,
                                                              "last_id": None, "has_more": False}
    listed = handlers["ReadsFunction"](load_event("reads-list-sessions.json"), LambdaContext("r"))
    assert len(json.loads(listed["body"])["data"]) == 1
    agents = handlers["ReadsFunction"](load_event("reads-list-agents.json"), LambdaContext("r"))
    assert json.loads(agents["body"])["data"][0]["name"] == "weather"


def test_websocket_and_stream_events(handlers, store):
    from agents_core.runtimes.connections import create_runtime_token
    context = LambdaContext("x")
    assert handlers["WsConnectFunction"](load_event("ws_connect-runtime.json"), context)["statusCode"] == 401
    create_runtime_token(store, "example", "rt-example")
    assert handlers["WsConnectFunction"](load_event("ws_connect-runtime.json"), context)["statusCode"] == 200
    assert handlers["WsDisconnectFunction"](load_event("ws_disconnect-close.json"), context)["statusCode"] == 200
    assert handlers["StreamFunction"](load_event("stream-outbox-record.json"), context) == {"batchItemFailures": []}
    assert handlers["SettleFunction"](load_event("settle-lost.json"), context) == {"status": "missing"}


def test_clients_event_on_an_unknown_connection_answers_with_an_error(handlers, store, monkeypatch):
    posted = []
    from agents_core.runtimes import connections
    monkeypatch.setattr(connections, "post_safely", lambda messenger, store, connection_id, message: posted.append(message))
    assert handlers["ClientsFunction"](load_event("clients-subscribe.json"), LambdaContext("c"))["statusCode"] == 200
    assert posted[0]["type"] == "error" and posted[0]["error"]["param"] == "action"


def test_exec_server_registry_event_refuses_a_signature_from_no_issued_key(handlers, store):
    """The sample registration is signed with a key no enrollment issued: refused, as the exec-server
    understands it (a 4xx in the official envelope), and nothing is written."""
    before = store.client.scan(TableName=store.table)["Count"]
    answer = handlers["ExecServerRegistryFunction"](load_event("exec_server_registry-register.json"), LambdaContext("x"))
    assert answer["statusCode"] in (403, 404)
    assert set(json.loads(answer["body"])["error"]) >= {"message", "type"}
    assert store.client.scan(TableName=store.table)["Count"] == before
