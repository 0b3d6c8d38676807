"""Hosted preparation: an openai_hosted Environment's configuration, created on its own or with a Session.

What a hosted Runtime prepares the Environment from (files, packages, setup commands, env, network) is
admitted by `agents_contract.hosted` (pure) and kept sealed (KMS envelope, `vault_crypto`), opened only
into a claimed Turn's `turn.start`; its public configuration is what reads and each Session that names
the Environment (`openai_hosted.environment_id`) see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from agents_contract import jsonutil
from agents_contract.errors import Conflict, InvalidRequest

from .. import keys
from ..ids import new_id, now
from ..store import DynamoStore, unpack
from .placement import session_environment_id
from .resource import LIVE, emit, final_message, load, new_item, resource

if TYPE_CHECKING:
    from .. import engine


EMPTY_PREPARATION = {"files": [], "packages": {"python": [], "npm": []}, "setup_commands": [], "env": {},
                     "network": {"access": "disabled"}}


def preparation(store: DynamoStore, tenant: str, env_id: str) -> dict[str, Any]:
    """What a hosted Runtime prepares the Environment from (confidential: setup command bodies, env
    values and file data travel only in `turn.start` to the Runtime that claimed the Turn)."""
    env = store.get(keys.environment(tenant, env_id))
    if env is None or not (env.get("preparation_sealed") or env.get("preparation")):
        return dict(EMPTY_PREPARATION)
    if env.get("preparation_sealed"):
        from ..vault_crypto import default_sealer

        return jsonutil.loads(default_sealer().open(env["preparation_sealed"], preparation_context(tenant, env_id)))
    return jsonutil.loads(unpack(env["preparation"]))  # stored before preparations were sealed


# ---- creation, and Sessions that name one -------------------------------------------------------------

def preparation_context(tenant: str, env_id: str) -> dict[str, str]:
    """The KMS encryption context of an Environment's preparation: it opens for that Environment only."""
    return {"tenant": tenant, "environment_id": env_id, "secret": "hosted_preparation"}


def _hosted_fields(environment: dict[str, Any], requested: Any, tenant: str, env_id: str) -> dict[str, Any]:
    """What an openai_hosted Environment item keeps: its public configuration (reads, and the snapshot of
    each Session that names it) and, sealed apart (KMS envelope, `vault_crypto`: setup command bodies, env
    values and file data are confidential), its preparation, opened only by Dispatch into a claimed
    Turn's `turn.start`."""
    from agents_contract import hosted

    from ..vault_crypto import default_sealer

    public = {k: v for k, v in environment.items() if k != "id"}
    sealed = default_sealer().seal(jsonutil.dumps(hosted.preparation(requested)), preparation_context(tenant, env_id))
    return {"config": jsonutil.dumps(public), "preparation_sealed": sealed}


def create(store: DynamoStore, tenant: str, body: Any) -> dict[str, Any]:
    """`environments.create(environment={"type": "openai_hosted", ...}, vault_ids=...)`: a standalone
    Environment (`pending` until a hosted Runtime prepares it for its first Turn), the same checks as a
    Session's inline configuration; Sessions then name it with `openai_hosted.environment_id`."""
    from agents_contract import hosted, parser, validation, wire

    request = validation.parse(wire.EnvironmentCreate, body)
    hosted.check(request.environment)
    vault_ids: list[str] = []
    if request.vault_ids:
        # "The IDs of up to 10 vaults made available": each must be the tenant's (unknown or foreign: 404).
        # They are recorded with the Environment; a Session's MCP credentials come from its own vault_ids.
        from agents_contract.vaults import check_vault_ids

        from ..vaults import attached_credentials

        vault_ids = check_vault_ids(request.vault_ids)
        attached_credentials(store, tenant, vault_ids)
    environment = parser.resolve_environment(request.environment)  # type: ignore[arg-type]
    environment = _files_of_tenant(store, tenant, environment)
    env_id = new_id("env")
    item = {**keys.environment(tenant, env_id), "kind": "environment", "id": env_id, "tenant": tenant,
            "type": "openai_hosted", "session_id": None, "status": "pending", "created_at": now(),
            "workspace_directory": environment["workspace_directory"],
            **keys.listed_environment(tenant, "openai_hosted", env_id), "vault_ids": vault_ids,
            **_hosted_fields(environment, request.environment, tenant, env_id)}
    store.put(item, condition="attribute_not_exists(PK)")
    return resource(item)


def _files_of_tenant(store: DynamoStore, tenant: str, environment: dict[str, Any]) -> dict[str, Any]:
    """`files` of `type: "file_id"` name the tenant's Files (404 naming the entry otherwise), with their sizes."""
    from ..files import environment as environment_files

    return environment_files.resolve(store, tenant, environment)


def for_session(store: DynamoStore, tenant: str, requested: Any, snapshot: Any) -> tuple[Any, Optional[dict[str, Any]]]:
    """A Session that names an existing Environment (`openai_hosted.environment_id`) runs in it, with its
    configuration: the snapshot takes that Environment's (and its id). A foreign or missing id is the
    official 404; a final one (`expired`, `failed`) a 409 naming it."""
    if getattr(requested, "type", None) != "openai_hosted":
        return snapshot, None
    if not requested.environment_id:
        resolved = _files_of_tenant(store, tenant, snapshot.environment)
        return (snapshot if resolved is snapshot.environment else
                snapshot.model_copy(update={"environment": resolved})), None
    env = load(store, tenant, requested.environment_id)
    if env["type"] != "openai_hosted":
        raise InvalidRequest(f"Invalid 'environment.environment_id': '{env['id']}' is a self_hosted Environment; "
                             "an openai_hosted Session names an openai_hosted one.", param="environment.environment_id")
    if env.get("status") not in LIVE:
        raise Conflict(final_message(env))
    config = jsonutil.loads(env["config"]) if env.get("config") else snapshot.environment
    return snapshot.model_copy(update={"environment": {**config, "id": env["id"]}}), env


def announce(draft: engine.Draft, environment: dict[str, Any], reused: Optional[dict[str, Any]]) -> None:
    """In the Session create commit: an openai_hosted Environment that is still `pending` says so; a Turn
    claimed in this commit binds the Environment through this commit's own write of it (`bind_host`)."""
    if environment.get("type") != "openai_hosted":
        return
    draft.environment_in_commit = True
    env_id = session_environment_id(draft.session_id, environment)
    status = reused["status"] if reused is not None else "pending"
    if status == "pending":
        emit(draft, "pending", {"id": env_id, "type": "openai_hosted", "status": "pending"})


def write_for_session(tx: Any, draft: engine.Draft, environment: dict[str, Any], ts: int, requested: Any,
                      reused: Optional[dict[str, Any]]) -> None:
    """The Environment write of a Session create: its own new Environment, or the named one, which now
    reports to this Session (its most recent); either carries the host a Turn claimed in this commit."""
    host = draft.bound_host
    if reused is not None:
        sets, cond = "SET session_id = :s", "attribute_exists(PK) AND NOT #st IN (:e, :f)"
        values: dict[str, Any] = {":s": draft.session_id, ":e": "expired", ":f": "failed"}
        if host:
            sets += ", host_id = :h"
            cond += " AND (attribute_not_exists(host_id) OR host_id = :h)"
            values[":h"] = host
        tx.update(keys.environment(draft.tenant, reused["id"]), sets, cond, names={"#st": "status"}, values=values)
        return
    item = new_item(draft.tenant, draft.session_id, environment, ts)
    if item is None:
        return
    if item["type"] == "openai_hosted":
        item.update(_hosted_fields(environment, requested, draft.tenant, item["id"]))
        if host:
            item["host_id"] = host
    tx.put(item, "attribute_not_exists(PK)")
