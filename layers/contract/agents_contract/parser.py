"""The execution parser: request -> resolved, immutable Session snapshot.

Saving an Agent checks only the request's shape (protocol errors); it never qualifies execution,
so a saved Agent keeps every pinned value. Session creation resolves the saved Agent plus inline
overrides into the snapshot and then admits it against the selected Harness (`admission.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, TypeAdapter

from . import jsonutil, limits, validation, wire
from .errors import InvalidRequest, UnsupportedConfiguration

# ---- protocol checks shared by Agent save and Session creation ---------------------------------

METADATA_MAX_PAIRS = limits.METADATA_MAX_PAIRS
METADATA_MAX_KEY = limits.METADATA_MAX_KEY
METADATA_MAX_VALUE = limits.METADATA_MAX_VALUE


def check_metadata(metadata: Optional[dict[str, str]], param: str = "metadata") -> None:
    if not metadata:
        return
    if len(metadata) > METADATA_MAX_PAIRS:
        raise InvalidRequest(
            f"Invalid '{param}': too many properties. Expected an object with at most {METADATA_MAX_PAIRS} "
            f"properties, but got an object with {len(metadata)} properties instead.",
            param=param,
        )
    for key in sorted(metadata):  # the first offending key in a stable order
        value = metadata[key]
        if not key:
            raise InvalidRequest(f"Invalid property name in '{param}': '' is too short. Expected a string with "
                                 "minimum length 1, but got a string with length 0 instead.", param=f"{param}.")
        if len(key) > METADATA_MAX_KEY:
            raise InvalidRequest(
                f"Invalid property name in '{param}': '{key}' is too long. Expected a string with maximum length "
                f"{METADATA_MAX_KEY}, but got a string with length {len(key)} instead.", param=f"{param}.{key}")
        if len(value) > METADATA_MAX_VALUE:
            raise InvalidRequest(
                f"Invalid '{param}.{key}': string too long. Expected a string with maximum length "
                f"{METADATA_MAX_VALUE}, but got a string with length {len(value)} instead.",
                param=f"{param}.{key}",
            )


@lru_cache(maxsize=16)
def _meta_validator(dialect: Optional[str]) -> Any:
    """The meta-schema validator of a dialect (None: Draft 2020-12); None for an unknown dialect."""
    import jsonschema  # imported on first use: most requests carry no schema (cold start)

    if dialect is None:
        cls: Any = jsonschema.Draft202012Validator
    else:
        cls = jsonschema.validators.validator_for({"$schema": dialect}, default=None)
        if cls is None:
            return None
    return cls(cls.META_SCHEMA, format_checker=cls.FORMAT_CHECKER)


_DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/"
_VOCABULARIES = ("core", "applicator", "unevaluated", "validation", "meta-data", "format-annotation", "content")
# What a 2020-12 vocabulary meta-schema may hold besides its properties and $defs (its identity,
# annotations and the root's allOf of the vocabularies).
_META_BOOKKEEPING = {"$schema", "$id", "$vocabulary", "$dynamicAnchor", "title", "$comment", "allOf"}


def _static_refs(node: Any, root: str = "#") -> Any:
    """A vocabulary meta-schema's subschema with its references pointing into the flat meta-schema:
    `$dynamicRef: "#meta"` -> `root`, `[base]#/$defs/name` -> the flat `$defs/name`."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$dynamicRef":
                if value != "#meta":
                    raise ValueError(f"unexpected $dynamicRef {value!r}")
                out["$ref"] = root
            elif key == "$ref":
                _, sep, name = value.partition("#/$defs/")
                if not sep or "/" in name:
                    raise ValueError(f"unexpected $ref {value!r}")
                out["$ref"] = f"#/$defs/{name}"
            else:
                out[key] = _static_refs(value, root)
        return out
    if isinstance(node, list):
        return [_static_refs(v, root) for v in node]
    return node


def flat_meta_schema(root: str = "#") -> dict[str, Any]:
    """The Draft 2020-12 meta-schema with its seven vocabulary meta-schemas merged into one schema
    and every `$dynamicRef: "#meta"` made a `$ref` to that root. The same assertions: validating a
    schema starts at the root meta-schema, which holds `$dynamicAnchor: meta`, so each `#meta`
    resolves to it; the vocabularies are applied in an allOf, each one a `type` (the same in all)
    plus properties and $defs whose names no two vocabularies share (checked here), with no
    unevaluated* keyword that a merge could change. jsonschema-rs checks it several times faster
    than the dynamic-scope original. `root`: where the meta-schema will sit, when it is to be
    embedded in another schema."""
    from jsonschema_specifications import REGISTRY

    top = REGISTRY.contents(_DRAFT_2020_12 + "schema")
    parts = [top] + [REGISTRY.contents(f"{_DRAFT_2020_12}meta/{name}") for name in _VOCABULARIES]
    if top.get("allOf") != [{"$ref": f"meta/{name}"} for name in _VOCABULARIES]:
        raise ValueError("unexpected Draft 2020-12 meta-schema layout")
    properties: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for part in parts:
        if part.get("type") != ["object", "boolean"] or set(part) - _META_BOOKKEEPING - {"type", "properties", "$defs"}:
            raise ValueError("unexpected Draft 2020-12 vocabulary meta-schema layout")
        if part is not top and "allOf" in part:
            raise ValueError("unexpected allOf in a vocabulary meta-schema")
        for into, members in ((properties, part.get("properties", {})), (defs, part.get("$defs", {}))):
            for name, subschema in members.items():
                if name in into:
                    raise ValueError(f"two vocabularies define {name!r}")
                into[name] = _static_refs(subschema, root)
    return {"$schema": _DRAFT_2020_12 + "schema", "type": ["object", "boolean"], "properties": properties,
            "$defs": defs}


@lru_cache(maxsize=1)
def _fast_meta_validator() -> Any:
    """The Draft 2020-12 meta-schema (flattened, `flat_meta_schema`) as a Rust validator with format
    checks (the "regex" format of `pattern` included, in ECMA-262 terms, which is what JSON Schema
    specifies); None without it."""
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - the layer ships it; the full check still runs
        return None
    return jsonschema_rs.Draft202012Validator(flat_meta_schema(), validate_formats=True)


@lru_cache(maxsize=1)
def _fast_parameters_validator() -> Any:
    """All of a request's function `parameters` in one Rust call: an array whose every item is a
    valid Draft 2020-12 schema (`flat_meta_schema`) that names no `$schema` and whose `type`, when
    present, is "object" -- exactly what `check_tools` asks of each function's schema. None without
    jsonschema-rs."""
    try:
        import jsonschema_rs
    except ImportError:  # pragma: no cover - the layer ships it; the full check still runs
        return None
    meta = flat_meta_schema("#/$defs/meta")
    defs = meta.pop("$defs")
    return jsonschema_rs.Draft202012Validator({
        "$schema": meta.pop("$schema"),
        "type": "array",
        "items": {"$ref": "#/$defs/meta", "properties": {"$schema": False, "type": {"const": "object"}}},
        "$defs": {**defs, "meta": meta},
    }, validate_formats=True)


def _surely_valid(schema: dict[str, Any]) -> bool:
    """The fast path for a Draft 2020-12 schema: microseconds in Rust, where the pure-Python check
    takes most of a millisecond per schema. False means "not sure": the full check decides and
    words the error."""
    validator = _fast_meta_validator()
    try:
        return validator is not None and bool(validator.is_valid(schema))
    except Exception:  # noqa: BLE001 - any doubt goes to the full check
        return False


def schema_error(schema: dict[str, Any]) -> Optional[str]:
    """Why `schema` is not a valid JSON Schema, checked against the meta-schema of the dialect its
    `$schema` names (Draft 2020-12 when it names none), in the official "In context=(...)" form;
    None when it is valid. Saving never qualifies execution: a valid schema a Harness cannot run
    is still valid here."""
    dialect = schema.get("$schema")
    if dialect is None and _surely_valid(schema):
        return None
    from jsonschema import exceptions

    validator = _meta_validator(dialect if isinstance(dialect, str) else None)
    if validator is None:
        return f"In context=('$schema',), unsupported JSON Schema dialect '{str(dialect)[:200]}'."
    error = exceptions.best_match(validator.iter_errors(schema))
    if error is None:
        return None
    message = error.message if len(error.message) <= 300 else error.message[:297] + "..."
    return f"In context={tuple(error.absolute_path)!r}, {message}."


def _type_text(value: Any) -> str:
    return jsonutil.dumps(value) if not isinstance(value, str) else value


def _functions_pass(functions: list[wire.FunctionTool]) -> bool:
    """Whether every function passes check_tools' function checks (unique nonblank names, a valid
    schema without `$schema`, an object root), answered in a few C-speed passes and one Rust call;
    False when not sure, and the one-by-one checks then find and word the first problem."""
    names = [tool.name for tool in functions]
    if len(set(names)) != len(names) or "" in names or any(map(str.isspace, names)):
        return False
    validator = _fast_parameters_validator()
    try:
        return validator is not None and bool(validator.is_valid([tool.parameters for tool in functions]))
    except Exception:  # noqa: BLE001 - any doubt goes to the one-by-one checks
        return False


def check_tools(tools: Sequence[wire.AnyTool], prefix: str) -> None:
    """Duplicates, nonblank names, unique labels and function schema roots (protocol errors)."""
    names: set[str] = set()
    labels: set[str] = set()
    seen: set[str] = set()
    function = wire.FunctionTool
    functions = [tool for tool in tools if type(tool) is function]
    indexed: Iterable[tuple[int, wire.AnyTool]] = enumerate(tools)
    if functions and _functions_pass(functions):  # their checks all pass: only the others remain
        indexed = [(i, tool) for i, tool in enumerate(tools) if type(tool) is not function]
    for i, tool in indexed:
        if type(tool) is function:
            name = tool.name  # type: ignore[union-attr]
            if name in names:
                raise InvalidRequest(f"duplicate function tool name: {name}", param=None)
            if not name or name.isspace():
                raise InvalidRequest(
                    f"Invalid '{prefix}tools[{i}].name': function names must be nonblank.", param=f"{prefix}tools[{i}].name"
                )
            names.add(name)
            parameters = tool.parameters  # type: ignore[union-attr]
            schema_problem = schema_error(parameters)
            if schema_problem:
                raise InvalidRequest(f"Invalid schema for function '{name}': {schema_problem}",
                                     param=f"{prefix}tools[{i}].parameters")
            if "type" in parameters and parameters["type"] != "object":
                raise InvalidRequest(
                    f"Invalid schema for function '{name}': schema must be a JSON Schema of "
                    f"'type: \"object\"', got 'type: \"{_type_text(parameters['type'])}\"'.",
                    param=f"{prefix}tools[{i}].parameters",
                )
        elif tool.type == "mcp":
            label = tool.server_label  # type: ignore[union-attr]
            if not label:
                at = f"{prefix}tools[{i}]"
                raise InvalidRequest(
                    f"Invalid '{at}.server_label': server_label must be nonempty.", param=f"{at}.server_label"
                )
            if label in labels:
                raise InvalidRequest(f"duplicate mcp server_label: {label}", param=None)
            labels.add(label)
        else:
            if tool.type in seen:
                raise InvalidRequest(f"duplicate {tool.type} tool", param=None)
            seen.add(tool.type)


def check_text(text: Optional[wire.TextConfig], prefix: str) -> None:
    fmt = text.format if text else None
    if isinstance(fmt, wire.TextFormatJSONSchema):
        schema_problem = schema_error(fmt.schema_)
        if schema_problem:
            raise InvalidRequest(f"Invalid schema for '{prefix}text.format.schema': {schema_problem}",
                                 param=f"{prefix}text.format.schema")
    if isinstance(fmt, wire.TextFormatJSONSchema) and "type" in fmt.schema_ and fmt.schema_["type"] != "object":
        raise InvalidRequest(
            f'{prefix}text.format.schema must have top-level type "object"; got "{_type_text(fmt.schema_["type"])}"',
            param=f"{prefix}text.format.schema",
        )


def _check_config(config: wire._AgentConfig, tools: Optional[Sequence[wire.AnyTool]], prefix: str) -> None:
    if tools:
        check_tools(tools, prefix)
    check_text(config.text, prefix)


AGENT_NAME_MAX = 128


def _check_name(name: Optional[str]) -> None:
    if name is not None and len(name) > AGENT_NAME_MAX:
        raise InvalidRequest(f"Invalid 'name': string too long. Expected a string with maximum length {AGENT_NAME_MAX}, "
                             f"but got a string with length {len(name)} instead.", param="name")


def parse_agent_create(body: Any) -> wire.AgentCreate:
    request = validation.parse(wire.AgentCreate, body)
    _check_name(request.name)
    _check_config(request, request.tools, "")
    check_metadata(request.metadata)
    return request


def parse_agent_update(body: Any) -> wire.AgentUpdate:
    request = validation.parse(wire.AgentUpdate, body)
    if request.given("model") and request.model is None:
        raise InvalidRequest("Invalid type for 'model': expected a string, but got null instead.", param="model")
    _check_name(request.name)
    _check_config(request, request.tools, "")
    check_metadata(request.metadata)
    return request


def check_nonempty_input(value: Any, param: str) -> None:
    """An empty input cannot start a Turn (nor steer one): an empty string, an empty array of messages,
    a message with no content, or a message whose text parts are all empty and that has no image.
    An empty text part beside other content is kept as sent; text is never trimmed."""
    if isinstance(value, str):
        if not value:
            raise InvalidRequest(f"Invalid '{param}': empty string. Expected a string with minimum length 1, but "
                                 "got an empty string instead.", param=param)
        return
    if isinstance(value, list) and not value:
        raise InvalidRequest(
            f"Invalid '{param}': empty array. Expected an array with minimum length 1, but got an empty array "
            "instead.", param=param)
    for index, message in enumerate(value or []):
        content = getattr(message, "content", None)
        at = f"{param}[{index}].content"
        if isinstance(content, list) and not content:
            raise InvalidRequest(f"Invalid '{at}': empty array. Expected an array with minimum length 1, but got "
                                 "an empty array instead.", param=at)
        if isinstance(content, list) and not _carries(content):
            raise InvalidRequest(f"Invalid '{at}': a message needs an image or a non-empty text part.", param=at)


# What a JavaScript Harness treats as blank: Go's unicode.IsSpace and ECMAScript's trim, together.
_BLANK = frozenset("\t\n\v\f\r \u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000\ufeff"
                   + "".join(chr(c) for c in range(0x2000, 0x200B)))
WHITESPACE_ONLY_TEXT = ("This Session's harness does not accept a message whose text is only whitespace. Include "
                        "non-whitespace text or an image, or use a harness that supports whitespace-only text.")


def check_input(decl: Any, value: Any) -> None:
    """What the Harness (its HarnessDeclaration) can run of a message input: Session creation and
    events.create alike, before anything is written."""
    if value is not None and not decl.whitespace_only_text and whitespace_only(value):
        raise UnsupportedConfiguration(WHITESPACE_ONLY_TEXT, param=None)


def _carries(parts: Sequence[Any], blank: frozenset[str] = frozenset()) -> bool:
    """Whether message content has an image or a text with a character outside `blank` (by default:
    any character, so only empty text parts carry nothing)."""
    return any(isinstance(part, wire.InputImage)
               or (isinstance(part, wire.InputText) and any(ch not in blank for ch in part.text))
               for part in parts)


def whitespace_only(value: Any) -> bool:
    """Whether some message of an input has no image and no text but whitespace."""
    if isinstance(value, str):
        return all(ch in _BLANK for ch in value)
    return any(not _carries(getattr(message, "content", None) or [], _BLANK) for message in value or [])


def parse_session_create(body: Any) -> wire.SessionCreate:
    request = validation.parse(wire.SessionCreate, body)
    check_nonempty_input(request.input, "input")
    if request.stream_options is not None and request.stream is not True:
        raise InvalidRequest("Invalid 'stream_options': only allowed when 'stream' is true.", param="stream_options")
    if request.agent is not None:
        _check_config(request.agent, request.agent.tools, "agent.")
    check_metadata(request.metadata)
    return request


def parse_event_batch(body: Any) -> wire.EventBatch:
    batch = validation.parse(wire.EventBatch, body)
    for index, event in enumerate(batch.events):
        if isinstance(event, wire.MessageEvent):
            check_nonempty_input(event.input, f"events[{index}].input")
    return batch


def parse_session_update(body: Any) -> wire.SessionUpdate:
    request = validation.parse(wire.SessionUpdate, body)
    check_metadata(request.metadata)
    return request


# ---- saved Agent configuration ----------------------------------------------------------------

CONFIG_FIELDS = (
    "model",
    "instructions",
    "reasoning",
    "service_tier",
    "text",
    "tools",
    "compaction",
    "experimental",
    "multi_agent",
)


def config_as_sent(request: BaseModel, fields: Sequence[str] = CONFIG_FIELDS, raw: Any = None) -> dict[str, Any]:
    """The configuration members the caller sent, exactly (presence, nulls and numbers kept)."""
    if isinstance(raw, dict):  # the body as sent: taken verbatim
        return {k: raw[k] for k in fields if k in raw}
    dumped = request.model_dump(by_alias=True, exclude_unset=True, include=set(fields))
    return {k: v for k, v in dumped.items() if k in fields}


def merge_config(saved: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """An update's members replace the saved ones (null resets a member to its default)."""
    merged = dict(saved)
    merged.update(update)
    return merged


@lru_cache(maxsize=1)
def _inline_tools() -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[wire.InlineTool])  # built on first use, not at import (cold start)


def tools_from_config(raw: Optional[list[dict[str, Any]]]) -> list[wire.AnyTool]:
    if not raw:
        return []
    return list(_inline_tools().validate_python(raw))


# ---- resolved shapes --------------------------------------------------------------------------


def resolve_tool(tool: wire.AnyTool) -> dict[str, Any]:
    """One tool with every default the spec names applied (the persisted resource shape)."""
    if isinstance(tool, wire.FunctionTool):
        out: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
            "defer_loading": tool.defer_loading,
        }
        if "async_" in tool.__pydantic_fields_set__:
            out["async"] = tool.async_
        return out
    if isinstance(tool, wire.ToolSearchTool):
        return {"type": "tool_search"}
    if isinstance(tool, wire.ProgrammaticToolCallingTool):
        return {"type": "programmatic_tool_calling", "enabled": tool.enabled}
    if isinstance(tool, wire.AutomationsTool):
        return {"type": "automations"}
    if isinstance(tool, wire.WebSearchTool):
        location = None
        if tool.location is not None:
            loc = tool.location
            location = {"city": loc.city, "country": loc.country, "region": loc.region, "timezone": loc.timezone}
        return {
            "type": "web_search",
            "mode": tool.mode or "live",
            "context_size": tool.context_size or "medium",
            "allowed_domains": list(tool.allowed_domains) if tool.allowed_domains is not None else None,
            "location": location,
        }
    transport = tool.transport
    if isinstance(transport, wire.HttpTransport):
        resolved_transport: dict[str, Any] = {
            "type": "http",
            "server_url": transport.server_url,
            "headers": dict(transport.headers or {}),
        }
        # Omitted or null means `service` on every placement (the SDK's rule): it never selects the
        # workspace's network by itself, so on a workspace it is rejected like an explicit `service`.
        default_origin = "service"
    else:
        resolved_transport = {
            "type": "stdio",
            "command": transport.command,
            "cwd": transport.cwd,
            "args": list(transport.args or []),
            "env_vars": list(transport.env_vars or []),
        }
        default_origin = "environment"
    return {
        "type": "mcp",
        "server_label": tool.server_label,
        "transport": resolved_transport,
        "allowed_tools": list(tool.allowed_tools) if tool.allowed_tools is not None else None,
        "connection_origin": tool.connection_origin or default_origin,
        "credential_id": tool.credential_id,
        "request_metadata": dict(tool.request_metadata or {}),
        "required": tool.required,
    }


def resolve_tools(tools: Sequence[wire.AnyTool], raw: Optional[list[Any]] = None) -> list[dict[str, Any]]:
    """All tools resolved; a function validated from `raw` (the request as sent) is copied from it
    with only its one default added, which is what resolve_tool would build field by field."""
    if raw is None or len(raw) != len(tools):
        return [resolve_tool(t) for t in tools]
    function = wire.FunctionTool
    # A copy with the default appended when missing (what dict(sent).setdefault(...) gives, with
    # no method call per function).
    return [
        (sent.copy() if "defer_loading" in sent else sent | _FUNCTION_DEFAULTS)
        if type(tool) is function and isinstance(sent, dict)
        else resolve_tool(tool)
        for tool, sent in zip(tools, raw, strict=True)
    ]


_FUNCTION_DEFAULTS = {"defer_loading": False}


def resolve_text(raw: Any) -> dict[str, Any]:
    raw = raw or {}
    fmt = raw.get("format") or {"type": "text"}
    if fmt.get("type") == "json_schema":
        fmt = {"type": "json_schema", "schema": fmt["schema"]}
    else:
        fmt = {"type": "text"}
    return {"format": fmt, "verbosity": raw.get("verbosity") or "medium"}


DEFAULT_MAX_CONCURRENT_SUBAGENTS = 6


def _multi_agent(config: dict[str, Any]) -> dict[str, Any]:
    """The SDK's rule: max_concurrent_subagents is null when disabled and defaults to 6 when enabled."""
    enabled = bool(config.get("enabled", False))
    limit = config.get("max_concurrent_subagents")
    if not enabled:
        return {"enabled": False, "max_concurrent_subagents": None}
    return {"enabled": True, "max_concurrent_subagents": DEFAULT_MAX_CONCURRENT_SUBAGENTS if limit is None else limit}


def resolve_agent_config(config: dict[str, Any]) -> dict[str, Any]:
    """Saved or merged configuration -> the resolved Agent configuration (resource members)."""
    reasoning = config.get("reasoning") or {}
    multi_agent = config.get("multi_agent") or {}
    compaction = config.get("compaction") or {}
    experimental = config.get("experimental") or {}
    return {
        "model": config.get("model"),
        "instructions": config.get("instructions"),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "service_tier": config.get("service_tier") or "auto",
        "text": resolve_text(config.get("text")),
        "tools": [resolve_tool(t) for t in tools_from_config(config.get("tools"))],
        "multi_agent": _multi_agent(multi_agent),
        "compaction": {"async": bool(compaction.get("async") or False)},
        "experimental": {"time_awareness": bool(experimental.get("time_awareness", False))},
    }


class Snapshot(BaseModel):
    """The immutable, resolved Session configuration. Definitions stay fixed for its lifetime."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent_id: str
    agent_name: Optional[str] = None
    agent: dict[str, Any]
    environment: dict[str, Any]
    harness: str
    impersonate: Optional[str] = None
    # Attached Vaults, and the frozen credential binding (credential id -> its Vault): never re-chosen.
    vault_ids: list[str] = []
    credentials: dict[str, str] = {}

    @property
    def placement(self) -> str:
        return "none" if self.environment["type"] == "none" else "workspace"

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.agent["tools"]

    @property
    def functions(self) -> list[dict[str, Any]]:
        return [t for t in self.tools if t["type"] == "function"]

    @property
    def output_schema(self) -> Optional[dict[str, Any]]:
        fmt = self.agent["text"]["format"]
        return fmt["schema"] if fmt["type"] == "json_schema" else None

    def to_json(self) -> str:
        return jsonutil.dumps(self.model_dump())

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        return cls.model_validate(jsonutil.loads(text))


def resolve_environment(env: wire.EnvironmentNone | wire.EnvironmentSelfHosted | wire.EnvironmentOpenAIHosted) -> dict[str, Any]:
    if isinstance(env, wire.EnvironmentNone):
        return {"type": "none"}
    if isinstance(env, wire.EnvironmentSelfHosted):
        return {
            "type": "self_hosted",
            "workspace_directory": env.workspace_directory,
            "capability_directories": list(env.capability_directories or []),
        }
    from . import hosted  # the hosted configuration's own rules and views

    return hosted.public(env)
