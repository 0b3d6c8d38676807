"""`make dev`: the whole system on this machine, no AWS account and no Docker."""

from __future__ import annotations

import signal
import sys
import threading

from .server import LocalStack

EXAMPLE = '''import time
from openai import OpenAI
client = OpenAI(base_url="{base_url}", api_key="{api_key}")
session = client.beta.agents.sessions.create(environment={{"type": "none"}}, agent={{"model": "gpt-5"}},
                                             input="say Hello from the scripted harness")
while client.beta.agents.sessions.retrieve(session.id).status == "in_progress":
    time.sleep(0.1)                                   # the Runtime runs the Turn; the reply follows
print(client.beta.agents.sessions.items.list(session.id, order="asc").data[-1].content[0].text)'''


def runtime_line(stack: LocalStack) -> str:
    if not stack.runtime_process:
        return "not started"
    native = stack.config.native_harnesses
    impersonated = [h for h in ("codex", "claude_code", "minimax_code") if h not in native]
    line = f"running (scripted; impersonates {', '.join(impersonated)})" if impersonated else "running (scripted)"
    if native:
        line += f"\n  native Runtime:          {', '.join(native)} on the scripted model provider " \
                f"(requests logged to {stack.info.get('provider_log')})"
    return line


def main() -> int:
    stack = LocalStack()
    info = stack.start()
    print(f"""
agents-core local stack is up ({info['startup_seconds']}s)
  base URL (SDK base_url): {info['base_url']}
  WebSocket URL:           {info['websocket_url']}
  dashboard:               {info['dashboard_url']}
  API key (tenant {info['tenant']}):   {info['api_key']}
  moto endpoint:           {info['moto_endpoint']}   (table {info['table']})
  stack file:              {stack.config.stack_file}
  reference Runtime:       {runtime_line(stack)}

Try it (official SDK):

{EXAMPLE.format(**info)}

Ctrl-C stops everything.
""", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        while not stopped.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    print("stopping...", flush=True)
    stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
