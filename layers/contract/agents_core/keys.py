"""The table's key schema: every key and key prefix of the one DynamoDB table, and nowhere else.

Logic asks this module for what it addresses ("the Turns of a Session", "an Environment of a tenant")
and never spells a key itself. Keys are `PK`/`SK`; GSI1 is `GSI1PK`/`GSI1SK`. Every tenant-owned
partition starts with `T#{tenant}#`, so a foreign id simply names nothing (404).

| partition (PK)                    | sort keys (SK)                                                    |
| --------------------------------- | ----------------------------------------------------------------- |
| `T#{tenant}#AGENT#{agent}`        | `A`                                                               |
| `T#{tenant}#SESSION#{session}`    | `S` the Session; `L` its list entry; `ITEM#{position:012d}`;      |
|                                   | `TURN#{turn}`; `CALL#{call}`; `OUT#{seq:012d}` outbox; `RID#...`  |
|                                   | a Runtime's Item id; `OBS#{turn}#{seq:012d}` a buffered           |
|                                   | observation; `SUBAGENT#{id}`, `SUBAGENTN#{runtime id}`,           |
|                                   | `CTURN#{subagent}#{turn}`, `CTURNN#{runtime id}`                  |
| `T#{tenant}#IDEM#{key}`           | `I` an Idempotency-Key's record                                   |
| `T#{tenant}#VAULT#{vault}`        | `V` the Vault; `CRED#{credential}`                                |
| `T#{tenant}#ENV#{env}`            | `E` an Environment                                                |
| `T#{tenant}#QUOTA`                | `Q` running-Turn count, `R` WebSocket request bucket (quotas.py)  |
| `T#{tenant}#AUTO#{automation}`    | `A` an automation; `INV#{invocation}` its invocations             |
| `T#{tenant}#WEBHOOK#{endpoint}`   | `W` a webhook endpoint; `DLV#{event}` its deliveries              |
| `KEY#{sha256}`                    | `K` an API key                                                    |
| `RT#{sha256}`                     | `R` a Runtime token or an Environment's durable credential        |
| `TICKET#{sha256}`                 | `T` a WebSocket connection ticket                                 |
| `ENROLL#{sha256}`                 | `N` an Environment enrollment                                     |
| `CONN#{connection}`               | `C` the connection; `H#{harness}` and `H#ENV#{env}#{harness}`     |
|                                   | declarations; `XHOST` an exec-server host; `CLAIM#{turn}`;        |
|                                   | `SUB#{session}` a subscription                                    |
| `HOST#{host}`                     | `CONN#{connection}`, `ENV#{env}`: a hosted host's members         |
| `EXECKEY#{access key id}`         | `X` an exec-server key                                            |
| `EXECSIG#{signature}`             | `S` a seen exec-server signature (the replay guard)               |
| `EXECREG#{registration}`          | `G` an exec-server registration                                   |
| `EXECENV#{env}`                   | `H` the exec-server host an Environment last used                 |

GSI1 partitions: `T#{tenant}#AGENTS`, `#SESSIONS`, `#VAULTS`, `#AUTOS`, `#WEBHOOKS`, `#ENVS#{type}` (a tenant's lists, by
id); `RUNTIME#...` (a pool of connected Runtimes), `QUEUE#...` (the Turns waiting for that pool) and
`EXECUTORS#{harness}` (exec-server hosts), by `{connected_at:012d}#{connection}` or Turn id;
`SUB#{tenant}#{session}` (a Session's subscribers, by connection).

`PARTITIONS` and `INDEX_PARTITIONS` are the leading-key prefixes the template's `dynamodb:LeadingKeys`
conditions name (as `"{prefix}*"`); `tests/unit/test_keys.py` holds the template against them.
"""

from __future__ import annotations

from typing import Any, Optional, TypedDict

PK, SK = "PK", "SK"
GSI1, GSI1PK, GSI1SK = "GSI1", "GSI1PK", "GSI1SK"

Key = dict[str, str]

# Leading-key prefixes of the table's partitions (PK) ...
TENANT = "T#"
API_KEY = "KEY#"
RUNTIME_CREDENTIAL = "RT#"
TICKET = "TICKET#"
ENROLLMENT = "ENROLL#"
CONNECTION = "CONN#"
HOST = "HOST#"
EXEC_SERVER_KEY = "EXECKEY#"
EXEC_SERVER_SIGNATURE = "EXECSIG#"
EXEC_SERVER_REGISTRATION = "EXECREG#"
EXEC_SERVER_AFFINITY = "EXECENV#"
# ... and of GSI1's (a tenant's lists are GSI1 partitions under TENANT too).
RUNTIME_POOL = "RUNTIME#"
TURN_QUEUE = "QUEUE#"
EXEC_SERVER_HOSTS = "EXECUTORS#"
SUBSCRIBERS = "SUB#"

PARTITIONS = (TENANT, API_KEY, RUNTIME_CREDENTIAL, TICKET, ENROLLMENT, CONNECTION, HOST, EXEC_SERVER_KEY,
              EXEC_SERVER_SIGNATURE, EXEC_SERVER_REGISTRATION, EXEC_SERVER_AFFINITY)
INDEX_PARTITIONS = (TENANT, RUNTIME_POOL, TURN_QUEUE, EXEC_SERVER_HOSTS, SUBSCRIBERS)

# Sort-key prefixes (what a query by prefix reads)
_TURN, _ITEM, _CALL, _OUTBOX, _ITEM_REF, _OBSERVATION = "TURN#", "ITEM#", "CALL#", "OUT#", "RID#", "OBS#"
_SUBAGENT, _SUBAGENT_NAME, _CHILD_TURN, _CHILD_TURN_NAME = "SUBAGENT#", "SUBAGENTN#", "CTURN#", "CTURNN#"
_CREDENTIAL, _CLAIM, _SUBSCRIPTION, _DECLARATION = "CRED#", "CLAIM#", "SUB#", "H#"
_ENV_DECLARATION = "H#ENV#"
_INVOCATION = "INV#"
_DELIVERY = "DLV#"
_HOST_CONNECTION, _HOST_ENVIRONMENT = "CONN#", "ENV#"


class Range(TypedDict, total=False):
    """What one query reads: `store.query(**keys.turns_of_session(tenant, session_id), ...)`."""

    pk: str
    sk_prefix: str
    index: str


def _key(pk: str, sk: str) -> Key:
    return {PK: pk, SK: sk}


def _listed(pk: str, sk: str) -> Key:
    """The GSI1 attributes that put an item in a list."""
    return {GSI1PK: pk, GSI1SK: sk}


def address(key_or_item: dict[str, Any]) -> tuple[str, str]:
    """An item's (PK, SK): how a batch read's answers are found (`DynamoStore.batch_get`)."""
    return key_or_item[PK], key_or_item[SK]


def sort_key(key_or_item: dict[str, Any]) -> str:
    return key_or_item[SK]


def list_position(item: dict[str, Any]) -> str:
    """Where an item stands in its GSI1 list (a page's cursor)."""
    return item[GSI1SK]


# ---- Agents ---------------------------------------------------------------------------------------

def agent(tenant: str, agent_id: str) -> Key:
    return _key(f"T#{tenant}#AGENT#{agent_id}", "A")


def agents_of_tenant(tenant: str) -> Range:
    return {"pk": f"T#{tenant}#AGENTS", "index": GSI1}


def listed_agent(tenant: str, agent_id: str) -> Key:
    return _listed(agents_of_tenant(tenant)["pk"], agent_id)


# ---- Sessions and what lives in their partition ----------------------------------------------------

def session_partition(tenant: str, session_id: str) -> str:
    return f"T#{tenant}#SESSION#{session_id}"


def session(tenant: str, session_id: str) -> Key:
    return _key(session_partition(tenant, session_id), "S")


def sessions_of_tenant(tenant: str) -> Range:
    return {"pk": f"T#{tenant}#SESSIONS", "index": GSI1}


def listed_session(tenant: str, session_id: str) -> Key:
    return _listed(sessions_of_tenant(tenant)["pk"], session_id)


def session_listing(tenant: str, session_id: str) -> Key:
    """A Session's list entry (GSI1): its own row, so the Session's commits write no index entry (sessions.listing)."""
    return _key(session_partition(tenant, session_id), "L")


def turn_sk(turn_id: str) -> str:
    return f"{_TURN}{turn_id}"


def turn(tenant: str, session_id: str, turn_id: str) -> Key:
    return _key(session_partition(tenant, session_id), turn_sk(turn_id))


def turns_of_session(tenant: str, session_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": _TURN}


def item_sk(position: int) -> str:
    return f"{_ITEM}{position:012d}"


def item_position(sk: str) -> int:
    """The position an Item's sort key holds."""
    return int(sk[len(_ITEM):])


def item(tenant: str, session_id: str, position: int) -> Key:
    return _key(session_partition(tenant, session_id), item_sk(position))


def items_of_session(tenant: str, session_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": _ITEM}


def call(tenant: str, session_id: str, call_id: str) -> Key:
    return _key(session_partition(tenant, session_id), f"{_CALL}{call_id}")


def calls_of_session(tenant: str, session_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": _CALL}


def is_call(sk: str) -> bool:
    return sk.startswith(_CALL)


def outbox_sk(seq: int) -> str:
    return f"{_OUTBOX}{seq:012d}"


def outbox_record(tenant: str, session_id: str, seq: int) -> Key:
    return _key(session_partition(tenant, session_id), outbox_sk(seq))


def outbox_of_session(tenant: str, session_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": _OUTBOX}


def is_outbox_record(sk: str) -> bool:
    return sk.startswith(_OUTBOX)


def item_ref(tenant: str, session_id: str, turn_id: str, runtime_id: str) -> Key:
    """A Runtime's Item id -> the public Item (one row per Item, so the Turn never grows with them)."""
    return _key(session_partition(tenant, session_id), f"{_ITEM_REF}{turn_id}#{runtime_id}")


def item_refs_of_turn(tenant: str, session_id: str, turn_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": f"{_ITEM_REF}{turn_id}#"}


def runtime_item_id(sk: str) -> str:
    """The Runtime's Item id an item ref's sort key names."""
    return sk.split("#", 2)[2]


def buffered_observation_sk(turn_id: str, seq: int) -> str:
    return f"{_OBSERVATION}{turn_id}#{seq:012d}"


def buffered_observation(tenant: str, session_id: str, turn_id: str, seq: int) -> Key:
    return _key(session_partition(tenant, session_id), buffered_observation_sk(turn_id, seq))


def buffered_observations_of_turn(tenant: str, session_id: str, turn_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": f"{_OBSERVATION}{turn_id}#"}


def subagent_sk(subagent_id: str) -> str:
    return f"{_SUBAGENT}{subagent_id}"


def subagent(tenant: str, session_id: str, subagent_id: str) -> Key:
    return _key(session_partition(tenant, session_id), subagent_sk(subagent_id))


def subagents_of_session(tenant: str, session_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": _SUBAGENT}


def subagent_name(tenant: str, session_id: str, runtime_id: str) -> Key:
    """The Runtime's identity of a Subagent -> its public id (written once)."""
    return _key(session_partition(tenant, session_id), f"{_SUBAGENT_NAME}{runtime_id}")


def child_turn_sk(subagent_id: str, turn_id: str) -> str:
    return f"{_CHILD_TURN}{subagent_id}#{turn_id}"


def child_turn(tenant: str, session_id: str, subagent_id: str, turn_id: str) -> Key:
    return _key(session_partition(tenant, session_id), child_turn_sk(subagent_id, turn_id))


def child_turns_of_subagent(tenant: str, session_id: str, subagent_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": child_turn_sk(subagent_id, "")}


def child_turn_name(tenant: str, session_id: str, runtime_id: str) -> Key:
    """The Runtime's child turn id -> the public child Turn (written once)."""
    return _key(session_partition(tenant, session_id), f"{_CHILD_TURN_NAME}{runtime_id}")


def tenant_quota(tenant: str, part: str = "Q") -> Key:
    """A tenant's quota item (agents_core/quotas): `Q` its running-Turn count, `R` its WebSocket request bucket."""
    return _key(f"T#{tenant}#QUOTA", part)


def idempotency_record(tenant: str, idempotency_key: str) -> Key:
    return _key(f"T#{tenant}#IDEM#{idempotency_key}", "I")


# ---- Automations (agents_core/automations) ---------------------------------------------------------

def automation_partition(tenant: str, automation_id: str) -> str:
    return f"T#{tenant}#AUTO#{automation_id}"


def automation(tenant: str, automation_id: str) -> Key:
    return _key(automation_partition(tenant, automation_id), "A")


def automations_of_tenant(tenant: str) -> Range:
    return {"pk": f"T#{tenant}#AUTOS", "index": GSI1}


def listed_automation(tenant: str, automation_id: str) -> Key:
    return _listed(automations_of_tenant(tenant)["pk"], automation_id)


def invocation_sk(invocation_id: str) -> str:
    return f"{_INVOCATION}{invocation_id}"


def invocation(tenant: str, automation_id: str, invocation_id: str) -> Key:
    return _key(automation_partition(tenant, automation_id), invocation_sk(invocation_id))


def invocations_of_automation(tenant: str, automation_id: str) -> Range:
    return {"pk": automation_partition(tenant, automation_id), "sk_prefix": _INVOCATION}


# ---- Webhook endpoints and their deliveries (agents_core/webhooks) ------------------------------------

def webhook_endpoint_partition(tenant: str, endpoint_id: str) -> str:
    return f"T#{tenant}#WEBHOOK#{endpoint_id}"


def webhook_endpoint(tenant: str, endpoint_id: str) -> Key:
    return _key(webhook_endpoint_partition(tenant, endpoint_id), "W")


def webhook_endpoints_of_tenant(tenant: str) -> Range:
    return {"pk": f"T#{tenant}#WEBHOOKS", "index": GSI1}


def listed_webhook_endpoint(tenant: str, endpoint_id: str) -> Key:
    return _listed(webhook_endpoints_of_tenant(tenant)["pk"], endpoint_id)


def webhook_delivery(tenant: str, endpoint_id: str, event_id: str) -> Key:
    return _key(webhook_endpoint_partition(tenant, endpoint_id), f"{_DELIVERY}{event_id}")


def webhook_deliveries_of_endpoint(tenant: str, endpoint_id: str) -> Range:
    return {"pk": webhook_endpoint_partition(tenant, endpoint_id), "sk_prefix": _DELIVERY}


# ---- Vaults ----------------------------------------------------------------------------------------

def vault_partition(tenant: str, vault_id: str) -> str:
    return f"T#{tenant}#VAULT#{vault_id}"


def vault(tenant: str, vault_id: str) -> Key:
    return _key(vault_partition(tenant, vault_id), "V")


def vaults_of_tenant(tenant: str) -> Range:
    return {"pk": f"T#{tenant}#VAULTS", "index": GSI1}


def listed_vault(tenant: str, vault_id: str) -> Key:
    return _listed(vaults_of_tenant(tenant)["pk"], vault_id)


def credential_sk(credential_id: str) -> str:
    return f"{_CREDENTIAL}{credential_id}"


def credential(tenant: str, vault_id: str, credential_id: str) -> Key:
    return _key(vault_partition(tenant, vault_id), credential_sk(credential_id))


def credentials_of_vault(tenant: str, vault_id: str) -> Range:
    return {"pk": vault_partition(tenant, vault_id), "sk_prefix": _CREDENTIAL}


# ---- Environments ----------------------------------------------------------------------------------

def environment(tenant: str, env_id: str) -> Key:
    return _key(f"T#{tenant}#ENV#{env_id}", "E")


def environments_of_tenant(tenant: str, kind: str) -> Range:
    """A tenant's Environments of one type (`openai_hosted`, `self_hosted`)."""
    return {"pk": f"T#{tenant}#ENVS#{kind}", "index": GSI1}


def listed_environment(tenant: str, kind: str, env_id: str) -> Key:
    return _listed(environments_of_tenant(tenant, kind)["pk"], env_id)


def enrollment(token_hash: str) -> Key:
    return _key(f"{ENROLLMENT}{token_hash}", "N")


def enrollment_hash(key_or_item: dict[str, Any]) -> str:
    """The token hash an enrollment's key holds."""
    return key_or_item[PK].removeprefix(ENROLLMENT)


def runtime_credential(token_hash: str) -> Key:
    """A Runtime token (`rt-`) or an Environment's durable credential (`rte-`), by its hash."""
    return _key(f"{RUNTIME_CREDENTIAL}{token_hash}", "R")


def host_connection(host_id: str, connection_id: str) -> Key:
    """A connected hosted Runtime of a host."""
    return _key(f"{HOST}{host_id}", f"{_HOST_CONNECTION}{connection_id}")


def connections_of_host(host_id: str) -> Range:
    return {"pk": f"{HOST}{host_id}", "sk_prefix": _HOST_CONNECTION}


def host_environment(host_id: str, env_id: str) -> Key:
    """An openai_hosted Environment bound to a host."""
    return _key(f"{HOST}{host_id}", f"{_HOST_ENVIRONMENT}{env_id}")


def environments_of_host(host_id: str) -> Range:
    return {"pk": f"{HOST}{host_id}", "sk_prefix": _HOST_ENVIRONMENT}


# ---- the stock exec-server -------------------------------------------------------------------------

def exec_server_key(access_key_id: str) -> Key:
    return _key(f"{EXEC_SERVER_KEY}{access_key_id}", "X")


def exec_server_key_id(key_or_item: dict[str, Any]) -> str:
    """The access key id an exec-server key's key holds."""
    return key_or_item[PK].removeprefix(EXEC_SERVER_KEY)


def exec_server_signature(signature: str) -> Key:
    return _key(f"{EXEC_SERVER_SIGNATURE}{signature}", "S")


def exec_server_registration(registration_id: str) -> Key:
    return _key(f"{EXEC_SERVER_REGISTRATION}{registration_id}", "G")


def exec_server_registration_id(key_or_item: dict[str, Any]) -> str:
    return key_or_item[PK].removeprefix(EXEC_SERVER_REGISTRATION)


def exec_server_affinity(env_id: str) -> Key:
    """The exec-server host that served an Environment last."""
    return _key(f"{EXEC_SERVER_AFFINITY}{env_id}", "H")


def exec_server_hosts(harness: str) -> Range:
    return {"pk": f"{EXEC_SERVER_HOSTS}{harness}", "index": GSI1}


def exec_server_host(connection_id: str) -> Key:
    """A connection's offer to host exec-server WebSockets."""
    return _key(connection_partition(connection_id), "XHOST")


def listed_exec_server_host(harness: str, connected_at: int, connection_id: str) -> Key:
    return _listed(exec_server_hosts(harness)["pk"], _by_time(connected_at, connection_id))


# ---- API keys, tickets ------------------------------------------------------------------------------

def api_key(key_hash: str) -> Key:
    return _key(f"{API_KEY}{key_hash}", "K")


def ticket(ticket_hash: str) -> Key:
    return _key(f"{TICKET}{ticket_hash}", "T")


# ---- WebSocket connections: declarations, claims, subscriptions -----------------------------------

def connection_partition(connection_id: str) -> str:
    return f"{CONNECTION}{connection_id}"


def connection(connection_id: str) -> Key:
    return _key(connection_partition(connection_id), "C")


def declaration(connection_id: str, harness: str) -> Key:
    """A Runtime connection's capability declaration of one Harness (`runtime.hello`)."""
    return _key(connection_partition(connection_id), f"{_DECLARATION}{harness}")


def environment_declaration(connection_id: str, env_id: str, harness: str) -> Key:
    """A declaration that serves exactly one Environment (an exec-server's, through its host)."""
    return _key(connection_partition(connection_id), f"{_ENV_DECLARATION}{env_id}#{harness}")


def environment_declarations_of_connection(connection_id: str) -> Range:
    return {"pk": connection_partition(connection_id), "sk_prefix": _ENV_DECLARATION}


def claim(connection_id: str, turn_id: str) -> Key:
    """A connection's claim of a Turn it runs."""
    return _key(connection_partition(connection_id), f"{_CLAIM}{turn_id}")


def claims_of_connection(connection_id: str) -> Range:
    return {"pk": connection_partition(connection_id), "sk_prefix": _CLAIM}


def runtime_instance(instance_hash: str) -> Key:
    """A Runtime instance (a process that keeps one identity across its connections): its newest connection.
    Under CONN#: it is connection state, read and written by the functions that own connections."""
    return _key(f"{CONNECTION}INSTANCE#{instance_hash}", "I")


def subscription(connection_id: str, session_id: str) -> Key:
    """A client connection's subscription to a Session."""
    return _key(connection_partition(connection_id), f"{_SUBSCRIPTION}{session_id}")


def subscribers_of_session(tenant: str, session_id: str) -> Range:
    return {"pk": f"{SUBSCRIBERS}{tenant}#{session_id}", "index": GSI1}


def listed_subscriber(tenant: str, session_id: str, connection_id: str) -> Key:
    return _listed(subscribers_of_session(tenant, session_id)["pk"], connection_id)


# ---- Runtime pools and the Turns queued for them ----------------------------------------------------

def runtime_pool(kind: str, harness: str, env_id: Optional[str] = None) -> str:
    """The GSI1 partition a connection of `kind` (shared, enrolled, hosted) declares its Harness in."""
    if kind == "enrolled":
        return f"{RUNTIME_POOL}ENV#{env_id}#{harness}"
    if kind == "hosted":
        return f"{RUNTIME_POOL}HOSTED#{harness}"
    return f"{RUNTIME_POOL}{harness}"


def runtimes_in_pool(pool: str) -> Range:
    return {"pk": pool, "index": GSI1}


def listed_in_pool(pool: str, connected_at: int, connection_id: str) -> Key:
    """A declaration's place in its pool (newest first when read descending)."""
    return _listed(pool, _by_time(connected_at, connection_id))


def turn_queue(pool: str) -> str:
    """The GSI1 partition where the Turns that `pool`'s Runtimes may serve wait for one to say hello."""
    return TURN_QUEUE + pool.removeprefix(RUNTIME_POOL)


def queued_turns(queue: str) -> Range:
    """The Turns waiting in a queue (`turn_queue`; a plain Harness name is the shared queue)."""
    if not queue.startswith(TURN_QUEUE):
        queue = TURN_QUEUE + queue
    return {"pk": queue, "index": GSI1}


def queued_turn(queue: str, turn_id: str) -> Key:
    return _listed(queue, turn_id)


def _by_time(ts: int, connection_id: str) -> str:
    return f"{ts:012d}#{connection_id}"


# ---- Files, Uploads, Session artifacts, Environment file answers (agents_core/files; bytes in S3) ----

_UPLOAD_PART, _ARTIFACT = "PART#", "ARTIFACT#"


def file(tenant: str, file_id: str) -> Key:
    return _key(f"T#{tenant}#FILE#{file_id}", "F")


def files_of_tenant(tenant: str) -> Range:
    return {"pk": f"T#{tenant}#FILES", "index": GSI1}


def listed_file(tenant: str, file_id: str) -> Key:
    return _listed(files_of_tenant(tenant)["pk"], file_id)


def upload_partition(tenant: str, upload_id: str) -> str:
    return f"T#{tenant}#UPLOAD#{upload_id}"


def upload(tenant: str, upload_id: str) -> Key:
    return _key(upload_partition(tenant, upload_id), "U")


def upload_part(tenant: str, upload_id: str, part_id: str) -> Key:
    return _key(upload_partition(tenant, upload_id), f"{_UPLOAD_PART}{part_id}")


def parts_of_upload(tenant: str, upload_id: str) -> Range:
    return {"pk": upload_partition(tenant, upload_id), "sk_prefix": _UPLOAD_PART}


def artifact_sk(artifact_id: str) -> str:
    return f"{_ARTIFACT}{artifact_id}"


def artifact(tenant: str, session_id: str, artifact_id: str) -> Key:
    return _key(session_partition(tenant, session_id), artifact_sk(artifact_id))


def artifacts_of_session(tenant: str, session_id: str) -> Range:
    return {"pk": session_partition(tenant, session_id), "sk_prefix": _ARTIFACT}


def environment_file_op(tenant: str, env_id: str, op_id: str) -> Key:  # a Runtime's answer (environment_files.py)
    return _key(f"T#{tenant}#ENV#{env_id}", f"FILEOP#{op_id}")
