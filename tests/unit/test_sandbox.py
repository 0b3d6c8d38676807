"""The hosted Environment sandbox (runtime/sandbox.py) and the provider bridge (runtime/bridge.py), on the
real bubblewrap: what a process inside sees and does not see, preparation once with errors that name the
step and never a command's body, and a bridge that adds the key the sandbox never holds."""

import base64
import http.server
import json
import os
import pathlib
import subprocess
import tempfile
import threading
import urllib.request

import pytest

from runtime import sandbox as sb
from runtime.bridge import ProviderBridge


@pytest.fixture
def hosts():
    root = pathlib.Path(tempfile.mkdtemp(dir="/var/tmp", prefix="sandbox-test-"))  # noqa: S108 - traversable
    os.chmod(root, 0o711)  # noqa: S103
    yield sb.HostedEnvironments(str(root / "hosted"), {})
    subprocess.run(["rm", "-rf", str(root)], check=False)  # noqa: S603, S607 - files owned by Environment uids


def run(box, script, network=None):
    done = subprocess.run(box.argv(["/bin/sh", "-c", script], network=network), env=box.environ(),  # noqa: S603
                          capture_output=True, text=True, cwd=str(box.workspace), timeout=60)
    return done.returncode, done.stdout, done.stderr


def test_a_sandbox_sees_its_workspace_and_nothing_of_the_host_or_another_environment(hosts, monkeypatch):
    monkeypatch.setenv("AGENTS_CORE_RUNTIME_TOKEN", "rt-must-not-leak")
    mine = hosts.sandbox({"id": "env_mine", "hosted": {"env": {"GREETING": "hello"}}})
    other = hosts.sandbox({"id": "env_other", "hosted": {}})
    (other.workspace / "secret.txt").write_text("the other tenant's")
    (mine.workspace / "own.txt").write_text("mine")
    code, out, err = run(mine, f"""
        cat /workspace/own.txt; echo
        echo "greeting=$GREETING"
        ls /root 2>&1 | head -1
        cat {other.workspace}/secret.txt 2>&1 | head -1
        ls {hosts.directory} 2>&1 | head -1
        tr '\\0' '\\n' < /proc/1/environ | sort
        id -u
    """)
    assert code == 0, err
    assert "mine" in out and "greeting=hello" in out
    assert "No such file or directory" in out  # /root, the other workspace and the hosts' directory are absent
    assert "the other tenant's" not in out
    assert "rt-must-not-leak" not in out and "AGENTS_CORE" not in out
    environ = [line for line in out.splitlines() if "=" in line and not line.startswith("greeting")]
    assert {line.split("=", 1)[0] for line in environ} <= {"PATH", "HOME", "LANG", "USER", "LOGNAME", "SHELL",
                                                         "TERM", "GREETING"}
    assert out.strip().splitlines()[-1] == "1000"  # the sandbox's own user inside
    if os.geteuid() == 0:  # on the host: an unprivileged uid of the Environment's own, different per Environment
        assert mine.uid and other.uid and mine.uid != other.uid and mine.workspace.stat().st_uid == mine.uid
        assert oct(mine.workspace.stat().st_mode & 0o777) == "0o700"


def test_network_disabled_leaves_only_loopback_and_enabled_shares_the_hosts(hosts):
    box = hosts.sandbox({"id": "env_net", "hosted": {"network": {"access": "disabled"}}})
    code, out, _ = run(box, "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    assert code == 0 and [n.strip() for n in out.split()] == ["lo"]
    code, out, _ = run(box, "cat /proc/net/dev | tail -n +3 | cut -d: -f1", network="enabled")
    assert code == 0 and len(out.split()) >= 1


def test_preparation_writes_files_runs_setup_in_order_once_and_a_failure_names_the_step_not_the_body(hosts):
    data = base64.b64encode(b"payload \x00\x01").decode()
    box = hosts.sandbox({"id": "env_prep", "hosted": {
        "files": [{"type": "inline", "path": "/workspace/src/in.bin", "data": data}],
        "setup_commands": [{"command": "echo one >> order.txt"}, {"command": "echo two >> order.txt", "cwd": "/workspace"}]}})
    assert box.prepare() is True
    assert box.prepare() is False  # once per Environment on this host
    assert (box.workspace / "src" / "in.bin").read_bytes() == b"payload \x00\x01"
    assert (box.workspace / "order.txt").read_text() == "one\ntwo\n"
    failing = hosts.sandbox({"id": "env_fail", "hosted": {"setup_commands": [
        {"command": "true"}, {"command": "echo SECRET-BODY; exit 7"}, {"command": "touch never"}]}})
    with pytest.raises(sb.PreparationFailed) as failed:
        failing.prepare()
    assert str(failed.value) == "setup_commands[1] exited with code 7."
    assert failed.value.code == "setup_command_failed"
    assert not (failing.workspace / "never").exists() and not failing.prepared()


@pytest.mark.parametrize("path", ["/etc/passwd", "/workspace/../escape", "relative.txt", "/workspace/"])
def test_a_file_outside_the_workspace_is_refused(hosts, path):
    box = hosts.sandbox({"id": "env_files", "hosted": {"files": [{"path": path, "data": "eA=="}]}})
    with pytest.raises(sb.PreparationFailed, match=r"files\[0\]\.path"):
        box.prepare()


def test_a_file_is_never_written_through_a_symbolic_link(hosts, tmp_path):
    box = hosts.sandbox({"id": "env_link", "hosted": {"files": [{"path": "/workspace/out/x.txt", "data": "eA=="}]}})
    (box.workspace / "out").symlink_to(tmp_path)
    with pytest.raises(sb.PreparationFailed, match="symbolic link"):
        box.prepare()
    assert not (tmp_path / "x.txt").exists()


def test_a_setup_command_past_its_bound_fails_the_preparation(hosts, monkeypatch):
    monkeypatch.setattr(sb, "SETUP_TIMEOUT", 0.5)
    box = hosts.sandbox({"id": "env_slow", "hosted": {"setup_commands": [{"command": "sleep 5"}]}})
    with pytest.raises(sb.PreparationFailed, match=r"setup_commands\[0\] did not finish within 0.5 seconds"):
        box.prepare()


def test_an_environment_id_that_is_not_one_is_refused(hosts):
    with pytest.raises(sb.SandboxError):
        hosts.sandbox({"id": "../../etc", "hosted": {}})


def test_missing_bubblewrap_is_a_clear_error_at_runtime_start(monkeypatch, tmp_path):
    monkeypatch.setattr(sb.shutil, "which", lambda name: None)
    with pytest.raises(sb.SandboxError, match="needs bubblewrap"):
        sb.HostedEnvironments(str(tmp_path / "h"), {})


def test_a_host_directory_other_uids_cannot_traverse_is_a_clear_error(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only a root Runtime runs Environments as uids of their own")  # pragma: no cover
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(sb.SandboxError, match="not traversable"):
        sb.HostedEnvironments(str(closed / "hosted"), {})


def test_the_bridge_puts_the_operators_key_on_the_request_and_drops_the_sandboxs(tmp_path):
    seen = []

    class Upstream(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append({"path": self.path, "auth": self.headers.get_all("Authorization"), "body": body,
                         "host": self.headers["Host"]})
            reply = json.dumps({"ok": True}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    bridge = ProviderBridge(origin, ("Authorization", "Bearer sk-operator"), str(tmp_path / "p.sock")).start()
    try:
        request = urllib.request.Request(bridge.url + "/v1/responses", data=b'{"x":1}', method="POST",
                                         headers={"Authorization": "Bearer sandbox-bridge",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
            assert json.loads(answer.read()) == {"ok": True}
        assert seen == [{"path": "/v1/responses", "auth": ["Bearer sk-operator"], "body": b'{"x":1}',
                         "host": origin.removeprefix("http://")}]
        assert oct(os.stat(tmp_path / "p.sock").st_mode & 0o777) == "0o666"  # any sandbox uid may call it
    finally:
        bridge.stop()
        server.shutdown()


# ---- the Runtime's side: a hosted Runtime prepares the Environment, then runs the Turn -----------------

def hosted_start(turn_id, env_id="env_router", hosted=None, kind="openai_hosted", text="say Hi."):
    return {"type": "turn.start", "tenant": "t", "session_id": "sess_router", "turn_id": turn_id,
            "harness": "scripted", "agent": {"model": "gpt-5", "tools": []},
            "environment": {"type": kind, "workspace_directory": "/workspace", "id": env_id,
                            "hosted": hosted or {}},
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}]}


def observations(sent, turn_id):
    out = []
    for message in sent:
        if message.get("turn_id") == turn_id:
            out += [{**o, "turn_id": turn_id} for o in message.get("observations") or [message]]
    return out


def ended(sent, turn_id):
    import time

    for _ in range(500):
        actions = [o["action"] for o in observations(sent, turn_id)]
        if any(a in ("turn.completed", "turn.failed") for a in actions):
            return actions
        time.sleep(0.01)
    raise AssertionError(observations(sent, turn_id))


def test_a_hosted_runtime_reports_the_environment_before_the_turn_and_prepares_once(hosts):
    from runtime.harnesses.scripted.driver import ScriptedDriver
    from runtime.router import Runtime

    sent = []
    runtime = Runtime(sent.append, {"scripted": ScriptedDriver()}, heartbeat_seconds=30, hosted=hosts)
    runtime.on_message(hosted_start("turn_1", hosted={"files": [{"path": "/workspace/a.txt", "data": "YQ=="}]}))
    assert ended(sent, "turn_1")[-1] == "turn.completed"
    first = [o for o in observations(sent, "turn_1") if o["action"] == "turn.environment"]
    assert [(o["status"], o["prepared"]) for o in first] == [("connected", True)]
    runtime.on_message(hosted_start("turn_2"))
    assert ended(sent, "turn_2")[-1] == "turn.completed"
    second = [o for o in observations(sent, "turn_2") if o["action"] == "turn.environment"]
    assert [(o["status"], o["prepared"]) for o in second] == [("connected", False)]


def test_a_failed_preparation_fails_the_environment_and_the_turn_naming_the_step(hosts):
    from runtime.harnesses.scripted.driver import ScriptedDriver
    from runtime.router import Runtime

    sent = []
    runtime = Runtime(sent.append, {"scripted": ScriptedDriver()}, heartbeat_seconds=30, hosted=hosts)
    runtime.on_message(hosted_start("turn_f", env_id="env_broken",
                                    hosted={"setup_commands": [{"command": "exit 9"}]}))
    assert ended(sent, "turn_f")[-1] == "turn.failed"
    environment, = [o for o in observations(sent, "turn_f") if o["action"] == "turn.environment"]
    assert environment["status"] == "failed"
    assert environment["error"] == {"code": "setup_command_failed", "type": "sandbox_error",
                                    "message": "setup_commands[0] exited with code 9."}
    assert "exit 9" not in json.dumps(sent)


@pytest.mark.parametrize("kind", ["none", "self_hosted"])
def test_a_hosted_runtime_refuses_every_other_placement_and_a_shared_one_refuses_hosted(hosts, kind):
    from runtime.harnesses.scripted.driver import ScriptedDriver
    from runtime.router import Runtime

    sent = []
    Runtime(sent.append, {"scripted": ScriptedDriver()}, heartbeat_seconds=30, hosted=hosts).on_message(
        hosted_start("turn_x", kind=kind))
    assert ended(sent, "turn_x")[-1] == "turn.failed"
    assert "openai_hosted Environments only" in json.dumps(sent)
    shared = []
    Runtime(shared.append, {"scripted": ScriptedDriver()}, heartbeat_seconds=30).on_message(hosted_start("turn_y"))
    assert ended(shared, "turn_y")[-1] == "turn.failed"
    assert "--hosted-environments" in json.dumps(shared)


def test_packages_install_inside_the_sandbox_with_the_network_and_a_failure_names_the_list(hosts, monkeypatch):
    ran = []

    def fake_run(self, command, *, network, timeout, cwd=sb.INSIDE_WORKSPACE):
        ran.append((command, network))
        return 1 if "npm install" in command else 0

    monkeypatch.setattr(sb.Sandbox, "run", fake_run)
    box = hosts.sandbox({"id": "env_pkgs", "hosted": {"network": {"access": "disabled"},
                                                      "packages": {"python": ["requests==2.32.3"], "npm": ["left-pad"]},
                                                      "setup_commands": [{"command": "never reached"}]}})
    with pytest.raises(sb.PreparationFailed, match=r"Installing packages\.npm failed \(exit code 1\)\.") as failed:
        box.prepare()
    assert failed.value.code == "package_install_failed"
    assert ran == [
        ("/usr/bin/python3 -m pip install --user --quiet --break-system-packages --no-warn-script-location -- "
         "requests==2.32.3", "enabled"),
        ("npm install --global --silent --prefix /home/agent/.npm-global -- left-pad", "enabled")]
    assert not box.prepared()
