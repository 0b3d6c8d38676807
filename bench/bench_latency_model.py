"""An AWS latency model for a Turn's critical paths, from hops recorded on the local stack.

The in-process stack (moto executing our ASL, the real handlers, the stream poller, the scripted
Runtime) runs Turns with one function call. Every hop is recorded by kind at the boundary where AWS
would spend time on it:

- `api_gateway_http`: an HTTP request through the HTTP API (plus a warm Lambda invoke)
- `api_gateway_websocket_in`: a Runtime message through the WebSocket API (plus a warm Lambda invoke)
- `streams_to_lambda`: a DynamoDB Streams batch delivered to the stream consumer (plus a warm Lambda invoke)
- `sfn_task`: a Step Functions Lambda task (Dispatch, Settle...) (plus a warm Lambda invoke)
- `sfn_api`: StartExecution / SendTask* calls
- `dynamodb_read` / `dynamodb_write` / `dynamodb_transaction`: DynamoDB requests
- `websocket_post`: PostToConnection (to the Runtime or a subscriber)

Paths (a quiet single Turn: no subscribers, heartbeats far apart, each path separated by a pause so
that one path's tail does not fall into the next one's window):

1. `message_to_turn_start`: POST message -> `turn.start` posted to the Runtime
2. `function_call_to_required_action`: the Runtime sends `turn.function_call` -> the required action readable
3. `result_to_runtime`: POST tool_result -> `turn.tool_result` posted to the Runtime
4. `completion_to_idle`: the Runtime sends `turn.completed` -> the Session readable as idle

A path's critical hops are the chain it waited on, walked back from the hop that finished it (see
`critical_chain`); work that ran beside it in the same window (a redundant stream delivery, fan-out)
is listed apart and not projected. The projection replaces
each hop's local duration by a sample of its kind's AWS latency (lognormal from p50/p95 in
bench/aws_latency.json, each with its public source) and adds the handlers' own compute time as
measured here (handler time minus the AWS calls it made). Printed per path: local p50/p95, hop counts
by kind, Streams hops, projected AWS p50/p95.

    .venv/bin/python bench/bench_latency_model.py [turns]
"""

from __future__ import annotations

try:
    from bench.common import ROOT, emit, percentiles
except ImportError:  # run as a script
    from common import ROOT, emit, percentiles  # type: ignore[no-redef]

import json
import math
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from moto import mock_aws

PARAMETERS = json.loads((ROOT / "bench" / "aws_latency.json").read_text())["kinds"]
FN = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}
ENTRY_KINDS = ("api_gateway_http", "api_gateway_websocket_in", "streams_to_lambda", "sfn_task")
READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}
TRANSACTIONS = {"TransactWriteItems"}
PAUSE = 0.3  # seconds between paths, so one path's tail stays out of the next window


@dataclass
class Hop:
    t0: float
    t1: float
    kind: str
    name: str
    thread: int
    own: float = 0.0  # an entry hop's handler compute time (its duration minus the AWS calls it made)


class Recorder:
    def __init__(self) -> None:
        self.hops: list[Hop] = []
        self.marks: dict[str, list[float]] = {}
        self.quiet = threading.local()  # the benchmark's own polling is not a hop
        self._lock = threading.Lock()

    def mark(self, name: str) -> None:
        with self._lock:
            self.marks.setdefault(name, []).append(time.perf_counter())

    def around(self, kind: str, name: str, fn: Any) -> Any:
        if getattr(self.quiet, "on", False):
            return fn()
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            with self._lock:
                self.hops.append(Hop(t0, time.perf_counter(), kind, name, threading.get_ident()))

    def finish(self) -> None:
        """Own compute time of each entry hop: its duration minus the AWS calls made inside it."""
        calls = [h for h in self.hops if h.kind not in ENTRY_KINDS]
        for hop in self.hops:
            if hop.kind in ENTRY_KINDS:
                inside = sum(c.t1 - c.t0 for c in calls if c.thread == hop.thread and c.t0 >= hop.t0 and c.t1 <= hop.t1)
                hop.own = max(0.0, (hop.t1 - hop.t0) - inside)


def install(recorder: Recorder, stack: Any) -> None:
    import botocore.client

    from local import lambdas

    original_call = botocore.client.BaseClient._make_api_call

    def api_call(self: Any, operation: str, params: Any) -> Any:
        service = self.meta.service_model.service_name
        if service == "dynamodb":
            kind = ("dynamodb_read" if operation in READS else
                    "dynamodb_transaction" if operation in TRANSACTIONS else "dynamodb_write")
        elif service in ("stepfunctions", "sfn"):
            kind = "sfn_api"
        elif service == "apigatewaymanagementapi":
            kind = "websocket_post"
        else:  # dynamodbstreams: the event source mapping's own polling, priced in streams_to_lambda
            return original_call(self, operation, params)
        return recorder.around(kind, operation, lambda: original_call(self, operation, params))

    botocore.client.BaseClient._make_api_call = api_call  # type: ignore[method-assign]

    http_handle = stack.http.handle
    stack.http.handle = lambda method, path, *a, **k: recorder.around(
        "api_gateway_http", f"{method} {path.split('/')[-1]}", lambda: http_handle(method, path, *a, **k))

    ws_message = stack.ws.message

    def message(connection_id: str, body: str) -> Any:
        if '"turn.function_call"' in body:
            recorder.mark("function_call_sent")
        if '"turn.completed"' in body:
            recorder.mark("completed_sent")
        return recorder.around("api_gateway_websocket_in", _action(body), lambda: ws_message(connection_id, body))

    stack.ws.message = message

    ws_post = stack.ws.post

    def post(connection_id: str, data: Any) -> bool:
        text = data.decode() if isinstance(data, bytes) else str(data)
        ok = ws_post(connection_id, data)
        for kind in ("turn.start", "turn.tool_result"):
            if f'"type": "{kind}"' in text or f'"type":"{kind}"' in text:
                recorder.mark(f"{kind}_received")
        return ok

    stack.ws.post = post

    stream_handler = stack.poller.handler
    stack.poller.handler = lambda event, context: recorder.around(
        "streams_to_lambda", f"{len(event.get('Records', []))} records", lambda: stream_handler(event, context))

    for name, handler in list(lambdas._handlers.items()):
        lambdas._handlers[name] = (lambda n, h: lambda event, context: recorder.around(
            "sfn_task", n, lambda: h(event, context)))(name, handler)


def _action(body: str) -> str:
    try:
        return str(json.loads(body).get("action"))
    except ValueError:
        return "?"


def _sample(kind: str, rng: random.Random) -> float:
    p = PARAMETERS[kind]
    mu = math.log(p["p50_ms"])
    sigma = max(1e-9, (math.log(p["p95_ms"]) - mu) / 1.645)
    return rng.lognormvariate(mu, sigma)


def critical_chain(hops: list[Hop], start: float, end: float, end_kind: str) -> list[Hop]:
    """The hops a path waited on, walked back from the hop that finished it to the path's entry.

    The path ends with `end_kind` (the post that delivered the Runtime's message, or the write that
    made the state readable). Each call belongs to the entry hop (a Lambda invocation) that made it;
    that invocation's calls up to the link count. An invocation was caused by: the client (HTTP or
    WebSocket message: the path's start), the write whose stream record it handles (the latest write
    before it), or the Step Functions call that scheduled its task (the earliest one in the window:
    a repeated StartExecution of the same execution schedules nothing). Parallel work (a second
    stream delivery, fan-out) is not on the chain."""
    window = [h for h in hops if start <= h.t0 <= end]
    calls = [h for h in window if h.kind not in ENTRY_KINDS]
    entries = [h for h in window if h.kind in ENTRY_KINDS]
    writes = ("dynamodb_transaction", "dynamodb_write")
    if end_kind == "websocket_post":
        finals = [c for c in calls if c.kind == "websocket_post" and c.t0 <= end]
    else:
        finals = [c for c in calls if c.kind in writes and c.t1 <= end]
    if not finals:
        return []
    link: Hop | None = max(finals, key=lambda h: h.t0)
    chain: list[Hop] = []
    while link is not None:
        entry = next((e for e in entries if e.thread == link.thread and e.t0 <= link.t0 and e.t1 >= link.t1), None)
        if entry is None:
            chain.append(link)
            break
        chain += [c for c in calls if c.thread == entry.thread and entry.t0 <= c.t0 <= link.t0]
        chain.append(entry)
        if entry.kind == "streams_to_lambda":
            before = [c for c in calls if c.kind in writes and c.thread != entry.thread and c.t1 <= entry.t0]
            link = max(before, key=lambda h: h.t1) if before else None
        elif entry.kind == "sfn_task":
            before = [c for c in calls if c.kind == "sfn_api" and c.t1 <= entry.t0]
            link = min(before, key=lambda h: h.t0) if before else None
        else:
            link = None  # the client started it
    return sorted(chain, key=lambda h: h.t0)


def project(windows: list[list[Hop]], rng: random.Random, draws: int = 400) -> dict[str, float]:
    """AWS p50/p95 (ms) of a path: per recorded window, `draws` samples of its hops' AWS latencies."""
    samples = []
    for hops in windows:
        own_ms = sum(h.own for h in hops) * 1000
        for _ in range(draws):
            total = own_ms
            for hop in hops:
                total += _sample(hop.kind, rng)
                if hop.kind in ENTRY_KINDS:
                    total += _sample("lambda_invoke_warm", rng)
            samples.append(total)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 1), "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 1)}


def main(turns: int = 12) -> dict:
    from agents_core.apikeys import create_key
    from agents_core.runtimes.connections import create_runtime_token
    from local import apigw
    from local.inprocess import InProcessStack, wait_for
    from local.lambdas import MOTO_CONFIG
    from tests.integration.conftest import sdk

    os.environ["HEARTBEAT_SECONDS"] = "120"
    recorder = Recorder()
    windows: dict[str, list[tuple[float, float]]] = {k: [] for k in (
        "message_to_turn_start", "function_call_to_required_action", "result_to_runtime", "completion_to_idle")}
    with mock_aws(config=MOTO_CONFIG):
        stack = InProcessStack("agents-core-bench-latency", apigw.load_handlers()).start()
        key = create_key(stack.store, "bench")
        client = sdk(stack.http, key)
        stack.connect_runtime(create_runtime_token(stack.store, "bench"), ["scripted"], heartbeat_seconds=60)
        session = client.beta.agents.sessions.create(environment={"type": "none"}, input="say warm",
                                                     agent={"model": "m", "tools": [FN]},
                                                     extra_body={"x_agents_core": {"harness": "scripted"}})
        table = stack.store

        def quietly(fn: Any) -> Any:
            recorder.quiet.on = True
            try:
                return fn()
            finally:
                recorder.quiet.on = False

        def session_item() -> dict[str, Any]:
            return quietly(lambda: client.beta.agents.sessions.retrieve(session.id)).model_dump()

        wait_for(lambda: session_item()["status"] == "idle", timeout=30)
        install(recorder, stack)
        del table
        script = f"sleep {PAUSE}\ncall f {{}}\nsleep {PAUSE}"
        for _ in range(turns):
            time.sleep(PAUSE)
            seen = {k: len(v) for k, v in recorder.marks.items()}

            def new_mark(name: str, seen: dict = seen) -> Any:
                marks = recorder.marks.get(name, [])
                return marks[seen.get(name, 0)] if len(marks) > seen.get(name, 0) else None  # the first one

            t0 = time.perf_counter()
            client.beta.agents.sessions.events.create(session.id, events=[{
                "type": "agent.session.input.message",
                "input": [{"role": "user", "content": [{"type": "input_text", "text": script}]}]}])
            windows["message_to_turn_start"].append((t0, wait_for(lambda: new_mark("turn.start_received"), 15)))
            sent = wait_for(lambda: new_mark("function_call_sent"), 15)
            action = wait_for(lambda: session_item()["required_actions"], timeout=15, interval=0.001)[0]
            windows["function_call_to_required_action"].append((sent, time.perf_counter()))
            time.sleep(PAUSE)
            t0 = time.perf_counter()
            client.beta.agents.sessions.events.create(session.id, events=[{
                "type": "agent.session.input.tool_result", "turn_id": action["turn_id"],
                "call_id": action["call_id"], "success": True, "output": "ok"}])
            windows["result_to_runtime"].append((t0, wait_for(lambda: new_mark("turn.tool_result_received"), 15)))
            sent = wait_for(lambda: new_mark("completed_sent"), 15)
            wait_for(lambda: session_item()["status"] == "idle", timeout=15, interval=0.001)
            windows["completion_to_idle"].append((sent, time.perf_counter()))
        stack.stop()
    recorder.finish()

    rng = random.Random(7)
    paths: dict[str, Any] = {}
    ends = {"message_to_turn_start": "websocket_post", "function_call_to_required_action": "write",
            "result_to_runtime": "websocket_post", "completion_to_idle": "write"}
    for name, spans in windows.items():
        hop_lists = [critical_chain(recorder.hops, a, b, ends[name]) for a, b in spans]
        in_window = [Counter(h.kind for h in recorder.hops if a <= h.t0 <= b) for a, b in spans]
        counts = [Counter(h.kind for h in hops) for hops in hop_lists]
        typical = max(counts, key=lambda c: sum(1 for other in counts if other == c))
        paths[name] = {
            "local": percentiles([b - a for a, b in spans]),
            "critical_hops": dict(sorted(typical.items())),
            "all_hops_in_window": dict(sorted(max(in_window, key=lambda c: sum(c.values())).items())),
            "streams_hops": typical.get("streams_to_lambda", 0),
            "handler_own_ms_p50": round(statistics.median(sum(h.own for h in hops) * 1000 for hops in hop_lists), 2),
            "aws_projection": project(hop_lists, rng),
            "sequence": [f"{h.kind}:{h.name}" for h in sorted(hop_lists[-1], key=lambda h: h.t0)],
        }
    return emit("latency_model", {
        "benchmark": "aws_latency_model",
        "turns": turns,
        "paths": paths,
        "parameters": "bench/aws_latency.json",
        "note": "critical hops walked back from each path's end on a quiet single Turn; the projection sums per-kind "
                "AWS latencies of those hops (lognormal from p50/p95) plus the handler compute measured here",
    })


if __name__ == "__main__":
    main(1 if "--smoke" in sys.argv[1:] else int(sys.argv[1]) if len(sys.argv) > 1 else 12)
