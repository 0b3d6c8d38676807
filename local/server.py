"""The embedded local stack: moto in server mode (executing our ASL), the HTTP gateway, the
WebSocket gateway with its @connections management API, the DynamoDB Streams poller, and the
reference Runtime as its own process. Same template, same handlers, same ASL as in AWS."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _port(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default  # 0: the stack binds a free port (see _bind)


def _bind(port: int, variable: str) -> socket.socket:
    """Bind a port before anything starts, and keep the socket for the server that uses it: a port
    another process holds is a clear error, never a stack that says it is up with someone else's URL
    (uvicorn only logs a failed bind in its thread) or one that waits forever (moto's threaded server)."""
    # proto IPPROTO_TCP, as getaddrinfo gives it: asyncio sets TCP_NODELAY only on sockets that say TCP,
    # and without it every keep-alive response waits out the client's delayed ACK (about 40 ms)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise PortInUse(f"error: port {port} ({variable}) is not available: {exc.strerror}. Stop the "
                        f"process using it, or choose another port ({variable}=0 picks a free one).") from exc
    return sock


class PortInUse(SystemExit):
    """A port the local stack needs is taken: `python -m local` exits with this message, status 1."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


RUNTIME_HARNESSES = ("scripted", "codex", "claude_code", "minimax_code")
NATIVE_HARNESSES = ("codex", "claude_code")  # what the reference Runtime can run on real engines


def hosted_directory(state: pathlib.Path) -> pathlib.Path:
    """Where the local hosted Runtime keeps its Environments: beside the stack's state when every parent
    directory is traversable (each Environment's own uid must reach its workspace), else under /var/tmp."""
    preferred = (state / "hosted").resolve()
    parents = [preferred.parent, *preferred.parent.parents]
    if os.geteuid() != 0 or all(p.stat().st_mode & 0o001 for p in parents if p.exists()):
        return preferred
    digest = hashlib.sha256(str(preferred).encode()).hexdigest()[:12]
    return pathlib.Path("/var/tmp") / f"agents-core-hosted-{digest}"  # noqa: S108 - 1777; DIR itself is 0711


def native_harnesses(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in NATIVE_HARNESSES]
    if unknown:
        raise SystemExit(f"AGENTS_CORE_NATIVE_HARNESSES: {', '.join(unknown)} cannot run natively here "
                         f"(choose from {', '.join(NATIVE_HARNESSES)})")
    return names


def stack_file() -> pathlib.Path:
    """Where the running stack describes itself (URLs, dev key, Runtime token, pid) for the SDK examples,
    `agents_core.apikeys` and `python -m runtime`. It holds no state: the stack's state lives in memory.
    AGENTS_CORE_STATE_FILE is the variable's old name, still honoured."""
    value = os.environ.get("AGENTS_CORE_STACK_FILE") or os.environ.get("AGENTS_CORE_STATE_FILE")
    return pathlib.Path(value) if value else ROOT / ".local" / "stack.json"


@dataclass
class Config:
    http_port: int = field(default_factory=lambda: _port("AGENTS_CORE_HTTP_PORT", 8000))
    ws_port: int = field(default_factory=lambda: _port("AGENTS_CORE_WS_PORT", 8001))
    moto_port: int = field(default_factory=lambda: _port("AGENTS_CORE_MOTO_PORT", 5055))
    api_key: Optional[str] = field(default_factory=lambda: os.environ.get("AGENTS_CORE_DEV_API_KEY"))
    tenant: str = field(default_factory=lambda: os.environ.get("AGENTS_CORE_DEV_TENANT", "dev"))
    heartbeat_seconds: int = field(default_factory=lambda: int(os.environ.get("AGENTS_CORE_HEARTBEAT_SECONDS", "10")))
    stack_file: pathlib.Path = field(default_factory=lambda: stack_file())
    start_runtime: bool = field(default_factory=lambda: os.environ.get("AGENTS_CORE_START_RUNTIME", "1") != "0")
    # the dev tenant's self_hosted Environments served on this machine, each through its own enrollment
    connect_environments: bool = field(default_factory=lambda: os.environ.get(
        "AGENTS_CORE_CONNECT_ENVIRONMENTS", "1") != "0")
    # one Runtime for openai_hosted Environments, each in a bubblewrap sandbox (needs bwrap)
    hosted_environments: bool = field(default_factory=lambda: os.environ.get(
        "AGENTS_CORE_HOSTED_ENVIRONMENTS", "1") != "0")
    native_harnesses: list[str] = field(default_factory=lambda: native_harnesses(
        os.environ.get("AGENTS_CORE_NATIVE_HARNESSES", "")))
    table: str = "agents-core-local"


def _environment(config: Config) -> None:
    os.environ.update({
        "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1", "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "MOTO_PORT": str(config.moto_port), "TABLE_NAME": config.table,
        "WEBSOCKET_ENDPOINT": f"http://127.0.0.1:{config.ws_port}",
        "WEBSOCKET_URL": f"ws://127.0.0.1:{config.ws_port}",
        # a self_hosted Environment's remote_url: the exec-server registry, served by the HTTP gateway here
        "REMOTE_URL": f"http://127.0.0.1:{config.http_port}",
        # the welcome tells Runtimes the WebSocket API's maximum connection duration (they rotate before it)
        "WEBSOCKET_MAX_CONNECTION_SECONDS": str(max(1, int(float(os.environ.get(
            "AGENTS_CORE_WS_MAX_CONNECTION_SECONDS") or 7200)))),
        "HEARTBEAT_SECONDS": str(config.heartbeat_seconds), "DEFAULT_HARNESS": os.environ.get("DEFAULT_HARNESS",
                                                                                               "scripted"),
        "POWERTOOLS_TRACE_DISABLED": "1", "POWERTOOLS_METRICS_DISABLED": "true",
        "AGENTS_CORE_EXIT_WITH_PARENT": "1",  # the Runtimes this stack starts stop when it does
        "POWERTOOLS_SERVICE_NAME": "agents-core", "POWERTOOLS_METRICS_NAMESPACE": "AgentsCore",
        "POWERTOOLS_LOG_LEVEL": os.environ.get("POWERTOOLS_LOG_LEVEL", "WARNING"),
        # Vaults on a laptop: loopback http MCP servers and OAuth token endpoints (the SAM default is off).
        "VAULT_ALLOW_LOOPBACK_HTTP": os.environ.get("VAULT_ALLOW_LOOPBACK_HTTP", "true"),
        "OAUTH_TRUSTED_ORIGINS": os.environ.get("OAUTH_TRUSTED_ORIGINS", "loopback"),
        # webhook endpoints on a loopback receiver, over http (the SAM default is off)
        "WEBHOOK_ALLOW_LOOPBACK_HTTP": os.environ.get("WEBHOOK_ALLOW_LOOPBACK_HTTP", "true"),
    })
    for path in (str(ROOT / "layers" / "contract"), str(ROOT)):
        if path not in sys.path:
            sys.path.insert(0, path)


def _connect_before_answering(send: Any, connector: Any, authorization: str, sessions: bool) -> Any:
    """The laptop is the dev tenant's workspace: a Session create that answers 201 with a JSON body (not a
    stream) and a self_hosted Environment has that Environment connected (through its own enrollment,
    local/environments.py) before the answer goes out, so input can follow at once, as the README shows.
    Any other successful create (a streamed Session create, environments.create) has the connector look
    for the dev tenant's new Environment at once."""
    from starlette.concurrency import run_in_threadpool

    held: list[dict[str, Any]] = []

    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message.get("headers", [])}
            status = message.get("status", 500)
            if status == 201 and headers.get("content-type", "").startswith("application/json") and sessions:
                held.append(message)
                return
            if 200 <= status < 300:
                connector.created(authorization)
        elif held:
            held.append(message)
            if message.get("more_body"):
                return
            body = b"".join(m.get("body", b"") for m in held[1:])
            try:
                environment = json.loads(body).get("environment") or {}
            except ValueError:
                environment = {}
            if environment.get("type") == "self_hosted" and environment.get("id"):
                await run_in_threadpool(connector.ensure, environment["id"])
            for queued in held:
                await send(queued)
            held.clear()
            return
        await send(message)

    return wrapped


class _MotoServer:
    """moto's server on a socket already bound (moto's ThreadedMotoServer binds in its thread and, when
    the port is taken, waits forever for a server that never comes)."""

    def __init__(self, sock: socket.socket):
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        sock.listen(128)
        host, port = sock.getsockname()[:2]
        self._server = make_server(host, port, DomainDispatcherApplication(create_backend_app), threaded=True,
                                   request_handler=MotoRequestHandler, fd=sock.fileno())
        sock.close()  # the server holds its own duplicate of the descriptor
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name=f"moto-{port}")

    def start(self) -> _MotoServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)
        self._server.server_close()


def _forget_dead_stacks_tables(nft: str) -> None:
    """A stack that was killed (not stopped) left its sandbox firewall table: remove those whose stack is gone."""
    listed = subprocess.run([nft, "list", "tables"], capture_output=True, text=True, check=False)  # noqa: S603
    for line in listed.stdout.splitlines():
        name = line.rsplit(" ", 1)[-1]
        pid = name.removeprefix("agents_core_sandboxes_")
        if name.startswith("agents_core_sandboxes_") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            subprocess.run([nft, "delete", "table", "inet", name], capture_output=True, check=False)  # noqa: S603


class LocalStack:
    def __init__(self, config: Optional[Config] = None):
        self.config = config or Config()
        self._servers: list[Any] = []
        self._threads: list[threading.Thread] = []
        self.runtime_process: Optional[subprocess.Popen[bytes]] = None
        self.native_runtime_process: Optional[subprocess.Popen[bytes]] = None
        self.hosted_runtime_process: Optional[subprocess.Popen[bytes]] = None
        self.firewall_table: Optional[str] = None  # the nftables table of the sandboxes' uids, while applied
        self.started_at = time.perf_counter()

    # -- start ---------------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        config = self.config
        sockets: dict[str, socket.socket] = {}
        try:
            for name, variable in (("http_port", "AGENTS_CORE_HTTP_PORT"), ("ws_port", "AGENTS_CORE_WS_PORT"),
                                   ("moto_port", "AGENTS_CORE_MOTO_PORT")):
                sockets[name] = _bind(getattr(config, name), variable)
                setattr(config, name, sockets[name].getsockname()[1])
        except PortInUse:
            for sock in sockets.values():
                sock.close()
            raise
        _environment(config)
        import logging

        from moto.core.config import default_user_config

        from . import apigw, clientcache, iam, lambdas, motofix, streams, template, websocket
        from .inprocess import reset_caches

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request access log
        default_user_config["stepfunctions"] = {"execute_state_machine": True}
        default_user_config["lambda"] = {"use_docker": False}
        motofix.install()
        clientcache.install()  # each client made once, as a Lambda execution environment keeps its own
        iam.install()  # every function's AWS calls are checked against its own policies (AGENTS_CORE_IAM=off: not)
        # The handlers and the ASL interpreter reach moto in-process (no HTTP hop per DynamoDB call);
        # the server on MOTO_PORT serves the same backends to other processes (CLI, scripts, tools).
        from moto import mock_aws

        self._mock = mock_aws(config=lambdas.MOTO_CONFIG)
        self._mock.start()
        self.moto = _MotoServer(sockets["moto_port"]).start()
        import boto3

        dynamodb = boto3.client("dynamodb")
        template.create_table(dynamodb, config.table)
        sfn = boto3.client("stepfunctions")
        machines = {m.logical_id: sfn.create_state_machine(
            name=m.logical_id, definition=m.definition, type=m.type,
            roleArn=f"arn:aws:iam::{template.ACCOUNT}:role/local")["stateMachineArn"] for m in template.state_machines()}
        os.environ["STATE_MACHINE_ARN"] = machines["TurnStateMachine"]
        os.environ["CONNECTION_WAIT_STATE_MACHINE_ARN"] = machines["ConnectionWaitStateMachine"]
        os.environ["VAULT_KEY_ID"] = template.create_keys(boto3.client("kms"))["VaultKey"]
        os.environ["FILES_BUCKET"] = template.create_buckets(boto3.client("s3"))["FilesBucket"]
        # presigned URLs (a hosted preparation's file_id files) name the moto server, which other processes reach
        os.environ["S3_ENDPOINT_URL"] = f"http://127.0.0.1:{config.moto_port}"
        from . import scheduler  # EventBridge Scheduler: schedules in moto, run by local/scheduler.py

        scheduler.setup(boto3.client("scheduler"))
        from . import queues  # SQS queues and their event sources (the webhook deliveries)

        queue_urls = queues.create_queues(boto3.client("sqs"))
        os.environ["OUTBOX_DLQ_URL"] = queue_urls["OutboxDeadLetterQueue"]  # the redrive function's queue
        reset_caches()
        self.handlers = apigw.load_handlers()
        lambdas.install(self.handlers)
        self.scheduler = scheduler.LocalScheduler(boto3.client("scheduler"), self.handlers)
        self._threads.append(self.scheduler.start(interval=1.0))
        # polled 4 times a second (Lambda long-polls; a tighter loop here costs the e2e suite CPU)
        self.queue_pollers = queues.pollers(boto3.client("sqs"), queue_urls, self.handlers)
        self._threads += [p.start(interval=0.25) for p in self.queue_pollers]
        self.http = apigw.Gateway(self.handlers)
        self.ws = websocket.WebSocketGateway(self.handlers)
        source = template.stream_sources()[0]
        self.poller = streams.StreamPoller(boto3.client("dynamodbstreams"),
                                           streams.stream_arn(dynamodb, config.table),
                                           self.handlers[source.function], source,
                                           context_factory=lambda: apigw.LambdaContext(source.function),
                                           on_failure=streams.dead_letter_sender(boto3.client("sqs"), queue_urls,
                                                                                 source.function))
        self._threads.append(self.poller.start(interval=0.01))
        from agents_core.apikeys import create_key
        from agents_core.runtimes.connections import create_runtime_token
        from agents_core.store import default_store

        self.api_key = create_key(default_store(), config.tenant, config.api_key)
        self.runtime_token = create_runtime_token(default_store(), "local")
        self._serve(self._http_app(), sockets["http_port"])
        # API Gateway's quotas: 32 KB frames, 128 KB messages (a larger one closes the connection, 1009).
        self._serve(self._ws_app(), sockets["ws_port"], ws=websocket.uvicorn_protocol(),
                    ws_max_size=websocket.MAX_MESSAGE_BYTES)
        info = {
            "base_url": f"http://127.0.0.1:{config.http_port}/v1",
            "dashboard_url": f"http://127.0.0.1:{config.http_port}/",
            "websocket_url": f"ws://127.0.0.1:{config.ws_port}",
            "remote_url": f"http://127.0.0.1:{config.http_port}",  # codex exec-server --remote (issue 26)
            "api_key": self.api_key, "tenant": config.tenant, "runtime_token": self.runtime_token,
            "moto_endpoint": f"http://127.0.0.1:{config.moto_port}", "table": config.table,
            "state_machine_arn": machines["TurnStateMachine"], "pid": os.getpid(),
        }
        if config.hosted_environments:  # for its own hosted Runtime and any a test or an operator connects
            info["sandbox_firewall"] = self._sandbox_firewall()
        if config.start_runtime:
            self._start_runtimes(info)
        self._connect_environments(info)
        config.stack_file.parent.mkdir(parents=True, exist_ok=True)
        config.stack_file.touch(mode=0o600)
        config.stack_file.chmod(0o600)  # it holds the dev API key and the Runtime token
        config.stack_file.write_text(json.dumps(info, indent=2))
        info["startup_seconds"] = round(time.perf_counter() - self.started_at, 2)
        self.info = info
        return info

    def _connect_environments(self, info: dict[str, Any]) -> None:
        """The dev tenant's self_hosted Environments, served on this machine (local/environments.py)."""
        config = self.config
        info["connect_environments"] = config.connect_environments
        if not config.connect_environments:
            return
        from .environments import EnvironmentConnector

        args = ["--heartbeat", str(max(1.0, config.heartbeat_seconds / 3))]
        for harness in RUNTIME_HARNESSES:
            args += ["--harness", harness]
        if config.native_harnesses:
            args += ["--native", ",".join(config.native_harnesses), "--model-provider", "scripted",
                     "--provider-log", str(config.stack_file.parent / "provider.jsonl")]
        self.environment_connector = EnvironmentConnector(
            self.http, self.api_key, config.tenant, info["websocket_url"], ROOT,
            config.stack_file.parent / "environments", args).start()

    def _start_runtimes(self, info: dict[str, Any]) -> None:
        """The reference Runtime (scripted; impersonates the native names it serves) and, with
        AGENTS_CORE_NATIVE_HARNESSES, a second Runtime that runs those Harnesses on their real engines
        against the embedded scripted model provider. The token travels in the environment, not argv."""
        config = self.config
        env = {**os.environ, "AGENTS_CORE_RUNTIME_TOKEN": self.runtime_token}
        common = ["--url", info["websocket_url"], "--heartbeat", str(max(1.0, config.heartbeat_seconds / 3))]
        scripted = [h for h in RUNTIME_HARNESSES if h not in config.native_harnesses]
        argv = [sys.executable, "-m", "runtime", *common]
        for harness in scripted:
            argv += ["--harness", harness]
        self.runtime_process = subprocess.Popen(argv, cwd=ROOT, env=env)  # noqa: S603 - our own module
        if config.native_harnesses:
            state = config.stack_file.parent
            info["provider_log"] = str(state / "provider.jsonl")
            argv = [sys.executable, "-m", "runtime", *common, "--native", ",".join(config.native_harnesses),
                    "--model-provider", "scripted", "--provider-log", info["provider_log"],
                    "--state-dir", str(state / "runtime-state")]
            for harness in config.native_harnesses:
                argv += ["--harness", harness]
            if "codex" in config.native_harnesses:  # it hosts `codex exec-server --remote <remote_url>` too
                argv += ["--exec-server-listen", "127.0.0.1:0"]
            self.native_runtime_process = subprocess.Popen(argv, cwd=ROOT, env=env)  # noqa: S603
        info["native_harnesses"] = list(config.native_harnesses)
        self._start_hosted_runtime(info, env, common)

    def _start_hosted_runtime(self, info: dict[str, Any], env: dict[str, str], common: list[str]) -> None:
        """One Runtime for openai_hosted Environments (every Harness; the native ones natively), each
        Environment in a bubblewrap sandbox of its own. Without bwrap the stack runs on and says why."""
        config = self.config
        info["hosted_environments"] = None
        if not config.hosted_environments:
            return
        if shutil.which("bwrap") is None:
            info["hosted_environments_error"] = "bubblewrap (bwrap) is not installed: openai_hosted Sessions " \
                                                "wait for a hosted Runtime (apt-get install bubblewrap)"
            return
        directory = hosted_directory(config.stack_file.parent)
        argv = [sys.executable, "-m", "runtime", *common, "--hosted-environments", str(directory),
                "--state-dir", str(config.stack_file.parent / "hosted-state")]
        for harness in RUNTIME_HARNESSES:
            argv += ["--harness", harness]
        if config.native_harnesses:
            argv += ["--native", ",".join(config.native_harnesses), "--model-provider", "scripted",
                     "--provider-log", str(config.stack_file.parent / "provider.jsonl")]
        self.hosted_runtime_process = subprocess.Popen(argv, cwd=ROOT, env=env)  # noqa: S603 - our own module
        info["hosted_environments"] = str(directory)

    def _sandbox_firewall(self) -> str:
        """The operator hardening the README documents, on this machine too: the Environments' uids refused
        loopback, link-local and private addresses on the host's network stack (nftables; root only)."""
        from runtime.environments.sandbox import firewall_ruleset

        if os.geteuid() != 0:
            return "not applied: the hosted Runtime runs Environments as this user, not as uids of their own"
        nft = shutil.which("nft")
        if nft is None:
            return "not applied: nftables is not installed (apt-get install nftables)"
        _forget_dead_stacks_tables(nft)
        table = f"agents_core_sandboxes_{os.getpid()}"
        done = subprocess.run([nft, "-f", "-"], input=firewall_ruleset(table), capture_output=True, text=True,  # noqa: S603
                              check=False)
        if done.returncode != 0:
            return f"not applied: nft refused the rules ({done.stderr.strip()[:200]})"
        self.firewall_table = table
        return f"nftables table inet {table}"

    def _serve(self, app: Any, sock: socket.socket, **options: Any) -> None:
        import uvicorn

        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                               lifespan="off", **{"ws_max_size": 2**22, **options}))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                                  name=f"uvicorn-{port}")
        thread.start()
        self._servers.append(server)
        self._threads.append(thread)
        deadline = time.time() + 10
        while not server.started and thread.is_alive() and time.time() < deadline:
            time.sleep(0.01)
        if not server.started:
            raise RuntimeError(f"the server on port {port} did not start")

    # -- the HTTP API (and the dashboard) -----------------------------------------------------------
    def _http_app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import FileResponse, JSONResponse, Response
        from starlette.routing import Route

        from . import apigw

        gateway = self.http
        dashboard = ROOT / "dashboard" / "index.html"

        def dashboard_settings(request: Request) -> Response:
            """The dashboard's base URL and dev key, so the page needs no typing here. Only the local
            stack serves this file (the deployed static files have none, so there the page asks), and only
            to a loopback Host: a DNS-rebinding page cannot read the key."""
            host = request.headers.get("host", "")
            if host.rpartition(":")[0] not in ("127.0.0.1", "localhost", "[::1]") or \
                    request.headers.get("sec-fetch-site") == "cross-site" or not getattr(self, "info", None):
                return Response(status_code=404)
            return JSONResponse({"base_url": f"http://{host}/v1", "api_key": self.api_key,
                                 "tenant": self.config.tenant, "websocket_url": self.info["websocket_url"]},
                                headers={"cache-control": "no-store"})

        async def proxy(request: Request) -> Response:
            path = request.url.path
            if path in ("/", "/index.html") and request.method == "GET" and dashboard.exists():
                return FileResponse(dashboard, headers={"cache-control": "no-cache"})
            if path == "/local-stack.json" and request.method == "GET":
                return dashboard_settings(request)
            body = await request.body()
            result = await run_in_threadpool(gateway.handle, request.method, path,
                                             request.url.query, dict(request.headers), body)
            return Response(result.body, status_code=result.status, headers=result.headers)

        buffered = Starlette(routes=[Route("/{path:path}", proxy, methods=["GET", "POST", "DELETE", "PUT", "PATCH"])])
        handlers = self.handlers

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            """A streaming route (responseTransferMode STREAM) goes, once admitted by the gateway, to its
            function's ASGI app as the Lambda Web Adapter would pass it: the same app as in AWS, streamed."""
            connector = getattr(self, "environment_connector", None)
            if connector is not None and scope["type"] == "http" and scope["method"] == "POST" \
                    and scope["path"] in ("/v1/agents/sessions", "/v1/agents/environments"):
                authorization = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "")
                send = _connect_before_answering(send, connector, authorization, scope["path"] == "/v1/agents/sessions")
            found = gateway.match(scope["method"].upper(), scope["path"]) if scope["type"] == "http" else None
            if found is None or not found[0].streaming:
                await buffered(scope, receive, send)
                return
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            admitted, answer = await run_in_threadpool(gateway.admit, scope["method"], scope["path"],
                                                       scope["query_string"].decode("latin-1"), headers,
                                                       int(headers.get("content-length") or 0))
            if admitted is None:
                assert answer is not None
                await Response(answer.body, status_code=answer.status, headers=answer.headers)(scope, receive, send)
                return
            release = gateway.reserve(admitted.route.function)  # an open stream holds its function's slot
            if release is None:
                answer = gateway.lambda_refused()
                await Response(answer.body, status_code=answer.status, headers=answer.headers)(scope, receive, send)
                return
            try:
                await handlers[admitted.route.function](apigw.asgi_scope(admitted.event), receive, send)
            finally:
                release()

        return app

    # -- the WebSocket API and its @connections management API --------------------------------------
    def _ws_app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route, WebSocketRoute
        from starlette.websockets import WebSocket, WebSocketDisconnect

        from . import websocket as websocket_module

        ws = self.ws

        async def socket(websocket: WebSocket) -> None:
            loop = asyncio.get_running_loop()

            def send(text: str) -> None:
                future = asyncio.run_coroutine_threadsafe(websocket.send_text(text), loop)
                future.result(timeout=10)

            def close(code: int) -> None:  # the gateway closes the socket (1009: over a quota; 1001: its clock)
                reason = "Going away" if code == websocket_module.GOING_AWAY else ""
                asyncio.run_coroutine_threadsafe(websocket.close(code=code, reason=reason), loop)

            connection_id = await run_in_threadpool(ws.connect, send, dict(websocket.headers),
                                                    dict(websocket.query_params), close)
            if connection_id is None:
                await websocket.close(code=1008)  # API Gateway answers the handshake with 401/403
                return
            await websocket.accept()
            try:
                while True:
                    text = await websocket.receive_text()
                    await run_in_threadpool(ws.receive, connection_id, text)
            except WebSocketDisconnect as exc:
                await run_in_threadpool(ws.disconnect, connection_id, exc.code)
            except Exception:  # noqa: BLE001 - any socket failure is a disconnect
                await run_in_threadpool(ws.disconnect, connection_id, 1006)

        def gone() -> Response:
            return JSONResponse({"message": "GoneException"}, status_code=410,
                                headers={"x-amzn-ErrorType": "GoneException"})

        async def connections(request: Request) -> Response:
            connection_id = request.path_params["connection_id"]
            if request.method == "POST":
                ok = await run_in_threadpool(ws.post, connection_id, await request.body())
                return Response(status_code=200) if ok else gone()
            if request.method == "GET":
                info = ws.info(connection_id)
                return JSONResponse(info) if info else gone()
            ok = await run_in_threadpool(ws.close, connection_id)
            return Response(status_code=204) if ok else gone()

        return Starlette(routes=[
            Route("/@connections/{connection_id}", connections, methods=["POST", "GET", "DELETE"]),
            WebSocketRoute("/", socket),
        ])

    # -- stop ------------------------------------------------------------------------------------------
    def stop(self) -> None:
        if self.firewall_table:
            subprocess.run([shutil.which("nft") or "nft", "delete", "table", "inet", self.firewall_table],  # noqa: S603
                           capture_output=True, check=False)
        if getattr(self, "environment_connector", None) is not None:
            self.environment_connector.stop()
        runtimes = (self.runtime_process, self.native_runtime_process, self.hosted_runtime_process)
        for process in runtimes:
            if process and process.poll() is None:
                process.terminate()
        for process in runtimes:
            if process:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.poller.stop()
        if getattr(self, "scheduler", None) is not None:  # told to stop, not only joined: each join waited 5 s
            self.scheduler.stop()
        for queue_poller in getattr(self, "queue_pollers", ()):
            queue_poller.stop()
        for server in self._servers:
            server.should_exit = True
            server.force_exit = True  # open streams and sockets are not waited for: the stack is going
        for thread in self._threads:
            thread.join(timeout=5)
        self.moto.stop()
        self._mock.stop()
        try:
            if json.loads(self.config.stack_file.read_text()).get("pid") == os.getpid():
                self.config.stack_file.unlink()
        except (OSError, ValueError):
            pass
