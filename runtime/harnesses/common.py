"""Native Harness adapters: pure translation of the frozen Session configuration (and the Turn's
ExecutionControls) into each native Harness's configuration. No network, no processes."""

from __future__ import annotations

from typing import Any

from agents_contract.protocol import TURN_START


class AdapterError(Exception):
    """The native configuration cannot honour the frozen configuration: the start fails."""


def tools_of(start: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [t for t in start["agent"]["tools"] if t["type"] == kind]


def one(start: dict[str, Any], kind: str) -> dict[str, Any] | None:
    found = tools_of(start, kind)
    return found[0] if found else None


def placement(start: dict[str, Any]) -> str:
    return "none" if start["environment"]["type"] == "none" else "workspace"


def output_schema(start: dict[str, Any]) -> dict[str, Any] | None:
    fmt = start["agent"]["text"]["format"]
    return fmt["schema"] if fmt["type"] == "json_schema" else None


def as_start(document: dict[str, Any]) -> dict[str, Any]:
    """Accept a turn.start message or a Session snapshot (`Snapshot.to_json()`)."""
    if "type" in document and document.get("type") == TURN_START:
        return document
    return {"type": TURN_START, "agent": document["agent"], "environment": document["environment"],
            "harness": document.get("harness"), "impersonate": document.get("impersonate")}


def bearer_variables(start: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """A turn.start's Vault bearers (`mcp_credentials`) as environment variables for the native process:
    (server label -> variable name, variable name -> token). The token lives only in the native process's
    environment, never in argv, a configuration file or a log; the variable names carry no secret."""
    credentials = start.get("mcp_credentials") or {}
    names: dict[str, str] = {}
    values: dict[str, str] = {}
    for index, label in enumerate(sorted(credentials)):
        entry = credentials[label]
        if not isinstance(entry, dict) or entry.get("type") != "bearer" or not isinstance(entry.get("token"), str):
            raise AdapterError(f"MCP server '{label}' has a credential this Runtime cannot use.")
        name = f"AGENTS_MCP_BEARER_{index}"
        names[label], values[name] = name, entry["token"]
    return names, values
