"""A `codex app-server` exchange with a child agent (multi_agent_v1, `spawn_agent` with `fork_context`), for the
Codex driver's Subagent tests. Its shapes follow the app-server 0.163.0 JSON schema (`codex app-server
generate-json-schema`: `collabAgentToolCall {tool, senderThreadId, receiverThreadIds, prompt, status}`) and the
sequence verified against the real binary (../shared/notes/native-subagents.md): the spawn on the root thread,
no `thread/started` for the child, `turn/started {threadId: child, turn: {rootTurnId}}`, the child's items and
its `item/tool/call`, `turn/completed` on the child, then the root's `wait` and final message. Notifications of
both threads share one stream (Codex does not filter them by thread).

Scenarios (FAKE_CODEX_SCENARIO): `subagent` (the round trip), `subagent_cancel` (the caller cancels while the
child's call is pending: the child's turn interrupted fails its call, the root's ends interrupted),
`stranger` (a thread nobody spawned talks on the same stream), `detached` (no wait_agent: the root turn
completes while the child runs; its call arrives after). Requests go to FAKE_CODEX_LOG.
"""

from __future__ import annotations

import json
import os
import sys

ROOT, ROOT_TURN = "thread-root", "turn-root"
CHILD, CHILD_TURN = "thread-child", "turn-child"
CALL = "call_child_1"
SCENARIO = os.environ.get("FAKE_CODEX_SCENARIO", "subagent")
LOG = os.environ.get("FAKE_CODEX_LOG")


def out(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def note(method: str, **params) -> None:
    out({"method": method, "params": params})


def message(thread: str, turn: str, item_id: str, text: str, phase) -> None:
    item = {"type": "agentMessage", "id": item_id, "text": "", "phase": phase, "memoryCitation": None}
    note("item/started", item=item, threadId=thread, turnId=turn, startedAtMs=1)
    note("item/agentMessage/delta", threadId=thread, turnId=turn, itemId=item_id, delta=text)
    note("item/completed", item={**item, "text": text}, threadId=thread, turnId=turn, completedAtMs=2)


def collab(tool: str, status: str, receivers: list, method: str) -> None:
    note(method, threadId=ROOT, turnId=ROOT_TURN, item={
        "type": "collabAgentToolCall", "id": f"collab_{tool}", "tool": tool, "status": status,
        "senderThreadId": ROOT, "receiverThreadIds": receivers, "prompt": "call get_weather {}",
        "model": None, "reasoningEffort": None, "agentsStates": {}})


def call_completed(status: str, content, success) -> None:
    note("item/completed", threadId=CHILD, turnId=CHILD_TURN, item={
        "type": "dynamicToolCall", "id": CALL, "namespace": None, "tool": "get_weather", "arguments": {},
        "status": status, "contentItems": content, "success": success, "durationMs": 1})


def turn_completed(thread: str, turn: str, status: str) -> None:
    note("turn/completed", threadId=thread, turn={"id": turn, "rootTurnId": ROOT_TURN, "items": [],
                                                  "status": status, "error": None})


def main() -> int:
    if "--version" in sys.argv:
        print("codex-cli 0.163.0-replay")
        return 0
    for line in sys.stdin:
        request = json.loads(line)
        if LOG:
            with open(LOG, "a") as fh:
                fh.write(line)
        method, rid = request.get("method"), request.get("id")
        if method is None:  # our answer to the child's item/tool/call
            call_completed("completed", request["result"]["contentItems"], request["result"]["success"])
            message(CHILD, CHILD_TURN, "msg_child", "child done", "final_answer")
            turn_completed(CHILD, CHILD_TURN, "completed")
            if SCENARIO == "detached":  # the root already completed: the child was the last thing running
                continue
            collab("wait", "completed", [CHILD], "item/completed")
            message(ROOT, ROOT_TURN, "msg_root", "root done", "final_answer")
            turn_completed(ROOT, ROOT_TURN, "completed")
            continue
        if method == "initialize":
            out({"id": rid, "result": {"userAgent": "replay", "platformFamily": "unix", "platformOs": "linux"}})
        elif method == "config/read":
            out({"id": rid, "result": {"config": {}, "origins": {}, "layers": None}})
        elif method == "configRequirements/read":
            out({"id": rid, "result": {"requirements": None}})
        elif method in ("thread/start", "thread/resume"):
            out({"id": rid, "result": {"thread": {"id": ROOT, "ephemeral": False, "status": {"type": "idle"}}}})
        elif method == "turn/start":
            out({"id": rid, "result": {"turn": {"id": ROOT_TURN, "rootTurnId": ROOT_TURN, "items": [],
                                                "status": "inProgress", "error": None}}})
            note("turn/started", threadId=ROOT, turn={"id": ROOT_TURN, "rootTurnId": ROOT_TURN, "status": "inProgress"})
            if SCENARIO == "stranger":  # another thread's chatter on the same stream is not this Turn's
                note("turn/started", threadId="thread-other", turn={"id": "turn-other", "rootTurnId": "turn-x"})
                message("thread-other", "turn-other", "msg_other", "not yours", "final_answer")
                out({"method": "item/tool/call", "id": 7, "params": {"threadId": "thread-other", "turnId": "turn-other",
                                                                     "callId": "call_other", "tool": "get_weather",
                                                                     "arguments": {}}})
                message(ROOT, ROOT_TURN, "msg_root", "root done", "final_answer")
                turn_completed(ROOT, ROOT_TURN, "completed")
                continue
            message(ROOT, ROOT_TURN, "msg_spawn", "spawning", "commentary")
            collab("spawnAgent", "inProgress", [], "item/started")
            collab("spawnAgent", "completed", [CHILD], "item/completed")
            note("thread/status/changed", threadId=CHILD, status={"type": "active"})
            note("turn/started", threadId=CHILD, turn={"id": CHILD_TURN, "rootTurnId": ROOT_TURN,
                                                       "status": "inProgress"})
            if SCENARIO == "detached":  # no wait_agent: the root turn completes while the child runs
                message(ROOT, ROOT_TURN, "msg_root", "root done", "final_answer")
                turn_completed(ROOT, ROOT_TURN, "completed")
            else:
                collab("wait", "inProgress", [CHILD], "item/started")
            message(CHILD, CHILD_TURN, "msg_child_c", "checking", "commentary")
            out({"method": "item/tool/call", "id": 0, "params": {"threadId": CHILD, "turnId": CHILD_TURN,
                                                                 "callId": CALL, "namespace": None,
                                                                 "tool": "get_weather", "arguments": {}}})
        elif method == "turn/interrupt":
            out({"id": rid, "result": {}})
            thread = request["params"]["threadId"]
            if thread == CHILD:
                call_completed("failed", None, False)
                turn_completed(CHILD, CHILD_TURN, "interrupted")
            else:
                turn_completed(ROOT, ROOT_TURN, "interrupted")
        else:
            out({"id": rid, "error": {"code": -32601, "message": f"unknown method {method}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
