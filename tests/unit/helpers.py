"""Builders for request bodies used by the contract tests."""

from agents_contract import admission, jsonutil, parser

WORKSPACE = "/work/repo"


def fn(name="lookup", *, params=None, **extra):
    return {"type": "function", "name": name, "description": f"{name} things",
            "parameters": params if params is not None else {"type": "object", "properties": {}}, **extra}


def http_mcp(label="tickets", url="https://mcp.example.com/mcp", **extra):
    transport = {"type": "http", "server_url": url}
    transport.update(extra.pop("transport", {}))
    return {"type": "mcp", "server_label": label, "transport": transport, **extra}


def stdio_mcp(label="files", cwd=WORKSPACE, **extra):
    transport = {"type": "stdio", "command": "mcp-files", "cwd": cwd, "args": ["--ro"], "env_vars": ["TOKEN_PATH"]}
    transport.update(extra.pop("transport", {}))
    return {"type": "mcp", "server_label": label, "transport": transport, **extra}


NONE = {"type": "none"}
SELF_HOSTED = {"type": "self_hosted", "workspace_directory": WORKSPACE}


def session_body(tools=None, *, harness="codex", env=None, text=None, impersonate=None, **agent):
    body = {"environment": env or NONE, "agent": {"model": "gpt-5", **agent}}
    if (env or NONE)["type"] == "none":
        body["input"] = "hello"
    if tools is not None:
        body["agent"]["tools"] = tools
    if text is not None:
        body["agent"]["text"] = text
    ext = {"harness": harness}
    if impersonate:
        ext["impersonate"] = impersonate
    body["x_agents_core"] = ext
    return body


def resolve(body, saved=None, default_harness=None):
    body = jsonutil.loads(jsonutil.dumps(body)) if not isinstance(body, str) else jsonutil.loads(body)
    request = parser.parse_session_create(body)
    return admission.resolve_session(request, saved, default_harness=default_harness, agent_id="agent_test", body=body)
