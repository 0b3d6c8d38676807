"""Public resources and events, built from stored state in the official SDK shapes.

The Session resource projects the frozen configuration: the pinned Session tool union has no
tool_search and no HTTP MCP headers, so both are left out here while the snapshot keeps them.
"""

from __future__ import annotations

from typing import Any, Optional

from .parser import Snapshot, resolve_agent_config

FAILED_TURN_ERROR = {"code": "internal_error", "message": "The execution could not complete."}


def agent_resource(record: dict[str, Any]) -> dict[str, Any]:
    """record: id, created_at, updated_at, name, metadata, config (as sent), harness."""
    resolved = resolve_agent_config(record["config"])
    out = {
        "id": record["id"],
        "object": "agent",
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "name": record.get("name"),
        "metadata": record.get("metadata") or {},
        **resolved,
    }
    if record.get("harness"):
        out["x_agents_core"] = {"harness": record["harness"]}
    return out


def _session_tool(tool: dict[str, Any]) -> Optional[dict[str, Any]]:
    if tool["type"] == "tool_search":
        return None
    if tool["type"] == "mcp" and tool["transport"]["type"] == "http":
        return {**tool, "transport": {"type": "http", "server_url": tool["transport"]["server_url"]}}
    return tool


def environment_resource(environment: dict[str, Any], environment_id: str, remote_url: str = "") -> dict[str, Any]:
    kind = environment["type"]
    if kind == "none":
        return {"type": "none"}
    if kind == "self_hosted":
        return {
            "id": environment_id,
            "type": "self_hosted",
            "workspace_directory": environment["workspace_directory"],
            "capability_directories": environment["capability_directories"],
            # What a machine connects to for this Environment (with an enrollment): the WebSocket API.
            "remote_url": remote_url,
        }
    return {
        "id": environment_id,
        "type": "openai_hosted",
        "capability_directories": environment["capability_directories"],
        "container_size": environment.get("container_size"),
        "desktop": environment.get("desktop"),
        "files": list(environment.get("files") or []),  # {id, path, size_bytes, type}: never the data
        "network": environment["network"],
        "packages": environment["packages"],
        "plugins": [],
        "skills": [],
    }


def session_agent(snapshot: Snapshot) -> dict[str, Any]:
    agent = snapshot.agent
    tools = [t for t in (_session_tool(t) for t in agent["tools"]) if t is not None]
    return {
        "id": snapshot.agent_id,
        "name": snapshot.agent_name,
        "instructions": agent["instructions"],
        "model": agent["model"],
        "multi_agent": agent["multi_agent"],
        "reasoning": agent["reasoning"],
        "service_tier": agent["service_tier"],
        "text": agent["text"],
        "tools": tools,
        "compaction": agent["compaction"],
        "experimental": agent["experimental"],
    }


def session_resource(session: dict[str, Any], snapshot: Snapshot) -> dict[str, Any]:
    """session: id, created_at, last_active_at, metadata, status, required_actions, review,
    prompt_cache_options (the stored Session item, decoded)."""
    return {
        "id": session["id"],
        "object": "agent.session",
        "agent": session_agent(snapshot),
        "created_at": session["created_at"],
        "last_active_at": session["last_active_at"],
        "environment": environment_resource(snapshot.environment, snapshot.environment.get("id")  # a named one
                                            or "env_" + session["id"].removeprefix("sess_"),
                                            session.get("remote_url") or ""),
        # A failed Session is one whose latest Turn failed: it says so (a new Turn clears it).
        "error": (session.get("error") or FAILED_TURN_ERROR["message"]) if session["status"] == "failed" else None,
        "metadata": session.get("metadata") or {},
        "required_actions": session.get("required_actions") or [],
        "status": session["status"],
        "usage": None,
        "vault_ids": list(snapshot.vault_ids),
        "prompt_cache_options": session.get("prompt_cache_options"),
        "review": session.get("review"),
        "x_agents_core": {"harness": snapshot.harness},
    }


def turn_resource(turn: dict[str, Any]) -> dict[str, Any]:
    status = turn["status"]
    return {
        "id": turn["id"],
        "object": "agent.session.turn",
        "agent_id": turn["agent_id"],
        "session_id": turn["session_id"],
        "created_at": turn["created_at"],
        "started_at": turn.get("started_at"),
        "completed_at": turn.get("completed_at"),
        "status": status,
        # A Turn that could not run in its Environment says why (`sandbox_error`); others the generic error.
        "error": (turn.get("error") or FAILED_TURN_ERROR) if status == "failed" else None,
        "subagent_id": turn.get("subagent_id"),
        "usage": None,
        # This project's extension: the engine that ran the Turn (set when a Runtime claims it) and,
        # for a failed Turn, what the Harness reported (the public error stays the contract's).
        "x_agents_core": {"engine": None, "error": None, **(turn.get("x_agents_core") or {})},
    }


def subagent_resource(subagent: dict[str, Any]) -> dict[str, Any]:
    """A Subagent as stored (its Runtime identity left out): `instructions` is the initial task as
    output_text content, or null when the Harness did not report it."""
    instructions = subagent.get("instructions")
    return {
        "id": subagent["id"],
        "object": "agent.session.subagent",
        "session_id": subagent["session_id"],
        "parent_agent_id": subagent["parent_agent_id"],
        "name": subagent.get("name"),
        "instructions": [{"type": "output_text", "text": instructions}] if isinstance(instructions, str) else None,
        "status": subagent["status"],
        "opened_at": subagent["opened_at"],
        "closed_at": subagent.get("closed_at"),
    }


def user_message_item(item_id: str, turn_id: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "message",
        "role": "user",
        "status": "completed",
        "phase": None,  # message Items always carry it; a user message has none
        "turn_id": turn_id,
        "content": content,
    }


def input_messages(value: Any) -> list[dict[str, Any]]:
    """Session input (a string or input messages) -> message contents, one list per message."""
    if isinstance(value, str):
        return [[{"type": "input_text", "text": value}]]  # type: ignore[list-item]
    return [[part.model_dump() for part in message.content] for message in value]  # type: ignore[misc]


def function_call_output_item(item_id: str, turn_id: str, call_id: str, result: dict[str, Any]) -> dict[str, Any]:
    """Public result Items always carry output and error, null when not submitted."""
    return {
        "id": item_id,
        "type": "function_call_output",
        "call_id": call_id,
        "turn_id": turn_id,
        "status": "completed" if result.get("success") else "failed",
        "output": result.get("output"),
        "error": result.get("error"),
    }


def function_call_action(call_id: str, name: str, arguments: Any, turn_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments, "turn_id": turn_id}


# ---- agent.session.* events ---------------------------------------------------------------------

SESSION_EVENTS = ("agent.session.created", "agent.session.in_progress", "agent.session.requires_action",
                  "agent.session.idle", "agent.session.failed")
TURN_EVENTS = ("agent.session.turn.created", "agent.session.turn.in_progress", "agent.session.turn.completed",
               "agent.session.turn.failed", "agent.session.turn.cancelled")


def session_event(kind: str, event_id: str, session: dict[str, Any]) -> dict[str, Any]:
    assert kind in SESSION_EVENTS, kind
    return {"type": kind, "event_id": event_id, "session": session}


def turn_event(kind: str, event_id: str, turn: dict[str, Any]) -> dict[str, Any]:
    assert kind in TURN_EVENTS, kind
    event = {"type": kind, "event_id": event_id, "session_id": turn["session_id"], "turn_id": turn["id"], "turn": turn}
    if kind in ("agent.session.turn.completed", "agent.session.turn.failed", "agent.session.turn.cancelled"):
        event["usage"] = None  # the root agent's token usage: not reported by Runtimes yet
    return event


SUBAGENT_EVENTS = ("agent.session.subagent.created", "agent.session.subagent.active", "agent.session.subagent.closed")


def subagent_event(kind: str, event_id: str, subagent: dict[str, Any]) -> dict[str, Any]:
    assert kind in SUBAGENT_EVENTS, kind
    return {"type": kind, "event_id": event_id, "subagent": subagent}


def item_event(kind: str, event_id: str, session_id: str, item: dict[str, Any],
               output_index: Optional[int] = None) -> dict[str, Any]:
    assert kind in ("agent.session.turn.item.added", "agent.session.turn.item.done"), kind
    return {"type": kind, "event_id": event_id, "session_id": session_id, "turn_id": item.get("turn_id"),
            "item": item, "output_index": output_index}
