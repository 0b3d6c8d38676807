"""Turns in one process (moto in-process, real handlers, the ASL executed, the scripted Runtime):

- DynamoDB requests per tool-result batch of 1, 16 and 64 results, and for an identical retry
  (counted on the submitting thread only; goal: one read + one TransactWriteItems, zero writes)
- DynamoDB requests and Step Functions states per Turn lifecycle (one function call)
- in-process latency per handler invocation (p50/p95)
- call round trip: message -> required action visible -> result -> Turn completed (p50/p95)
- fan-out of one event to 1, 100 and 1,000 subscribed connections
- a waiting Turn (a function call pending): every hop of its heartbeats over a window, per beat
- DynamoDB write units of GSI1 (projection ALL) beside the table's, from each written item's index
  entry before and after the write

`--smoke` (what `make test` runs: tests/integration/test_bench_smoke.py): the smallest sizes, the same figures.
"""

from __future__ import annotations

try:
    from bench.common import emit, percentiles
except ImportError:  # run as a script
    from common import emit, percentiles  # type: ignore[no-redef]

import json
import math
import sys
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from moto import mock_aws

FN = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}


CURRENT = threading.local()
HEARTBEAT = "Heartbeat"  # the Runtime gateway's invocations for heartbeat messages
APART = ("ReadsFunction", HEARTBEAT)  # not in a Turn's own figures: the client's polling, the heartbeats


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


def _value_size(value: dict[str, Any]) -> int:
    """A value's size as DynamoDB counts it (Item sizes, developer guide): strings and binaries their bytes,
    numbers about one byte per two digits plus one, maps and lists 3 bytes plus each element (and name)."""
    (kind, raw), = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "B":
        return len(raw)
    if kind == "N":
        return len(raw.lstrip("-").replace(".", "")) // 2 + 1
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "M":
        return 3 + sum(len(k.encode()) + _value_size(v) + 1 for k, v in raw.items())
    if kind == "L":
        return 3 + sum(_value_size(v) + 1 for v in raw)
    return sum(len(x) if isinstance(x, (bytes, str)) else 1 for x in raw)  # SS, NS, BS


def _size(item: dict[str, Any]) -> int:
    """An item's size in bytes (attribute names plus values)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _index_writes(before: Any, after: Any) -> list[int]:
    """The sizes (B) of the writes a table write makes to GSI1 (DynamoDB's rules for a global secondary index:
    an item entering or leaving the index is one write, one that stays is one write (projection ALL: any
    attribute change), one whose index key changes is two: a delete and a put)."""
    if before is None and after is None:
        return []
    if before is None or after is None:
        return [(before or after)[1]]
    return [after[1]] if before[0] == after[0] else [before[1], after[1]]


class UnitMeter:
    """Estimated DynamoDB request units (on-demand), attributed to the calling function: writes by
    item kind (sizes measured afterwards), reads from the items actually returned, and GSI1's write
    units from each written item's index entry read (by `reader`, uncounted) before and after it."""

    def __init__(self, client: Any, reader: Any = None):
        self.writes: dict[str, Counter[str]] = defaultdict(Counter)  # function -> kind -> transactional entries
        self.plain_writes: dict[str, Counter[str]] = defaultdict(Counter)
        self.rru: Counter[str] = Counter()
        self.index_wru: Counter[str] = Counter()  # function -> GSI1 write units
        self.index_writes: Counter[str] = Counter()  # function -> GSI1 writes
        self.reader = reader
        self._pending = threading.local()
        self.on = False
        client.meta.events.register("provide-client-params.dynamodb", self._params)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _fn(self) -> str:
        return getattr(CURRENT, "function", "other")

    def _entry(self, table: str, key: dict[str, Any]) -> Any:
        """(GSI1 key, size in B) of the item's index entry now, or None when it is not in GSI1."""
        if self.reader is None:
            return None
        from local import iam

        with iam.acting_as(None):  # the benchmark's own read, not the function's
            item = self.reader.get_item(TableName=table, Key={"PK": key["PK"], "SK": key["SK"]},
                                        ConsistentRead=True).get("Item")
        if not item or "GSI1PK" not in item:
            return None
        return (item["GSI1PK"]["S"], item.get("GSI1SK", {}).get("S")), _size(item)

    def _params(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if not self.on:
            return
        written: list[tuple[str, dict[str, Any], bool]] = []
        if model.name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                kind_of_op, op = next(iter(entry.items()))
                key = op.get("Key") or {"PK": op["Item"]["PK"], "SK": op["Item"]["SK"]}
                self.writes[self._fn()][_kind(key)] += 1
                if kind_of_op != "ConditionCheck":
                    written.append((op["TableName"], key, True))
        elif model.name in ("PutItem", "UpdateItem", "DeleteItem"):
            key = params.get("Key") or {"PK": params["Item"]["PK"], "SK": params["Item"]["SK"]}
            self.plain_writes[self._fn()][_kind(key)] += 1
            written.append((params["TableName"], key, False))
        self._pending.before = [(table, key, tx, self._entry(table, key)) for table, key, tx in written]
        if model.name == "BatchGetItem":
            self._pending.consistent = all(r.get("ConsistentRead") for r in params["RequestItems"].values())
        else:
            self._pending.consistent = model.name not in ("GetItem", "Query") or bool(params.get("ConsistentRead"))

    def _after(self, model: Any, parsed: dict[str, Any], http_response: Any = None, **_: Any) -> None:
        if not self.on:
            return
        before_rru, fn = self.rru[self._fn()], self._fn()
        self._reads(model, parsed)
        if not getattr(self._pending, "consistent", True):  # an eventually consistent read: half the units
            self.rru[fn] = before_rru + (self.rru[fn] - before_rru) / 2
        self._index_after(http_response)

    def _index_after(self, http_response: Any) -> None:
        pending, self._pending.before = getattr(self._pending, "before", None), None
        if pending and (http_response is None or http_response.status_code < 300):
            for table, key, transactional, before in pending:
                sizes = _index_writes(before, self._entry(table, key))
                self.index_writes[self._fn()] += len(sizes)
                # counted at the transactional rate when the table write is transactional (conservative)
                self.index_wru[self._fn()] += sum((2 if transactional else 1) * math.ceil(b / 1024) for b in sizes)

    def _reads(self, model: Any, parsed: dict[str, Any]) -> None:
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
            if inspect.iscoroutinefunction(handler):
                handlers[name] = self._wrap_asgi(name, handler)  # a Lambda Web Adapter function: one invocation
            elif inspect.isfunction(handler):
                handlers[name] = self._wrap(name, handler)

    def _wrap_asgi(self, name: str, app: Any) -> Any:
        async def timed(scope: Any, receive: Any, send: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await app(scope, receive, send)
            finally:
                self.samples[name].append(time.perf_counter() - t0)
        return timed

    def _wrap(self, name: str, handler: Any) -> Any:
        def timed(event: Any, context: Any) -> Any:
            outer = getattr(CURRENT, "function", None)
            # a heartbeat's invocation is counted apart: the waiting Turn's cost, per minute, not the Turn's own
            label = HEARTBEAT if getattr(CURRENT, "beat", False) and name == "RuntimeGatewayFunction" else name
            CURRENT.function = label
            t0 = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                self.samples[label].append(time.perf_counter() - t0)
                CURRENT.function = outer
        return timed




def _kms_counter(meter: UnitMeter) -> Counter[str]:
    """KMS requests while the meter is on (moto's backend, whichever client made them)."""
    from moto.kms.models import KmsBackend

    calls: Counter[str] = Counter()
    for name in ("encrypt", "decrypt", "re_encrypt", "generate_data_key"):
        real = getattr(KmsBackend, name)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            if meter.on:
                calls[_name] += 1
            return _real(self, *args, **kwargs)

        setattr(KmsBackend, name, counted)
    return calls


def main(smoke: bool = False) -> dict:
    import os

    import boto3

    from agents_core import live
    from agents_core.apikeys import create_key
    from agents_core.aws import default_messenger
    from agents_core.runtimes.connections import create_runtime_token
    from local import apigw
    from local.inprocess import InProcessStack, wait_for
    from local.lambdas import MOTO_CONFIG
    from tests.integration.conftest import sdk

    # The heartbeat bound (HeartbeatSeconds): the Runtime beats at a third of it (its welcome says so), so a
    # waiting Turn's window holds a few beats; the smoke uses the smallest bound the window needs.
    bound = 3 if smoke else 6
    os.environ["HEARTBEAT_SECONDS"] = str(bound)
    sizes_of_batches = (1,) if smoke else (1, 16, 64)
    rounds = 1 if smoke else 20
    settle = 0.2 if smoke else 0.5  # seconds for background work (the stream consumer) to drain
    subscribers = (1, 10) if smoke else (1, 100, 1000)
    window = (1.3 if smoke else 8.5) * bound / 3  # seconds a waiting Turn is watched: 1 (smoke) or 8 beats
    with mock_aws(config=MOTO_CONFIG):
        handlers = apigw.load_handlers()
        timer = HandlerTimer(handlers)
        stack = InProcessStack("agents-core-bench-turns", handlers).start()
        counter = ThreadCounter(stack.store.client)
        meter = UnitMeter(stack.store.client, boto3.client("dynamodb", region_name="us-east-1"))
        kms_calls = _kms_counter(meter)
        ws_messages = Counter()
        beats = Counter()
        original_message, original_post = stack.ws.message, stack.ws.post

        def counted_message(connection_id: str, body: str) -> None:
            if meter.on:
                ws_messages["in"] += 1
                action = (json.loads(body) if body.startswith("{") else {}).get("action", "")
                if action in ("runtime.heartbeat", "turn.heartbeat"):
                    beats[action] += 1
                    CURRENT.beat = True  # delivered on this thread: its invocation is labelled HEARTBEAT
            try:
                original_message(connection_id, body)
            finally:
                CURRENT.beat = False

        def counted_post(connection_id: str, data: Any) -> bool:
            if meter.on:
                ws_messages["out"] += 1
            return original_post(connection_id, data)

        stack.ws.message, stack.ws.post = counted_message, counted_post
        key = create_key(stack.store, "bench")
        client = sdk(stack.http, key)
        runtime = stack.connect_runtime(create_runtime_token(stack.store, "bench"), ["scripted"], heartbeat_seconds=5)

        def acknowledged() -> bool:
            """Core acknowledged every observation the Runtime sent (with deferred acks, a beat's `turn.acks` did:
            that answer is part of the Turn's messages, so a measurement waits for it)."""
            return not any(c.unacknowledged for c in list(runtime.runtime.channels.values()))
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
        for n in sizes_of_batches:
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
        time.sleep(settle)
        wait_for(acknowledged)
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
        wait_for(acknowledged)  # the beat's answer acknowledging the Turn's last observations is the Turn's
        time.sleep(settle)  # let the stream consumer drain the last outbox records
        meter.on = False
        lifecycle = {name: dict(c) for name, c in sorted(counter.by_function.items()) if name not in APART}
        invocations = {name: len(v) - invocations_before.get(name, 0) for name, v in timer.samples.items()}
        invocations = {k: v for k, v in invocations.items() if v and k not in APART}
        sizes: dict[str, list[int]] = defaultdict(list)
        for raw in stack.dynamodb.scan(TableName=stack.table)["Items"]:
            sizes[_kind(raw)].append(_size(raw))
        sizes_kb = {k: sum(v) / len(v) / 1024 for k, v in sizes.items()}
        writers = [f for f in [*meter.writes, *meter.plain_writes] if f not in APART]
        lifecycle_wru = meter.wru(sizes_kb, set(writers))
        lifecycle_index_wru = sum(v for k, v in meter.index_wru.items() if k not in APART)
        lifecycle_index_writes = sum(v for k, v in meter.index_writes.items() if k not in APART)
        lifecycle_kms = sum(kms_calls.values())
        meter_index = {f: v for f, v in meter.index_wru.items() if f not in APART and v}
        lifecycle_rru = sum(v for k, v in meter.rru.items() if k not in APART)
        marginal_wru = meter.wru(sizes_kb, {"ResultsFunction"}) + (
            meter.wru(sizes_kb, {"RuntimeGatewayFunction"}) / max(1, invocations.get("RuntimeGatewayFunction", 1)))
        marginal_rru = meter.rru["ResultsFunction"] + meter.rru["RuntimeGatewayFunction"] / max(
            1, invocations.get("RuntimeGatewayFunction", 1))
        marginal_index_wru = meter.index_wru["ResultsFunction"] + meter.index_wru["RuntimeGatewayFunction"] / max(
            1, invocations.get("RuntimeGatewayFunction", 1))
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        arn = stack.state_machines["TurnStateMachine"]
        execution = [e for e in sfn.list_executions(stateMachineArn=arn)["executions"] if e["name"] == action.turn_id][0]
        history = wait_for(lambda: (h := sfn.get_execution_history(executionArn=execution["executionArn"])["events"])
                           and h[-1]["type"] == "ExecutionSucceeded" and h)
        states_entered = sum(1 for e in history if e["type"].endswith("StateEntered"))

        life = {"dynamodb_requests_by_function": lifecycle,
                "request_units": {"wru": lifecycle_wru, "rru": lifecycle_rru, "index_wru": lifecycle_index_wru},
                "index_writes": lifecycle_index_writes, "index_wru_by_function": meter_index,
                "kms_requests": lifecycle_kms, "item_kb": {k: round(v, 2) for k, v in sizes_kb.items()},
                "transactional_writes_by_function": {f: dict(c) for f, c in meter.writes.items() if f not in APART},
                "plain_writes_by_function": {f: dict(c) for f, c in meter.plain_writes.items()},
                "http_api_requests": 2, "heartbeats": dict(beats),
                "websocket_messages": ws_messages["in"] + ws_messages["out"] - sum(beats.values()),
                "dynamodb_total": sum(sum(c.values()) for c in lifecycle.values()),
                "step_functions_states_entered": states_entered}

        # A waiting Turn (its function call pending): every hop its Runtime's heartbeats make over the window.
        waiting_session = session("call f {}\nsay done")
        waiting = wait_for(lambda: client.beta.agents.sessions.retrieve(waiting_session.id).required_actions)[0]
        wait_for(acknowledged)  # the call's acknowledgement is the Turn's, not its waiting minutes'
        time.sleep(settle)
        counter.total.clear()
        counter.by_function.clear()
        meter.writes.clear(), meter.plain_writes.clear(), meter.rru.clear(), meter.index_wru.clear()
        meter.index_writes.clear(), ws_messages.clear(), beats.clear(), kms_calls.clear()
        before = {name: len(v) for name, v in timer.samples.items()}
        meter.on = True
        time.sleep(window)
        meter.on = False
        beat_invocations = {name: len(v) - before.get(name, 0) for name, v in timer.samples.items()}
        beat_invocations = {k: v for k, v in beat_invocations.items() if v and k != "ReadsFunction"}
        beat_ms = {name: percentiles(timer.samples[name][before.get(name, 0):])["p50_ms"] for name in beat_invocations}
        n_beats = max(1, sum(beats.values()))
        waiting_figures = {
            "window_seconds": round(window, 2), "heartbeat_bound_seconds": bound, "beats": dict(beats),
            "websocket_messages": ws_messages["in"] + ws_messages["out"],
            "lambda": {name: {"invocations": n, "p50_ms": beat_ms[name]} for name, n in beat_invocations.items()},
            "dynamodb_requests": dict(counter.total),
            "rru": sum(meter.rru.values()), "wru": meter.wru(sizes_kb), "index_wru": sum(meter.index_wru.values()),
            "kms_requests": sum(kms_calls.values()), "per_beat_of": n_beats,
        }
        client.beta.agents.sessions.events.create(waiting_session.id, events=[{
            "type": "agent.session.input.tool_result", "turn_id": waiting.turn_id, "call_id": waiting.call_id,
            "success": True, "output": "ok"}])
        wait_for(lambda: client.beta.agents.sessions.retrieve(waiting_session.id).status == "idle")

        # Call round trip: message -> required action visible -> result -> Turn completed.
        for samples in timer.samples.values():
            samples.clear()
        round_trips, to_action = [], []
        for _ in range(rounds):
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
        marginal = {"wru": marginal_wru, "rru": marginal_rru, "index_wru": marginal_index_wru,
                    "http_api_requests": 1, "websocket_messages": 2, "invocations": 3,
                    "gb_seconds": per.get("ResultsFunction", 0) + per.get("RuntimeGatewayFunction", 0)
                    + per.get("StreamFunction", 0)}

        # Fan-out of one event to N subscribed connections.
        fanout: dict[str, Any] = {}
        target = session("say hi")
        received = [0]

        def sink(text: str) -> None:
            received[0] += 1

        for n in subscribers:
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
        "turn_lifecycle_one_call": {**life, "lambda": lambda_costing},
        "waiting_turn": waiting_figures,
        "smoke": smoke,
        "call_round_trip_in_process": {**percentiles(round_trips), "to_required_action": percentiles(to_action)},
        "handler_latency_in_process": handler_latency,
        "fanout_in_process": fanout,
        "note": "in-process: moto in the same process; latency includes moto's emulation and polling",
    })


if __name__ == "__main__":
    main(smoke="--smoke" in sys.argv[1:])
