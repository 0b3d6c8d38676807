"""Shared benchmark plumbing: moto, the template's table, the real handlers, request counting."""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "layers" / "contract"), str(ROOT)]
os.environ.update({
    "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1", "TABLE_NAME": "agents-core-bench", "DEFAULT_HARNESS": "scripted",
    "POWERTOOLS_TRACE_DISABLED": "1", "POWERTOOLS_METRICS_NAMESPACE": "AgentsCore",
    "POWERTOOLS_LOG_LEVEL": "ERROR", "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled", "POWERTOOLS_METRICS_DISABLED": "true",
})
# `make test` runs every benchmark once at its smallest size (`--smoke`: tests/integration/test_bench_smoke.py and
# tests/e2e/test_bench_smoke.py), its figures under BENCH_RESULTS so make bench's own stay as they are.
SMOKE = "--smoke" in sys.argv[1:]
RESULTS = pathlib.Path(os.environ.get("BENCH_RESULTS") or ROOT / "bench" / "results")


@contextmanager
def local_stack(env: dict[str, str], timeout: float = 60) -> Iterator[dict[str, Any]]:
    """`python -m local` in its own process with `env` (its stack file's contents yielded), stopped after; or, with
    BENCH_STACK_FILE (the smoke under make test: tests/e2e/test_bench_smoke.py), the stack already running there."""
    import signal
    import subprocess
    import tempfile

    from local.inprocess import wait_for

    if os.environ.get("BENCH_STACK_FILE"):
        yield json.loads(pathlib.Path(os.environ["BENCH_STACK_FILE"]).read_text())
        return
    state = pathlib.Path(tempfile.mkdtemp()) / "stack.json"
    env = {**os.environ, "AGENTS_CORE_HTTP_PORT": "0", "AGENTS_CORE_WS_PORT": "0", "AGENTS_CORE_MOTO_PORT": "0",
           "AGENTS_CORE_STACK_FILE": str(state), "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}", **env}
    t0 = time.perf_counter()
    stack = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        info = wait_for(lambda: state.exists() and json.loads(state.read_text() or "null"), timeout=timeout,
                        interval=0.005)
        yield {**info, "startup_seconds_measured": round(time.perf_counter() - t0, 2)}
    finally:
        # SIGTERM, which `python -m local` handles as Ctrl-C: a process started from a background job inherits SIGINT
        # ignored (POSIX), so SIGINT left a `make bench &` waiting 30 s for a stack that never heard it
        stack.send_signal(signal.SIGTERM)
        stack.wait(timeout=30)


class RequestCounter:
    """Counts DynamoDB API calls through botocore's event hooks."""

    def __init__(self, client: Any):
        self.calls: Counter[str] = Counter()
        self.seconds = 0.0  # time spent inside DynamoDB calls (moto's emulation locally)
        self._started = 0.0
        client.meta.events.register("before-call.dynamodb", self._count)
        client.meta.events.register("after-call.dynamodb", self._done)
        client.meta.events.register("after-call-error.dynamodb", self._done)

    def _count(self, model: Any, **_: Any) -> None:
        self.calls[model.name] += 1
        self._started = time.perf_counter()

    def _done(self, **_: Any) -> None:
        self.seconds += time.perf_counter() - self._started

    def timed_excluding(self, fn: Callable[[], Any], rounds: int) -> tuple[list[float], list[float]]:
        """(total, total minus DynamoDB time) per call."""
        total, own = [], []
        for _ in range(rounds):
            self.seconds = 0.0
            t0 = time.perf_counter()
            fn()
            elapsed = time.perf_counter() - t0
            total.append(elapsed)
            own.append(elapsed - self.seconds)
        return total, own

    @contextmanager
    def measure(self) -> Iterator[Counter[str]]:
        self.calls.clear()
        snapshot: Counter[str] = Counter()
        yield snapshot
        snapshot.update(self.calls)


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 3), "p95_ms": round(p95 * 1000, 3),
            "n": len(ordered)}


def timed(fn: Callable[[], Any], rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def emit(name: str, result: dict[str, Any]) -> dict[str, Any]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return result


_SHARED: list[Any] = []  # the one stack of one_stack(), while it runs


@contextmanager
def one_stack() -> Iterator[None]:
    """The smoke (bench/smoke.py): every in_process_stack() inside reuses one stack, started once (about 1.5 s
    of CPU each saved), its Runtimes killed and its executions stopped between benchmarks."""
    from moto import mock_aws

    table = os.environ["TABLE_NAME"]
    import tests.integration.conftest  # noqa: F401 - its environment first, as in_process_stack imports it
    from local.inprocess import InProcessStack, reset_caches
    from local.lambdas import MOTO_CONFIG

    with mock_aws(config=MOTO_CONFIG):
        stack = InProcessStack(table).start()
        _SHARED.append(stack)
        try:
            yield
        finally:
            _SHARED.clear()
            stack.stop()
            os.environ["TABLE_NAME"] = table  # the benchmarks after it make their own table of that name
            reset_caches()


def _reuse(stack: Any, heartbeat_seconds: int) -> None:
    """A clean slate on the shared stack: no Runtime left connected, no execution running, the bound asked."""
    import boto3

    from local.inprocess import reset_caches

    for runtime in stack.runtimes:
        runtime.kill()
    stack.runtimes.clear()
    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    for arn in stack.state_machines.values():
        for execution in sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]:
            sfn.stop_execution(executionArn=execution["executionArn"])
    os.environ["HEARTBEAT_SECONDS"] = str(heartbeat_seconds)
    reset_caches()  # the settings (the bound) are read again


@contextmanager
def in_process_stack(heartbeat_seconds: int) -> Iterator[tuple[Any, Any]]:
    """(the in-process stack on moto, tenant-a's official SDK client against it), torn down after (or, inside
    one_stack(), the shared one)."""
    from moto import mock_aws

    from agents_core.apikeys import create_key
    from local.inprocess import InProcessStack
    from local.lambdas import MOTO_CONFIG
    from tests.integration.conftest import sdk

    if _SHARED:
        stack = _SHARED[0]
        delivery = stack.ws.delivery
        _reuse(stack, heartbeat_seconds)
        try:
            yield stack, sdk(stack.http, create_key(stack.store, "tenant-a"))
        finally:
            stack.ws.delivery = delivery
        return
    os.environ["HEARTBEAT_SECONDS"] = str(heartbeat_seconds)
    with mock_aws(config=MOTO_CONFIG):
        stack = InProcessStack("agents-core-bench").start()
        try:
            yield stack, sdk(stack.http, create_key(stack.store, "tenant-a"))
        finally:
            stack.stop()
