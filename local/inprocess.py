"""The whole system in one process on moto's in-process mock: the test vehicle for integration
tests (the `make dev` stack uses the same parts over real sockets)."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Optional

import boto3

from agents_contract.protocol import RUNTIME_HELLO

from . import apigw, iam, lambdas, motofix, streams, template, websocket


def reset_caches() -> None:
    from agents_core import aws as aws_module
    from agents_core import settings as settings_module
    from agents_core import store as store_module

    settings_module.get_settings.cache_clear()
    store_module.default_store.cache_clear()
    aws_module.default_messenger.cache_clear()
    aws_module.default_workflow.cache_clear()
    from agents_core import vault_crypto

    vault_crypto.default_sealer.cache_clear()
    from agents_core.files import objects

    objects.default_objects.cache_clear()


class InProcessStack:
    """Requires an active `mock_aws(config=lambdas.MOTO_CONFIG)`."""

    def __init__(self, table: str, handlers: Optional[dict[str, apigw.Handler]] = None):
        motofix.install()
        iam.install()  # before any client is made: every function's AWS calls are checked (local/iam.py)
        self.table = table
        self.runtimes: list[LocalRuntime] = []
        self.dynamodb = boto3.client("dynamodb", region_name=template.REGION)
        template.create_table(self.dynamodb, table)
        sfn = boto3.client("stepfunctions", region_name=template.REGION)
        self.state_machines = {}
        for machine in template.state_machines():
            arn = sfn.create_state_machine(name=machine.logical_id, definition=machine.definition,
                                           roleArn=f"arn:aws:iam::{template.ACCOUNT}:role/local",
                                           type=machine.type)["stateMachineArn"]
            self.state_machines[machine.logical_id] = arn
        self._saved_env = {k: os.environ.get(k) for k in ("STATE_MACHINE_ARN", "TABLE_NAME", "WEBSOCKET_URL",
                                                           "CONNECTION_WAIT_STATE_MACHINE_ARN", "VAULT_KEY_ID",
                                                           "FILES_BUCKET")}
        os.environ["VAULT_KEY_ID"] = template.create_keys(boto3.client("kms", region_name=template.REGION))["VaultKey"]
        os.environ["FILES_BUCKET"] = template.create_buckets(boto3.client("s3", region_name=template.REGION))["FilesBucket"]
        os.environ["STATE_MACHINE_ARN"] = self.state_machines["TurnStateMachine"]
        os.environ["CONNECTION_WAIT_STATE_MACHINE_ARN"] = self.state_machines["ConnectionWaitStateMachine"]
        os.environ["TABLE_NAME"] = table
        from . import scheduler  # EventBridge Scheduler: schedules in moto, run by local/scheduler.py

        self._saved_env |= {k: os.environ.get(k) for k in scheduler.ENV}
        scheduler.setup(boto3.client("scheduler", region_name=template.REGION))
        from . import queues  # SQS queues and their event sources (the webhook deliveries)

        self._saved_env["WEBHOOK_QUEUE_URL"] = os.environ.get("WEBHOOK_QUEUE_URL")
        self.sqs = boto3.client("sqs", region_name=template.REGION)
        self.queue_urls = queues.create_queues(self.sqs)
        self._saved_env["OUTBOX_DLQ_URL"] = os.environ.get("OUTBOX_DLQ_URL")
        os.environ["OUTBOX_DLQ_URL"] = self.queue_urls["OutboxDeadLetterQueue"]  # the redrive function's queue
        os.environ["WEBSOCKET_URL"] = "ws://in-process.invalid"  # no socket: the gateway is called directly
        reset_caches()
        self.handlers = handlers or apigw.load_handlers()
        lambdas.install(self.handlers)
        self.http = apigw.Gateway(self.handlers)
        # not started: a test runs a schedule's next occurrence with self.scheduler.fire_next(name)
        self.scheduler = scheduler.LocalScheduler(boto3.client("scheduler", region_name=template.REGION),
                                                  self.handlers)
        # not started (most tests queue nothing): a test that needs them calls start() on each
        self.queue_pollers = queues.pollers(self.sqs, self.queue_urls, self.handlers)
        self.ws = websocket.WebSocketGateway(self.handlers)
        websocket.install_moto_management_api(self.ws)
        streams_client = boto3.client("dynamodbstreams", region_name=template.REGION)
        source = template.stream_sources()[0]
        self.poller = streams.StreamPoller(streams_client, streams.stream_arn(self.dynamodb, table),
                                           self.handlers[source.function], source,
                                           context_factory=lambda: apigw.LambdaContext(source.function),
                                           on_failure=streams.dead_letter_sender(self.sqs, self.queue_urls,
                                                                                 source.function))
        self._thread: Optional[threading.Thread] = None

    @property
    def store(self) -> Any:
        from agents_core.store import default_store

        return default_store()

    def start(self) -> InProcessStack:
        self._thread = self.poller.start(interval=0.01)
        return self

    def stop(self) -> None:
        for runtime in self.runtimes:
            runtime.kill()
        self.ws.shutdown()
        self.poller.stop()
        for queue_poller in self.queue_pollers:
            queue_poller.stop()
        if self._thread:
            self._thread.join(timeout=5)
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        reset_caches()

    def connect_runtime(self, token: str, harnesses: list[str], heartbeat_seconds: float = 0.5,
                        workspace: Optional[str] = None, beats: bool = True,
                        deferred_acks: bool = True, waiting_calls: bool = True) -> LocalRuntime:
        """A scripted Runtime: shared (an `rt-` token), or an Environment's (an enrollment or its
        credential, with the `workspace` directory it is bound to). `beats=False`: one of the older protocol
        (no runtime.heartbeat; each Turn sends turn.heartbeat), trusted until a post meets GoneException.
        `deferred_acks=False`: one that takes a turn.ack for every message; `waiting_calls=False`: one that takes each
        tool result twice, straight after its commit and from its outbox (its hello does not ask)."""
        runtime = LocalRuntime(self, token, harnesses, heartbeat_seconds, workspace, beats, deferred_acks,
                               waiting_calls)
        self.runtimes.append(runtime)
        return runtime


class LocalRuntime:
    """The reference scripted Runtime wired to the in-process WebSocket gateway."""

    def __init__(self, stack: InProcessStack, token: str, harnesses: list[str], heartbeat_seconds: float,
                 workspace: Optional[str] = None, beats: bool = True, deferred_acks: bool = True,
                 waiting_calls: bool = True):
        from runtime.capabilities import declarations
        from runtime.harnesses.scripted.driver import ScriptedDriver
        from runtime.router import Runtime

        self.stack = stack
        self.inbox: list[dict[str, Any]] = []
        self.closed_with: Optional[int] = None  # the close code when the gateway closed the socket
        from runtime.environments.workspace import Workspace

        self.credential: Optional[str] = None
        self.runtime = Runtime(self.send, {h: ScriptedDriver(h) for h in harnesses}, heartbeat_seconds,
                               workspace=Workspace(workspace) if workspace else None,
                               on_welcome=lambda w: setattr(self, "credential", w.get("credential") or self.credential))
        self.connection_id = stack.ws.connect(self._receive, {"Authorization": f"Bearer {token}"},
                                              close=self._closed)
        if self.connection_id is None:
            raise PermissionError("runtime connection rejected")
        # heartbeat_seconds: it sends runtime.heartbeat, so Core holds it to the bound (runtime.router.Runtime beats)
        liveness = {"heartbeat_seconds": heartbeat_seconds} if beats else {}
        if beats and deferred_acks:  # its heartbeat asks for acks (runtime/client.py's hello says so too)
            liveness["deferred_acks"] = True
        if beats and waiting_calls:  # its heartbeat names the calls it waits on: each result is posted once
            liveness["waiting_calls"] = True
        self.send({"action": RUNTIME_HELLO, "harnesses": declarations(harnesses), **liveness})

    def _receive(self, text: str) -> None:
        message = json.loads(text)
        self.inbox.append(message)
        # Deliver on another thread, as a socket would: the poster must not run the Turn.
        threading.Thread(target=self.runtime.on_message, args=(message,), daemon=True).start()

    def _closed(self, code: int) -> None:
        self.closed_with, self.connection_id = code, None

    def send(self, message: dict[str, Any]) -> None:
        """As a socket would: through the gateway's quota and delivery mode."""
        if self.connection_id is not None:  # a dead socket sends nothing
            self.stack.ws.receive(self.connection_id, json.dumps(message))

    def hang(self) -> None:
        """The process hangs: no more heartbeats, no more messages (the socket stays open)."""
        self.runtime.stop_heartbeats()
        for handle in self.runtime.turns.values():
            handle.channel.done.set()
            handle.channel.send_raw = lambda message: None

    def kill(self) -> None:
        """The process dies: the socket closes and nothing more is sent."""
        connection_id, self.connection_id = self.connection_id, None
        self.hang()
        if connection_id:
            self.stack.ws.disconnect(connection_id, code=1006)


# The longest pause between two polls of `wait_for`: None keeps `interval` (the benchmarks measure latencies by
# polling); the test suite sets it (tests/conftest.py), so a long wait polls less and less often: each poll of a
# test is a request its stack serves.
POLL_MAX_INTERVAL: Optional[float] = None


def wait_for(predicate: Any, timeout: float = 15.0, interval: float = 0.02) -> Any:
    end = time.time() + timeout
    pause = interval
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(min(pause, max(0.0, end - time.time())))
        if POLL_MAX_INTERVAL is not None:
            pause = min(max(pause * 1.25, interval), max(POLL_MAX_INTERVAL, interval))
    value = predicate()  # once more at the deadline: the last pause may have ended just before it
    if value:
        return value
    raise AssertionError(f"condition not met within {timeout}s")
