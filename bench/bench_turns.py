"""Turns in one process (moto in-process, real handlers, the ASL executed, the scripted Runtime):

- DynamoDB requests per tool-result batch of 1, 16 and 64 results, and for an identical retry
  (counted on the submitting thread only; goal: one read + one TransactWriteItems, zero writes)
- DynamoDB requests and Step Functions states per Turn lifecycle (one function call)
- in-process latency per handler invocation (p50/p95)
- call round trip: message -> required action visible -> result -> Turn completed (p50/p95)
- fan-out of one event to 1, 100 and 1,000 subscribed connections
"""

from __future__ import annotations

try:
    from bench.common import emit, percentiles
except ImportError:  # run as a script
    from common import emit, percentiles  # type: ignore[no-redef]

import json
import math
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from moto import mock_aws

FN = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}


CURRENT = threading.local()


class ThreadCounter:
    """DynamoDB calls per thread and per calling function (botocore hooks), so background work and
    the benchmark's own polling do not pollute a figure."""

    def __init__(self, client: Any):
        self.by_thread: dict[int, Counter[str]] = defaultdict(Counter)
        self.by_function: dict[str, Counter[str]] = defaultdict(Counter)
        self.total: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.by_thread[threading.get_ident()][model.name] += 1
        self.by_function[getattr(CURRENT, "function", "other")][model.name] += 1
        self.total[model.name] += 1

    def mine(self) -> Counter[str]:
        return self.by_thread[threading.get_ident()]


def _kind(key: dict[str, Any]) -> str:
    pk, sk = key["PK"]["S"], key["SK"]["S"]
    if sk == "S":
        return "session"
    for prefix, kind in (("TURN#", "turn"), ("ITEM#", "item"), ("CALL#", "call"), ("OUT#", "outbox"),
                         ("SUB#", "subscription"), ("H#", "runtime")):
        if sk.startswith(prefix):
            return kind
    return "other" if "#IDEM#" not in pk else "idempotency"


def _size(item: dict[str, Any]) -> int:
    return len(json.dumps(item, separators=(",", ":"), default=lambda raw: "x" * len(raw)))  # B: its bytes


class UnitMeter:
    """Estimated DynamoDB request units (on-demand), attributed to the calling function: writes by
    item kind (sizes measured afterwards), reads from the items actually returned."""

    def __init__(self, client: Any):
        self.writes: dict[str, Counter[str]] = defaultdict(Counter)  # function -> kind -> transactional entries
        self.plain_writes: dict[str, Counter[str]] = defaultdict(Counter)
        self.rru: Counter[str] = Counter()
        self.on = False
        client.meta.events.register("provide-client-params.dynamodb", self._params)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _fn(self) -> str:
        return getattr(CURRENT, "function", "other")

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if not self.on:
            return
        if model.name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                op = next(iter(entry.values()))
                key = op.get("Key") or {"PK": op["Item"]["PK"], "SK": op["Item"]["SK"]}
                self.writes[self._fn()][_kind(key)] += 1
        elif model.name in ("PutItem", "UpdateItem", "DeleteItem"):
            key = params.get("Key") or {"PK": params["Item"]["PK"], "SK": params["Item"]["SK"]}
            self.plain_writes[self._fn()][_kind(key)] += 1

    def _after(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if not self.on:
            return
        if model.name == "GetItem" and parsed.get("Item"):
            self.rru[self._fn()] += math.ceil(_size(parsed["Item"]) / 4096)
        elif model.name == "GetItem":
            self.rru[self._fn()] += 1
        elif model.name == "BatchGetItem":
            for items in parsed.get("Responses", {}).values():
                self.rru[self._fn()] += sum(math.ceil(_size(i) / 4096) for i in items) or 1
        elif model.name == "TransactGetItems":
            self.rru[self._fn()] += sum(2 * math.ceil(_size(r["Item"]) / 4096) if r.get("Item") else 2
                                        for r in parsed.get("Responses", []))
        elif model.name == "Query":
            self.rru[self._fn()] += max(1, math.ceil(sum(_size(i) for i in parsed.get("Items", [])) / 4096))

    def wru(self, sizes_kb: dict[str, float], functions: Any = None) -> float:
        total = 0.0
        for fn, kinds in self.writes.items():
            if functions is None or fn in functions:
                total += sum(2 * math.ceil(sizes_kb.get(k, 1.0)) * n for k, n in kinds.items())
        for fn, kinds in self.plain_writes.items():
            if functions is None or fn in functions:
                total += sum(math.ceil(sizes_kb.get(k, 1.0)) * n for k, n in kinds.items())
        return total


class HandlerTimer:
    def __init__(self, handlers: dict[str, Any]):
        self.samples: dict[str, list[float]] = defaultdict(list)
        import inspect

        for name, handler in list(handlers.items()):
            if inspect.isfunction(handler) and not inspect.iscoroutinefunction(handler):  # not the ASGI app
                handlers[name] = self._wrap(name, handler)

    def _wrap(self, name: str, handler: Any) -> Any:
        def timed(event: Any, context: Any) -> Any:
            outer = getattr(CURRENT, "function", None)
            CURRENT.function = name
            t0 = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                self.samples[name].append(time.perf_counter() - t0)
                CURRENT.function = outer
        return timed




def main() -> dict:
    import os

    from agents_core import live
    from agents_core.apikeys import create_key
    from agents_core.aws import default_messenger
    from agents_core.runtimes.connections import create_runtime_token
    from local import apigw
    from local.inprocess import InProcessStack, wait_for
    from local.lambdas import MOTO_CONFIG
    from tests.integration.conftest import sdk
    os.environ["HEARTBEAT_SECONDS"] = "10"
    with mock_aws(config=MOTO_CONFIG):
        handlers = apigw.load_handlers()
        timer = HandlerTimer(handlers)
        stack = InProcessStack("agents-core-bench-turns", handlers).start()
        counter = ThreadCounter(stack.store.client)
        meter = UnitMeter(stack.store.client)
        ws_messages = Counter()
        original_message, original_post = stack.ws.message, stack.ws.post

        def counted_message(connection_id: str, body: str) -> None:
            if meter.on:
                ws_messages["in"] += 1
            original_message(connection_id, body)

        def counted_post(connection_id: str, data: Any) -> bool:
            if meter.on:
                ws_messages["out"] += 1
            return original_post(connection_id, data)

        stack.ws.message, stack.ws.post = counted_message, counted_post
        key = create_key(stack.store, "bench")
        client = sdk(stack.http, key)
        stack.connect_runtime(create_runtime_token(stack.store, "bench"), ["scripted"], heartbeat_seconds=5)
        headers = {"authorization": f"Bearer {key}", "openai-beta": "agents=v1"}

        def session(script: str) -> Any:
            return client.beta.agents.sessions.create(environment={"type": "none"}, input=script,
                                                      agent={"model": "m", "tools": [FN]},
                                                      extra_body={"x_agents_core": {"harness": "scripted"}})

        def submit(session_id: str, events: list[dict[str, Any]]) -> tuple[int, dict[str, int]]:
            counter.mine().clear()
            response = stack.http.handle("POST", f"/v1/agents/sessions/{session_id}/events", "", headers,
                                         json.dumps({"events": events}).encode())
            return response.status, dict(counter.mine())

        batches: dict[str, Any] = {}
        for n in (1, 16, 64):
            s = session(f"parallel {n} f {{}}\nsay done")
            actions = wait_for(lambda: (a := client.beta.agents.sessions.retrieve(s.id).required_actions)
                               and len(a) == n and a)
            events = [{"type": "agent.session.input.tool_result", "turn_id": a.turn_id, "call_id": a.call_id,
                       "success": True, "output": "ok"} for a in actions]
            status, first = submit(s.id, events)
            status_retry, retry = submit(s.id, events)
            batches[f"batch_{n}"] = {"status": status, "requests": first}
            batches[f"identical_retry_{n}"] = {"status": status_retry, "requests": retry}
            wait_for(lambda: client.beta.agents.sessions.retrieve(s.id).status == "idle")

        # One Turn lifecycle with one function call: every request of every component.
        time.sleep(0.5)
        counter.total.clear()
        counter.by_function.clear()
        invocations_before = {name: len(v) for name, v in timer.samples.items()}
        meter.on = True
        s = session("call f {}\nsay done")
        action = wait_for(lambda: client.beta.agents.sessions.retrieve(s.id).required_actions)[0]
        client.beta.agents.sessions.events.create(s.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, "output": "ok"}])
        wait_for(lambda: client.beta.agents.sessions.retrieve(s.id).status == "idle")
        time.sleep(0.5)  # let the stream consumer drain the last outbox records
        meter.on = False
        lifecycle = {name: dict(c) for name, c in sorted(counter.by_function.items()) if name != "ReadsFunction"}
        invocations = {name: len(v) - invocations_before.get(name, 0) for name, v in timer.samples.items()}
        invocations = {k: v for k, v in invocations.items() if v and k != "ReadsFunction"}
        sizes: dict[str, list[int]] = defaultdict(list)
        for raw in stack.dynamodb.scan(TableName=stack.table)["Items"]:
            sizes[_kind(raw)].append(_size(raw))
        sizes_kb = {k: sum(v) / len(v) / 1024 for k, v in sizes.items()}
        writers = [f for f in meter.writes if f != "ReadsFunction"] + [f for f in meter.plain_writes]
        lifecycle_wru = meter.wru(sizes_kb, set(writers))
        lifecycle_rru = sum(v for k, v in meter.rru.items() if k != "ReadsFunction")
        marginal_wru = meter.wru(sizes_kb, {"ResultsFunction"}) + (
            meter.wru(sizes_kb, {"RuntimeGatewayFunction"}) / max(1, invocations.get("RuntimeGatewayFunction", 1)))
        marginal_rru = meter.rru["ResultsFunction"] + meter.rru["RuntimeGatewayFunction"] / max(
            1, invocations.get("RuntimeGatewayFunction", 1))
        import boto3
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = stack.state_machines["TurnStateMachine"]
        execution = [e for e in sfn.list_executions(stateMachineArn=arn)["executions"] if e["name"] == action.turn_id][0]
        history = sfn.get_execution_history(executionArn=execution["executionArn"])["events"]
        states_entered = sum(1 for e in history if e["type"].endswith("StateEntered"))

        # Call round trip: message -> required action visible -> result -> Turn completed.
        for samples in timer.samples.values():
            samples.clear()
        round_trips, to_action = [], []
        for _ in range(20):
            t0 = time.perf_counter()
            s = session("call f {}\nsay done")
            action = wait_for(lambda: client.beta.agents.sessions.retrieve(s.id).required_actions)[0]
            t1 = time.perf_counter()
            client.beta.agents.sessions.events.create(s.id, events=[{
                "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
                "success": True, "output": "ok"}])
            wait_for(lambda: client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=s.id).status
                     == "completed")
            round_trips.append(time.perf_counter() - t0)
            to_action.append(t1 - t0)
        handler_latency = {name: percentiles(samples) for name, samples in sorted(timer.samples.items()) if samples}
        lambda_costing = {name: {"invocations": n, "p50_ms": handler_latency.get(name, {"p50_ms": 50.0})["p50_ms"]}
                          for name, n in invocations.items()}
        per = {name: v["p50_ms"] / 1000 * (0.25 if name in ("AuthorizerFunction", "WsConnectFunction",
                                                              "WsDisconnectFunction", "ClientsFunction") else 0.5)
               for name, v in lambda_costing.items()}
        marginal = {"wru": marginal_wru, "rru": marginal_rru, "http_api_requests": 1, "websocket_messages": 2,
                    "invocations": 3,
                    "gb_seconds": per.get("ResultsFunction", 0) + per.get("RuntimeGatewayFunction", 0)
                    + per.get("StreamFunction", 0)}

        # Fan-out of one event to N subscribed connections.
        fanout: dict[str, Any] = {}
        target = session("say hi")
        received = [0]

        def sink(text: str) -> None:
            received[0] += 1

        for n in (1, 100, 1000):
            connections = []
            for _ in range(n):
                conn = stack.ws.connect(sink, {"Authorization": f"Bearer {key}"})
                stack.ws.message(conn, json.dumps({"action": "subscribe", "session_id": target.id}))
                connections.append(conn)
            received[0] = 0
            event = {"type": "agent.session.idle", "event_id": "evt_bench", "session": {}}
            t0 = time.perf_counter()
            reached = live.fanout(stack.store, default_messenger(), "bench", target.id, 10_000 + n, [event])
            elapsed = time.perf_counter() - t0
            fanout[f"subscribers_{n}"] = {"seconds": round(elapsed, 4), "reached": reached,
                                          "per_connection_ms": round(elapsed / n * 1000, 3)}
            for conn in connections:
                stack.ws.disconnect(conn)
        stack.stop()
    return emit("turns", {
        "benchmark": "turns_results_fanout",
        "dynamodb_requests_per_batch": batches,
        "tool_result_marginal": marginal,
        "turn_lifecycle_one_call": {"dynamodb_requests_by_function": lifecycle,
                                    "request_units": {"wru": lifecycle_wru, "rru": lifecycle_rru},
                                    "item_kb": {k: round(v, 2) for k, v in sizes_kb.items()},
                                    "transactional_writes_by_function": {f: dict(c) for f, c in meter.writes.items()
                                                                         if f != "ReadsFunction"},
                                    "plain_writes_by_function": {f: dict(c) for f, c in meter.plain_writes.items()},
                                    "lambda": lambda_costing, "http_api_requests": 2,
                                    "websocket_messages": ws_messages["in"] + ws_messages["out"],
                                    "dynamodb_total": sum(sum(c.values()) for c in lifecycle.values()),
                                    "step_functions_states_entered": states_entered},
        "call_round_trip_in_process": {**percentiles(round_trips), "to_required_action": percentiles(to_action)},
        "handler_latency_in_process": handler_latency,
        "fanout_in_process": fanout,
        "note": "in-process: moto in the same process; latency includes moto's emulation and polling",
    })


if __name__ == "__main__":
    main()
