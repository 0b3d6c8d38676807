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
- Native tools follow the placement: on `environment: none` the model sees only what the Session
  declares (functions, tool_search, MCP tools) and no request_user_input, goal or clock tools; web search
  follows its control, and an omitted control keeps Codex's native web search. On a workspace placement
  the native workspace tools stay.

Codex 0.163.0 decides part of the tool set from its bundled model catalog, not from config keys:
most catalog models are `tool_mode: "code_mode_only"` (every tool behind `exec`, whatever
`features.code_mode` says), offer `tool_search` (`supports_search_tool`) and extra tools
(`experimental_supported_tools`: clock, send_user_message_async). `catalog_overrides` says which
catalog fields a Session needs changed; the driver writes a copy of the bundled catalog with them and
points `model_catalog_json` at it (config.toml only: the per-thread config does not read it).

The Session's config.toml is `native_config` (this translation plus the model provider); `dynamic_tools` are
thread/start's functions, `turn_start_params` a root turn/start's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import tomli_w

from agents_contract.harnessconfig import CODEX_RESERVED_LABELS

from ..common import AdapterError, one, output_schema, placement, tools_of


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
        # Under approval_policy "never" Codex fails every tool without readOnlyHint ("requires approval");
        # a declared server's tools are approved (allowed_tools already limits which exist).
        entry["default_tools_approval_mode"] = "approve"
        entry["required"] = bool(tool["required"])
        servers[label] = entry
    return servers


def config(start: dict[str, Any], credentials: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """The native configuration of the Session's declared tools and controls. An omitted control keeps
    native behaviour; `placement_config` adds what the placement removes."""
    out: dict[str, Any] = {}
    servers = mcp_servers(start, credentials)
    if servers:
        out["mcp_servers"] = servers
    if credentials:
        # The bearer variables stay out of the model's shell (and of Codex's 0644 shell snapshots).
        out["shell_environment_policy"] = {"exclude": sorted(credentials.values())}
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


def placement_config(start: dict[str, Any]) -> dict[str, Any]:
    """On `environment: none` the model sees only what the Session declares: no subagent tools unless
    the Agent's multi_agent is on, no request_user_input, no goal tools (nobody can answer a user-input
    request on `none`). A workspace placement keeps the native tool set ({}).

    web_search is not among them: "an omitted web_search or programmatic_tool_calling keeps each
    Harness's native behavior", on every placement; only a declared `disabled` removes Codex's search."""
    if placement(start) != "none":
        return {}
    out: dict[str, Any] = {"tools": {"experimental_request_user_input": {"enabled": False}},
                           "features": {"goals": False}}
    if not (start["agent"].get("multi_agent") or {}).get("enabled"):
        out["agents"] = {"enabled": False}  # the subagent tools, v1 and v2
    return out


def multi_agent_config(start: dict[str, Any]) -> dict[str, Any]:
    """The Agent's multi_agent on every placement: disabled removes the subagent tools (v1 and v2); enabled
    keeps them and sets `agents.max_threads` (Codex's max_concurrent_threads_per_session) from
    max_concurrent_subagents."""
    multi = start["agent"].get("multi_agent") or {}
    if not multi.get("enabled"):
        return {"agents": {"enabled": False}}
    limit = multi.get("max_concurrent_subagents")
    return {"agents": {"max_threads": int(limit)}} if limit else {}


def session_config(start: dict[str, Any], credentials: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """Everything config.toml carries for this Session: `config` with `placement_config` and
    `multi_agent_config` over it."""
    return merge(merge(config(start, credentials), placement_config(start)), multi_agent_config(start))


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Tables merge key by key (TOML semantics); `over` wins for any other value."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def turn_environment(start: dict[str, Any]) -> dict[str, Any]:
    """`turn/start` parameters for the placement: `environments: []` ("Empty disables environment
    access": no exec_command, write_stdin, apply_patch, view_image) on every Turn of a `none` Session;
    `thread/resume` does not keep it. A workspace placement keeps the thread's own environment."""
    return {"environments": []} if placement(start) == "none" else {}


def catalog_overrides(start: dict[str, Any]) -> dict[str, Any]:
    """The model catalog fields this Session changes, for every model Codex knows ({}: the bundled
    catalog as it is).

    - programmatic_tool_calling false: no `tool_mode` (the catalog's code_mode_only is not undone by
      `features.code_mode = false`) and no `multi_agent_version` (subagents, when on, as v1, the
      version verified with this driver, instead of the catalog's v2).
    - environment none: no `experimental_supported_tools`, and `tool_search` only when declared."""
    out: dict[str, Any] = {}
    ptc = one(start, "programmatic_tool_calling")
    if ptc is not None and not ptc["enabled"]:
        out.update(tool_mode=None, multi_agent_version=None)
    if placement(start) == "none":
        out["experimental_supported_tools"] = []
        if one(start, "tool_search") is None:
            out["supports_search_tool"] = False
    return out


def model_catalog(bundled: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of the bundled catalog (`codex debug models --bundled`) with the overrides on each model."""
    return {**bundled, "models": [{**model, **overrides} for model in bundled["models"]]}


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


# What a declared server's entry must keep in the configuration Codex loaded: "Codex writes command, args, cwd
# and env_vars to its [mcp_servers] table and verifies them with the rest of the declared configuration", and
# "each declared server keeps its URL or command, bearer reference and headers".
VERIFIED_KEYS = ("url", "command", "args", "cwd", "env_vars", "bearer_token_env_var", "http_headers")


def verify_servers(declared: dict[str, Any], loaded: dict[str, Any]) -> None:
    """Before any native connection: each declared server keeps its URL or command, args, cwd, env_vars,
    bearer reference and headers in the configuration Codex actually loaded (project configuration loads
    natively on a trusted workspace), and no stored native credential."""
    loaded_servers = loaded.get("mcp_servers") or {}
    for label, entry in (declared.get("mcp_servers") or {}).items():
        got = loaded_servers.get(label)
        if got is None:
            raise AdapterError(f"Declared MCP server '{label}' is missing from the loaded Codex configuration.")
        for key in VERIFIED_KEYS:
            if (entry.get(key) or None) != (got.get(key) or None):  # Codex omits an empty list or table
                raise AdapterError(f"Declared MCP server '{label}' changed '{key}' in the loaded Codex configuration.")
        if got.get("bearer_token") or got.get("oauth"):
            raise AdapterError(f"MCP server '{label}' has a stored native credential; Core credentials only.")


def turn_params(start: dict[str, Any], *, subagent: bool = False) -> dict[str, Any]:
    """Per-Turn parameters: the schema unchanged on every root Turn (initial, resumed, recovered)."""
    schema = output_schema(start)
    if schema is None or subagent:
        return {}
    return {"outputSchema": schema}


@dataclass
class Provider:
    """Which model provider Codex talks to.

    `scripted`: the embedded loopback provider (no key; network-off features, only loopback traffic).
    `openai`: the real OpenAI Responses API with OPENAI_API_KEY (optional base URL); native behaviour
    for undeclared servers, apps and plugins is kept.
    """

    kind: str  # "scripted" | "openai"
    base_url: str
    env_key: Optional[str] = None

    def native(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.kind, "base_url": self.base_url, "wire_api": "responses"}
        if self.env_key:
            entry["env_key"] = self.env_key
        if self.kind == "scripted":
            entry.update(request_max_retries=0, stream_max_retries=0)
        out: dict[str, Any] = {"model_provider": "agents_core", "model_providers": {"agents_core": entry}}
        if self.kind == "scripted":
            out["features"] = {"plugins": False, "apps": False, "remote_plugin": False}
        return out


def native_config(start: dict[str, Any], provider: Provider, catalog: Optional[str] = None,
                  credentials: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """config.toml: the adapter's translation of the snapshot plus the provider selection; `catalog`
    is the path of this Session's model catalog, when it needs one; `credentials`: server label -> the
    variable holding its bearer (the name only)."""
    native = session_config(start, credentials)
    merged: dict[str, Any] = {"model": start["agent"]["model"], "approval_policy": "never", **native}
    if catalog:
        merged["model_catalog_json"] = catalog
    for key, value in provider.native().items():
        if key == "features":
            merged["features"] = {**value, **(merged.get("features") or {})}
        else:
            merged[key] = value
    verbosity = (start.get("execution_controls") or {}).get("verbosity")
    if verbosity:
        merged["model_verbosity"] = verbosity
    return merged


def dynamic_tools(start: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "name": t["name"], "description": t.get("description") or "",
             "inputSchema": t["parameters"], "deferLoading": bool(t.get("defer_loading"))}
            for t in tools_of(start, "function")]


def user_input(item: dict[str, Any]) -> list[dict[str, Any]]:
    """A user message Item's content as native UserInput parts."""
    parts: list[dict[str, Any]] = []
    for part in item.get("content") or []:
        if part.get("type") == "input_text":
            parts.append({"type": "text", "text": part["text"], "text_elements": []})
        elif part.get("type") == "input_image" and part.get("image_url"):
            parts.append({"type": "image", "url": part["image_url"]})
    return parts


def turn_start_params(start: dict[str, Any], thread_id: str) -> dict[str, Any]:
    params: dict[str, Any] = {"threadId": thread_id,
                              "input": [p for item in start.get("input", []) for p in user_input(item)]}
    params.update(turn_params(start))  # outputSchema, unchanged, on every root Turn
    params.update(turn_environment(start))  # environments: [] on none, every Turn (resume drops it)
    agent = start["agent"]
    reasoning = agent.get("reasoning") or {}
    if reasoning.get("effort"):
        params["effort"] = reasoning["effort"]
    if reasoning.get("summary"):
        params["summary"] = reasoning["summary"]
    if agent.get("service_tier"):
        params["serviceTier"] = agent["service_tier"]
    return params
