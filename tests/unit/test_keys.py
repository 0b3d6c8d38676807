"""The key schema lives in one module (`agents_core.keys`), and the template's `dynamodb:LeadingKeys`
conditions name exactly what it can produce.

Every key is pinned byte for byte (the layout in the README's data model; a changed key would orphan
stored items), every partition prefix the module produces is one of its declared leading-key prefixes,
and the template holds each function's DynamoDB grant to prefixes of that module, while every prefix
the module produces is granted somewhere (else no function could use it, or one reaches it unconditioned).
"""

from __future__ import annotations

import inspect

import pytest

from agents_core import keys
from local import template

T, S = "tenant-a", "sess_1"

# (function, arguments, what it builds), one row per builder of the module
EXAMPLES = [
    ("agent", (T, "agent_1"), {"PK": "T#tenant-a#AGENT#agent_1", "SK": "A"}),
    ("agents_of_tenant", (T,), {"pk": "T#tenant-a#AGENTS", "index": "GSI1"}),
    ("listed_agent", (T, "agent_1"), {"GSI1PK": "T#tenant-a#AGENTS", "GSI1SK": "agent_1"}),
    ("session_partition", (T, S), "T#tenant-a#SESSION#sess_1"),
    ("session", (T, S), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "S"}),
    ("sessions_of_tenant", (T,), {"pk": "T#tenant-a#SESSIONS", "index": "GSI1"}),
    ("listed_session", (T, S), {"GSI1PK": "T#tenant-a#SESSIONS", "GSI1SK": "sess_1"}),
    ("session_listing", (T, S), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "L"}),
    ("turn_sk", ("turn_1",), "TURN#turn_1"),
    ("turn", (T, S, "turn_1"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "TURN#turn_1"}),
    ("turns_of_session", (T, S), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "TURN#"}),
    ("item_sk", (42,), "ITEM#000000000042"),
    ("item", (T, S, 42), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "ITEM#000000000042"}),
    ("items_of_session", (T, S), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "ITEM#"}),
    ("call", (T, S, "call_1"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "CALL#call_1"}),
    ("calls_of_session", (T, S), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "CALL#"}),
    ("outbox_sk", (7,), "OUT#000000000007"),
    ("outbox_record", (T, S, 7), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "OUT#000000000007"}),
    ("outbox_of_session", (T, S), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "OUT#"}),
    ("item_ref", (T, S, "turn_1", "msg_9"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "RID#turn_1#msg_9"}),
    ("item_refs_of_turn", (T, S, "turn_1"), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "RID#turn_1#"}),
    ("buffered_observation_sk", ("turn_1", 3), "OBS#turn_1#000000000003"),
    ("buffered_observation", (T, S, "turn_1", 3),
     {"PK": "T#tenant-a#SESSION#sess_1", "SK": "OBS#turn_1#000000000003"}),
    ("buffered_observations_of_turn", (T, S, "turn_1"),
     {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "OBS#turn_1#"}),
    ("subagent_sk", ("sub_1",), "SUBAGENT#sub_1"),
    ("subagent", (T, S, "sub_1"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "SUBAGENT#sub_1"}),
    ("subagents_of_session", (T, S), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "SUBAGENT#"}),
    ("subagent_name", (T, S, "agent-x"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "SUBAGENTN#agent-x"}),
    ("child_turn_sk", ("sub_1", "turn_2"), "CTURN#sub_1#turn_2"),
    ("child_turn", (T, S, "sub_1", "turn_2"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "CTURN#sub_1#turn_2"}),
    ("child_turns_of_subagent", (T, S, "sub_1"), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "CTURN#sub_1#"}),
    ("child_turn_name", (T, S, "t-9"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "CTURNN#t-9"}),
    ("idempotency_record", (T, "k-1"), {"PK": "T#tenant-a#IDEM#k-1", "SK": "I"}),
    ("tenant_quota", (T,), {"PK": "T#tenant-a#QUOTA", "SK": "Q"}),
    ("tenant_quota", (T, "R"), {"PK": "T#tenant-a#QUOTA", "SK": "R"}),
    ("vault_partition", (T, "vault_1"), "T#tenant-a#VAULT#vault_1"),
    ("vault", (T, "vault_1"), {"PK": "T#tenant-a#VAULT#vault_1", "SK": "V"}),
    ("vaults_of_tenant", (T,), {"pk": "T#tenant-a#VAULTS", "index": "GSI1"}),
    ("listed_vault", (T, "vault_1"), {"GSI1PK": "T#tenant-a#VAULTS", "GSI1SK": "vault_1"}),
    ("automation_partition", (T, "auto_1"), "T#tenant-a#AUTO#auto_1"),
    ("automation", (T, "auto_1"), {"PK": "T#tenant-a#AUTO#auto_1", "SK": "A"}),
    ("automations_of_tenant", (T,), {"pk": "T#tenant-a#AUTOS", "index": "GSI1"}),
    ("listed_automation", (T, "auto_1"), {"GSI1PK": "T#tenant-a#AUTOS", "GSI1SK": "auto_1"}),
    ("invocation_sk", ("ainv_1",), "INV#ainv_1"),
    ("invocation", (T, "auto_1", "ainv_1"), {"PK": "T#tenant-a#AUTO#auto_1", "SK": "INV#ainv_1"}),
    ("invocations_of_automation", (T, "auto_1"), {"pk": "T#tenant-a#AUTO#auto_1", "sk_prefix": "INV#"}),
    ("webhook_endpoint_partition", (T, "whep_1"), "T#tenant-a#WEBHOOK#whep_1"),
    ("webhook_endpoint", (T, "whep_1"), {"PK": "T#tenant-a#WEBHOOK#whep_1", "SK": "W"}),
    ("webhook_endpoints_of_tenant", (T,), {"pk": "T#tenant-a#WEBHOOKS", "index": "GSI1"}),
    ("listed_webhook_endpoint", (T, "whep_1"), {"GSI1PK": "T#tenant-a#WEBHOOKS", "GSI1SK": "whep_1"}),
    ("webhook_delivery", (T, "whep_1", "evt_1"), {"PK": "T#tenant-a#WEBHOOK#whep_1", "SK": "DLV#evt_1"}),
    ("webhook_deliveries_of_endpoint", (T, "whep_1"), {"pk": "T#tenant-a#WEBHOOK#whep_1", "sk_prefix": "DLV#"}),
    ("credential_sk", ("cred_1",), "CRED#cred_1"),
    ("credential", (T, "vault_1", "cred_1"), {"PK": "T#tenant-a#VAULT#vault_1", "SK": "CRED#cred_1"}),
    ("credentials_of_vault", (T, "vault_1"), {"pk": "T#tenant-a#VAULT#vault_1", "sk_prefix": "CRED#"}),
    ("environment", (T, "env_1"), {"PK": "T#tenant-a#ENV#env_1", "SK": "E"}),
    ("environments_of_tenant", (T, "self_hosted"), {"pk": "T#tenant-a#ENVS#self_hosted", "index": "GSI1"}),
    ("listed_environment", (T, "openai_hosted", "env_1"),
     {"GSI1PK": "T#tenant-a#ENVS#openai_hosted", "GSI1SK": "env_1"}),
    ("enrollment", ("ab12",), {"PK": "ENROLL#ab12", "SK": "N"}),
    ("runtime_credential", ("ab12",), {"PK": "RT#ab12", "SK": "R"}),
    ("host_connection", ("host-1", "c1="), {"PK": "HOST#host-1", "SK": "CONN#c1="}),
    ("connections_of_host", ("host-1",), {"pk": "HOST#host-1", "sk_prefix": "CONN#"}),
    ("host_environment", ("host-1", "env_1"), {"PK": "HOST#host-1", "SK": "ENV#env_1"}),
    ("environments_of_host", ("host-1",), {"pk": "HOST#host-1", "sk_prefix": "ENV#"}),
    ("exec_server_key", ("AKEXABC",), {"PK": "EXECKEY#AKEXABC", "SK": "X"}),
    ("exec_server_signature", ("f00d",), {"PK": "EXECSIG#f00d", "SK": "S"}),
    ("exec_server_registration", ("xreg_1",), {"PK": "EXECREG#xreg_1", "SK": "G"}),
    ("exec_server_affinity", ("env_1",), {"PK": "EXECENV#env_1", "SK": "H"}),
    ("exec_server_hosts", ("codex",), {"pk": "EXECUTORS#codex", "index": "GSI1"}),
    ("exec_server_host", ("c1=",), {"PK": "CONN#c1=", "SK": "XHOST"}),
    ("listed_exec_server_host", ("codex", 1700000000, "c1="),
     {"GSI1PK": "EXECUTORS#codex", "GSI1SK": "001700000000#c1="}),
    ("api_key", ("ab12",), {"PK": "KEY#ab12", "SK": "K"}),
    ("ticket", ("ab12",), {"PK": "TICKET#ab12", "SK": "T"}),
    ("connection_partition", ("c1=",), "CONN#c1="),
    ("connection", ("c1=",), {"PK": "CONN#c1=", "SK": "C"}),
    ("declaration", ("c1=", "codex"), {"PK": "CONN#c1=", "SK": "H#codex"}),
    ("environment_declaration", ("c1=", "env_1", "codex"), {"PK": "CONN#c1=", "SK": "H#ENV#env_1#codex"}),
    ("environment_declarations_of_connection", ("c1=",), {"pk": "CONN#c1=", "sk_prefix": "H#ENV#"}),
    ("claim", ("c1=", "turn_1"), {"PK": "CONN#c1=", "SK": "CLAIM#turn_1"}),
    ("claims_of_connection", ("c1=",), {"pk": "CONN#c1=", "sk_prefix": "CLAIM#"}),
    ("runtime_instance", ("ab12",), {"PK": "CONN#INSTANCE#ab12", "SK": "I"}),
    ("subscription", ("c1=", S), {"PK": "CONN#c1=", "SK": "SUB#sess_1"}),
    ("subscribers_of_session", (T, S), {"pk": "SUB#tenant-a#sess_1", "index": "GSI1"}),
    ("listed_subscriber", (T, S, "c1="), {"GSI1PK": "SUB#tenant-a#sess_1", "GSI1SK": "c1="}),
    ("runtime_pool", ("shared", "codex"), "RUNTIME#codex"),
    ("runtime_pool", ("enrolled", "codex", "env_1"), "RUNTIME#ENV#env_1#codex"),
    ("runtime_pool", ("hosted", "codex"), "RUNTIME#HOSTED#codex"),
    ("runtimes_in_pool", ("RUNTIME#HOSTED#codex",), {"pk": "RUNTIME#HOSTED#codex", "index": "GSI1"}),
    ("listed_in_pool", ("RUNTIME#codex", 1700000000, "c1="), {"GSI1PK": "RUNTIME#codex", "GSI1SK": "001700000000#c1="}),
    ("turn_queue", ("RUNTIME#codex",), "QUEUE#codex"),
    ("turn_queue", ("RUNTIME#ENV#env_1#codex",), "QUEUE#ENV#env_1#codex"),
    ("turn_queue", ("RUNTIME#HOSTED#codex",), "QUEUE#HOSTED#codex"),
    ("queued_turns", ("QUEUE#HOSTED#codex",), {"pk": "QUEUE#HOSTED#codex", "index": "GSI1"}),
    ("queued_turns", ("codex",), {"pk": "QUEUE#codex", "index": "GSI1"}),  # a plain Harness: the shared queue
    ("queued_turn", ("QUEUE#codex", "turn_1"), {"GSI1PK": "QUEUE#codex", "GSI1SK": "turn_1"}),
    ("file", (T, "file-1"), {"PK": "T#tenant-a#FILE#file-1", "SK": "F"}),
    ("files_of_tenant", (T,), {"pk": "T#tenant-a#FILES", "index": "GSI1"}),
    ("listed_file", (T, "file-1"), {"GSI1PK": "T#tenant-a#FILES", "GSI1SK": "file-1"}),
    ("upload_partition", (T, "upload_1"), "T#tenant-a#UPLOAD#upload_1"),
    ("upload", (T, "upload_1"), {"PK": "T#tenant-a#UPLOAD#upload_1", "SK": "U"}),
    ("upload_part", (T, "upload_1", "part_1"), {"PK": "T#tenant-a#UPLOAD#upload_1", "SK": "PART#part_1"}),
    ("parts_of_upload", (T, "upload_1"), {"pk": "T#tenant-a#UPLOAD#upload_1", "sk_prefix": "PART#"}),
    ("artifact_sk", ("art_1",), "ARTIFACT#art_1"),
    ("artifact", (T, S, "art_1"), {"PK": "T#tenant-a#SESSION#sess_1", "SK": "ARTIFACT#art_1"}),
    ("artifacts_of_session", (T, S), {"pk": "T#tenant-a#SESSION#sess_1", "sk_prefix": "ARTIFACT#"}),
    ("environment_file_op", (T, "env_1", "efop_1"), {"PK": "T#tenant-a#ENV#env_1", "SK": "FILEOP#efop_1"}),
]
# What reads a key back rather than builds one
READERS = {"address", "sort_key", "list_position", "item_position", "runtime_item_id", "is_call",
           "is_outbox_record", "enrollment_hash", "exec_server_key_id", "exec_server_registration_id"}


@pytest.mark.parametrize(("name", "args", "expected"), EXAMPLES, ids=[f"{e[0]}{e[1]}" for e in EXAMPLES])
def test_each_key_is_the_documented_string_byte_for_byte(name, args, expected):
    assert getattr(keys, name)(*args) == expected


def test_every_builder_of_the_module_is_pinned_above():
    public = {n for n, f in vars(keys).items() if inspect.isfunction(f) and not n.startswith("_")
              and f.__module__ == keys.__name__}
    assert public - READERS == {name for name, _, _ in EXAMPLES}


def test_what_is_read_back_from_a_key_is_what_built_it():
    assert keys.address(keys.turn(T, S, "turn_1")) == ("T#tenant-a#SESSION#sess_1", "TURN#turn_1")
    assert keys.sort_key(keys.call(T, S, "call_1")) == "CALL#call_1"
    assert keys.list_position(keys.listed_subscriber(T, S, "c1=")) == "c1="
    assert keys.item_position(keys.item_sk(42)) == 42
    assert keys.runtime_item_id(keys.sort_key(keys.item_ref(T, S, "turn_1", "msg#9"))) == "msg#9"
    assert keys.is_call(keys.sort_key(keys.call(T, S, "c"))) and not keys.is_call(keys.turn_sk("c"))
    assert keys.is_outbox_record(keys.outbox_sk(1)) and not keys.is_outbox_record("S")
    assert keys.enrollment_hash(keys.enrollment("ab12")) == "ab12"
    assert keys.exec_server_key_id(keys.exec_server_key("AKEXABC")) == "AKEXABC"
    assert keys.exec_server_registration_id(keys.exec_server_registration("xreg_1")) == "xreg_1"


def _partitions(value) -> tuple[set[str], set[str]]:
    """(table partitions, GSI1 partitions) a builder's value addresses."""
    if isinstance(value, str):
        return set(), set()  # a sort key, or a partition already counted through the keys built with it
    if "PK" in value:
        return {value["PK"]}, set()
    if "GSI1PK" in value:
        return set(), {value["GSI1PK"]}
    return (set(), {value["pk"]}) if value.get("index") else ({value["pk"]}, set())


def _produced() -> tuple[set[str], set[str]]:
    table: set[str] = set()
    index: set[str] = set()
    for name, args, _ in EXAMPLES:
        t, i = _partitions(getattr(keys, name)(*args))
        table |= t
        index |= i
    return table, index


def _prefix(value: str, prefixes: tuple[str, ...]) -> str:
    found = [p for p in prefixes if value.startswith(p)]
    assert found, f"{value} starts with none of {prefixes}"
    return max(found, key=len)


def test_every_partition_the_module_builds_starts_with_one_of_its_leading_key_prefixes_and_each_is_used():
    table, index = _produced()
    assert {_prefix(pk, keys.PARTITIONS) for pk in table} == set(keys.PARTITIONS)
    assert {_prefix(pk, keys.INDEX_PARTITIONS) for pk in index} == set(keys.INDEX_PARTITIONS)


def _dynamodb_statements():
    """(function, statement, covers the table, covers GSI1) for every DynamoDB grant in template.yaml."""
    for name, res in template.resources("AWS::Serverless::Function").items():
        for policy in res["Properties"].get("Policies") or []:
            for statement in (policy.get("Statement") or []) if isinstance(policy, dict) else []:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                if not any(a.startswith("dynamodb:") for a in actions):
                    continue
                resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
                if resources == [{"Fn::GetAtt": ["Table", "StreamArn"]}]:
                    continue  # stream reads (the outbox DLQ's redrive) touch no item key
                table = {"Fn::GetAtt": ["Table", "Arn"]} in resources
                index = {"Fn::Sub": "${Table.Arn}/index/GSI1"} in resources
                assert table or index, f"{name}: a DynamoDB grant on neither the table nor GSI1"
                yield name, statement, table, index


def _leading_keys(statement) -> list[str] | None:
    condition = (statement.get("Condition") or {}).get("ForAllValues:StringLike") or {}
    return condition.get("dynamodb:LeadingKeys")


def test_every_leading_keys_condition_of_the_template_names_prefixes_the_key_module_produces():
    conditions = 0
    for name, statement, table, index in _dynamodb_statements():
        listed = _leading_keys(statement)
        if listed is None:
            continue
        conditions += 1
        allowed = (set(keys.PARTITIONS) if table else set()) | (set(keys.INDEX_PARTITIONS) if index else set())
        for entry in listed:
            assert entry.endswith("*") and entry[:-1] in allowed, \
                f"{name}: LeadingKeys {entry!r} is no prefix keys.py produces for {statement['Resource']}"
    assert conditions >= 10  # the template's conditions were found (its shape did not change unseen)


def test_every_prefix_the_key_module_produces_is_granted_by_some_leading_keys_condition_or_unconditioned():
    """A prefix no condition lists is reachable only by a function whose grant has no condition (the
    outbox consumer and the Runtime gateway, which read the queues and subscriber lists)."""
    granted_table: set[str] = set()
    granted_index: set[str] = set()
    unconditioned_index: set[str] = set()
    for name, statement, table, index in _dynamodb_statements():
        listed = _leading_keys(statement)
        if listed is None:
            if index:
                unconditioned_index.add(name)
            continue
        prefixes = {entry.removesuffix("*") for entry in listed}
        granted_table |= prefixes if table else set()
        granted_index |= prefixes if index else set()
    assert set(keys.PARTITIONS) <= granted_table
    assert set(keys.INDEX_PARTITIONS) - granted_index == {keys.TURN_QUEUE, keys.SUBSCRIBERS}
    assert unconditioned_index == {"StreamFunction", "RuntimeGatewayFunction"}
