"""The local stack started once per test session (`python -m local`, as `make dev` does), driven
over real HTTP with the official SDK and over real WebSockets."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from openai import OpenAI

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The heartbeat bound of the e2e stacks, and the cadence their Runtimes beat at (a third of it, as Core's welcome
# names): a lost Runtime is found within seconds, and a Runtime starved for a few seconds on a busy 2-core machine is
# not taken for a lost one. Each beat is a WebSocket message, a gateway invocation and table writes in the stack.
HEARTBEAT = 6
BEAT = str(HEARTBEAT / 3)


def _wait_file(path: pathlib.Path, process: subprocess.Popen, timeout: float = 60) -> dict:
    end = time.time() + timeout
    while time.time() < end:
        if process.poll() is not None:
            raise RuntimeError(f"local stack exited with {process.returncode}")
        if path.exists():
            try:
                return json.loads(path.read_text())
            except ValueError:
                pass
        time.sleep(0.05)
    raise TimeoutError("local stack did not start")


# Input on an offline Environment waits this long in e2e (the deployment default is 300 s): long enough for
# a test to connect its machine, short enough to see the wait end.
ENVIRONMENT_WAIT = 20


def start_stack(directory: pathlib.Path, **settings: str) -> tuple[subprocess.Popen, dict]:
    """`python -m local` (as `make dev` runs it, with no Runtime of its own) on free ports, its state under
    `directory`; `settings` are more of its environment variables."""
    state = directory / "stack.json"
    env = {**os.environ, "AGENTS_CORE_HTTP_PORT": "0", "AGENTS_CORE_WS_PORT": "0", "AGENTS_CORE_MOTO_PORT": "0",
           "AGENTS_CORE_STACK_FILE": str(state), "AGENTS_CORE_HEARTBEAT_SECONDS": str(HEARTBEAT),
           "AGENTS_CORE_START_RUNTIME": "0", "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}",
           "ENVIRONMENT_WAIT_SECONDS": str(ENVIRONMENT_WAIT), **settings}
    started = time.perf_counter()
    # Its log goes to a file: a pipe nobody reads fills after a few thousand lines of a full run and then
    # blocks the stack (and the Runtimes it started, which inherit it) at their next write.
    log = state.with_name("stack.log")
    with open(log, "w") as err:
        process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env,  # noqa: S603
                                   stdout=subprocess.DEVNULL, stderr=err)
    try:
        info = _wait_file(state, process)
    except (RuntimeError, TimeoutError) as exc:
        process.kill()
        raise RuntimeError(f"{exc}: {log.read_text()[-4000:]}") from exc
    info["startup_seconds_measured"] = round(time.perf_counter() - started, 2)
    info["stack_file"] = str(state)
    return process, info


def stop_stack(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)  # `python -m local` stops on SIGTERM as on Ctrl-C
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


# The tenant whose automation schedules run their next occurrence as soon as they are created or resumed
# (local/scheduler.py), so the schedule tests wait no minute boundary; every other tenant's run at their time.
SCHEDULES_TENANT = "e2e-schedules"


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory):
    process, info = start_stack(tmp_path_factory.mktemp("stack"), AGENTS_CORE_SCHEDULES_FIRE_NOW=SCHEDULES_TENANT)
    yield info
    stop_stack(process)


# The e2e MCP servers listen on loopback: an operator's Runtime reaches them only where the operator's
# setting allows it (issue 33), so the tests' shared Runtimes allow loopback unless a test says otherwise.
TEST_EGRESS_ALLOW = "127.0.0.0/8"


def start_runtime(info: dict, harnesses: list[str], extra: tuple[str, ...] = (), stderr=subprocess.DEVNULL,
                  egress_allow: str = TEST_EGRESS_ALLOW) -> subprocess.Popen:
    args = [sys.executable, "-m", "runtime", "--url", info["websocket_url"], "--heartbeat", BEAT, *extra]
    for h in harnesses:
        args += ["--harness", h]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,  # noqa: S603
                            env={**os.environ, "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}",
                                 "AGENTS_CORE_RUNTIME_TOKEN": info["runtime_token"],
                                 "AGENTS_CORE_EGRESS_ALLOW": egress_allow})


@pytest.fixture(scope="session")
def runtime_process(local_stack, tmp_path_factory):
    # codex is left to the native Runtime of test_codex.py (real Codex on the scripted model provider)
    log = tmp_path_factory.mktemp("runtime") / "runtime.log"
    with open(log, "w") as err:
        process = start_runtime(local_stack, ["scripted", "claude_code"], stderr=err)
    from local.inprocess import wait_for

    wait_for(lambda: "connected; serving" in log.read_text() or process.poll() is not None, timeout=30)
    assert process.poll() is None, log.read_text()
    yield process
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def client(local_stack, runtime_process) -> OpenAI:
    return OpenAI(base_url=local_stack["base_url"], api_key=local_stack["api_key"], max_retries=0,
                  _strict_response_validation=True)


def connected(client, session, timeout: float = 30):
    """The local stack serves the dev tenant's self_hosted Environments on this machine, each through its
    own enrollment (local/environments.py): wait until the Session's Environment is connected."""
    from local.inprocess import wait_for

    wait_for(lambda: client.beta.agents.environments.retrieve(session.environment.id).status == "connected",
             timeout=timeout, interval=0.1)
    return session


def aws_client(info: dict, service: str):
    import boto3

    return boto3.client(service, endpoint_url=info["moto_endpoint"], region_name="us-east-1",
                        aws_access_key_id="local", aws_secret_access_key="local")  # noqa: S106


@pytest.fixture
def runtime(runtime_process):
    """The Runtime process serving scripted and claude_code (impersonated) for the session's flows."""
    return runtime_process


class RuntimeProcess:
    """A reference Runtime process of a test, and the model requests its provider log holds."""

    log: pathlib.Path
    process: subprocess.Popen | None = None

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


class NativeRuntime(RuntimeProcess):
    """`python -m runtime --harness H --native H --model-provider scripted`, restartable with the same
    state directory (so a restart resumes the native history); the provider log shows what the native
    Harness sent the model."""

    def __init__(self, info: dict, root: pathlib.Path, harness: str, extra: tuple[str, ...] = (),
                 egress_allow: str = TEST_EGRESS_ALLOW):
        self.info = info
        self.harness = harness
        self.extra = extra
        self.egress_allow = egress_allow
        self.log = root / "provider.jsonl"
        self.state = root / "state"
        self.stderr = root / "runtime.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        mark = self.stderr.read_text().count("connected; serving") if self.stderr.exists() else 0
        with open(self.stderr, "a") as err:
            self.process = start_runtime(self.info, [self.harness], extra=(
                "--native", self.harness, "--model-provider", "scripted", "--provider-log", str(self.log),
                "--state-dir", str(self.state), *self.extra), stderr=err, egress_allow=self.egress_allow)
        from local.inprocess import wait_for

        wait_for(lambda: self.stderr.read_text().count(f"connected; serving {self.harness}") > mark, timeout=30)


def tenant_client(local_stack: dict, tenant: str) -> OpenAI:
    """Another tenant's official SDK client, its key made as `python -m agents_core.apikeys --tenant` makes it
    (its create_key on the stack's table, with the emulator's dummy credentials), in this process: a new interpreter
    per tenant was 0.3 s of CPU, 50 times a run. tests/e2e/test_local_stack.py and test_newcomer.py run the command
    itself. Only the dev tenant's Environments are connected automatically: another tenant's wait for their own
    machine."""
    from agents_core.apikeys import create_key
    from agents_core.store import DynamoStore, dynamodb_client

    store = DynamoStore(local_stack["table"], dynamodb_client(local_stack["moto_endpoint"], "us-east-1",
                                                              emulator=True))
    return OpenAI(base_url=local_stack["base_url"], api_key=create_key(store, tenant), max_retries=0,
                  _strict_response_validation=True)


BETA = {"headers": {"OpenAI-Beta": "agents=v1"}}


def enroll(client: OpenAI, env_id: str) -> dict:
    """`POST /v1/agents/environments/{id}/enrollments` (an extension route: no SDK method sets the header)."""
    return client.post(f"/agents/environments/{env_id}/enrollments", body={}, cast_to=object, options=BETA)


class EnrolledRuntime(RuntimeProcess):
    """A machine connected as a self_hosted Environment, as the enrollment's command says: `python -m
    runtime --url <remote_url> --workspace DIR` with the token in AGENTS_CORE_ENROLLMENT_TOKEN, natively on
    the scripted model provider when `native`."""

    def __init__(self, root: pathlib.Path, harness: str, native: bool = False, log: pathlib.Path | None = None):
        self.root = root
        self.harness = harness
        self.native = native
        self.log = log or root / "provider.jsonl"
        self.stderr = root / "enrolled.log"
        self.process: subprocess.Popen | None = None

    def connect(self, client: OpenAI, session, workspace: str, tool_env: dict | None = None,
                wait: bool = True) -> dict:
        enrollment = enroll(client, session.environment.id)
        args = [sys.executable, "-m", "runtime", "--url", session.environment.remote_url, "--workspace", workspace,
                "--harness", self.harness, "--heartbeat", BEAT, "--state-dir", str(self.root / "state")]
        if self.native:
            args += ["--native", self.harness, "--model-provider", "scripted", "--provider-log", str(self.log)]
        if tool_env is not None:
            env_file = self.root / "tool.env"
            env_file.write_text("".join(f"{k}={v}\n" for k, v in tool_env.items()))
            args += ["--tool-env-file", str(env_file)]
        with open(self.stderr, "a") as err:
            self.process = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,  # noqa: S603
                                            env={**os.environ, "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}",
                                                 "AGENTS_CORE_ENROLLMENT_TOKEN": enrollment["token"]})
        if wait:
            connected(client, session)
        return enrollment

