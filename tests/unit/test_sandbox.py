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

import pytest

from runtime.environments import sandbox as sb
from runtime.environments.bridge import ProviderBridge, Route, inference_routes
from runtime.environments.egress import EgressPolicy, EgressProxy


@pytest.fixture
def hosts():
    root = pathlib.Path(tempfile.mkdtemp(dir="/var/tmp", prefix="sandbox-test-"))  # noqa: S108 - traversable
    os.chmod(root, 0o711)  # noqa: S103
    egress = EgressProxy(EgressPolicy(), str(root / "hosted" / "egress"), bridge_port=sb.BRIDGE_PORT).start()
    yield sb.HostedEnvironments(str(root / "hosted"), {}, egress=egress)
    egress.stop()
    subprocess.run(["rm", "-rf", str(root)], check=False)  # noqa: S603, S607 - files owned by Environment uids


def run(box, script, network=None):
    done = subprocess.run(box.argv(["/bin/sh", "-c", script], network=network),  # noqa: S603
                          env=box.environ(network=network), capture_output=True, text=True, cwd=str(box.workspace),
                          timeout=60)
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


@pytest.mark.parametrize("network", ["disabled", "enabled", "packages"])
def test_every_sandbox_has_a_network_namespace_of_its_own_with_only_loopback(hosts, network):
    box = hosts.sandbox({"id": "env_net", "hosted": {"network": {"access": "enabled"}}})
    code, out, err = run(box, "cat /proc/net/dev | tail -n +3 | cut -d: -f1; echo --; "
                              "awk 'FNR > 1 {print $2 \"-\" $3}' /proc/net/tcp /proc/net/tcp6", network=network)
    assert code == 0, err
    interfaces, sockets = out.split("--")
    assert [n.strip() for n in interfaces.split()] == ["lo"]
    # none of the host's sockets: only the forwarder's own loopback port (and the readiness probe's)
    for pair in sockets.split():
        ends = [(end.rsplit(":", 1)[0], int(end.rsplit(":", 1)[1], 16)) for end in pair.split("-")]
        assert ends[0][0] == "0100007F" and {ends[0][1], ends[1][1]} & {sb.EGRESS_PORT, sb.BRIDGE_PORT}, pair


def test_egress_reaches_only_what_the_policy_allows_and_the_proxy_is_there_only_with_egress(hosts):
    served = []

    class Host(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            served.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Host)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    box = hosts.sandbox({"id": "env_egress", "hosted": {"network": {"access": "enabled"}}})
    script = (f"curl -s -m 5 -x http://127.0.0.1:{sb.EGRESS_PORT} --noproxy '' http://127.0.0.1:{port}/proxied; "
              f"echo; curl -s -m 5 http://127.0.0.1:{port}/direct; echo rc=$?; "
              "curl -s -m 5 http://169.254.169.254/latest/meta-data/; echo; "
              "curl -s -m 5 http://[fd00:ec2::254]/latest/meta-data/; echo")
    try:
        code, out, err = run(box, script, network="enabled")
        assert code == 0, err
        assert "the egress policy refuses 127.0.0.1" in out and "is loopback" in out
        assert "rc=7" in out  # nothing listens on the sandbox's own loopback
        assert "169.254.169.254 is link-local" in out and "fd00:ec2::254 is unique-local" in out
        assert served == []
        code, out, err = run(box, f"curl -s -m 3 http://127.0.0.1:{sb.EGRESS_PORT}/; echo rc=$?", network="disabled")
        assert "rc=7" in out and served == []  # no proxy in a sandbox without egress
    finally:
        server.shutdown()


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
        sb.HostedEnvironments(str(tmp_path / "h"), {}, egress=None)


def test_a_host_directory_other_uids_cannot_traverse_is_a_clear_error(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only a root Runtime runs Environments as uids of their own")  # pragma: no cover
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(sb.SandboxError, match="not traversable"):
        sb.HostedEnvironments(str(closed / "hosted"), {}, egress=None)


def test_the_bridge_relays_inference_routes_with_the_operators_key_for_its_own_namespace_only(tmp_path):
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
    bridge = ProviderBridge(inference_routes("codex", origin + "/v1", ("Authorization", "Bearer sk-operator")),
                            str(tmp_path / "bridge")).start()

    def call(identity, path, token):
        import socket

        client = socket.socket(socket.AF_UNIX)
        client.connect(bridge.socket_for(identity))
        body = b'{"x":1}'
        client.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                       f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        reply = b""
        while chunk := client.recv(65536):
            reply += chunk
        client.close()
        return int(reply.split(b" ", 2)[1]), reply.split(b"\r\n\r\n", 1)[1]

    try:
        mine, other = bridge.token("env_a"), bridge.token("env_b")
        assert mine != other
        assert call("env_a", "/v1/responses", mine) == (200, b'{"ok": true}')
        assert seen == [{"path": "/v1/responses", "auth": ["Bearer sk-operator"], "body": b'{"x":1}',
                         "host": origin.removeprefix("http://")}]
        status, body = call("env_a", "/v1/responses", other)  # another namespace's token
        assert status == 401 and b"only the token its namespace was given" in body
        status, body = call("env_a", "/v1/files?purpose=fine-tune", mine)  # not an inference route
        assert status == 403 and b"not a model inference route" in body
        assert len(seen) == 1
        if os.geteuid() == 0:
            owned = bridge.socket_for("env_c", owner=4242)
            assert os.stat(owned).st_uid == 4242 and oct(os.stat(owned).st_mode & 0o777) == "0o600"
    finally:
        bridge.stop()
        server.shutdown()


def test_each_harness_gets_only_its_inference_routes():
    assert inference_routes("codex", "https://api.openai.com/v1", None) == [
        Route("codex", "POST", "/v1/responses", "https://api.openai.com")]
    assert [(r.method, r.path) for r in inference_routes("claude_code", "https://api.anthropic.com", None)] == [
        ("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens")]


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


def test_packages_install_in_the_registries_only_namespace_isolated_and_a_failure_names_the_list(hosts, monkeypatch):
    ran = []

    def fake_run(self, command, *, network, timeout, cwd=sb.INSIDE_WORKSPACE, env=None):
        ran.append((command, network, cwd, env))
        return 1 if "npm install" in command else 0

    monkeypatch.setattr(sb.Sandbox, "run", fake_run)
    box = hosts.sandbox({"id": "env_pkgs", "hosted": {"network": {"access": "disabled"},
                                                      "env": {"PYTHONPATH": "/workspace", "NODE_OPTIONS": "--require=x",
                                                              "PIP_INDEX_URL": "http://127.0.0.1:1/"},
                                                      "packages": {"python": ["requests==2.32.3"], "npm": ["left-pad"]},
                                                      "setup_commands": [{"command": "never reached"}]}})
    with pytest.raises(sb.PreparationFailed, match=r"Installing packages\.npm failed \(exit code 1\)\.") as failed:
        box.prepare()
    assert failed.value.code == "package_install_failed"
    assert [(c, n, d) for c, n, d, _ in ran] == [
        ("/usr/bin/python3 -I -m pip install --user --quiet --break-system-packages --no-warn-script-location "
         "--no-input --disable-pip-version-check -- requests==2.32.3", "packages", "/tmp"),
        ("npm install --global --silent --ignore-scripts --no-audit --no-fund --prefix /home/agent/.npm-global -- "
         "left-pad", "packages", "/tmp")]
    for _, _, _, env in ran:  # none of the Session's env; no configuration file; the registries-only proxy
        assert not {"PYTHONPATH", "NODE_OPTIONS", "PIP_INDEX_URL"} & set(env)
        assert env["PIP_CONFIG_FILE"] == os.devnull and env["npm_config_userconfig"] == os.devnull
        assert env["npm_config_ignore_scripts"] == "true" and env["HTTPS_PROXY"] == f"http://127.0.0.1:{sb.EGRESS_PORT}"
    assert not box.prepared()


def test_the_registries_only_proxy_refuses_every_other_host(hosts):
    box = hosts.sandbox({"id": "env_reg", "hosted": {}})
    code, out, err = run(box, "curl -s -m 5 http://example.com/; echo; curl -s -m 5 http://127.0.0.1:5055/; echo",
                         network="packages")
    assert code == 0, err
    assert "example.com is not a package registry this host allows (pypi.org, files.pythonhosted.org, " \
           "registry.npmjs.org)" in out
