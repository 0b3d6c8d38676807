"""Harness declarations (`internal/harnessconfig`): what each Harness supports, as data.

The matrix is the contract notes' "Harness declarations" table. Admission (`admission.py`) reads
these declarations; it never branches on a Harness name.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

ALL_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh", "max"})
ALL_SUMMARIES = frozenset({"concise", "detailed", "auto"})
ALL_TIERS = frozenset({"auto", "default", "flex", "priority", "fast", "ultrafast"})
ALL_VERBOSITIES = frozenset({"low", "medium", "high"})

StdioRule = Literal["absolute_cwd", "workspace_cwd", "rejected"]
LabelRule = Literal["reserved_native", "claude_ascii", "functions_reserved", "any"]
SchemaNumbers = Literal["lossless", "binary64_exact"]
SearchSettings = Literal["all", "medium_only"]


@dataclass(frozen=True)
class HarnessDeclaration:
    name: str
    function_tools: bool = True
    function_parameters_object_root: bool = False  # Claude: parameters root must be type: object
    function_result_images: bool = True
    function_result_images_success_only: bool = False  # Claude: successful results only
    function_result_image_types: frozenset[str] | None = None  # None: any; Claude: PNG/JPEG data
    structured_output: bool = True
    output_schema_numbers: SchemaNumbers = "lossless"
    output_schema_object_root: bool = False  # Claude: explicit type "object" at the root
    tool_search: bool = False
    web_search_modes: frozenset[str] = frozenset({"disabled", "cached", "live"})
    web_search_settings: SearchSettings = "all"
    programmatic_tool_calling: frozenset[bool] = frozenset({True, False})
    mcp_service_origin: bool = True  # HTTP MCP with origin service, on environment none only
    mcp_environment_origin: bool = True  # HTTP MCP with origin environment, on workspace placements
    mcp_environment_restricted: bool = False  # MiniMax: allowed_tools null and required false only
    stdio: StdioRule = "absolute_cwd"
    stdio_allowed_tools_null: bool = False  # Claude hides unselected tools only on HTTP servers
    required_mcp: bool = True
    label_rule: LabelRule = "any"
    reserved_labels: frozenset[str] = frozenset()
    rejects_placeholders: bool = False  # Claude rejects ${ in server_url and header values
    reasoning_efforts: frozenset[str] = ALL_EFFORTS
    reasoning_summaries: frozenset[str] = ALL_SUMMARIES
    service_tiers: frozenset[str] = ALL_TIERS
    verbosities: frozenset[str] = ALL_VERBOSITIES
    whitespace_only_text: bool = True  # Claude Code and MiniMax Code cannot run a message that is only whitespace
    # The `automations` tool, which Core serves as a function the Harness calls (agents_core.automations.tool):
    # turn.start carries it as a function tool, which every driver offers its model as any declared function
    # (Codex dynamic tools, Claude Code's and MiniMax Code's functions MCP server, the scripted harness's calls).
    automations_tool: bool = True


# What each Harness really passes to its engine ("Reasoning efforts, summaries, service tiers and verbosities are
# checked against each Harness's declaration"): nothing outside a declaration is dropped silently at execution.
# Codex takes every value (its app-server's turn/start passes effort, summary and serviceTier as the model
# advertises them, and model_verbosity low/medium/high). The Claude Agent SDK (0.2.189) has an `effort` of
# low, medium, high, xhigh and max only, and no reasoning summary, service tier or verbosity setting: Claude
# Code accepts what it runs natively, the pinned defaults (service tier auto, verbosity medium), and no summary.
CLAUDE_CODE_EFFORTS = frozenset({"low", "medium", "high", "xhigh", "max"})

# Codex's own MCP server names: a declared server cannot take them.
CODEX_RESERVED_LABELS = frozenset({"codex", "codex_apps"})

CODEX = HarnessDeclaration(
    name="codex",
    label_rule="reserved_native",
    reserved_labels=CODEX_RESERVED_LABELS,
)

CLAUDE_CODE = HarnessDeclaration(
    name="claude_code",
    whitespace_only_text=False,
    function_parameters_object_root=True,
    function_result_images_success_only=True,
    function_result_image_types=frozenset({"image/png", "image/jpeg"}),
    output_schema_numbers="binary64_exact",
    output_schema_object_root=True,
    tool_search=True,
    web_search_modes=frozenset({"disabled", "live"}),
    web_search_settings="medium_only",
    programmatic_tool_calling=frozenset({False}),
    stdio="workspace_cwd",
    stdio_allowed_tools_null=True,
    label_rule="claude_ascii",
    rejects_placeholders=True,
    reasoning_efforts=CLAUDE_CODE_EFFORTS,
    reasoning_summaries=frozenset(),
    service_tiers=frozenset({"auto"}),
    verbosities=frozenset({"medium"}),
)

MINIMAX_CODE = HarnessDeclaration(
    name="minimax_code",
    whitespace_only_text=False,
    function_result_images=False,
    structured_output=False,
    web_search_modes=frozenset({"disabled"}),
    web_search_settings="medium_only",
    programmatic_tool_calling=frozenset({False}),
    mcp_service_origin=False,
    mcp_environment_restricted=True,
    stdio="rejected",
    required_mcp=False,
    label_rule="functions_reserved",
)

# The reference harness accepts everything the other three accept.
SCRIPTED = HarnessDeclaration(name="scripted", tool_search=True)

NATIVE = {d.name: d for d in (CODEX, CLAUDE_CODE, MINIMAX_CODE)}
DECLARATIONS = {**NATIVE, "scripted": SCRIPTED}
HARNESS_NAMES = tuple(DECLARATIONS)


def declaration(harness: str, impersonate: str | None = None) -> HarnessDeclaration:
    """The declaration admission checks against; `scripted` may impersonate a native Harness."""
    if harness == "scripted" and impersonate:
        return replace(NATIVE[impersonate], name="scripted")
    return DECLARATIONS[harness]
