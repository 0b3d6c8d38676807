"""The egress path of hosted sandboxes (issue 33), with and without it:
- a 10 MiB HTTP download from a server the egress policy allows (AGENTS_CORE_EGRESS_ALLOW=10.213.7.2/32, the
  server in a network namespace this benchmark creates, behind a veth pair): directly from the host (curl, no
  sandbox, no proxy); from the host through the egress proxy's own loopback TCP port (the proxy alone); and from
  inside a hosted sandbox with `network.access: enabled` (curl -> the forwarder on 127.0.0.1:8556 -> the
  Environment's Unix socket -> EgressProxy -> the server). curl's own time_total (the transfer, process and
  sandbox start excluded) and the wall time of the whole command; throughput in MiB/s from time_total;
- sandbox start: `true` in a sandbox with the network `disabled` (no forwarder) and `enabled` (the forwarder
  and the proxy socket);
- the first Turn of a new hosted Environment on a hosted Runtime (runtime.router.Runtime, the scripted
  Harness, in-process), from on_message to turn.completed: network disabled with a `true` setup command, enabled
  with a `true` setup command, and enabled with a setup command that fetches a small file through the proxy.
p50/p95 ms over interleaved rounds after a warm-up. Without `ip netns` (not root), the server is on loopback
with 127.0.0.0/8 allowed instead, and `note` says so."""

from __future__ import annotations

try:
    from bench.common import ROOT, emit, percentiles
except ImportError:  # run as a script
    from common import ROOT, emit, percentiles  # type: ignore[no-redef]

import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Optional

sys.path.insert(0, str(ROOT))

SIZE = 10 * 1024 * 1024
SMALL = 1024
PORT = 8000
HOST_ADDRESS, SERVER_ADDRESS = "10.213.7.1", "10.213.7.2"
SMOKE = "--smoke" in sys.argv[1:]  # make test: once each
DOWNLOADS = 1 if SMOKE else int(os.environ.get("BENCH_EGRESS_DOWNLOADS", "7"))
STARTS = 1 if SMOKE else int(os.environ.get("BENCH_EGRESS_STARTS", "20"))
TURNS = 1 if SMOKE else int(os.environ.get("BENCH_EGRESS_TURNS", "6"))
CURL_FORMAT = "%{time_total} %{size_download} %{http_code}"

SERVER = f"""\
import http.server, sys
BIG, SMALL = b"x" * {SIZE}, b"y" * {SMALL}
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = BIG if self.path == "/big" else SMALL if self.path == "/small" else None
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), Handler).serve_forever()
"""


class Server:
    """The allowed server: in a network namespace of its own behind a veth pair, or on loopback (fallback)."""

    def __init__(self, work: pathlib.Path):
        self.script = work / "server.py"
        self.script.write_text(SERVER)
        tag = str(os.getpid())
        self.netns, self.veth_host, self.veth_ns = f"bench-egress-{tag}", f"vbe{tag}h", f"vbe{tag}n"
        self.process: Optional[subprocess.Popen] = None
        self.namespaced = False
        self.note: Optional[str] = None
        self.address = SERVER_ADDRESS
        self.allow = f"{SERVER_ADDRESS}/32"

    def start(self) -> Server:
        try:
            self._namespace()
            self.namespaced = True
            prefix = ["ip", "netns", "exec", self.netns]
        except (OSError, subprocess.CalledProcessError) as exc:
            self._remove_namespace()
            reason = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) and exc.stderr else str(exc)
            self.note = (f"ip netns unavailable ({reason[:160]}): the server runs on the host's loopback and the "
                         "policy allows 127.0.0.0/8 instead of a namespace address")
            self.address, self.allow, prefix = "127.0.0.1", "127.0.0.0/8", []
        self.process = subprocess.Popen([*prefix, "/usr/bin/python3", "-I", str(self.script), self.address, str(PORT)],  # noqa: S603
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((self.address, PORT), timeout=1).close()
                return self
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("the benchmark's HTTP server did not start") from None
                time.sleep(0.02)

    def url(self, path: str) -> str:
        return f"http://{self.address}:{PORT}{path}"

    def _namespace(self) -> None:
        def ip(*words: str) -> None:
            subprocess.run(["ip", *words], check=True, capture_output=True, text=True, timeout=10)  # noqa: S603, S607

        ip("netns", "add", self.netns)
        ip("link", "add", self.veth_host, "type", "veth", "peer", "name", self.veth_ns)
        ip("link", "set", self.veth_ns, "netns", self.netns)
        ip("addr", "add", f"{HOST_ADDRESS}/30", "dev", self.veth_host)
        ip("link", "set", self.veth_host, "up")
        ip("netns", "exec", self.netns, "ip", "addr", "add", f"{SERVER_ADDRESS}/30", "dev", self.veth_ns)
        ip("netns", "exec", self.netns, "ip", "link", "set", self.veth_ns, "up")
        ip("netns", "exec", self.netns, "ip", "link", "set", "lo", "up")

    def _remove_namespace(self) -> None:
        for words in (["netns", "del", self.netns], ["link", "del", self.veth_host]):
            subprocess.run(["ip", *words], capture_output=True, timeout=10, check=False)  # noqa: S603, S607

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        if self.namespaced:
            self._remove_namespace()


def curl(argv: list[str], env: dict[str, str], cwd: Optional[str] = None) -> tuple[float, float]:
    """(curl's time_total, the wall time of the whole command) in seconds; the download checked."""
    began = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)  # noqa: S603
    wall = time.perf_counter() - began
    words = done.stdout.strip().split()
    if done.returncode != 0 or len(words) != 3 or words[2] != "200" or int(float(words[1])) != SIZE:
        raise RuntimeError(f"download failed (exit {done.returncode}): {done.stdout[-300:]} {done.stderr[-300:]}")
    return float(words[0]), wall


def throughput(transfer: list[float]) -> dict[str, Any]:
    figures = percentiles(transfer)
    ordered = sorted(transfer)
    figures["mib_per_s_p50"] = round(SIZE / (1024 * 1024) / ordered[len(ordered) // 2], 1)
    figures["mib_per_s_best"] = round(SIZE / (1024 * 1024) / ordered[0], 1)
    return figures


def run_in(box: Any, script: str, network: str) -> subprocess.CompletedProcess:
    return subprocess.run(box.argv(["/bin/sh", "-c", script], network=network), env=box.environ(network=network),  # noqa: S603
                          capture_output=True, text=True, cwd=str(box.workspace), timeout=60, check=False)


def wait_turn(sent: list[dict], turn_id: str, timeout: float = 60.0) -> str:
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        for message in list(sent):
            if message.get("turn_id") != turn_id:
                continue
            for o in message.get("observations") or [message]:
                if o.get("action") in ("turn.completed", "turn.failed"):
                    return o["action"]
        time.sleep(0.002)
    raise TimeoutError(f"turn {turn_id} did not end within {timeout}s")


def hosted_start(env_id: str, hosted: dict) -> dict:
    return {"type": "turn.start", "tenant": "bench", "session_id": "sess_" + uuid.uuid4().hex[:12],
            "turn_id": "turn_" + uuid.uuid4().hex, "harness": "scripted", "agent": {"model": "gpt-5", "tools": []},
            "environment": {"type": "openai_hosted", "workspace_directory": "/workspace", "id": env_id,
                            "hosted": hosted},
            "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say Hi."}]}]}


def main() -> dict:
    from runtime.environments import sandbox as sb
    from runtime.environments.egress import EgressPolicy, EgressProxy, parse_allow
    from runtime.harnesses.scripted.driver import ScriptedDriver
    from runtime.router import Runtime

    work = pathlib.Path(tempfile.mkdtemp(dir="/var/tmp", prefix="bench-egress-"))  # noqa: S108 - traversable
    os.chmod(work, 0o711)  # noqa: S103 - the Environments' uids traverse it
    server = Server(work)
    egress = runtime = None
    out: dict[str, Any] = {"size_bytes": SIZE}
    try:
        server.start()
        out["server"] = server.url("/big")
        out["egress_allow"] = server.allow
        if server.note:
            out["note"] = server.note
        # the operator's AGENTS_CORE_EGRESS_ALLOW, as runtime/__main__.py's egress_proxy builds it, in-process
        egress = EgressProxy(EgressPolicy(parse_allow(server.allow)), str(work / "hosted" / "egress"),
                             bridge_port=sb.BRIDGE_PORT).start()
        hosts = sb.HostedEnvironments(str(work / "hosted"), {}, egress=egress)
        box = hosts.sandbox({"id": "env_download", "hosted": {"network": {"access": "enabled"}}})

        # 1. the 10 MiB download: direct, through the proxy alone, from inside the sandbox (interleaved)
        plain_env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        direct_argv = ["curl", "-s", "-o", "/dev/null", "--noproxy", "*", "-w", CURL_FORMAT, server.url("/big")]
        proxy_argv = ["curl", "-s", "-o", "/dev/null", "-x", egress.url, "--noproxy", "", "-w", CURL_FORMAT,
                      server.url("/big")]
        # inside, NO_PROXY exempts loopback (the sandbox's own): the loopback fallback names the proxy itself
        via = "" if server.namespaced else f"-x http://127.0.0.1:{sb.EGRESS_PORT} --noproxy '' "
        boxed_script = f"curl -s -o /dev/null {via}-w '{CURL_FORMAT}' {server.url('/big')}"
        boxed_argv = box.argv(["/bin/sh", "-c", boxed_script], network="enabled")
        boxed_env = box.environ(network="enabled")
        samples: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []), "host_via_proxy": ([], []),
                                                               "sandbox_via_egress": ([], [])}
        runs = (("direct", direct_argv, plain_env, None), ("host_via_proxy", proxy_argv, plain_env, None),
                ("sandbox_via_egress", boxed_argv, boxed_env, str(box.workspace)))
        for _, argv, env, cwd in runs:  # warm-up
            curl(argv, env, cwd)
        before = egress.connections
        for _ in range(DOWNLOADS):
            for label, argv, env, cwd in runs:
                transfer, wall = curl(argv, env, cwd)
                samples[label][0].append(transfer)
                samples[label][1].append(wall)
        proxied = egress.connections - before
        if proxied < 2 * DOWNLOADS:  # plus each sandbox forwarder's readiness probe (a connection that sends nothing)
            raise RuntimeError(f"expected {2 * DOWNLOADS} proxied downloads, the proxy saw {proxied} connections")
        download: dict[str, Any] = {}
        for label, (transfer, wall) in samples.items():
            download[label] = {"transfer": throughput(transfer), "wall": percentiles(wall)}
        direct_p50 = download["direct"]["transfer"]["p50_ms"]
        download["sandbox_transfer_over_direct"] = round(download["sandbox_via_egress"]["transfer"]["p50_ms"] /
                                                         direct_p50, 2) if direct_p50 else None
        out["download_10mib"] = download

        # 2. sandbox start: `true`, network disabled (no forwarder) vs enabled (forwarder + proxy socket)
        starts: dict[str, list[float]] = {"disabled": [], "enabled": []}
        for network in starts:  # warm-up
            run_in(box, "true", network)
        for _ in range(STARTS):
            for network, values in starts.items():
                began = time.perf_counter()
                done = run_in(box, "true", network)
                values.append(time.perf_counter() - began)
                if done.returncode != 0:
                    raise RuntimeError(f"`true` in a sandbox ({network}) exited {done.returncode}: {done.stderr[-300:]}")
        start_figures: dict[str, Any] = {network: percentiles(values) for network, values in starts.items()}
        start_figures["enabled_minus_disabled_p50_ms"] = round(
            start_figures["enabled"]["p50_ms"] - start_figures["disabled"]["p50_ms"], 1)
        out["sandbox_start_true"] = start_figures

        # 3. the first Turn of a new hosted Environment (preparation: one setup command; then the scripted Turn)
        sent: list[dict] = []
        runtime = Runtime(sent.append, {"scripted": ScriptedDriver()}, heartbeat_seconds=30, hosted=hosts)
        fetch = f"curl -sf -m 10 -o /dev/null {via}{server.url('/small')}"
        variants = {"disabled_setup_true": ("disabled", "true"), "enabled_setup_true": ("enabled", "true"),
                    "enabled_setup_fetch": ("enabled", fetch)}
        turns: dict[str, list[float]] = {label: [] for label in variants}
        for round_ in range(TURNS + 1):  # round 0 is the warm-up
            for label, (network, command) in variants.items():
                start = hosted_start(f"env_{label.replace('_', '')}{round_}x{uuid.uuid4().hex[:6]}",
                                     {"network": {"access": network}, "setup_commands": [{"command": command}]})
                began = time.perf_counter()
                runtime.on_message(start)
                result = wait_turn(sent, start["turn_id"])
                elapsed = time.perf_counter() - began
                if result != "turn.completed":
                    raise RuntimeError(f"first Turn ({label}) failed: "
                                       f"{[m for m in sent if m.get('turn_id') == start['turn_id']]!s:.600}")
                if round_:
                    turns[label].append(elapsed)
        turn_figures: dict[str, Any] = {label: percentiles(values) for label, values in turns.items()}
        turn_figures["enabled_minus_disabled_p50_ms"] = round(
            turn_figures["enabled_setup_true"]["p50_ms"] - turn_figures["disabled_setup_true"]["p50_ms"], 1)
        turn_figures["fetch_minus_true_p50_ms"] = round(
            turn_figures["enabled_setup_fetch"]["p50_ms"] - turn_figures["enabled_setup_true"]["p50_ms"], 1)
        out["first_turn"] = turn_figures
        out["rounds"] = {"downloads": DOWNLOADS, "starts": STARTS, "turns": TURNS}
    finally:
        if runtime is not None:
            runtime.close()
        if egress is not None:
            egress.stop()
        server.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)  # noqa: S603, S607 - files owned by Environment uids
    return out


if __name__ == "__main__":
    emit("egress", {"benchmark": "egress", **main()})
