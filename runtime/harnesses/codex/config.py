"""Codex: `[mcp_servers]`, web search, code mode and the per-Turn `outputSchema`.

- "Codex writes command, args, cwd and env_vars to its [mcp_servers] table and verifies them with
  the rest of the declared configuration before any native connection."
- "Before any native connection that carries a Core credential, it verifies that each declared
  server keeps its URL or command, bearer reference and headers, and fails the start or resume with
  an error otherwise. It rejects reserved native labels and stored native MCP credentials."
- web_search: "disabled, cached and live, with context_size, allowed_domains and location, as
  native web_search and tools.web_search settings".
- programmatic_tool_calling: "enabled: true turns on native code_mode; false turns off code_mode,
  code_mode_only and code_mode_prewarm and checks native managed requirements before a thread
  starts or resumes".
- "The Codex adapter sends the schema unchanged as the native outputSchema on every root Turn,
  including Turns after resume or recovery ... Subagent threads do not receive the schema."
"""

from __future__ import annotations

from typing import Any, Optional

import tomli_w

from ..common import AdapterError, one, output_schema, tools_of

try:
    from agents_contract.harnessconfig import CODEX_RESERVED_LABELS
except ImportError:  # pragma: no cover - the Runtime normally runs beside the contract layer
    CODEX_RESERVED_LABELS = frozenset({"codex", "codex_apps"})


def mcp_servers(start: dict[str, Any], credentials: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """credentials: server label -> the environment variable holding its Vault bearer token."""
    servers: dict[str, Any] = {}
    for tool in tools_of(start, "mcp"):
        label = tool["server_label"]
        if label in CODEX_RESERVED_LABELS:
            raise AdapterError(f"MCP server label '{label}' is reserved by Codex.")
        transport = tool["transport"]
        if transport["type"] == "stdio":
            entry: dict[str, Any] = {"command": transport["command"], "args": list(transport["args"]),
                                     "cwd": transport["cwd"], "env_vars": list(transport["env_vars"])}
        else:
            entry = {"url": transport["server_url"]}
            if transport.get("headers"):
                entry["http_headers"] = dict(transport["headers"])
            if credentials and label in credentials:
                entry["bearer_token_env_var"] = credentials[label]
        if tool["allowed_tools"] is not None:
            entry["enabled_tools"] = list(tool["allowed_tools"])
        entry["required"] = bool(tool["required"])
        servers[label] = entry
    return servers


def config(start: dict[str, Any], credentials: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The native configuration for this Session. An omitted control keeps native behaviour."""
    out: dict[str, Any] = {}
    servers = mcp_servers(start, credentials)
    if servers:
        out["mcp_servers"] = servers
    search = one(start, "web_search")
    if search is not None:
        out["web_search"] = search["mode"]
        settings: dict[str, Any] = {"context_size": search["context_size"]}
        if search["allowed_domains"] is not None:
            settings["allowed_domains"] = list(search["allowed_domains"])
        if search["location"] is not None:
            settings["location"] = {k: v for k, v in search["location"].items() if v is not None}
        out["tools"] = {"web_search": settings}
    ptc = one(start, "programmatic_tool_calling")
    if ptc is not None:
        if ptc["enabled"]:
            out["features"] = {"code_mode": True}
        else:
            out["features"] = {"code_mode": False, "code_mode_only": False, "code_mode_prewarm": False}
    return out


def render_toml(native: dict[str, Any]) -> str:
    return tomli_w.dumps(native)


def check_managed_requirements(native: dict[str, Any], requirements: dict[str, Any]) -> None:
    """Before a thread starts or resumes: managed requirements must not force code mode back on."""
    features = native.get("features") or {}
    if features.get("code_mode") is False:
        forced = [k for k in ("code_mode", "code_mode_only", "code_mode_prewarm")
                  if (requirements.get("features") or {}).get(k) is True]
        if forced:
            raise AdapterError(f"Managed requirements force {', '.join(forced)} on; programmatic tool calling is "
                               "disabled for this Session.")


def verify_servers(declared: dict[str, Any], loaded: dict[str, Any]) -> None:
    """Before any connection that carries a Core credential: each declared server keeps its URL or
    command, bearer reference and headers in the configuration Codex actually loaded (project
    configuration loads natively on a trusted workspace), and no stored native credential."""
    loaded_servers = loaded.get("mcp_servers") or {}
    for label, entry in (declared.get("mcp_servers") or {}).items():
        got = loaded_servers.get(label)
        if got is None:
            raise AdapterError(f"Declared MCP server '{label}' is missing from the loaded Codex configuration.")
        for key in ("url", "command", "bearer_token_env_var", "http_headers"):
            if entry.get(key) != got.get(key):
                raise AdapterError(f"Declared MCP server '{label}' changed '{key}' in the loaded Codex configuration.")
        if got.get("bearer_token") or got.get("oauth"):
            raise AdapterError(f"MCP server '{label}' has a stored native credential; Core credentials only.")


def turn_params(start: dict[str, Any], *, subagent: bool = False) -> dict[str, Any]:
    """Per-Turn parameters: the schema unchanged on every root Turn (initial, resumed, recovered)."""
    schema = output_schema(start)
    if schema is None or subagent:
        return {}
    return {"outputSchema": schema}
