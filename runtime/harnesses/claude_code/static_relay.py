"""A declared stdio MCP server behind a relay that holds Claude Code to static inventories.

"Claude ... requires static inventories": Claude Code shows nothing of a server's capabilities (not in its MCP
status, not in its logs), so the adapter starts each declared stdio server through this relay
(`python3 -I -c SOURCE LABEL MARK -- COMMAND ARGS...`). It runs where Claude Code runs the server (the same sandbox or
network namespace, directory and environment) and passes every byte through unchanged, reading only the answers
to the requests that carry the server's capabilities: `server/discover` (MCP 2026-07-28, which Claude Code tries
first) and `initialize` (the handshake era). A server that announces `capabilities.tools.listChanged: true` is
stopped, its refusal is written to the file MARK, and Claude Code gets a JSON-RPC error naming it, so its MCP
status is `failed` and the adapter fails the start with that message (session.py; Claude Code redacts a server's
error text in its status, hence the file).

Standard library only, run as source text (`-c`): nothing of the Runtime needs to be visible where it runs.
"""

import json
import os
import signal
import subprocess
import sys
import threading

REFUSAL = "MCP server '{label}' announces tools.listChanged; Claude Code requires static inventories."
CAPABILITY_REQUESTS = ("initialize", "server/discover")


def _messages(line):
    try:
        message = json.loads(line)
    except ValueError:
        return []
    return [m for m in (message if isinstance(message, list) else [message]) if isinstance(m, dict)]


def announces_list_changed(result):
    """Whether an initialize or server/discover result announces a changing tool inventory."""
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    tools = capabilities.get("tools") if isinstance(capabilities, dict) else None
    return isinstance(tools, dict) and tools.get("listChanged") is True


def main(argv):
    label, mark, command = argv[1], argv[2], argv[argv.index("--") + 1:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # noqa: S603
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, _frame: child.send_signal(number))
    # ids of the capability requests not answered yet: recorded before the server can read them
    pending = set()
    lock = threading.Lock()

    def to_server():
        try:
            for line in sys.stdin.buffer:
                if b'"method"' in line:
                    for message in _messages(line):
                        if message.get("method") in CAPABILITY_REQUESTS and "id" in message:
                            with lock:
                                pending.add(json.dumps(message["id"]))
                child.stdin.write(line)
                child.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
        try:
            child.stdin.close()
        except (BrokenPipeError, ValueError, OSError):
            pass

    threading.Thread(target=to_server, daemon=True).start()
    out = sys.stdout.buffer
    for line in child.stdout:
        with lock:
            watching = bool(pending)
        if watching:
            for message in _messages(line):
                key = json.dumps(message.get("id"))
                with lock:
                    answered = "result" in message and key in pending
                    pending.discard(key)
                if answered and announces_list_changed(message["result"]):
                    text = REFUSAL.format(label=label)
                    try:
                        with open(mark, "w") as fh:
                            fh.write(text)
                    except OSError:
                        pass
                    error = {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32600, "message": text}}
                    out.write(json.dumps(error).encode() + b"\n")
                    out.flush()
                    sys.stderr.write(text + "\n")
                    sys.stderr.flush()
                    child.terminate()
                    child.wait()
                    os._exit(1)  # the stdin reader may hold its buffer's lock: no interpreter shutdown
        out.write(line)
        out.flush()
    os._exit(child.wait())


if __name__ == "__main__":
    main(sys.argv)
