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


class HandlerTimer:
    def __init__(self, handlers: dict[str, Any]):
        self.samples: dict[str, list[float]] = defaultdict(list)
        for name, handler in list(handlers.items()):
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


def wait_for(predicate: Any, timeout: float = 30.0) -> Any:
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise TimeoutError


def main() -> dict:
    import os

    from agents_core import live
    from agents_core.apikeys import create_key
    from agents_core.aws import default_messenger
    from agents_core.runtimes import create_runtime_token
    from local import apigw
    from local.inprocess import InProcessStack
    from local.lambdas import MOTO_CONFIG
    from tests.integration.conftest import sdk
    os.environ["HEARTBEAT_SECONDS"] = "10"
    with mock_aws(config=MOTO_CONFIG):
        handlers = apigw.load_handlers()
        timer = HandlerTimer(handlers)
        stack = InProcessStack("agents-core-bench-turns", handlers).start()
        counter = ThreadCounter(stack.store.client)
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
        s = session("call f {}\nsay done")
        action = wait_for(lambda: client.beta.agents.sessions.retrieve(s.id).required_actions)[0]
        client.beta.agents.sessions.events.create(s.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
            "success": True, "output": "ok"}])
        wait_for(lambda: client.beta.agents.sessions.retrieve(s.id).status == "idle")
        time.sleep(0.5)  # let the stream consumer drain the last outbox records
        lifecycle = {name: dict(c) for name, c in sorted(counter.by_function.items()) if name != "ReadsFunction"}
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
        "turn_lifecycle_one_call": {"dynamodb_requests_by_function": lifecycle,
                                    "dynamodb_total": sum(sum(c.values()) for c in lifecycle.values()),
                                    "step_functions_states_entered": states_entered},
        "call_round_trip_in_process": {**percentiles(round_trips), "to_required_action": percentiles(to_action)},
        "handler_latency_in_process": handler_latency,
        "fanout_in_process": fanout,
        "note": "in-process: moto in the same process; latency includes moto's emulation and polling",
    })


if __name__ == "__main__":
    main()
