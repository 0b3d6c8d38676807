"""Egress for tenants (issue 33), black-box on a local stack of this module's own, with the official SDK and
the reference Runtime's documented command line.

A hostile tenant's code runs in a hosted Environment with the network enabled, under the scripted harness,
real Codex and real Claude Code, as a setup command, a stdio MCP server and the model's own shell call. It
lists the loopback sockets it can see, connects to a listener the test serves on the host's loopback (and
through the egress proxy to the local stack's own moto endpoint), to another tenant's sandbox serving its
workspace on 127.0.0.1, to a private and a link-local (metadata) address, and to a server in a network
namespace the test creates at an address the operator allows (AGENTS_CORE_EGRESS_ALLOW): only the last
answers. The bridge refuses a path that is not an inference route and another sandbox's token.

On `environment: none`, a shared Runtime's Harness connects to the tenant's HTTP MCP server_url: with
AGENTS_CORE_EGRESS_ALLOW empty a loopback server receives nothing (an optional one is dropped and the Turn
completes, a required one fails the Turn naming it), and with 127.0.0.0/8 allowed it is called.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import RuntimeProcess, start_runtime, start_stack, stop_stack, tenant_client
from tests.e2e.test_hosted_environments import HostedRuntime, finished, inline

pytestmark = pytest.mark.e2e

NATIVE = ("codex", "claude_code")
SHELL_TOOL = {"codex": ("exec_command", "cmd"), "claude_code": ("Bash", "command")}
NETNS = f"ac-egress-{os.getpid()}"
ALLOWED_HOST, ALLOWED_NS = "10.213.9.1", "10.213.9.2"  # the veth pair's ends: the host's and the namespace's
ALLOWED_PORT = 8080
OTHER_PORT = 7070  # where the other tenant's sandbox serves its workspace, on its own loopback


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    process, info = start_stack(tmp_path_factory.mktemp("egress-stack"))
    yield info
    stop_stack(process)


class Listener:
    """A TCP listener on the host's loopback that records every connection it accepts (and answers HTTP)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhost-secret")
            except OSError:
                pass
            conn.close()


@pytest.fixture(scope="module")
def listener():
    served = Listener()
    yield served
    served.sock.close()


@pytest.fixture(scope="module")
def allowed_server(tmp_path_factory):
    """An HTTP server in a network namespace of the test's own, on an address the operator allows."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("the egress e2e needs root and iproute2 to create its network namespace")  # pragma: no cover
    root = tmp_path_factory.mktemp("allowed")
    (root / "allowed.txt").write_text("reachable")

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True)  # noqa: S603, S607

    ip("netns", "add", NETNS)
    server = None
    try:
        ip("link", "add", f"{NETNS[:8]}h", "type", "veth", "peer", "name", f"{NETNS[:8]}n")
        ip("link", "set", f"{NETNS[:8]}n", "netns", NETNS)
        ip("addr", "add", f"{ALLOWED_HOST}/30", "dev", f"{NETNS[:8]}h")
        ip("link", "set", f"{NETNS[:8]}h", "up")
        ip("netns", "exec", NETNS, "ip", "addr", "add", f"{ALLOWED_NS}/30", "dev", f"{NETNS[:8]}n")
        ip("netns", "exec", NETNS, "ip", "link", "set", f"{NETNS[:8]}n", "up")
        ip("netns", "exec", NETNS, "ip", "link", "set", "lo", "up")
        server = subprocess.Popen(["ip", "netns", "exec", NETNS, sys.executable, "-m", "http.server",  # noqa: S603, S607
                                   str(ALLOWED_PORT), "--bind", ALLOWED_NS, "--directory", str(root)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def answers() -> bool:
            try:
                with socket.create_connection((ALLOWED_NS, ALLOWED_PORT), timeout=1):
                    return True
            except OSError:
                return False

        wait_for(answers, timeout=15, interval=0.1)
        yield f"http://{ALLOWED_NS}:{ALLOWED_PORT}/allowed.txt"
    finally:
        if server is not None:
            server.kill()
            server.wait(5)
        subprocess.run(["ip", "link", "del", f"{NETNS[:8]}h"], check=False, capture_output=True)  # noqa: S603, S607
        subprocess.run(["ip", "netns", "del", NETNS], check=False, capture_output=True)  # noqa: S603, S607


@pytest.fixture(scope="module")
def hosted(stack):
    root = pathlib.Path(tempfile.mkdtemp(dir="/var/tmp", prefix="e2e-egress-"))  # noqa: S108 - traversable
    os.chmod(root, 0o711)  # noqa: S103 - each Environment's uid reaches its own directory only
    runtime = HostedRuntime(stack, root, egress_allow=f"{ALLOWED_NS}/32")  # exactly the test namespace's server
    runtime.start()
    yield runtime
    runtime.stop()
    subprocess.run(["rm", "-rf", str(root)], check=False)  # noqa: S603, S607


# What tenant code tries, written to /workspace/probe-<where>.json. Raw sockets for the explicit proxy use, so
# no client library's own NO_PROXY handling decides; urllib (which honors the proxy variables) for the rest.
PROBE = r'''
import json, os, socket, sys, urllib.request
where, targets = sys.argv[1], json.load(open("/workspace/targets.json"))
out = {"listeners": sorted({int(line.split()[1].rsplit(":", 1)[1], 16)
                            for name in ("/proc/net/tcp", "/proc/net/tcp6") if os.path.exists(name)
                            for line in open(name).read().splitlines()[1:] if line.split()[3] == "0A"})}
def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=8) as answer:
            return "answered %s %s" % (answer.status, answer.read(64).decode("utf-8", "replace"))
    except Exception as exc:
        return "failed %s %s" % (type(exc).__name__, str(getattr(exc, "code", "")) or str(exc)[:120])
def connect(host, port):
    try:
        with socket.create_connection((host, port), timeout=5) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return "answered " + conn.recv(64).decode("utf-8", "replace")
    except OSError as exc:
        return "failed " + type(exc).__name__
def via_proxy(url):
    proxy = os.environ.get("HTTP_PROXY", "")
    if not proxy:
        return "failed no proxy"
    host, port = proxy.rsplit("/", 1)[-1].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=8) as conn:
            conn.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % url).encode())
            return "status " + conn.recv(4096).decode("utf-8", "replace").split("\r\n", 1)[0]
    except OSError as exc:
        return "failed " + type(exc).__name__
out["loopback"] = connect("127.0.0.1", targets["listener"])
out["loopback_http"] = fetch("http://127.0.0.1:%d/" % targets["listener"])
out["loopback_via_proxy"] = via_proxy("http://127.0.0.1:%d/" % targets["listener"])
out["localhost_via_proxy"] = via_proxy("http://localhost:%d/" % targets["listener"])
out["moto_via_proxy"] = via_proxy("http://127.0.0.1:%d/" % targets["moto"])
out["stack_via_proxy"] = via_proxy("http://127.0.0.1:%d/local-stack.json" % targets["stack"])
out["other_sandbox"] = connect("127.0.0.1", targets["other"])
out["private"] = fetch("http://10.1.2.3/")
out["private_direct"] = connect("10.1.2.3", 80)
out["link_local"] = fetch("http://169.254.169.254/latest/meta-data/")
out["link_local_v6"] = fetch("http://[fd00:ec2::254]/latest/meta-data/")
out["host_veth"] = fetch("http://%s:%d/" % (targets["host_veth"], targets["listener"]))
out["allowed"] = fetch(targets["allowed"])
out["allowed_direct"] = connect(targets["allowed_host"], targets["allowed_port"])
if os.environ.get("BRIDGE_TOKEN_OF_ANOTHER") or os.environ.get("ANTHROPIC_API_KEY"):
    def bridge(path, token):
        try:
            with socket.create_connection(("127.0.0.1", 8555), timeout=5) as conn:
                conn.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nx-api-key: %s\r\nContent-Length: 2\r\n\r\n{}"
                              % (path, token)).encode())
                return conn.recv(4096).decode("utf-8", "replace").split("\r\n", 1)[0]
        except OSError as exc:
            return "failed " + type(exc).__name__
    out["bridge_files"] = bridge("/v1/files?purpose=fine-tune", os.environ.get("ANTHROPIC_API_KEY", ""))
    out["bridge_other_token"] = bridge("/v1/messages", open("/workspace/other-token.txt").read().strip()
                                       if os.path.exists("/workspace/other-token.txt") else "acb_forged")
    out["own_token"] = os.environ.get("ANTHROPIC_API_KEY", "")
open("/workspace/probe-%s.json" % where, "w").write(json.dumps(out))
'''


def probe_files(targets: dict) -> list[dict]:
    return [inline("/workspace/probe.py", PROBE), inline("/workspace/targets.json", json.dumps(targets))]


def assert_confined(seen: dict, where: str, listener: Listener, allowed: bool = True) -> None:
    """Nothing of the host, another tenant or a private or link-local address answered; the allowed server did."""
    assert set(seen["listeners"]) <= {8555, 8556}, (where, seen["listeners"])  # the sandbox's own forwarder only
    for key in ("loopback", "loopback_http", "other_sandbox", "private", "private_direct", "link_local",
                "link_local_v6", "host_veth", "allowed_direct"):
        assert seen[key].startswith("failed"), (where, key, seen[key])
    for key in ("loopback_via_proxy", "localhost_via_proxy", "moto_via_proxy", "stack_via_proxy"):
        assert seen[key].startswith("status HTTP/1.1 403"), (where, key, seen[key])
    if allowed:
        assert seen["allowed"] == "answered 200 reachable", (where, seen["allowed"])
    assert listener.accepted == 0, where


@pytest.mark.parametrize("harness", ["scripted", *NATIVE])
def test_tenant_code_in_a_hosted_sandbox_reaches_only_what_the_policy_allows(stack, hosted, listener, allowed_server,
                                                                           harness):
    """A second tenant's setup command, stdio MCP server and model shell call probe the host; one more tenant's
    sandbox serves its workspace on its own 127.0.0.1 meanwhile."""
    mallory, victim = tenant_client(stack, f"mallory-{harness}"), tenant_client(stack, f"victim-{harness}")
    targets = {"listener": listener.port, "moto": int(stack["moto_endpoint"].rsplit(":", 1)[1]), "other": OTHER_PORT,
               "stack": int(stack["base_url"].rsplit(":", 1)[1].split("/")[0]),
               "host_veth": ALLOWED_HOST, "allowed": allowed_server, "allowed_host": ALLOWED_NS,
               "allowed_port": ALLOWED_PORT}
    served = None
    if harness == "claude_code":
        # the victim's sandbox serves its workspace on its own loopback while its Harness process stays warm,
        # and leaves its bridge token where the test (the operator's side) can read it
        tool_name, argument = SHELL_TOOL[harness]
        serve = (f"setsid python3 -m http.server {OTHER_PORT} --bind 127.0.0.1 --directory /workspace "
                 ">/dev/null 2>&1 < /dev/null & sleep 1; "
                 f"python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{OTHER_PORT}/secret.txt')"
                 f".read().decode())\" > /workspace/served.txt; echo $ANTHROPIC_API_KEY > /workspace/token.txt")
        victim_session = victim.beta.agents.sessions.create(
            environment={"type": "openai_hosted", "network": {"access": "enabled"},
                         "files": [inline("/workspace/secret.txt", "the victim's secret")]},
            agent={"model": "gpt-5"}, extra_body={"x_agents_core": {"harness": harness}},
            input=f"call {tool_name} {json.dumps({argument: serve})}\nsay Serving.")
        assert finished(victim, victim_session.id).status == "completed"
        victim_workspace = hosted.workspace(victim_session.environment.id)
        wait_for((victim_workspace / "token.txt").exists, timeout=30)
        assert (victim_workspace / "served.txt").read_text().strip() == "the victim's secret"  # it was serving
        served = (victim_workspace / "token.txt").read_text().strip()
        assert served.startswith("acb_")
    files = probe_files(targets)
    if served:
        files.append(inline("/workspace/other-token.txt", served))
    tools, script = [], "say Probed."
    if harness in NATIVE:
        tool_name, argument = SHELL_TOOL[harness]
        tools = [{"type": "mcp", "server_label": "probe", "transport": {
            "type": "stdio", "command": "/bin/sh", "args": ["-c", "python3 -I /workspace/probe.py mcp"],
            "cwd": "/workspace", "env_vars": []}}]
        script = f"call {tool_name} {json.dumps({argument: 'python3 -I /workspace/probe.py shell'})}\nsay Probed."
    session = mallory.beta.agents.sessions.create(
        environment={"type": "openai_hosted", "network": {"access": "enabled"}, "files": files,
                     "setup_commands": [{"command": "python3 -I /workspace/probe.py setup"}]},
        agent={"model": "gpt-5", "tools": tools}, extra_body={"x_agents_core": {"harness": harness}}, input=script)
    turn = finished(mallory, session.id)
    assert turn.status == "completed", (turn.model_extra, hosted.stderr.read_text()[-3000:])
    workspace = hosted.workspace(session.environment.id)
    for where in ("setup", *(("mcp", "shell") if harness in NATIVE else ())):
        wait_for((workspace / f"probe-{where}.json").exists, timeout=30)
        seen = json.loads((workspace / f"probe-{where}.json").read_text())
        assert_confined(seen, f"{harness} {where}", listener)
        if harness == "claude_code" and where in ("mcp", "shell"):
            # its own token on a path that is not an inference route; the victim's token on the inference route
            assert seen["bridge_files"].startswith("HTTP/1.1 403"), seen["bridge_files"]
            assert seen["bridge_other_token"].startswith("HTTP/1.1 401"), seen["bridge_other_token"]
            assert seen["own_token"] != served
    log = hosted.stderr.read_text()
    assert f"egress refused: {session.environment.id} -> 10.1.2.3:80" in log
    assert f"egress: {session.environment.id} -> {ALLOWED_NS}:{ALLOWED_PORT}" in log
    for secret in ("sk-operator", "acb_"):
        assert secret not in log


def test_the_local_stack_serves_its_key_and_moto_only_to_the_host_and_firewalls_the_sandbox_uids(stack, listener):
    """What a sandbox must never reach is there on the host (the dev key, an AWS endpoint that checks no
    signature), and the stack's nftables table refuses the Environments' uids the host's loopback."""
    import urllib.request

    with urllib.request.urlopen(stack["base_url"].rsplit("/v1", 1)[0] + "/local-stack.json", timeout=10) as answer:
        assert "api_key" in answer.read().decode()  # reachable from the host: the probes above prove the sandbox not
    if os.geteuid() != 0 or shutil.which("nft") is None:
        pytest.fail("make test installs nftables and CI runs as root: the sandbox firewall must be applied")
    table = stack.get("sandbox_firewall", "")
    assert table.startswith("nftables table inet agents_core_sandboxes_"), table
    rules = subprocess.run(["nft", "list", "table", "inet", table.rsplit(" ", 1)[1]], capture_output=True,  # noqa: S603, S607
                           text=True, check=True).stdout
    assert "meta skuid 200000-265535 ip daddr" in rules and "169.254.0.0/16" in rules
    done = subprocess.run(["setpriv", "--reuid=200777", "--regid=200777", "--clear-groups", sys.executable, "-I", "-c",  # noqa: S603, S607
                           f"import socket; socket.create_connection(('127.0.0.1', {listener.port}), timeout=3)"],
                          capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "ConnectionRefusedError" in done.stderr
    assert listener.accepted == 0


@pytest.mark.parametrize("network", ["disabled", "enabled"])
def test_package_installs_never_run_tenant_code_against_the_host(stack, hosted, listener, network):
    """The install vectors of the report: each is a 400 at admission, or runs confined with none of the
    Session's env (PYTHONPATH with a sitecustomize, PIP_INDEX_URL, NODE_OPTIONS) and only the registries."""
    import openai

    client = tenant_client(stack, f"installer-{network}")
    index = f"http://127.0.0.1:{listener.port}/simple"
    for manager, entry in (("python", "/workspace/pkg"), ("python", "file:///workspace/pkg"),
                           ("python", "pkg @ file:///workspace/pkg"), ("python", f"http://127.0.0.1:{listener.port}/p.tgz"),
                           ("python", "git+file:///workspace/repo"), ("npm", "file:/workspace/pkg.tgz"),
                           ("npm", "git+file:///workspace/repo")):
        before = client.beta.agents.sessions.list().data
        with pytest.raises(openai.BadRequestError) as refused:
            client.beta.agents.sessions.create(
                environment={"type": "openai_hosted", "network": {"access": network},
                             "packages": {manager: [entry]}},
                agent={"model": "gpt-5"}, extra_body={"x_agents_core": {"harness": "scripted"}}, input="say no")
        assert refused.value.body["param"] == f"environment.packages.{manager}[0]", entry
        assert client.beta.agents.sessions.list().data == before  # nothing written
    marker = "/workspace/sitecustomize-ran"
    files = [inline("/workspace/sitecustomize.py", f"open({marker!r}, 'w').write('ran')\n"
                                                   f"import urllib.request as u\nu.urlopen({index!r}, timeout=3)\n"),
             inline("/workspace/hook.js", f"require('fs').writeFileSync({marker!r} + '-node', 'ran')")]
    env = {"PYTHONPATH": "/workspace", "PIP_INDEX_URL": index, "PIP_EXTRA_INDEX_URL": index,
           "NODE_OPTIONS": "--require=/workspace/hook.js", "npm_config_registry": index}
    sessions = {manager: client.beta.agents.sessions.create(
        environment={"type": "openai_hosted", "network": {"access": network}, "files": files, "env": env,
                     "packages": {manager: ["agents-core-test-package-that-does-not-exist"]}},
        agent={"model": "gpt-5"}, extra_body={"x_agents_core": {"harness": "scripted"}}, input="say no")
        for manager in ("python", "npm")}
    for manager, session in sessions.items():
        turn = finished(client, session.id, timeout=240)
        assert turn.status == "failed"  # nothing installs: no registry answers this machine's sandboxes
        assert f"packages.{manager}" in turn.model_dump_json()
        workspace = hosted.workspace(session.environment.id)
        assert not (workspace / "sitecustomize-ran").exists()
        assert not (workspace / "sitecustomize-ran-node").exists()
    assert listener.accepted == 0


@pytest.fixture(scope="module")
def mcp_probe():
    """A loopback streamable-HTTP MCP server (python `mcp`) that records every request it receives."""
    import mcp.types as types
    import uvicorn
    from mcp.server import Server

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(name="ping", description="Ping",
                                                       input_schema={"type": "object", "properties": {}})])

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])

    app = Server("probe", version="1.0.0", on_list_tools=list_tools,
                 on_call_tool=call_tool).streamable_http_app(stateless_http=True)
    requests: list[str] = []

    async def recording(scope, receive, send):
        if scope["type"] == "http":
            requests.append(f"{scope['method']} {scope['path']}")
        await app(scope, receive, send)

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(recording, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=15)
    recording.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    recording.requests = requests
    yield recording
    server.should_exit = True
    thread.join(10)


class SharedRuntime(RuntimeProcess):
    """An operator's shared Runtime (environment none): scripted, and codex and claude_code natively."""

    def __init__(self, info: dict, root: pathlib.Path, allow: str):
        self.info, self.root, self.allow = info, root, allow
        self.log = root / "provider.jsonl"
        self.stderr = root / "shared.log"
        self.process = None

    def start(self) -> None:
        with open(self.stderr, "a") as err:
            self.process = start_runtime(self.info, ["scripted", *NATIVE], extra=(
                "--native", ",".join(NATIVE), "--model-provider", "scripted", "--provider-log", str(self.log),
                "--state-dir", str(self.root / "state")), stderr=err, egress_allow=self.allow)
        wait_for(lambda: "connected; serving" in self.stderr.read_text() or self.process.poll() is not None,
                 timeout=30)
        assert self.process.poll() is None, self.stderr.read_text()[-2000:]


@pytest.fixture(scope="module")
def closed(stack, tmp_path_factory):
    runtime = SharedRuntime(stack, tmp_path_factory.mktemp("closed"), allow="")
    runtime.start()
    yield runtime
    runtime.stop()


def none_session(client, harness, url, script, **extra):
    session = client.beta.agents.sessions.create(
        environment={"type": "none"}, agent={"model": "gpt-5", "tools": [
            {"type": "mcp", "server_label": "probe", "transport": {"type": "http", "server_url": url}, **extra}]},
        input=script, extra_body={"x_agents_core": {"harness": harness}})
    return session, finished(client, session.id)


@pytest.mark.parametrize("harness", ["scripted", *NATIVE])
def test_a_none_sessions_loopback_mcp_server_receives_nothing_without_the_operators_setting(
        stack, hosted, closed, mcp_probe, harness):
    client = tenant_client(stack, f"ssrf-{harness}")
    mcp_probe.requests.clear()
    session, turn = none_session(client, harness, mcp_probe.url, "mcp probe ping {}\nsay done")
    assert turn.status == "completed", (turn.model_extra, closed.stderr.read_text()[-3000:])
    assert mcp_probe.requests == []
    if harness == "scripted":  # the call fails as an unreachable server's does
        call, = [i for i in client.beta.agents.sessions.items.list(session.id) if i.type == "mcp_call"]
        assert "egress policy refuses" in call.error and "loopback" in call.error
    _, turn = none_session(client, harness, mcp_probe.url, "mcp probe ping {}\nsay done", required=True)
    assert turn.status == "failed"
    assert "'probe'" in turn.to_dict()["x_agents_core"]["error"]["message"]
    assert mcp_probe.requests == []
    assert "egress refused: " in closed.stderr.read_text()


@pytest.fixture(scope="module")
def opened(stack, closed, tmp_path_factory):
    closed.stop()  # one shared Runtime at a time, so each Turn runs on the Runtime the test means
    runtime = SharedRuntime(stack, tmp_path_factory.mktemp("opened"), allow="127.0.0.0/8")
    runtime.start()
    yield runtime
    runtime.stop()


@pytest.mark.parametrize("harness", ["scripted", *NATIVE])
def test_with_loopback_allowed_the_same_server_is_called(stack, opened, mcp_probe, harness):
    client = tenant_client(stack, f"allowed-{harness}")
    mcp_probe.requests.clear()
    session, turn = none_session(client, harness, mcp_probe.url, "mcp probe ping {}\nsay done", required=True)
    assert turn.status == "completed", (turn.model_extra, opened.stderr.read_text()[-3000:])
    assert any(r == "POST /mcp" for r in mcp_probe.requests)
    call, = [i for i in client.beta.agents.sessions.items.list(session.id) if i.type == "mcp_call"]
    assert call.status == "completed", call
    assert f"-> 127.0.0.1:{mcp_probe.url.rsplit(':', 1)[1].split('/')[0]}" in opened.stderr.read_text()
