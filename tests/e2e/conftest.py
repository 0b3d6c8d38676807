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
HEARTBEAT = 3


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


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory):
    state = tmp_path_factory.mktemp("stack") / "stack.json"
    env = {**os.environ, "AGENTS_CORE_HTTP_PORT": "0", "AGENTS_CORE_WS_PORT": "0", "AGENTS_CORE_MOTO_PORT": "0",
           "AGENTS_CORE_STACK_FILE": str(state), "AGENTS_CORE_HEARTBEAT_SECONDS": str(HEARTBEAT),
           "AGENTS_CORE_START_RUNTIME": "0", "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}"}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "local"], cwd=ROOT, env=env,  # noqa: S603
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    info = _wait_file(state, process)
    info["startup_seconds_measured"] = round(time.perf_counter() - started, 2)
    info["stack_file"] = str(state)
    yield info
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def start_runtime(info: dict, harnesses: list[str], extra: tuple[str, ...] = (), stderr=subprocess.DEVNULL
                  ) -> subprocess.Popen:
    args = [sys.executable, "-m", "runtime", "--url", info["websocket_url"], "--heartbeat", "0.5", *extra]
    for h in harnesses:
        args += ["--harness", h]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,  # noqa: S603
                            env={**os.environ, "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}",
                                 "AGENTS_CORE_RUNTIME_TOKEN": info["runtime_token"]})


@pytest.fixture(scope="session")
def runtime_process(local_stack):
    # codex is left to the native Runtime of test_codex.py (real Codex on the scripted model provider)
    process = start_runtime(local_stack, ["scripted", "claude_code"])
    time.sleep(1.0)
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


class NativeRuntime:
    """`python -m runtime --harness H --native H --model-provider scripted`, restartable with the same
    state directory (so a restart resumes the native history); the provider log shows what the native
    Harness sent the model."""

    def __init__(self, info: dict, root: pathlib.Path, harness: str, extra: tuple[str, ...] = ()):
        self.info = info
        self.harness = harness
        self.extra = extra
        self.log = root / "provider.jsonl"
        self.state = root / "state"
        self.stderr = root / "runtime.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        mark = self.stderr.read_text().count("connected; serving") if self.stderr.exists() else 0
        with open(self.stderr, "a") as err:
            self.process = start_runtime(self.info, [self.harness], extra=(
                "--native", self.harness, "--model-provider", "scripted", "--provider-log", str(self.log),
                "--state-dir", str(self.state), *self.extra), stderr=err)
        from local.inprocess import wait_for

        wait_for(lambda: self.stderr.read_text().count(f"connected; serving {self.harness}") > mark, timeout=30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)

    def requests(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
