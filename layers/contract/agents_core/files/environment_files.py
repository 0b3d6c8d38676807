"""Environment files (`client.beta.agents.environments.files`): bytes copied into a connected Environment's workspace
between Turns, and its live files listed, by the Runtime connection that holds the workspace.

- Which connection: a hosted Environment's host (it counts as connected while a Runtime of the host that holds its
  workspace is connected; its sandbox need not run), a self_hosted one's current connection. None: 409.
- create: the path is checked here first (inside /workspace, not reserved, no `.`/`..`: the official 400 naming
  `path`), the bytes staged where the Runtime can fetch them (inline data as an S3 object under `envfiles/`, a
  `file_id` as the File's object; 404 naming `file_id` for another tenant's), then `environment.file.write` goes to
  the connection with a presigned URL; the Runtime writes (refusing a symlink on the way or a directory at the
  target, with their 400s) and answers `environment.file.result`.
- list: `environment.file.list` (path, order, limit, page); the Runtime answers the live files.
The answer lands as a row of the Environment's partition (`keys.environment_file_op`), written by the Runtime
gateway only for the connection that holds the Environment, which the API function waits for (bounded) and reads
(the table's TTL removes it).
"""

from __future__ import annotations

import time
from typing import Any, Optional

from agents_contract import files as contract
from agents_contract import jsonutil
from agents_contract.errors import AgentsError, Conflict, InvalidRequest, NotFound

from .. import keys
from ..aws import ConnectionGone, Messenger
from ..ids import new_id, now
from ..store import DynamoStore
from .objects import ObjectStore, file_key, quote_tenant

WRITE, LIST, RESULT = "environment.file.write", "environment.file.list", "environment.file.result"
WAIT_SECONDS = 8.0  # inside the API function's 10 s
URL_SECONDS = 300
OP_TTL_SECONDS = 3600


def _not_connected(env_id: str) -> Conflict:
    return Conflict(f"The Environment {env_id} is not connected: files are copied into a connected Environment "
                    "between Turns (an openai_hosted one once its first Turn has run on a host that is connected; "
                    "a self_hosted one while its machine is connected).")


def _connection(store: DynamoStore, env: dict[str, Any]) -> str:
    if env.get("type") == "openai_hosted":
        host = env.get("host_id")
        rows = store.query(**keys.connections_of_host(host), limit=20, consistent=True).items if host else []
        live = [keys.sort_key(r).split("#", 1)[1] for r in rows if int(r.get("ttl", 0)) > now()]
        if live:
            return live[0]
    elif env.get("connection_id"):
        return str(env["connection_id"])
    raise _not_connected(env["id"])


def _ask(store: DynamoStore, messenger: Messenger, tenant: str, env: dict[str, Any],
         message: dict[str, Any]) -> dict[str, Any]:
    op_id = new_id("efop")
    try:
        messenger.post(_connection(store, env), {**message, "op_id": op_id, "tenant": tenant,
                                                 "environment_id": env["id"]})
    except ConnectionGone:
        raise _not_connected(env["id"]) from None
    key = keys.environment_file_op(tenant, env["id"], op_id)
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        row = store.get(key)
        if row is not None:  # left to the table's TTL (the reads function writes nothing)
            return jsonutil.loads(row["result"])
        time.sleep(0.05)
    raise Conflict(f"The Environment {env['id']} did not answer within {WAIT_SECONDS:g} seconds; list its files to "
                   "see whether the change was made.")


def _failure(result: dict[str, Any]) -> AgentsError:
    error = result.get("error") or {}
    param = error.get("param") if error.get("param") in ("path", "data", "file_id") else "path"
    return InvalidRequest(str(error.get("message") or "The file could not be written.")[:500], param=param)


def create(store: DynamoStore, objects: ObjectStore, messenger: Messenger, tenant: str, env_id: str,
           body: Any) -> dict[str, Any]:
    from ..environments.resource import load

    env = load(store, tenant, env_id)
    kind, path, value = contract.parse_environment_file(body)
    staged: Optional[str] = None
    if kind == "file_id":
        from .records import load as load_file

        try:
            size = int(load_file(store, tenant, value)["bytes"])
        except NotFound:
            raise NotFound(f"No such File object: {value}.", param="file_id") from None
        source = file_key(tenant, value)
    else:
        _connection(store, env)  # a disconnected Environment stages nothing
        size = len(value)
        staged = source = f"envfiles/{quote_tenant(tenant)}/{env_id}/{new_id('stage')}"
        objects.put(staged, value)
    try:
        result = _ask(store, messenger, tenant, env, {"type": WRITE, "path": path, "size_bytes": size,
                                                      "url": objects.presigned_get(source, URL_SECONDS)})
    finally:
        if staged is not None:
            objects.delete([staged])
    if not result.get("ok"):
        raise _failure(result)
    return contract.environment_file_resource(env_id, path, size)


def list_page(store: DynamoStore, messenger: Messenger, tenant: str, env_id: str, query: dict[str, str]) -> dict[str, Any]:
    from ..environments.resource import load

    env = load(store, tenant, env_id)
    raw = query.get("limit", "20")
    if not raw.isdigit() or not 1 <= int(raw) <= 100:
        raise InvalidRequest("Invalid 'limit': expected an integer between 1 and 100.", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidRequest(f"Invalid value: '{order[:64]}'. Supported values are: 'asc' and 'desc'.", param="order")
    path = query.get("path") or contract.WORKSPACE
    if path != contract.WORKSPACE:
        path = contract.check_environment_path(path)
    result = _ask(store, messenger, tenant, env, {"type": LIST, "path": path, "order": order, "limit": int(raw),
                                                  "page": query.get("page") or None})
    if not result.get("ok"):
        raise _failure(result)
    data = [contract.environment_file_resource(env_id, str(f["path"]), int(f["size_bytes"]))
            for f in result.get("files") or []]
    return {"object": "page", "data": data, "has_more": bool(result.get("next")), "next": result.get("next")}


def record(store: DynamoStore, connection_id: str, conn: dict[str, Any], message: dict[str, Any]) -> None:
    """The Runtime gateway: a Runtime's answer, kept only from the connection that holds that Environment."""
    tenant, env_id, op_id = (str(message.get(k) or "") for k in ("tenant", "environment_id", "op_id"))
    env = store.get(keys.environment(tenant, env_id)) if tenant and env_id.startswith("env_") else None
    holds = env is not None and (
        (env.get("type") == "openai_hosted" and env.get("host_id") and env.get("host_id") == conn.get("host_id"))
        or (env.get("type") == "self_hosted" and env.get("connection_id") == connection_id))
    if not holds or not op_id.startswith("efop_") or len(op_id) > 64:
        raise AgentsError("This connection does not hold that Environment.", param="environment_id")
    result = {k: message.get(k) for k in ("ok", "error", "files", "next") if k in message}
    store.put({**keys.environment_file_op(tenant, env_id, op_id), "kind": "environment_file_op",
               "result": jsonutil.dumps(result), "ttl": now() + OP_TTL_SECONDS}, condition="attribute_not_exists(PK)")
