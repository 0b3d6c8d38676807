"""Hosted Environments on this host (the Runtime's router and native drivers, no Core in the loop):
- preparation of an Environment (one 4 KB inline file and two setup commands in the sandbox);
- per native Harness, sandboxed vs unsandboxed: the first Turn of a new Session (process start included)
  and a second Turn on the warm process, `say` on the scripted model provider;
- memory per warm sandbox: the resident set of a warm sandbox's whole process tree (bwrap + Harness).
p50/p95 ms over ROUNDS fresh Sessions; memory in MiB."""

from __future__ import annotations

try:
    from bench.common import ROOT, emit, percentiles
except ImportError:  # run as a script
    from common import ROOT, emit, percentiles  # type: ignore[no-redef]

import base64
import json
import os
import pathlib
import sys
import tempfile
import threading
import time
import uuid
from typing import Optional

sys.path.insert(0, str(ROOT / "layers" / "contract"))

SMOKE = "--smoke" in sys.argv[1:]
ROUNDS = 1 if SMOKE else int(os.environ.get("BENCH_HOSTED_ROUNDS", "3"))  # smoke: make test


def turn_start(harness: str, session_id: str, env_id: Optional[str], text: str) -> dict:
    from agents_contract import admission, jsonutil, parser

    environment = {"type": "openai_hosted"} if env_id else {"type": "none"}
    body = {"environment": environment, "agent": {"model": "gpt-5"}, "x_agents_core": {"harness": harness},
            "input": "x"}
    snapshot = jsonutil.loads(admission.resolve_session(parser.parse_session_create(body), None, default_harness=None,
                                                         agent_id="agent_bench", body=body).to_json())
    start = {"type": "turn.start", "tenant": "bench", "session_id": session_id, "turn_id": "turn_" + uuid.uuid4().hex,
             "harness": harness, "agent": snapshot["agent"], "environment": snapshot["environment"],
             "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}],
             "execution_controls": {"output_format": {"type": "text"}, "verbosity": None, "reasoning": None,
                                    "service_tier": None, "tool_search": False}}
    if env_id:
        start["environment"] = {**start["environment"], "id": env_id, "hosted": {"network": {"access": "disabled"}}}
    return start


class Collector:
    def __init__(self):
        self.messages: list[dict] = []
        self.lock = threading.Lock()

    def send(self, message: dict) -> None:
        with self.lock:
            self.messages.append(message)

    def terminal(self, turn_id: str) -> Optional[dict]:
        with self.lock:
            for m in self.messages:
                for o in m.get("observations") or [m]:
                    if m.get("turn_id") == turn_id and o.get("action") in ("turn.completed", "turn.failed"):
                        return o
        return None


def run_turn(runtime, sink: Collector, start: dict, timeout: float = 120.0) -> float:
    began = time.perf_counter()
    runtime.on_message(start)
    deadline = began + timeout
    while time.perf_counter() < deadline:
        done = sink.terminal(start["turn_id"])
        if done is not None:
            if done["action"] != "turn.completed":
                raise RuntimeError(f"{start['harness']} turn failed: {json.dumps(done)[:600]}")
            return time.perf_counter() - began
        time.sleep(0.01)
    raise TimeoutError(f"{start['harness']} turn did not end within {timeout}s")


def tree_rss_mib(pid: int) -> float:
    """Resident set of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            for line in pathlib.Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def main() -> dict:
    from runtime.__main__ import build_drivers, egress_proxy, hosted_environments, parser
    from runtime.environments.sandbox import HostedEnvironments
    from runtime.router import Runtime

    work = pathlib.Path(tempfile.mkdtemp(dir="/var/tmp", prefix="bench-hosted-"))
    os.chmod(work, 0o711)  # noqa: S103 - the Environments' uids traverse it
    args = parser().parse_args(["--native", "codex,claude_code", "--model-provider", "scripted",
                                "--state-dir", str(work / "state"), "--url", "ws://unused", "--token", "unused"])
    drivers, provider = build_drivers(args, ["codex", "claude_code"])
    hosted = hosted_environments(str(work / "hosted"), drivers, egress_proxy(str(work / "hosted")))
    sink = Collector()
    plain = Runtime(sink.send, drivers, heartbeat_seconds=30)
    boxed = Runtime(sink.send, drivers, heartbeat_seconds=30, hosted=hosted)
    out: dict = {"rounds": ROUNDS}
    try:
        prep = []
        for i in range(ROUNDS):
            sandbox = hosted.sandbox({"id": f"env_prep{i}", "hosted": {
                "files": [{"path": "/workspace/src/data.bin", "data": base64.b64encode(os.urandom(4096)).decode()}],
                "setup_commands": [{"command": "mkdir -p build && echo ok > build/marker"},
                                   {"command": "test -f build/marker"}], "network": {"access": "disabled"}}})
            began = time.perf_counter()
            sandbox.prepare()
            prep.append(time.perf_counter() - began)
        out["preparation"] = percentiles(prep)
        for harness in ("codex",) if SMOKE else ("codex", "claude_code"):  # the smoke: one Harness, no warm-up
            figures: dict = {}
            samples: dict = {"unsandboxed": ([], []), "sandboxed": ([], [])}
            if not SMOKE:
                run_turn(plain, sink, turn_start(harness, f"sess_warmup{harness}{uuid.uuid4().hex[:6]}", None,
                                                 "say Hi."))
            for i in range(ROUNDS):  # interleaved, after a warm-up, so disk caches favour neither
                for label, runtime, hosted_env in (("unsandboxed", plain, False), ("sandboxed", boxed, True)):
                    first, warm = samples[label]
                    session = f"sess_{label}{harness}{i}{uuid.uuid4().hex[:6]}"
                    env_id = f"env_{label}{harness}{i}" if hosted_env else None
                    first.append(run_turn(runtime, sink, turn_start(harness, session, env_id, "say Hello.")))
                    warm.append(run_turn(runtime, sink, turn_start(harness, session, env_id, "say Again.")))
            for label, (first, warm) in samples.items():
                figures[label] = {"first_turn": percentiles(first), "warm_turn": percentiles(warm)}
            figures["first_turn_overhead_ms"] = round(
                figures["sandboxed"]["first_turn"]["p50_ms"] - figures["unsandboxed"]["first_turn"]["p50_ms"], 1)
            out[harness] = figures
        # memory of warm sandboxes: every Harness process started under bwrap
        rss = []
        sandboxes = {int(p.parent.name) for p in pathlib.Path("/proc").glob("[0-9]*/cmdline")
                     if _read(p).split(b"\0")[0].endswith(b"bwrap") and str(work).encode() in _read(p)}
        for pid in sandboxes:
            parent = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent not in sandboxes:  # the outer bwrap of each sandbox, with everything under it
                rss.append(tree_rss_mib(pid))
        out["warm_sandbox_rss_mib"] = {"count": len(rss), "mean": round(sum(rss) / len(rss), 1) if rss else None}
    finally:
        for driver in drivers.values():
            driver.close()
        if provider is not None:
            provider.stop()
    assert isinstance(hosted, HostedEnvironments)
    return out


def _read(path: pathlib.Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


if __name__ == "__main__":
    emit("hosted_environments", {"benchmark": "hosted_environments", **main()})
