"""DynamoDB requests per operation and in-process handler latency (moto, real handlers).

Session create, Session retrieve (goal: exactly 1 GetItem), Agent retrieve, list page; handler
latency for Session create with 64 tools.
"""

from __future__ import annotations

try:
    from bench.common import SMOKE, RequestCounter, emit, percentiles
except ImportError:  # run as a script
    from common import SMOKE, RequestCounter, emit, percentiles  # type: ignore[no-redef]

import json

import boto3
from moto import mock_aws


def main() -> dict:
    from agents_core import store as store_module
    from agents_core.apikeys import create_key
    from local import apigw, motofix, template

    motofix.install()

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        template.create_table(client, "agents-core-bench")
        store_module.default_store.cache_clear()
        store = store_module.default_store()
        counter = RequestCounter(store.client)
        key = create_key(store, "bench")
        gateway = apigw.Gateway(apigw.load_handlers())
        headers = {"authorization": f"Bearer {key}", "openai-beta": "agents=v1"}

        def call(method: str, path: str, body: object = None, query: str = "") -> dict:
            raw = json.dumps(body).encode() if body is not None else b""
            response = gateway.handle(method, path, query, headers, raw)
            assert response.status in (200, 201), response.body
            return json.loads(response.body)

        call("GET", "/v1/agents")  # warm the authorizer cache: API Gateway caches it per key
        tools = [{"type": "function", "name": f"fn_{i}", "description": "d",
                  "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}} for i in range(64)]
        counts: dict[str, dict[str, int]] = {}
        with counter.measure() as c:
            agent = call("POST", "/v1/agents", {"model": "gpt-5", "tools": tools})
        counts["agent_create"] = dict(c)
        with counter.measure() as c:
            call("GET", f"/v1/agents/{agent['id']}")
        counts["agent_retrieve"] = dict(c)
        body = {"agent_id": agent["id"], "environment": {"type": "none"}, "input": "say hi"}
        with counter.measure() as c:
            session = call("POST", "/v1/agents/sessions", body)
        counts["session_create_with_input"] = dict(c)
        with counter.measure() as c:
            call("GET", f"/v1/agents/sessions/{session['id']}")
        counts["session_retrieve"] = dict(c)
        for _ in range(3 if SMOKE else 25):
            call("POST", "/v1/agents/sessions", body)
        with counter.measure() as c:
            call("GET", "/v1/agents/sessions", query="limit=20")
        counts["session_list_page_20"] = dict(c)
        with counter.measure() as c:
            call("GET", "/v1/agents", query="limit=20")
        counts["agent_list_page"] = dict(c)

        inline = {"environment": {"type": "none"}, "input": "say hi", "agent": {"model": "gpt-5", "tools": tools}}
        create, create_own = counter.timed_excluding(lambda: call("POST", "/v1/agents/sessions", inline),
                                                     2 if SMOKE else 60)
        retrieve, retrieve_own = counter.timed_excluding(lambda: call("GET", f"/v1/agents/sessions/{session['id']}"),
                                                         2 if SMOKE else 100)
    return emit("requests", {
        "benchmark": "dynamodb_requests_and_handler_latency",
        "dynamodb_requests": counts,
        "session_retrieve_getitem_exactly_1": counts["session_retrieve"] == {"GetItem": 1},
        "latency_in_process_moto": {
            "session_create_64_tools": percentiles(create),
            "session_retrieve": percentiles(retrieve),
        },
        "latency_handler_excluding_dynamodb": {
            "session_create_64_tools": percentiles(create_own),
            "session_retrieve": percentiles(retrieve_own),
        },
        "note": "in-process handlers; 'in_process_moto' includes moto's DynamoDB emulation (its "
                "TransactWriteItems copies the table, so it grows with table size); 'excluding_dynamodb' "
                "subtracts the time spent inside DynamoDB calls",
    })


if __name__ == "__main__":
    main()
