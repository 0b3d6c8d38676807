"""Session admission: the resolved configuration checked against the selected Harness.

"Session creation resolves saved references and inline declarations with the execution parser into
the immutable Session snapshot, then checks the combination against the selected Harness's
declaration in internal/harnessconfig. An unsupported combination returns 400
unsupported_or_invalid_configuration before anything is written."
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Optional
from urllib.parse import urlsplit

from . import jsonutil, parser, vaults, wire
from .errors import InvalidRequest, UnsupportedConfiguration
from .harnessconfig import DECLARATIONS, HarnessDeclaration, declaration

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 field-name token
_FIELD_VALUE = re.compile(r"^[\t\x20-\x7e\x80-\xff]*$")  # visible chars, SP, HTAB, obs-text
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CLAUDE_LABEL = re.compile(r"^[A-Za-z0-9_-]+$")
_URL_BAD_CHARS = re.compile(r"[\x00-\x20\x7f]")


def _reject(message: str, param: Optional[str] = "agent.tools") -> UnsupportedConfiguration:
    return UnsupportedConfiguration(message, param=param)


@dataclass(frozen=True)
class SavedAgent:
    """What Session creation needs of a saved Agent."""

    id: str
    name: Optional[str]
    config: dict[str, Any]
    harness: Optional[str] = None


def select_harness(request: wire.SessionCreate, saved: Optional[SavedAgent], default: Optional[str]) -> tuple[str, Optional[str]]:
    ext = request.x_agents_core
    harness = (ext.harness if ext else None) or (saved.harness if saved else None) or default
    if not harness:
        raise InvalidRequest(
            "A Harness is required: set x_agents_core.harness or the deployment's DefaultHarness.",
            param="x_agents_core.harness",
        )
    if harness not in DECLARATIONS:
        raise InvalidRequest(f"Unknown Harness '{harness}'.", param="x_agents_core.harness")
    impersonate = ext.impersonate if ext else None
    if impersonate and harness != "scripted":
        raise InvalidRequest(
            "x_agents_core.impersonate is accepted only with the scripted harness.", param="x_agents_core.impersonate"
        )
    return harness, impersonate


def resolve_session(
    request: wire.SessionCreate,
    saved: Optional[SavedAgent],
    *,
    default_harness: Optional[str],
    agent_id: str,
    body: Optional[dict[str, Any]] = None,
    attached: Optional[list[vaults.AttachedCredential]] = None,
) -> parser.Snapshot:
    """Resolve the saved Agent plus inline overrides, admit, select Vault credentials and freeze the
    snapshot.

    `body` is the request as sent; when given, inline configuration is taken from it verbatim.
    `attached`: the credentials of the Vaults in `vault_ids` (None: no Vault attached).
    """
    harness, impersonate = select_harness(request, saved, default_harness)
    _check_session_options(request)
    inline = request.agent
    raw_agent = body.get("agent") if isinstance(body, dict) else None
    inline_config = parser.config_as_sent(inline, raw=raw_agent) if inline is not None else {}
    config = parser.merge_config(saved.config if saved else {}, inline_config)
    if not config.get("model"):
        raise InvalidRequest("Missing required parameter: 'agent.model'.", param="agent.model")
    if inline is not None and inline.tools is not None:
        tools: Sequence[wire.AnyTool] = inline.tools
    else:
        tools = parser.tools_from_config(config.get("tools"))
    environment = parser.resolve_environment(request.environment)
    decl = declaration(harness, impersonate)
    resolved = parser.resolve_agent_config({**config, "tools": None})
    raw_tools = (raw_agent or {}).get("tools") if inline is not None and inline.tools is not None else None
    if raw_tools is None:
        raw_tools = config.get("tools") if (inline is None or inline.tools is None) else None
    resolved["tools"] = parser.resolve_tools(tools, raw_tools)
    admit(decl, tools, resolved, environment)
    parser.check_input(decl, request.input)
    # "Vault credentials owns selection ... MCP credential authority owns the frozen Runtime binding."
    binding = vaults.select_credentials(resolved["tools"], attached)
    return parser.Snapshot(
        vault_ids=vaults.check_vault_ids(request.vault_ids),
        credentials=binding,
        agent_id=agent_id,
        agent_name=saved.name if saved else None,
        agent=resolved,
        environment=environment,
        harness=harness,
        impersonate=impersonate,
    )


def _check_session_options(request: wire.SessionCreate) -> None:
    if request.environment.type == "none" and not request.given("input"):
        raise InvalidRequest("Missing required parameter: 'input'.", param="input")
    if request.environment.type == "none" and request.input is None:
        raise InvalidRequest(
            "Invalid type for 'input': expected a string or an array, but got null instead.", param="input"
        )
    env = request.environment
    if isinstance(env, wire.EnvironmentOpenAIHosted):
        from . import hosted  # the hosted configuration's own rules

        if hosted.check_reference(env) is None:
            hosted.check(env)  # an existing Environment (environment_id) was checked when it was created


# ---- the checks -------------------------------------------------------------------------------


def admit(
    decl: HarnessDeclaration,
    tools: Sequence[wire.AnyTool],
    resolved: dict[str, Any],
    environment: dict[str, Any],
) -> None:
    """Raise UnsupportedConfiguration for the first combination the declaration does not allow."""
    placement = "none" if environment["type"] == "none" else "workspace"
    _check_execution_controls(decl, resolved)
    function = wire.FunctionTool
    # One comprehension per question (C-speed loops); a Session may carry hundreds of functions.
    functions = [tool for tool in tools if type(tool) is function]
    others: list[tuple[int, Any]] = (
        [(i, tool) for i, tool in enumerate(tools) if type(tool) is not function] if len(functions) < len(tools) else []
    )
    has_search = any(type(tool) is wire.ToolSearchTool for _, tool in others)
    if has_search:
        others = [(i, tool) for i, tool in others if type(tool) is not wire.ToolSearchTool]
    deferred = True in [tool.defer_loading for tool in functions]
    if functions and not decl.function_tools:
        raise _reject("The harness does not support function tools.")
    if (has_search or deferred) and not decl.tool_search:
        raise _reject("The harness does not support tool search.")
    if has_search != deferred:
        raise _reject("Tool search requires deferred functions, and deferred functions require tool search.")
    if decl.function_parameters_object_root:
        for i, fn in enumerate(tools):
            if type(fn) is function and fn.parameters.get("type") != "object":  # type: ignore[union-attr]
                raise _reject(
                    "The harness requires function parameters with an explicit top-level type \"object\".",
                    f"agent.tools[{i}].parameters",
                )
    for i, tool in others:
        at = f"agent.tools[{i}]"
        if isinstance(tool, wire.WebSearchTool):
            _check_web_search(decl, tool, resolved["tools"][i], at)
        elif isinstance(tool, wire.AutomationsTool):
            if not decl.automations_tool:
                raise _reject("The harness cannot run the automations tool (Core serves it as a function only to "
                              "Harnesses whose driver offers it).", f"{at}.type")
            if any(fn.name == AUTOMATIONS_FUNCTION for fn in functions):
                raise _reject(f"A function named '{AUTOMATIONS_FUNCTION}' conflicts with the automations tool.", at)
        elif isinstance(tool, wire.ProgrammaticToolCallingTool):
            if tool.enabled not in decl.programmatic_tool_calling:
                allowed = " or ".join(sorted(str(v).lower() for v in decl.programmatic_tool_calling))
                raise _reject(
                    f"Unsupported value for '{at}.enabled': the harness accepts {allowed} only.", f"{at}.enabled"
                )
        else:
            _check_mcp(decl, tool, resolved["tools"][i], at, placement, environment, bool(functions))
    _check_output_schema(decl, resolved["text"]["format"])


AUTOMATIONS_FUNCTION = "automations"  # the name the automations tool is called by


def _check_execution_controls(decl: HarnessDeclaration, resolved: dict[str, Any]) -> None:
    effort = resolved["reasoning"]["effort"]
    summary = resolved["reasoning"]["summary"]
    if effort is not None and effort not in decl.reasoning_efforts:
        raise _reject(f"Unsupported value for 'agent.reasoning.effort': '{effort}'.", "agent.reasoning.effort")
    if summary is not None and summary not in decl.reasoning_summaries:
        raise _reject(f"Unsupported value for 'agent.reasoning.summary': '{summary}'.", "agent.reasoning.summary")
    if resolved["service_tier"] not in decl.service_tiers:
        raise _reject(
            f"Unsupported value for 'agent.service_tier': '{resolved['service_tier']}'.", "agent.service_tier"
        )
    verbosity = resolved["text"]["verbosity"]
    if verbosity not in decl.verbosities:
        raise _reject(f"Unsupported value for 'agent.text.verbosity': '{verbosity}'.", "agent.text.verbosity")


def _check_web_search(decl: HarnessDeclaration, tool: wire.WebSearchTool, resolved: dict[str, Any], at: str) -> None:
    mode = resolved["mode"]
    if mode not in decl.web_search_modes:
        supported = [m for m in ("disabled", "cached", "live") if m in decl.web_search_modes]
        raise _reject(
            f"Unsupported value for '{at}.mode': '{mode}'. The harness supports "
            + " and ".join(f"'{m}'" for m in supported)
            + ".",
            f"{at}.mode",
        )
    if decl.web_search_settings == "medium_only":
        if resolved["context_size"] != "medium":
            raise _reject(
                f"Unsupported value for '{at}.context_size': the harness supports 'medium' only.",
                f"{at}.context_size",
            )
        if resolved["allowed_domains"] is not None:
            raise _reject(f"The harness does not support '{at}.allowed_domains'.", f"{at}.allowed_domains")
        if resolved["location"] is not None:
            raise _reject(f"The harness does not support '{at}.location'.", f"{at}.location")


def _check_output_schema(decl: HarnessDeclaration, fmt: dict[str, Any]) -> None:
    if fmt["type"] != "json_schema":
        return
    if not decl.structured_output:
        raise _reject("The harness does not support json_schema output.", "agent.text.format")
    schema = fmt["schema"]
    if decl.output_schema_object_root and schema.get("type") != "object":
        raise _reject("This runtime requires an object schema with lossless JSON numbers.", "agent.text.format.schema")
    if decl.output_schema_numbers == "binary64_exact" and not _numbers_binary64_exact(schema):
        raise _reject("This runtime requires an object schema with lossless JSON numbers.", "agent.text.format.schema")


def _numbers_binary64_exact(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, Decimal)):
        return jsonutil.binary64_exact(value)
    if isinstance(value, dict):
        return all(_numbers_binary64_exact(v) for v in value.values())
    if isinstance(value, list):
        return all(_numbers_binary64_exact(v) for v in value)
    return True


# ---- MCP ---------------------------------------------------------------------------------------


def _check_mcp(
    decl: HarnessDeclaration,
    tool: wire.McpTool | wire.InlineMcpTool,
    resolved: dict[str, Any],
    at: str,
    placement: str,
    environment: dict[str, Any],
    has_functions: bool,
) -> None:
    label = tool.server_label
    transport = tool.transport
    if tool.request_metadata:
        raise _reject("Nonempty MCP request_metadata is not supported yet.", f"{at}.request_metadata")
    if isinstance(transport, wire.InlineHttpTransport) and transport.authorization is not None:
        raise _reject("Inline MCP authorization is not supported; use credential_id.", f"{at}.transport.authorization")
    if isinstance(transport, wire.InlineStdioTransport) and transport.env:
        raise _reject(
            "Inline MCP env is not supported; declare env_vars and set the values in the Environment.",
            f"{at}.transport.env",
        )
    _check_label(decl, label, at, has_functions)
    origin = resolved["connection_origin"]
    if isinstance(transport, wire.HttpTransport):
        _check_http_transport(decl, transport, f"{at}.transport")
        if origin == "service" and placement != "none":
            raise _reject("Service-origin MCP requires environment none.", f"{at}.connection_origin")
        if origin == "environment" and placement == "none":
            raise _reject(
                "Environment-origin MCP requires a managed or self-hosted execution environment.",
                f"{at}.connection_origin",
            )
        if (origin == "service" and not decl.mcp_service_origin) or (
            origin == "environment" and not decl.mcp_environment_origin
        ):
            raise _reject("The harness does not support this MCP connection origin.", f"{at}.connection_origin")
        if origin == "environment" and decl.mcp_environment_restricted:
            if tool.allowed_tools is not None:
                raise _reject("The harness requires allowed_tools null.", f"{at}.allowed_tools")
            if tool.required:
                raise _reject("The harness does not support required MCP servers.", f"{at}.required")
    else:
        _check_stdio(decl, tool, transport, at, placement, environment)
    if tool.required and not decl.required_mcp:
        raise _reject("The harness does not support required MCP servers.", f"{at}.required")
    if decl.label_rule == "claude_ascii" and tool.allowed_tools:
        _check_normalized_names(tool.allowed_tools, label, f"{at}.allowed_tools")


def _check_label(decl: HarnessDeclaration, label: str, at: str, has_functions: bool) -> None:
    if decl.label_rule == "claude_ascii" and (not _CLAUDE_LABEL.match(label) or label == "functions"):
        raise _reject(
            "The configured engine accepts MCP server labels of ASCII letters, digits, underscore and hyphen, "
            "except 'functions'.",
            f"{at}.server_label",
        )
    if decl.label_rule == "reserved_native" and label in decl.reserved_labels:
        raise _reject(f"The MCP server label '{label}' is reserved by the configured engine.", f"{at}.server_label")
    if decl.label_rule == "functions_reserved" and has_functions and label == "functions":
        raise _reject(
            "The configured engine serves the Agent's functions as the MCP server 'functions'; choose another label.",
            f"{at}.server_label",
        )


def _normalize_tool_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def _check_normalized_names(names: Sequence[str], label: str, param: str) -> None:
    seen: dict[str, str] = {}
    for name in names:
        key = _normalize_tool_name(name)
        if key in seen and seen[key] != name:
            raise _reject(
                f"The configured engine normalizes the MCP tool names '{seen[key]}' and '{name}' of server "
                f"'{label}' to the same name.",
                param,
            )
        seen[key] = name


@lru_cache(maxsize=1024)
def _server_url_ok(url: str) -> bool:
    """An absolute HTTP(S) URL without credentials or fragment (a pure function of the text, so a
    Session's servers, sent again and again, are parsed once)."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        return False
    return not (
        not port_ok
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or "#" in url
        or _URL_BAD_CHARS.search(url) is not None
    )


def _check_http_transport(decl: HarnessDeclaration, transport: wire.HttpTransport, at: str) -> None:
    url = transport.server_url
    if not _server_url_ok(url):
        raise _reject(
            "MCP server_url must be an absolute HTTP or HTTPS URL without credentials or fragment.", f"{at}.server_url"
        )
    if decl.rejects_placeholders and "${" in url:
        raise _reject("The configured engine does not accept '${' in MCP server_url.", f"{at}.server_url")
    seen: set[str] = set()
    for name, value in (transport.headers or {}).items():
        if not _TOKEN.match(name):
            raise _reject(f"MCP header name '{name}' is not a valid HTTP header name.", f"{at}.headers")
        if not _FIELD_VALUE.match(value) or value != value.strip(" \t"):
            raise _reject(f"MCP header '{name}' has a value that is not a valid HTTP header value.", f"{at}.headers")
        lowered = name.lower()
        if lowered == "authorization":
            raise _reject(
                "An MCP Authorization header is not accepted; credentials enter only through a Vault credential.",
                f"{at}.headers",
            )
        if lowered in seen:
            raise _reject(f"MCP header names must be unique ignoring case; '{name}' repeats.", f"{at}.headers")
        seen.add(lowered)
        if decl.rejects_placeholders and "${" in value:
            raise _reject("The configured engine does not accept '${' in MCP header values.", f"{at}.headers")


def _check_stdio(
    decl: HarnessDeclaration,
    tool: wire.McpTool | wire.InlineMcpTool,
    transport: wire.StdioTransport,
    at: str,
    placement: str,
    environment: dict[str, Any],
) -> None:
    if placement == "none":
        raise _reject(
            "MCP stdio servers run in the Environment and need a workspace placement (openai_hosted or self_hosted).",
            f"{at}.transport",
        )
    if tool.connection_origin not in (None, "environment"):
        raise _reject("MCP stdio servers require connection_origin environment.", f"{at}.connection_origin")
    if tool.credential_id is not None:
        raise _reject("MCP stdio servers take no credential_id.", f"{at}.credential_id")
    parts = [transport.command, transport.cwd, *(transport.args or []), *(transport.env_vars or [])]
    if any("\x00" in p for p in parts):
        raise _reject("MCP stdio command, args, cwd and env_vars cannot contain NUL.", f"{at}.transport")
    if not transport.command.strip():
        raise _reject("MCP stdio command must be nonempty.", f"{at}.transport.command")
    if not transport.cwd.startswith("/"):
        raise _reject("MCP stdio cwd must be an absolute path.", f"{at}.transport.cwd")
    for name in transport.env_vars or []:
        if not _ENV_NAME.match(name):
            raise _reject(
                f"MCP stdio env_vars holds variable names; '{name}' is not one.", f"{at}.transport.env_vars"
            )
    if decl.stdio == "rejected":
        raise _reject("The configured engine cannot start MCP stdio servers in the declared cwd.", f"{at}.transport.cwd")
    if decl.stdio == "workspace_cwd":
        if transport.cwd.rstrip("/") != environment.get("workspace_directory", "").rstrip("/"):
            raise _reject(
                "The configured engine starts MCP stdio servers in the workspace directory; set cwd to it.",
                f"{at}.transport.cwd",
            )
    if decl.stdio_allowed_tools_null and tool.allowed_tools is not None:
        raise _reject("The harness requires allowed_tools null.", f"{at}.allowed_tools")
