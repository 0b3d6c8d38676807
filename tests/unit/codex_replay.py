"""A replay of recorded `codex app-server` exchanges (codex-cli 0.163.0 against the scripted model
provider; shapes copied from the recorded JSON lines), for the Codex driver's unit tests. Run as
`codex_replay.py app-server` with FAKE_CODEX_SCENARIO set; it also answers `--version`.

It writes what it was asked, one JSON line per request, to FAKE_CODEX_LOG so tests can read exactly what
the driver sent (turn/start params, our answer to item/tool/call).
"""

from __future__ import annotations

import json
import os
import sys

THREAD = "01a2381a-eb48-74a1-8c16-6a4ac53fc20a"
TURN = "01a2381a-eb54-7950-9413-5a56bee0d649"
CALL = "call_acf156658351471fafa68aa2"
SCENARIO = os.environ.get("FAKE_CODEX_SCENARIO", "round_trip")
LOG = os.environ.get("FAKE_CODEX_LOG")


def out(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def note(method: str, **params) -> None:
    out({"method": method, "params": params})


def agent_message(item_id: str, text: str, phase, done: bool) -> None:
    item = {"type": "agentMessage", "id": item_id, "text": text if done else "", "phase": phase,
            "memoryCitation": None, "delivery": None, "questions": None}
    if not done:
        note("item/started", item=item, threadId=THREAD, turnId=TURN, startedAtMs=1)
        note("item/agentMessage/delta", threadId=THREAD, turnId=TURN, itemId=item_id, delta=text)
    else:
        note("item/completed", item=item, threadId=THREAD, turnId=TURN, completedAtMs=2)


def tool_call(arguments: dict) -> None:
    note("item/started", item={"type": "dynamicToolCall", "id": CALL, "namespace": None, "tool": "get_weather",
                               "arguments": arguments, "status": "inProgress", "contentItems": None, "success": None,
                               "durationMs": None}, threadId=THREAD, turnId=TURN, startedAtMs=3)
    out({"method": "item/tool/call", "id": 0, "params": {"threadId": THREAD, "turnId": TURN, "callId": CALL,
                                                         "namespace": None, "tool": "get_weather",
                                                         "arguments": arguments}})


def call_completed(status: str, content, success) -> None:
    note("item/completed", item={"type": "dynamicToolCall", "id": CALL, "namespace": None, "tool": "get_weather",
                                 "arguments": {}, "status": status, "contentItems": content, "success": success,
                                 "durationMs": 1}, threadId=THREAD, turnId=TURN, completedAtMs=4)


def turn_completed(status: str, error=None) -> None:
    note("turn/completed", threadId=THREAD, turn={"id": TURN, "rootTurnId": TURN, "items": [], "itemsView": "summary",
                                                  "status": status, "error": error, "startedAt": 1, "completedAt": 2,
                                                  "durationMs": 177})


def main() -> int:
    if "--version" in sys.argv:
        print("codex-cli 0.163.0-replay")
        return 0
    for line in sys.stdin:
        message = json.loads(line)
        if LOG:
            with open(LOG, "a") as fh:
                fh.write(line)
        method, rid = message.get("method"), message.get("id")
        if method is None:  # our answer to item/tool/call
            if SCENARIO == "round_trip":
                call_completed("completed", message["result"]["contentItems"], message["result"]["success"])
                agent_message("msg_final", "It is sunny.", None, False)
                agent_message("msg_final", "It is sunny.", None, True)
                turn_completed("completed")
            continue
        if method == "initialize":
            out({"id": rid, "result": {"userAgent": "replay", "codexHome": os.environ.get("CODEX_HOME"),
                                       "platformFamily": "unix", "platformOs": "linux"}})
        elif method == "config/read":
            loaded = json.loads(os.environ.get("FAKE_CODEX_LOADED", "{}"))
            out({"id": rid, "result": {"config": loaded, "origins": {}, "layers": None}})
        elif method == "configRequirements/read":
            out({"id": rid, "result": {"supportsIndependentSpeedModes": None, "requirements": None}})
        elif method in ("thread/start", "thread/resume"):
            out({"id": rid, "result": {"thread": {"id": THREAD, "ephemeral": False, "status": {"type": "idle"}}}})
        elif method == "turn/start":
            out({"id": rid, "result": {"turn": {"id": TURN, "rootTurnId": TURN, "items": [], "itemsView": "notLoaded",
                                                "status": "inProgress", "error": None}}})
            note("turn/started", threadId=THREAD, turn={"id": TURN, "status": "inProgress"})
            if SCENARIO == "failed":
                note("error", threadId=THREAD, turnId=TURN, willRetry=False,
                     error={"message": "unexpected status 400 Bad Request: The model is unavailable today.",
                            "codexErrorInfo": None, "additionalDetails": None})
                turn_completed("failed", {"message": "unexpected status 400 Bad Request: The model is unavailable "
                                                     "today.", "codexErrorInfo": None, "additionalDetails": None})
                continue
            agent_message("msg_commentary", "Checking.", None, False)  # phase unknown (older models)
            agent_message("msg_commentary", "Checking.", None, True)
            tool_call({"city": "Paris"})
            if SCENARIO == "abandon":  # the call completes without our answer (e.g. a native timeout)
                call_completed("failed", None, False)
                agent_message("msg_final", "I could not check.", "final_answer", False)
                agent_message("msg_final", "I could not check.", "final_answer", True)
                turn_completed("completed")
        elif method == "turn/interrupt":
            out({"id": rid, "result": {}})
            call_completed("failed", None, False)
            turn_completed("interrupted")
        elif method == "turn/steer":
            out({"id": rid, "result": {"turnId": TURN}})
        else:
            out({"id": rid, "error": {"code": -32601, "message": f"unknown method {method}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
