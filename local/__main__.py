"""`make dev`: the whole system on this machine, no AWS account and no Docker."""

from __future__ import annotations

import signal
import sys
import threading

from . import gcsettings
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
    if stack.info.get("hosted_environments"):
        line += f"\n  hosted Runtime:          openai_hosted Environments, one bubblewrap sandbox each, in " \
                f"{stack.info['hosted_environments']}" \
                f"\n  sandbox firewall:        {stack.info.get('sandbox_firewall')}"
    elif stack.info.get("hosted_environments_error"):
        line += f"\n  hosted Runtime:          not started: {stack.info['hosted_environments_error']}"
    return line


USAGE = """usage: python -m local   (make dev)

Runs the whole system on this machine: the HTTP API and dashboard, the WebSocket gateway, moto
(DynamoDB, Streams, Step Functions executing the Turn workflow) and a reference Runtime.
Settings come from the environment:
  AGENTS_CORE_HTTP_PORT (8000), AGENTS_CORE_WS_PORT (8001), AGENTS_CORE_MOTO_PORT (5055): 0 binds a free port
  AGENTS_CORE_STACK_FILE       where the running stack describes itself (.local/stack.json)
  AGENTS_CORE_DEV_API_KEY      the dev API key to create (default: a new random one)
  AGENTS_CORE_DEV_TENANT       its tenant (dev)
  AGENTS_CORE_START_RUNTIME    0: start no reference Runtime
  AGENTS_CORE_NATIVE_HARNESSES codex,claude_code: run those natively on the scripted model provider
  AGENTS_CORE_HOSTED_ENVIRONMENTS 0: start no hosted-environments Runtime (openai_hosted Sessions)
  AGENTS_CORE_EGRESS_ALLOW     CIDRs the Runtimes' tenant connections may reach beyond the public internet
                               (empty: none; 127.0.0.0/8 for an MCP server on this machine's loopback)
  AGENTS_CORE_HEARTBEAT_SECONDS, AGENTS_CORE_WS_DELIVERY (direct|ordered|concurrent)
  API Gateway's WebSocket limits, for Runtimes and subscribers alike (a closed connection gets code 1001):
  AGENTS_CORE_WS_MAX_CONNECTION_SECONDS (7200)  close every connection at this age (API Gateway: 2 hours)
  AGENTS_CORE_WS_IDLE_SECONDS (600)             close one with no message either way this long (10 minutes)
  AGENTS_CORE_WS_DISCONNECT (always|never)      never: no $disconnect is delivered (AWS: best effort)
  (frames over 32 KB and messages over 128 KB always close the connection with 1009, as API Gateway does)
  AGENTS_CORE_IAM (on|off)     on: every AWS call a function makes is checked against its own policies in
                               template.yaml, as IAM checks it (AccessDenied otherwise); off: for debugging only
  Per-tenant quotas (README "Quotas"; the template's defaults unless set), over them 429 rate_limit_exceeded:
  TENANT_RATE_LIMIT (100), TENANT_BURST_LIMIT (200)  requests per second and burst (the REST API's usage plan,
                               and apart from it the WebSocket client requests)
  MAX_RUNNING_TURNS (100)      Turns one tenant runs at once (0: no limit)
  AGENTS_CORE_SCHEDULES_FIRE_NOW (0)  1 (or tenants, comma-separated: only theirs): a schedule's next
                               occurrence runs as soon as it is created, updated or resumed (EventBridge
                               Scheduler's schedules run here with croniter, in their time zones)
  WEBHOOK_ALLOW_LOOPBACK_HTTP (true)  webhook endpoints may be http on a loopback host
  WEBHOOK_RETRY_SECONDS        delays before each retry of a failed webhook delivery (5,30,300,...)
"""


def main() -> int:
    gcsettings.apply()  # an allocation-heavy emulation: fewer young-generation collections (local/gcsettings.py)
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(USAGE, end="")
        return 0
    if sys.argv[1:]:
        print(f"python -m local takes no arguments (got {' '.join(sys.argv[1:])}); settings come from the "
              "environment, see --help", file=sys.stderr)
        return 2
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
