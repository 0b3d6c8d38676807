"""Native Harness adapters: pure translation of the frozen Session configuration (and the Turn's
ExecutionControls) into each native Harness's configuration. No network, no processes."""

from __future__ import annotations

from typing import Any


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
    if "type" in document and document.get("type") == "turn.start":
        return document
    return {"type": "turn.start", "agent": document["agent"], "environment": document["environment"],
            "harness": document.get("harness"), "impersonate": document.get("impersonate")}
