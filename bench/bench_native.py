"""Native harnesses next to the scripted one.

1. Driver level (no Core): native process start (Codex: spawn `codex app-server`, initialize, verify,
   thread/start; Claude Code: spawn the bundled CLI through `ClaudeSDKClient.connect`, MCP handshake with the
   `functions` server, MCP status check), a fresh Session's first Turn to completion, and a warm call round
   trip (start -> function call observed -> result delivered -> completed), for Codex, Claude Code and the
   scripted harness.
2. End to end on the local stack (`python -m local` with AGENTS_CORE_NATIVE_HARNESSES=codex,claude_code):
   message -> required action -> result -> Turn completed over HTTP with the official SDK, Codex and Claude
   Code vs scripted.
Both native Harnesses run against the embedded scripted model provider on loopback.
"""

from __future__ import annotations

try:
    from bench.common import emit, percentiles
    from bench.common import local_stack as running_stack
except ImportError:  # run as a script
    from common import emit, percentiles  # type: ignore[no-redef]
    from common import local_stack as running_stack  # type: ignore[no-redef]

import os
import sys
import tempfile
import time

FN = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}
ROUNDS = 1 if "--smoke" in sys.argv[1:] else int(os.environ.get("BENCH_NATIVE_ROUNDS", "10"))  # smoke: make test
WARMUPS = 0 if "--smoke" in sys.argv[1:] else 1  # rounds not counted (imports, the first native start); smoke: none


MODELS = {"codex": "gpt-5", "claude_code": "claude-sonnet-4-5", "scripted": "gpt-5"}


def _start(session_id: str, turn_id: str, script: str, harness: str = "codex") -> dict:
    agent = {"model": MODELS[harness], "tools": [{**FN, "defer_loading": False}], "reasoning": None, "service_tier": None,
             "text": {"format": {"type": "text"}, "verbosity": None}}
    return {"type": "turn.start", "tenant": "bench", "session_id": session_id, "turn_id": turn_id,
            "harness": harness, "agent": agent, "environment": {"type": "none"}, "execution_controls": {},
            "input": [{"role": "user", "content": [{"type": "input_text", "text": script}]}]}


def _turn(driver, start: dict, answer: bool) -> tuple[float, float]:
    """(seconds to the function call observation or 0, seconds to the Turn's end)."""
    from runtime.protocol import TurnChannel

    sent: list[dict] = []
    channel = TurnChannel(start, sent.append, heartbeat_seconds=60)
    t0 = time.perf_counter()
    handle = driver.start_turn(start, channel)
    to_call = 0.0
    if answer:
        while not any(m.get("action") == "turn.function_call" for m in sent):
            time.sleep(0.0005)
        to_call = time.perf_counter() - t0
        call = next(m for m in sent if m.get("action") == "turn.function_call")
        handle.deliver_result(call["call_id"], {"success": True, "output": "ok"})
    if not channel.done.wait(60):
        raise RuntimeError(f"turn did not finish: {[m.get('action') for m in sent]}")
    return to_call, time.perf_counter() - t0


def _native(driver, harness: str, session_class) -> dict:
    """Process start, first Turn and warm call round trip of one native driver."""
    starts, firsts = [], []
    for i in range(ROUNDS):
        t0 = time.perf_counter()
        session = f"sess_start{i}"
        start = _start(session, "t", "", harness)
        s = driver.sessions[session] = session_class(driver, start)
        driver.submit(s._ensure(start)).result(timeout=60)
        starts.append(time.perf_counter() - t0)
        driver.submit(s.stop()).result(timeout=30)
    for i in range(ROUNDS):
        firsts.append(_turn(driver, _start(f"sess_first{i}", f"turn_{i}", "say hi", harness), answer=False)[1])
    warm = [_turn(driver, _start("sess_warm", f"turn_w{i}", "call f {}\nsay done", harness), answer=True)
            for i in range(ROUNDS + WARMUPS)][WARMUPS:]
    return {"process_start": percentiles(starts), "first_turn_to_completion": percentiles(firsts),
            "call_round_trip": {**percentiles([w[1] for w in warm]), "to_function_call": percentiles([w[0] for w in warm])}}


def driver_level() -> dict:
    from runtime.harnesses.claude_code.driver import ClaudeCodeDriver, ClaudeSession
    from runtime.harnesses.claude_code.driver import Provider as ClaudeProvider
    from runtime.harnesses.codex.driver import CodexDriver, CodexSession, Provider
    from runtime.harnesses.scripted.driver import ScriptedDriver
    from runtime.providers import ScriptedProvider

    provider = ScriptedProvider().start()
    codex = CodexDriver(Provider("scripted", provider.base_url + "/v1"), tempfile.mkdtemp())
    claude = ClaudeCodeDriver(ClaudeProvider("scripted", provider.base_url), tempfile.mkdtemp())
    scripted = ScriptedDriver("codex")
    out: dict = {"engines": [codex.engine, claude.engine]}
    try:
        out["codex"] = _native(codex, "codex", CodexSession)
        out["claude_code"] = _native(claude, "claude_code", ClaudeSession)
        s_first = [_turn(scripted, _start(f"sess_s{i}", f"turn_s{i}", "say hi"), answer=False)[1]
                   for i in range(ROUNDS)]
        s_warm = [_turn(scripted, _start("sess_sw", f"turn_sw{i}", "call f {}\nsay done"), answer=True)
                  for i in range(ROUNDS)]
        out["scripted"] = {"first_turn_to_completion": percentiles(s_first),
                           "call_round_trip": {**percentiles([w[1] for w in s_warm]),
                                               "to_function_call": percentiles([w[0] for w in s_warm])}}
    finally:
        codex.close()
        claude.close()
        provider.stop()
    return out


def local_stack() -> dict:
    from openai import OpenAI

    from local.inprocess import wait_for

    out: dict = {}
    # A reused stack (the smoke under make test: the e2e session's, whose Runtime serves these two) or our own.
    harnesses = ("claude_code", "scripted") if os.environ.get("BENCH_STACK_FILE") else ("codex", "claude_code",
                                                                                        "scripted")
    with running_stack({"AGENTS_CORE_NATIVE_HARNESSES": "codex,claude_code"}) as info:
        client = OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0)
        for harness in harnesses:
            trips, to_action = [], []
            for i in range(ROUNDS + WARMUPS):
                s = time.perf_counter()
                session = client.beta.agents.sessions.create(
                    environment={"type": "none"}, input="call f {}\nsay done", agent={"model": MODELS[harness], "tools": [FN]},
                    extra_body={"x_agents_core": {"harness": harness}})
                action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions,
                                  timeout=60, interval=0.005)[0]
                reached = time.perf_counter() - s
                client.beta.agents.sessions.events.create(session.id, events=[{
                    "type": "agent.session.input.tool_result", "turn_id": action.turn_id,
                    "call_id": action.call_id, "success": True, "output": "ok"}])
                wait_for(lambda: client.beta.agents.sessions.turns.retrieve(
                    action.turn_id, session_id=session.id).status == "completed", timeout=60, interval=0.005)
                if i >= WARMUPS:  # the first Session of each Harness pays warm-up (imports, the first native start)
                    to_action.append(reached)
                    trips.append(time.perf_counter() - s)
            out[harness] = {"call_round_trip_http": {**percentiles(trips), "to_required_action": percentiles(to_action)}}
        out["note"] = ("each round is a new Session: Codex and Claude Code pay their process start (spawn + "
                       "thread/start, spawn + connect) inside it")
    return out


def main() -> dict:
    return emit("native", {"benchmark": "native_harnesses", "driver": driver_level(), "local_stack": local_stack(),
                           "note": "Codex and Claude Code on the embedded scripted model provider (loopback); ms"})


if __name__ == "__main__":
    main()
