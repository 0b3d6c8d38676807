"""stdio MCP `env_vars` on every workspace placement (issue 37, items 3 and 14): "env_vars names variables of
the Environment, whose values never reach Core; ... the start fails when the Environment does not set one", and
"a variable the adapter sets, such as HOME, keeps the adapter's value".

- self_hosted: the Runtime's `--tool-env-file` (also tests/unit/test_workspace.py), for every Harness;
- openai_hosted: the Environment's `env` (or a variable its sandbox sets), checked by the hosted Runtime before
  anything is prepared, for every Harness; the sandbox's environment keeps the adapter's values over `env`;
- an exec-server's Environment: no stdio server starts there at all, so the start fails naming the server.
"""

import json
import time

import pytest

from runtime.environments import sandbox as sb
from runtime.environments.exec_server import ExecServerHub, _Link
from runtime.environments.workspace import WorkspaceError, check_hosted_variables
from runtime.harnesses.scripted.driver import ScriptedDriver
from runtime.router import Runtime
from tests.unit.test_sandbox import hosts, run  # noqa: F401 - the bubblewrap host fixture


def stdio(label="files", env_vars=("TOKEN_PATH",)):
    return {"type": "mcp", "server_label": label,
            "transport": {"type": "stdio", "command": "mcp-files", "args": [], "cwd": "/workspace",
                          "env_vars": list(env_vars)}}


def hosted_start(harness="codex", tools=(), hosted=None, turn_id="turn_1", kind="openai_hosted"):
    return {"type": "turn.start", "tenant": "t", "session_id": "sess_vars", "turn_id": turn_id, "harness": harness,
            "agent": {"model": "gpt-5", "tools": list(tools)},
            "environment": {"type": kind, "workspace_directory": "/workspace", "id": "env_vars",
                            "hosted": hosted or {}},
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say hi"}]}]}


# ---- openai_hosted: the Environment's env ---------------------------------------------------------------

def test_a_hosted_start_passes_when_the_environment_sets_every_variable():
    check_hosted_variables(hosted_start(tools=[stdio(env_vars=["TOKEN_PATH", "HOME"])],
                                        hosted={"env": {"TOKEN_PATH": "/workspace/token"}}))  # HOME: the sandbox's
    check_hosted_variables(hosted_start(tools=[stdio(env_vars=["HTTPS_PROXY"])],
                                        hosted={"network": {"access": "enabled"}}))  # the egress proxy's


def test_a_hosted_start_fails_naming_the_missing_variable_and_its_server_never_a_value():
    start = hosted_start(tools=[stdio("files", ["PRESENT"]), stdio("tickets", ["PRESENT", "ABSENT"])],
                         hosted={"env": {"PRESENT": "secret-value"}})
    with pytest.raises(WorkspaceError) as err:
        check_hosted_variables(start)
    message = str(err.value)
    assert "ABSENT" in message and "'tickets'" in message and "Environment's env" in message
    assert "secret-value" not in message and "PRESENT" not in message


class Hosts:
    """A hosted Runtime's host, for the router's side: records whether any Environment was prepared."""

    def __init__(self):
        self.prepared = []

    def sandbox(self, environment):
        self.prepared.append(environment["id"])
        raise sb.SandboxError("no sandbox in this test")


def failure(sent, turn_id):
    for _ in range(500):
        for message in sent:
            for o in message.get("observations") or [message]:
                if o.get("action") == "turn.failed" and message.get("turn_id") == turn_id:
                    return o["error"]["message"]
        time.sleep(0.01)
    raise AssertionError(sent)


@pytest.mark.parametrize("harness", ["codex", "claude_code"])
def test_a_hosted_runtime_fails_the_start_on_every_harness_before_preparing_anything(harness):
    sent, hosts = [], Hosts()
    runtime = Runtime(sent.append, {harness: ScriptedDriver(harness)}, heartbeat_seconds=30, hosted=hosts)
    runtime.on_message(hosted_start(harness, tools=[stdio("files", ["TOKEN_PATH"])], hosted={"env": {"OTHER": "1"}}))
    message = failure(sent, "turn_1")
    assert "TOKEN_PATH" in message and "'files'" in message
    assert hosts.prepared == []  # failed before preparation: the Environment itself is not failed
    assert not [o for m in sent for o in m.get("observations") or [m] if o.get("action") == "turn.environment"]
    # the same start with the variable set goes on to its sandbox
    runtime.on_message(hosted_start(harness, tools=[stdio("files", ["TOKEN_PATH"])], turn_id="turn_2",
                                    hosted={"env": {"TOKEN_PATH": "/workspace/t"}}))
    assert "no sandbox in this test" in failure(sent, "turn_2")
    assert hosts.prepared == ["env_vars"]
    assert "/workspace/t" not in json.dumps(sent)


@pytest.mark.parametrize("harness", ["codex", "claude_code"])
def test_a_self_hosted_runtime_fails_the_start_on_every_harness(tmp_path, harness):
    from runtime.environments.workspace import Workspace

    sent = []
    runtime = Runtime(sent.append, {harness: ScriptedDriver(harness)}, heartbeat_seconds=30,
                      workspace=Workspace(str(tmp_path), {"OTHER": "1"}))
    runtime.on_message(hosted_start(harness, tools=[stdio("files", ["TOKEN_PATH"])], kind="self_hosted"))
    message = failure(sent, "turn_1")
    assert "TOKEN_PATH" in message and "'files'" in message and "--tool-env-file" in message


# ---- openai_hosted: the adapter's variables keep the adapter's values -------------------------------------

ADAPTER = {"PATH", "HOME", "LANG", "USER", "LOGNAME", "SHELL", "TERM"}


def test_the_environments_env_never_overrides_a_variable_the_adapter_sets():
    config = {"env": {name: "/from/env" for name in ADAPTER | {"CLAUDE_CONFIG_DIR", "HTTPS_PROXY", "MINE"}},
              "network": {"access": "enabled"}}
    env = sb.sandbox_environ(config, {"CLAUDE_CONFIG_DIR": "/state/claude"})
    assert env["HOME"] == sb.INSIDE_HOME and env["PATH"].startswith(f"{sb.INSIDE_HOME}/.local/bin:")
    assert all(env[name] != "/from/env" for name in ADAPTER)
    assert env["CLAUDE_CONFIG_DIR"] == "/state/claude"  # the Harness's own
    assert env["HTTPS_PROXY"] == f"http://127.0.0.1:{sb.EGRESS_PORT}"  # the egress proxy's
    assert env["MINE"] == "/from/env"  # everything else the Environment sets reaches its processes


def test_a_process_in_the_sandbox_sees_the_adapters_home(hosts):  # noqa: F811 - the real bubblewrap host
    box = hosts.sandbox({"id": "env_home", "hosted": {"env": {"HOME": "/tmp", "MINE": "kept"}}})
    code, out, err = run(box, 'echo "$HOME $MINE"')
    assert code == 0, err
    assert out.split() == [sb.INSIDE_HOME, "kept"]


# ---- an exec-server's Environment ------------------------------------------------------------------------

def test_an_exec_server_environment_fails_a_stdio_start_naming_the_server():
    hub = ExecServerHub("127.0.0.1:0", None, lambda message: None)
    hub.port = 4567
    hub.links["env_vars"] = _Link("xreg_1")
    start = {**hosted_start("codex", tools=[stdio("files", ["TOKEN_PATH"])], kind="self_hosted")}
    with pytest.raises(WorkspaceError, match="'files'"):
        hub.bind(start)
