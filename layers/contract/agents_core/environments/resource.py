"""The Environment resource: its item, its public views and reads, its events and its final states.

"Native workspace tools and Environment Plugin MCP are part of the Environment." A workspace Session
(`self_hosted`, `openai_hosted`) has an Environment `env_...` owned by the tenant (`placement.environment_id`),
created with it (`new_item`), or, openai_hosted, on its own (`hosted_preparation.create`) and named by Sessions.
A self_hosted one is connected by the tenant's machine (`enrollment`, `connection`) or by the stock
`codex exec-server` (`exec_server`); an openai_hosted one runs on an operator's host (`hosted_lifecycle`).

Stored item (one table; `keys.environment`): `T#{tenant}#ENV#{env_id}` / `E` (type, session, status,
current connection, the hash of its durable credential, its host); GSI1 `T#{tenant}#ENVS#{type}` lists a
tenant's Environments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from agents_contract import jsonutil
from agents_contract.errors import InvalidRequest, NotFound

from .. import keys
from ..ids import new_id
from ..pagination import ListParams, page
from ..settings import get_settings
from ..store import DynamoStore
from .placement import environment_id

if TYPE_CHECKING:
    from .. import engine

TYPES = ("openai_hosted", "self_hosted")
LIVE = ("pending", "ready", "connected", "disconnected")  # `failed` and `expired` are final
HOSTED_ERROR_TYPES = ("sandbox_error",)


def remote_url() -> str:
    """A self_hosted Environment's remote_url: the exec-server registry's base (`codex exec-server --remote`;
    the reference Runtime finds the WebSocket API from it), or the WebSocket API where no registry is set."""
    settings = get_settings()
    return settings.remote_url or settings.websocket_url or ""


def new_item(tenant: str, session_id: str, environment: dict[str, Any], ts: int) -> Optional[dict[str, Any]]:
    """The Environment item a workspace Session creates with itself (None for `environment: none`)."""
    kind = environment.get("type")
    if kind not in TYPES:
        return None
    env_id = environment_id(session_id)
    return {**keys.environment(tenant, env_id), "kind": "environment", "id": env_id, "tenant": tenant, "type": kind,
            "session_id": session_id, "status": "pending", "created_at": ts,
            "workspace_directory": environment.get("workspace_directory"),
            **keys.listed_environment(tenant, kind, env_id)}


def resource(item: dict[str, Any]) -> dict[str, Any]:
    """The SDK's EnvironmentInfo ("Safe metadata": files without their contents)."""
    config = jsonutil.loads(item["config"]) if item.get("config") else {}
    return {"id": item["id"], "object": "agent.environment", "type": item["type"], "status": item["status"],
            "files": list(config.get("files") or []), "plugins": [], "skills": []}


def state(item: dict[str, Any], error: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """The SDK's AgentSessionEnvironmentState, carried by `agent.session.environment.*` events."""
    return {"id": item["id"], "type": item["type"], "status": item["status"], "error": error}


def load(store: DynamoStore, tenant: str, env_id: str) -> dict[str, Any]:
    item = store.get(keys.environment(tenant, env_id)) if env_id.startswith("env_") and len(env_id) <= 128 else None
    if item is None:
        raise NotFound()
    return item


def retrieve(store: DynamoStore, tenant: str, env_id: str) -> dict[str, Any]:
    return resource(load(store, tenant, env_id))


def list_page(store: DynamoStore, tenant: str, params: ListParams, query: dict[str, str]) -> dict[str, Any]:
    kind = query.get("type", "openai_hosted")  # the SDK's default
    if kind not in TYPES:
        raise InvalidRequest(f"Invalid value: '{kind[:64]}'. Supported values are: 'openai_hosted' and "
                             "'self_hosted'.", param="type")
    if params.after is not None:
        cursor = store.get(keys.environment(tenant, params.after)) if params.after.startswith("env_") else None
        if cursor is None or cursor["type"] != kind:
            raise NotFound()  # a cursor that names no Environment of this list
    result = store.query(**keys.environments_of_tenant(tenant, kind), after=params.after, limit=params.limit,
                         ascending=params.ascending)
    return page([resource(i) for i in result.items], result.has_more)

def emit(draft: engine.Draft, kind: str, env: dict[str, Any], turn_id: Optional[str] = None,
          error: Optional[dict[str, Any]] = None) -> None:
    draft.emit({"type": f"agent.session.environment.{kind}", "event_id": new_id("evt"),
                "session_id": draft.session_id, "environment": state(env, error), "turn_id": turn_id})


def turn_error(message: str) -> dict[str, str]:
    """A Turn that could not run in its Environment (the SDK's `sandbox_error` category)."""
    return {"code": "sandbox_error", "message": message}


def final_message(env: dict[str, Any]) -> str:
    if env["status"] == "expired":
        return (f"The Environment {env['id']} is expired: the host that held its workspace is gone, and this "
                "deployment does not move a workspace to another host. Create a Session with a new Environment.")
    return (f"The Environment {env['id']} is failed ({(env.get('error') or {}).get('message', 'preparation failed')}"
            "). Create a Session with a new Environment.")
