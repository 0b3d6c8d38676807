"""Issue 36 (cost): a Session is listed by a list entry of its own, so the commits that rewrite the Session item write
no GSI1 entry; sessions.list reads the Sessions its entries name. The entry is the first input message's Item of a
create with input (written once), else a row of its own (keys.session_listing). A Session created before list entries
existed (its own item on GSI1) still lists, in order, and filters; a metadata update moves the filter."""

import boto3
import pytest
from openai import NotFoundError

from agents_core import keys, sessions
from agents_core.apikeys import create_key
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import runtime, stack  # noqa: F401 - fixtures

AGENT = {"model": "m"}
SCRIPTED = {"x_agents_core": {"harness": "scripted"}}


def _create(client, **kw):
    return client.beta.agents.sessions.create(environment={"type": "none"}, agent=AGENT, input="say hi",
                                              extra_body=SCRIPTED, **kw)


def _ids(page):
    return [s.id for s in page.data]


def test_sessions_list_from_their_entries_and_one_listed_by_its_own_item_still_lists(stack, runtime):
    """One stack for both (a stack start is most of a test's time here)."""
    _from_entries(stack)
    _listed_by_its_own_item(stack)


def _from_entries(stack):
    client = sdk(stack.http, create_key(stack.store, "tenant-a"))
    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    made = [_create(client, metadata={"n": str(i)}) for i in range(3)]
    foreign = _create(other)
    run = _create(client)
    idle = client.beta.agents.sessions.create(environment={"type": "self_hosted", "workspace_directory": "/w"},
                                              agent=AGENT, extra_body=SCRIPTED)  # no input: its own list row
    for s in [*made, run]:
        wait_for(lambda s=s: client.beta.agents.sessions.retrieve(s.id).status == "idle")
    ids = sorted([s.id for s in made] + [run.id, idle.id])
    assert _ids(client.beta.agents.sessions.list(order="asc")) == ids
    assert _ids(client.beta.agents.sessions.list(order="desc")) == ids[::-1]
    first = client.beta.agents.sessions.list(order="asc", limit=2)
    assert _ids(first) == ids[:2] and first.has_more
    assert _ids(client.beta.agents.sessions.list(order="asc", after=ids[1])) == ids[2:]
    idle_agent = stack.store.get(keys.session("tenant-a", idle.id))["agent_id"]  # an inline Agent of its own
    assert _ids(client.beta.agents.sessions.list(extra_query={"agent_id": idle_agent})) == [idle.id]
    listed = {s.id: s for s in client.beta.agents.sessions.list().data}
    assert listed[run.id].status == "idle" and foreign.id not in listed  # the Session as it is now, tenant's own
    assert _ids(client.beta.agents.sessions.list(extra_query={"metadata[n]": "1"})) == [made[1].id]
    client.beta.agents.sessions.update(made[1].id, metadata={"n": "7"})
    assert _ids(client.beta.agents.sessions.list(extra_query={"metadata[n]": "1"})) == []
    assert _ids(client.beta.agents.sessions.list(extra_query={"metadata[n]": "7"})) == [made[1].id]
    # no Session item is on GSI1: its commits (create, the Turn's end) rewrote no index entry
    stored = stack.store.get(keys.session("tenant-a", run.id))
    assert keys.GSI1PK not in stored and int(stored["out_seq"]) >= 2
    entry = stack.store.get(sessions.list_entry("tenant-a", run.id, stored))
    assert entry[keys.GSI1PK] == keys.sessions_of_tenant("tenant-a")["pk"] and entry[keys.GSI1SK] == run.id
    assert entry[keys.SK] == keys.item_sk(1) and entry["kind"] == "item"  # the input message's Item
    first_item = client.beta.agents.sessions.items.list(run.id, order="asc").data[0]
    assert first_item.type == "message" and first_item.role == "user"  # an Item like any other
    own = stack.store.get(keys.session_listing("tenant-a", idle.id))
    assert own["listed"] == idle.id and own[keys.GSI1SK] == idle.id
    client.beta.agents.sessions.delete(made[0].id)
    assert made[0].id not in _ids(client.beta.agents.sessions.list())
    assert stack.store.query(pk=keys.session_partition("tenant-a", made[0].id)).items == []  # entry gone with it


def _listed_by_its_own_item(stack):
    client = sdk(stack.http, create_key(stack.store, "tenant-c"))
    old, new = (_create(client, metadata={"k": v}) for v in ("a", "b"))
    for s in (old, new):
        wait_for(lambda s=s: client.beta.agents.sessions.retrieve(s.id).status == "idle")
    # `old` as a deployment before list entries stored it: its own item on GSI1, no list entry
    table = boto3.client("dynamodb", region_name="us-east-1")
    listed = keys.listed_session("tenant-c", old.id)
    entry = sessions.list_entry("tenant-c", old.id, stack.store.get(keys.session("tenant-c", old.id)))
    key = {k: {"S": v} for k, v in keys.session("tenant-c", old.id).items()}
    table.update_item(TableName=stack.table, Key=key, UpdateExpression="SET GSI1PK = :p, GSI1SK = :s REMOVE list_item",
                      ExpressionAttributeValues={":p": {"S": listed[keys.GSI1PK]}, ":s": {"S": listed[keys.GSI1SK]}})
    table.update_item(TableName=stack.table, Key={k: {"S": v} for k, v in entry.items()},
                      UpdateExpression="REMOVE GSI1PK, GSI1SK, listed, agent_id, meta")
    assert _ids(client.beta.agents.sessions.list(order="asc")) == sorted([old.id, new.id])
    assert _ids(client.beta.agents.sessions.list(extra_query={"metadata[k]": "a"})) == [old.id]
    client.beta.agents.sessions.update(old.id, metadata={"k": "c"})
    assert _ids(client.beta.agents.sessions.list(extra_query={"metadata[k]": "c"})) == [old.id]
    assert "meta" not in stack.store.get(entry)  # no entry made for it
    # a list entry whose Session was just deleted (its partition goes right after) is left out
    stack.store.delete(keys.session("tenant-c", new.id))
    assert _ids(client.beta.agents.sessions.list()) == [old.id]
    with pytest.raises(NotFoundError):
        client.beta.agents.sessions.update(new.id, metadata={"k": "d"})
    new_entry = sessions.list_entry("tenant-c", new.id, {"list_item": 1})
    assert stack.store.get(new_entry)["meta"] == {"k": "b"}  # nothing written
