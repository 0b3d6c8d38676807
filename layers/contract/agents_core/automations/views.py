"""Stored automation and invocation items -> the SDK's `agent.automation` and
`agent.automation.invocation` resources.

"`target` in responses omits confidential setup commands and env values": a `new_session` target's
environment is rendered from a list of what may be shown (never `env`, `setup_commands` or inline file
contents), and its inline agent is the configuration as admitted (tools without credentials).
"""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import jsonutil, resources
from agents_contract.parser import Snapshot

_HOSTED_SHOWN = ("capability_directories", "container_size", "desktop", "environment_id", "environment_template_id",
                 "network", "packages")


def _hosted_file(entry: dict[str, Any]) -> dict[str, Any]:
    if entry.get("type") == "file_id":
        return {"type": "file_id", "file_id": entry.get("file_id"), "path": entry.get("path")}
    data = entry.get("data") or entry.get("content") or ""
    return {"type": "inline", "path": entry.get("path"), "size_bytes": len(str(data).encode())}


def environment_view(environment: dict[str, Any]) -> dict[str, Any]:
    kind = environment.get("type")
    if kind == "self_hosted":
        return {"type": "self_hosted", "workspace_directory": environment.get("workspace_directory"),
                "capability_directories": list(environment.get("capability_directories") or []),
                "environment_id": environment.get("environment_id")}
    if kind == "openai_hosted":
        view: dict[str, Any] = {"type": "openai_hosted", **{k: environment.get(k) for k in _HOSTED_SHOWN}}
        view["files"] = [_hosted_file(f) for f in environment["files"]] if environment.get("files") else None
        view["plugins"] = None
        view["skills"] = None
        return view
    return {"type": "none"}


def new_session_target_view(target: dict[str, Any], snapshot: Optional[Snapshot]) -> dict[str, Any]:
    agent = None
    if snapshot is not None and not target.get("agent_id"):
        agent = {k: v for k, v in resources.session_agent(snapshot).items() if k not in ("id", "name")}
    return {
        "type": "new_session",
        "agent": agent,
        "agent_id": target.get("agent_id"),
        "environment": environment_view(target.get("environment") or {}),
        "input": [{"type": "message", "role": "user", "content": m.get("content")} for m in target.get("input") or []],
        "metadata": dict(target.get("metadata") or {}),
        "vault_ids": list(target.get("vault_ids") or []),
    }


def automation_resource(item: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": item["id"],
        "object": "agent.automation",
        "type": item["type"],
        "name": item["name"],
        "metadata": dict(item.get("metadata") or {}),
        "target": jsonutil.loads(item["target_view"]),
        "created_at": int(item["created_at"]),
        "created_by": jsonutil.loads(item["created_by"]),
        "status": item["status"],
        "pause_reason": item.get("pause_reason"),
    }
    if item["type"] == "periodic":
        out |= {"expression": item["expression"], "timezone": item["timezone"]}
    else:
        out["run_at"] = int(item["run_at"])
    return out


def invocation_resource(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item["id"],
        "object": "agent.automation.invocation",
        "automation_id": item["automation_id"],
        "created_at": int(item["created_at"]),
        "source": jsonutil.loads(item["source"]),
        "scheduled_at": int(item["scheduled_at"]) if item.get("scheduled_at") is not None else None,
        "session_id": item.get("session_id"),
        "status": item["status"],
        "skip_reason": item.get("skip_reason"),
        "error": jsonutil.loads(item["error"]) if item.get("error") else None,
    }
