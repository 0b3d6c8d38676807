"""A newcomer's first hour, as the README writes it: the commands and SDK examples are read out of
README.md's code blocks (so this fails when the README drifts from what works) and run in a checkout's
root against the running local stack, with every AWS_* variable removed and a HOME without ~/.aws.

The checkout is a temporary directory holding what a clean checkout has after `make dev`: the code
(`layers/`, `runtime/`, `events/`), the virtual environment, and the stack file `.local/stack.json`
the running stack wrote. Nothing else.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
from openai import OpenAI

from tests.e2e.conftest import ROOT

README = (ROOT / "README.md").read_text()
TIMEOUT = 120


# ---- the README, read as a newcomer reads it ----------------------------------------------------------

def section(heading: str) -> str:
    """The text under a heading, up to the next heading of the same or a higher level."""
    level = len(heading.split(" ", 1)[0])
    lines = README[README.index(f"\n{heading}\n") + len(heading) + 2:].splitlines(keepends=True)
    fenced, taken = False, []
    for line in lines:
        fenced ^= line.startswith("```")
        if not fenced and re.match(rf"#{{1,{level}}} ", line):
            break
        taken.append(line)
    return "".join(taken)


def code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def commands(text: str) -> list[str]:
    """The shell commands of a section's bash blocks, without comments."""
    lines = []
    for block in code_blocks(text, "bash"):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def command(text: str, *needles: str) -> str:
    found = [c for c in commands(text) if all(n in c for n in needles)]
    assert len(found) == 1, f"the README has no single command with {needles}: {found}"
    return found[0]


AFTER_DEV = section("### After `make dev`")
RUNNING_A_RUNTIME = section("## Running a Runtime")


# ---- a newcomer's machine ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkout(local_stack, tmp_path_factory):
    root = tmp_path_factory.mktemp("checkout")
    for name in (".venv", "layers", "runtime", "events"):
        (root / name).symlink_to(ROOT / name)
    (root / ".local").mkdir()
    (root / ".local" / "stack.json").symlink_to(local_stack["stack_file"])
    return root


@pytest.fixture(scope="module")
def newcomer_env(tmp_path_factory):
    """No AWS credentials anywhere: no AWS_* variable, a HOME without ~/.aws, nothing of the project's."""
    home = tmp_path_factory.mktemp("home")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "AGENTS_CORE_", "BOTO")) and k not in ("PYTHONPATH", "TABLE_NAME")}
    env["HOME"] = str(home)
    return env


def shell(line: str, cwd, env, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,  # noqa: S603, S607
                          timeout=timeout)


def runtime_command(info: dict) -> str:
    """`python -m runtime --url <WebSocketUrl> [--harness scripted --harness claude_code ...]` with the
    stack's URL and the optional part taken as written."""
    line = command(RUNNING_A_RUNTIME, "-m runtime --url <WebSocketUrl>", "[")
    line = line.replace("<WebSocketUrl>", info["websocket_url"])
    return re.sub(r"\[(.*?)\s*(\.\.\.)?\]", r"\1", line)


def start(line: str, cwd, env, log) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-c", f"exec {line}"], cwd=cwd, env=env,  # noqa: S603, S607
                            stdout=log, stderr=subprocess.STDOUT)


def wait_for_text(path, text: str, process: subprocess.Popen, timeout: float = 30) -> str:
    end = time.time() + timeout
    while time.time() < end:
        seen = path.read_text()
        if text in seen:
            return seen
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared: {path.read_text()}")


@pytest.fixture(scope="module")
def runtime_token(checkout, newcomer_env):
    done = shell(command(RUNNING_A_RUNTIME, "agents_core.apikeys", "--runtime"), checkout, newcomer_env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def readme_runtime(local_stack, checkout, newcomer_env, runtime_token, tmp_path_factory):
    """The README's Runtime, started as written with the token it printed, in the environment."""
    log = tmp_path_factory.mktemp("runtime") / "runtime.log"
    with log.open("w") as out:
        process = start(runtime_command(local_stack), checkout,
                        {**newcomer_env, "AGENTS_CORE_RUNTIME_TOKEN": runtime_token}, out)
    wait_for_text(log, "connected", process)
    yield process, log
    if process.poll() is None:
        process.terminate()
        process.wait(timeout=15)


# ---- keys ------------------------------------------------------------------------------------------------

def test_the_readme_key_commands_work_against_the_local_stack_without_aws_credentials(local_stack, checkout,
                                                                                     newcomer_env, runtime_token):
    done = shell(command(AFTER_DEV, "agents_core.apikeys", "--tenant acme"), checkout, newcomer_env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    key = done.stdout.strip()
    assert key.startswith("sk-agents-") and runtime_token.startswith("rt-")
    # The new key is a second tenant: it works, and it sees nothing of the dev tenant's.
    acme = OpenAI(base_url=local_stack["base_url"], api_key=key, max_retries=0, _strict_response_validation=True)
    dev = OpenAI(base_url=local_stack["base_url"], api_key=local_stack["api_key"], max_retries=0)
    agent = acme.beta.agents.create(model="gpt-5", name="acme's")
    assert agent.id in [a.id for a in acme.beta.agents.list(limit=100)]
    assert agent.id not in [a.id for a in dev.beta.agents.list(limit=100)]


def test_the_stack_file_is_found_by_its_new_name_and_its_old_one(local_stack, newcomer_env, tmp_path):
    keys = [sys.executable, "-m", "agents_core.apikeys", "--tenant", "elsewhere"]
    env = {**newcomer_env, "PYTHONPATH": str(ROOT / "layers" / "contract")}
    for variable in ("AGENTS_CORE_STACK_FILE", "AGENTS_CORE_STATE_FILE"):
        done = subprocess.run(keys, cwd=tmp_path, env={**env, variable: local_stack["stack_file"]},  # noqa: S603
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert done.returncode == 0 and done.stdout.startswith("sk-agents-"), (variable, done.stderr)


def test_keys_without_a_stack_or_credentials_are_a_clear_error(newcomer_env, tmp_path):
    env = {**newcomer_env, "PYTHONPATH": str(ROOT / "layers" / "contract"), "AWS_EC2_METADATA_DISABLED": "true"}
    done = subprocess.run([sys.executable, "-m", "agents_core.apikeys", "--tenant", "acme"],  # noqa: S603
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: no AWS credentials") and "make dev" in done.stderr


# ---- the SDK examples --------------------------------------------------------------------------------

def test_the_readme_sdk_examples_run_verbatim(checkout, newcomer_env, readme_runtime):
    first, stream = code_blocks(AFTER_DEV, "python")
    assert "[...]" not in stream
    script = checkout / "readme_examples.py"
    script.write_text(first + "\n" + stream)  # one Python session: the stream example uses the same client
    done = subprocess.run([str(checkout / ".venv" / "bin" / "python"), script.name], cwd=checkout,  # noqa: S603
                          env=newcomer_env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    items, final = done.stdout.strip().splitlines()
    assert "('function_call_output', 'sunny')" in items and items.count("'message'") == 2
    assert final == "Sunny."


def test_the_printed_try_it_snippet_prints_the_reply(local_stack, checkout, newcomer_env, readme_runtime):
    from local.__main__ import EXAMPLE

    done = subprocess.run([str(checkout / ".venv" / "bin" / "python"), "-c", EXAMPLE.format(**local_stack)],  # noqa: S603
                          cwd=checkout, env=newcomer_env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello from the scripted harness"


# ---- the Runtime -----------------------------------------------------------------------------------

def test_the_readme_runtime_says_it_is_connected_and_stops_cleanly(local_stack, checkout, newcomer_env,
                                                                   runtime_token, tmp_path):
    log = tmp_path / "runtime.log"
    with log.open("w") as out:
        process = start(runtime_command(local_stack), checkout,
                        {**newcomer_env, "AGENTS_CORE_RUNTIME_TOKEN": runtime_token}, out)
    seen = wait_for_text(log, "connected", process)
    assert re.search(r"connected; serving scripted \(scripted\), claude_code \(scripted\)", seen), seen
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=15) == 0
    assert "Traceback" not in log.read_text()


def test_a_refused_runtime_token_stops_the_runtime_with_a_clear_message(local_stack, checkout, newcomer_env):
    started = time.time()
    done = shell(runtime_command(local_stack), checkout, {**newcomer_env, "AGENTS_CORE_RUNTIME_TOKEN": "rt-wrong"},
                 timeout=60)
    assert done.returncode == 2 and time.time() - started < 30
    assert "Core refused the Runtime token (HTTP 403)" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_readme_dry_runs_print_and_a_snapshot_of_another_harness_is_a_clear_error(checkout, newcomer_env):
    codex = command(RUNNING_A_RUNTIME, "--harness codex --dry-run")
    claude = command(RUNNING_A_RUNTIME, "--harness claude_code --dry-run")
    for line in (codex, claude):
        done = shell(line, checkout, newcomer_env)
        assert done.returncode == 0 and done.stdout and not done.stderr, (line, done.stderr)
    for harness, snapshot, of in (("codex", "claude", "claude_code"), ("claude_code", "codex", "codex"),
                                  ("minimax_code", "codex", "codex")):
        line = re.sub(r"--harness \w+", f"--harness {harness}", codex).replace(
            "runtime-snapshot-codex.json", f"runtime-snapshot-{snapshot}.json")
        done = shell(line, checkout, newcomer_env)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip() == f"error: the snapshot is a '{of}' Session's; translate it with --harness {of}"


# ---- make dev on a busy machine ------------------------------------------------------------------------

@pytest.mark.parametrize("variable", ["AGENTS_CORE_HTTP_PORT", "AGENTS_CORE_WS_PORT", "AGENTS_CORE_MOTO_PORT"])
def test_a_port_in_use_stops_the_local_stack_with_a_clear_error(variable, tmp_path):
    with socket.socket() as other:  # another program listening on the port the stack is told to use
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        stack_file = tmp_path / "stack.json"
        env = {**os.environ, "AGENTS_CORE_HTTP_PORT": "0", "AGENTS_CORE_WS_PORT": "0", "AGENTS_CORE_MOTO_PORT": "0",
               variable: str(port), "AGENTS_CORE_STACK_FILE": str(stack_file), "AGENTS_CORE_START_RUNTIME": "0",
               "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}"}
        done = subprocess.run([sys.executable, "-m", "local"], cwd=ROOT, env=env,  # noqa: S603
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "local stack is up" not in done.stdout and "Traceback" not in done.stderr
    assert done.stderr.strip() == (f"error: port {port} ({variable}) is not available: Address already in use. "
                                   f"Stop the process using it, or choose another port ({variable}=0 picks a free one).")
    assert not stack_file.exists()


# ---- the Errors section says what Core enforces ---------------------------------------------------------

def test_the_readme_errors_section_states_the_enforced_limits():
    from agents_contract import limits
    from agents_core.engine import MAX_INPUT_MESSAGES
    from agents_core.settings import Settings

    errors = section("## Errors")
    rows = {line.split("|")[1].strip(): line for line in errors.splitlines() if line.startswith("| ")}
    assert f"{limits.MAX_BODY_BYTES:,} bytes" in rows["request body"]
    assert Settings().max_body_bytes == limits.MAX_BODY_BYTES
    assert f"{limits.MAX_JSON_DEPTH} levels" in rows["JSON nesting"]
    assert f"| {limits.MAX_EVENTS_PER_BATCH} " in rows["events per batch"]
    assert f"{limits.MAX_BATCH_CONTENT_BYTES:,} bytes" in rows["tool results and messages of one batch"]
    assert f"| {MAX_INPUT_MESSAGES} |" in rows["input messages per request"]
    assert (f"{limits.METADATA_MAX_PAIRS} pairs; keys 1 to {limits.METADATA_MAX_KEY} characters; values at most "
            f"{limits.METADATA_MAX_VALUE} characters") in rows["metadata"]
    assert "`x-should-retry: false`" in errors and '"error": {"message"' in errors



def test_the_readme_event_shapes_are_the_documented_ones_and_a_message_starts_a_turn(local_stack, readme_runtime):
    import jsonschema
    import yaml

    block = json.loads(code_blocks(section("## API surface").replace("\n  ", "\n"), "json")[0])
    document = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    jsonschema.validate(block, {"$ref": "#/components/schemas/EventBatch", "components": document["components"]})
    assert [e["type"] for e in block["events"]] == [
        "agent.session.input.message", "agent.session.input.tool_result", "agent.session.input.cancel"]
    client = OpenAI(base_url=local_stack["base_url"], api_key=local_stack["api_key"], max_retries=0,
                    _strict_response_validation=True)
    idle = client.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/work"},
                                              agent={"model": "gpt-5"})
    client.beta.agents.sessions.events.create(idle.id, events=[block["events"][0]])
    end = time.time() + 30
    while client.beta.agents.sessions.retrieve(idle.id).status != "idle" or \
            len(client.beta.agents.sessions.items.list(idle.id).data) < 2:
        assert time.time() < end, "the message started no Turn that ended"
        time.sleep(0.1)
    items = client.beta.agents.sessions.items.list(idle.id, order="asc").data
    assert items[-1].role == "assistant" and items[-1].content[0].text == "Hi"
