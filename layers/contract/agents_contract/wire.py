"""Wire models for requests, mirroring the official SDK's param types (openai==3.57.0).

Every model is strict and forbids unknown members, so pydantic's own errors map one to one onto the
official protocol messages (see `validation.py`). Field presence is kept by pydantic's
`model_fields_set`: omitted, null and given stay distinguishable.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional, Union
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

ServiceTier = Literal["auto", "default", "flex", "priority", "fast", "ultrafast"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
Summary = Literal["concise", "detailed", "auto"]
Verbosity = Literal["low", "medium", "high"]
WebSearchMode = Literal["disabled", "cached", "live"]
ContextSize = Literal["low", "medium", "high"]
ConnectionOrigin = Literal["service", "environment"]

# Tag orders as the official messages list them.
TOOL_TYPES = ("function", "tool_search", "programmatic_tool_calling", "mcp", "web_search")
TRANSPORT_TYPES = ("http", "stdio")
TEXT_FORMAT_TYPES = ("text", "json_schema")
ENVIRONMENT_TYPES = ("none", "openai_hosted", "self_hosted")
INPUT_EVENT_TYPES = (
    "agent.session.input.message",
    "agent.session.input.cancel",
    "agent.session.input.tool_result",
    "agent.session.input.mcp_approval_request_result",
    "agent.session.input.computer_use_approval_request_result",
)
CONTENT_TYPES = ("input_text", "input_image")
JSONObject = dict[str, Any]


class Wire(BaseModel):
    # defer_build: each handler pays, on first use, only for the models it validates (cold start).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, arbitrary_types_allowed=True, defer_build=True)

    def given(self, name: str) -> bool:
        """Whether the caller sent this member (null included)."""
        return name in self.model_fields_set


# ---- tools -------------------------------------------------------------------------------------


class FunctionTool(Wire):
    type: Literal["function"]
    name: str
    description: str
    parameters: JSONObject
    defer_loading: bool = False
    async_: bool = Field(default=False, alias="async")


class ToolSearchTool(Wire):
    type: Literal["tool_search"]


class ProgrammaticToolCallingTool(Wire):
    type: Literal["programmatic_tool_calling"]
    enabled: bool = True


class WebSearchLocation(Wire):
    city: Optional[str] = None
    country: Optional[str] = None
    region: Optional[str] = None
    timezone: Optional[str] = None


class AutomationsTool(Wire):
    """`{"type": "automations"}`: the agent manages its own scheduled wake-ups (Core serves it:
    agents_core.automations.tool)."""

    type: Literal["automations"]


class WebSearchTool(Wire):
    type: Literal["web_search"]
    mode: Optional[WebSearchMode] = None
    context_size: Optional[ContextSize] = None
    allowed_domains: Optional[list[str]] = None
    location: Optional[WebSearchLocation] = None


class HttpTransport(Wire):
    type: Literal["http"]
    server_url: str
    headers: Optional[dict[str, str]] = None


class StdioTransport(Wire):
    type: Literal["stdio"]
    command: str
    cwd: str
    args: Optional[list[str]] = None
    env_vars: Optional[list[str]] = None


class InlineHttpTransport(HttpTransport):
    """Session inline form: the SDK also sends `authorization` (rejected at admission)."""

    authorization: Optional[str] = None


class InlineStdioTransport(StdioTransport):
    """Session inline form: the SDK also sends `env` (rejected at admission when nonempty)."""

    env: Optional[dict[str, str]] = None


SavedTransport = Annotated[Union[HttpTransport, StdioTransport], Field(discriminator="type")]
InlineTransport = Annotated[Union[InlineHttpTransport, InlineStdioTransport], Field(discriminator="type")]


class _McpBase(Wire):
    type: Literal["mcp"]
    server_label: str
    allowed_tools: Optional[list[str]] = None
    connection_origin: Optional[ConnectionOrigin] = None
    credential_id: Optional[str] = None
    request_metadata: Optional[JSONObject] = None
    required: bool = False


class McpTool(_McpBase):
    transport: SavedTransport


class InlineMcpTool(_McpBase):
    transport: InlineTransport


SavedTool = Annotated[
    Union[FunctionTool, ToolSearchTool, ProgrammaticToolCallingTool, McpTool, WebSearchTool, AutomationsTool],
    Field(discriminator="type"),
]
InlineTool = Annotated[
    Union[FunctionTool, ToolSearchTool, ProgrammaticToolCallingTool, InlineMcpTool, WebSearchTool, AutomationsTool],
    Field(discriminator="type"),
]
AnyTool = Union[FunctionTool, ToolSearchTool, ProgrammaticToolCallingTool, McpTool, InlineMcpTool, WebSearchTool,
                AutomationsTool]

# ---- agent configuration -----------------------------------------------------------------------


class TextFormatText(Wire):
    type: Literal["text"]


class TextFormatJSONSchema(Wire):
    """The Agents API form: no name, strict or other Responses API wrapper fields."""

    type: Literal["json_schema"]
    schema_: JSONObject = Field(alias="schema")


TextFormat = Annotated[Union[TextFormatText, TextFormatJSONSchema], Field(discriminator="type")]


class TextConfig(Wire):
    format: Optional[TextFormat] = None
    verbosity: Optional[Verbosity] = None


class Reasoning(Wire):
    effort: Optional[Effort] = None
    summary: Optional[Summary] = None


class MultiAgent(Wire):
    enabled: bool
    max_concurrent_subagents: int = Field(default=None, ge=1)  # type: ignore[assignment]


class Compaction(Wire):
    async_: Optional[bool] = Field(default=None, alias="async")


class Experimental(Wire):
    time_awareness: bool = False


class Extension(Wire):
    """`x_agents_core`: this project's request extension (sent through the SDK's `extra_body`)."""

    harness: Optional[Literal["codex", "claude_code", "minimax_code", "scripted"]] = None
    impersonate: Optional[Literal["codex", "claude_code", "minimax_code"]] = None


Metadata = Optional[dict[str, str]]


class _AgentConfig(Wire):
    instructions: Optional[str] = None
    reasoning: Optional[Reasoning] = None
    service_tier: Optional[ServiceTier] = None
    text: Optional[TextConfig] = None
    compaction: Optional[Compaction] = None
    experimental: Optional[Experimental] = None
    multi_agent: Optional[MultiAgent] = None


class AgentCreate(_AgentConfig):
    model: str
    name: Optional[str] = None
    metadata: Metadata = None
    tools: Optional[list[SavedTool]] = None
    x_agents_core: Optional[Extension] = None


class AgentUpdate(_AgentConfig):
    model: Optional[str] = None
    name: Optional[str] = None
    metadata: Metadata = None
    tools: Optional[list[SavedTool]] = None


class InlineAgent(_AgentConfig):
    """Session create `agent`: inline overrides of the saved Agent (or a whole inline Agent)."""

    model: Optional[str] = None
    tools: Optional[list[InlineTool]] = None


# ---- sessions ----------------------------------------------------------------------------------


class InputText(Wire):
    type: Literal["input_text"]
    text: str


_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")


def image_url_error(url: str) -> Optional[str]:
    """Why an `image_url` can never be an image: it must be an absolute http(s) URL, or a data URL
    of an image media type with base64 data (a Harness or provider would only fail the Turn later)."""
    if url.startswith("data:"):
        header, comma, data = url[5:].partition(",")
        media, _, encoding = header.partition(";")
        if not comma or encoding.lower() != "base64" or not media.lower().startswith("image/"):
            return "expected a base64 data URL of an image (data:image/<type>;base64,...)"
        data = re.sub(r"[\s]", "", data)
        if not data or len(data.rstrip("=")) % 4 == 1 or not _BASE64.fullmatch(data):
            return "the data URL's base64 data is not valid"
        return None
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return "expected an absolute http or https URL, or a base64 data URL"
    return None


class InputImage(Wire):
    type: Literal["input_image"]
    image_url: str

    @field_validator("image_url")
    @classmethod
    def _an_image(cls, value: str) -> str:
        problem = image_url_error(value)
        if problem is not None:
            raise ValueError(problem)
        return value


InputContent = Annotated[Union[InputText, InputImage], Field(discriminator="type")]


def string_or_array(value: Any) -> str | None:
    """Tag of a `str | list[...]` member; anything else is a type error naming both."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return None


def _string_or(item: Any) -> Any:
    return Annotated[
        Union[Annotated[str, Tag("string")], Annotated[list[item], Tag("array")]],  # type: ignore[valid-type]
        Discriminator(string_or_array),
    ]


class InputMessage(Wire):
    role: Literal["user"]
    content: list[InputContent]
    type: Literal["message"] = "message"


class EnvironmentNone(Wire):
    type: Literal["none"]


class EnvironmentSelfHosted(Wire):
    type: Literal["self_hosted"]
    workspace_directory: str
    capability_directories: Optional[list[str]] = None


class HostedNetwork(Wire):
    access: Literal["enabled", "disabled", "restricted"]
    allowed_domains: Optional[list[str]] = None
    blocked_domains: Optional[list[str]] = None


class HostedPackages(Wire):
    npm: Optional[list[str]] = None
    python: Optional[list[str]] = None
    system: Optional[list[str]] = None


class HostedDesktop(Wire):
    enabled: bool


class EnvironmentOpenAIHosted(Wire):
    type: Literal["openai_hosted"]
    capability_directories: Optional[list[str]] = None
    container_size: Optional[Literal["small", "medium", "large"]] = None
    desktop: Optional[HostedDesktop] = None
    env: Optional[dict[str, str]] = None
    environment_id: Optional[str] = None
    environment_template_id: Optional[str] = None
    files: Optional[list[JSONObject]] = None
    network: Optional[HostedNetwork] = None
    packages: Optional[HostedPackages] = None
    plugins: Optional[list[JSONObject]] = None
    setup_commands: Optional[list[JSONObject]] = None
    skills: Optional[list[JSONObject]] = None


Environment = Annotated[
    Union[EnvironmentNone, EnvironmentOpenAIHosted, EnvironmentSelfHosted], Field(discriminator="type")
]


class HostedEnvironmentCreate(Wire):
    """`environments.create`'s `environment` (no environment_id, no container_size there)."""

    type: Literal["openai_hosted"]
    capability_directories: Optional[list[str]] = None
    desktop: Optional[HostedDesktop] = None
    env: Optional[dict[str, str]] = None
    environment_template_id: str = None  # type: ignore[assignment]  # may be omitted, never null
    files: Optional[list[JSONObject]] = None
    network: Optional[HostedNetwork] = None
    packages: Optional[HostedPackages] = None
    plugins: Optional[list[JSONObject]] = None
    setup_commands: Optional[list[JSONObject]] = None
    skills: Optional[list[JSONObject]] = None


class EnvironmentCreate(Wire):
    environment: HostedEnvironmentCreate
    vault_ids: Optional[list[str]] = None


class PromptCacheOptions(Wire):
    ttl: Literal["30m", "12h"]


class StreamOptions(Wire):
    include_obfuscation: bool = False


class SessionCreate(Wire):
    environment: Environment
    agent: Optional[InlineAgent] = None
    agent_id: str = None  # type: ignore[assignment]  # may be omitted, never null
    input: Optional[_string_or(InputMessage)] = None
    metadata: Metadata = None
    prompt_cache_options: Optional[PromptCacheOptions] = None
    review: Literal["none", "auto_review"] = "none"
    stream: bool = False
    stream_options: Optional[StreamOptions] = None
    vault_ids: Optional[list[str]] = None
    x_agents_core: Optional[Extension] = None


class SessionUpdateAgent(Wire):
    model: Optional[str] = None
    reasoning: Optional[JSONObject] = None
    service_tier: Optional[ServiceTier] = None
    tools: Optional[list[JSONObject]] = None


class SessionUpdate(Wire):
    agent: Optional[SessionUpdateAgent] = None
    metadata: Metadata = None
    prompt_cache_options: Optional[PromptCacheOptions] = None
    review: Optional[Literal["none", "auto_review"]] = None


# ---- session input events ----------------------------------------------------------------------


class MessageEvent(Wire):
    type: Literal["agent.session.input.message"]
    input: list[InputMessage]


class CancelEvent(Wire):
    type: Literal["agent.session.input.cancel"]


class ToolResultEvent(Wire):
    type: Literal["agent.session.input.tool_result"]
    turn_id: str
    call_id: str
    success: bool
    error: Optional[str] = None
    output: Optional[_string_or(InputContent)] = None


class ApprovalResultEvent(Wire):
    """Accepted in shape so it can be answered with a clear 'not supported yet'."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)
    type: Literal["agent.session.input.mcp_approval_request_result", "agent.session.input.computer_use_approval_request_result"]


InputEvent = Annotated[
    Union[MessageEvent, CancelEvent, ToolResultEvent, ApprovalResultEvent], Field(discriminator="type")
]


class EventBatch(Wire):
    events: list[InputEvent]  # an empty batch is accepted and changes nothing



# ---- vaults and credentials (`client.beta.agents.vaults`, `.vaults.credentials`) -----------------

VaultStatus = Literal["active", "archived"]
CREDENTIAL_AUTH_TYPES = ("mcp_oauth", "static_bearer", "environment_variable")
TOKEN_ENDPOINT_AUTH_TYPES = ("none", "client_secret_basic", "client_secret_post")


class VaultCreate(Wire):
    name: str = None  # type: ignore[assignment]  # may be omitted, never null
    metadata: Metadata = None


class VaultUpdate(Wire):
    name: Optional[str] = None
    metadata: dict[str, str] = None  # type: ignore[assignment]  # may be omitted, never null


class TokenEndpointAuthNone(Wire):
    type: Literal["none"]


class TokenEndpointAuthBasic(Wire):
    type: Literal["client_secret_basic"]
    client_secret: str


class TokenEndpointAuthPost(Wire):
    type: Literal["client_secret_post"]
    client_secret: str


TokenEndpointAuthCreate = Annotated[
    Union[TokenEndpointAuthNone, TokenEndpointAuthBasic, TokenEndpointAuthPost], Field(discriminator="type")
]


class OAuthRefreshCreate(Wire):
    client_id: str
    refresh_token: str
    token_endpoint: str
    token_endpoint_auth: TokenEndpointAuthCreate
    resource: Optional[str] = None
    scope: Optional[str] = None


class StaticBearerCreate(Wire):
    type: Literal["static_bearer"]
    token: str
    mcp_server_url: str


class McpOAuthCreate(Wire):
    type: Literal["mcp_oauth"]
    access_token: str
    mcp_server_url: str
    expires_at: Optional[str] = None
    refresh: Optional[OAuthRefreshCreate] = None


class CredentialCreate(Wire):
    auth: Annotated[Union[McpOAuthCreate, StaticBearerCreate], Field(discriminator="type")]
    name: str
    metadata: dict[str, str] = None  # type: ignore[assignment]  # may be omitted, never null


class TokenEndpointAuthRotate(Wire):
    type: Literal["client_secret_basic", "client_secret_post"]
    client_secret: Optional[str] = None


class OAuthRefreshRotate(Wire):
    refresh_token: Optional[str] = None
    scope: Optional[str] = None
    token_endpoint_auth: Optional[TokenEndpointAuthRotate] = None


class StaticBearerRotate(Wire):
    type: Literal["static_bearer"]
    token: str


class McpOAuthRotate(Wire):
    type: Literal["mcp_oauth"]
    access_token: Optional[str] = None
    expires_at: Optional[str] = None
    refresh: Optional[OAuthRefreshRotate] = None


class CredentialUpdate(Wire):
    auth: Annotated[Union[McpOAuthRotate, StaticBearerRotate], Field(discriminator="type")] = None  # type: ignore[assignment]
    metadata: dict[str, str] = None  # type: ignore[assignment]  # may be omitted, never null
