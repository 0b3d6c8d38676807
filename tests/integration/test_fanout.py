"""Fan-out claims a commit for a page of subscribers in transactions of up to 100 conditional writes;
when one condition fails (a subscriber already had the commit, or left), the page falls back to
claims one by one, so every subscriber gets each commit exactly once."""


from agents_core import keys, live
from agents_core.aws import default_messenger
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import stack  # noqa: F401 - fixtures
from tests.integration.test_live import Subscriber, idle_session

EVENT = {"type": "agent.session.idle", "event_id": "evt_fanout", "session": {}}


def subscribers(stack, key, session_id, count):
    subs = [Subscriber(stack, key) for _ in range(count)]
    for sub in subs:
        sub.subscribe(session_id)
    return subs


def got(sub):
    return [m for m in sub.messages if m.get("event_id") == "evt_fanout"]


def test_every_subscriber_of_several_claim_transactions_gets_the_commit_once(stack):
    """120 subscribers: a full transaction of 100 claims and one of 20 (`make bench` fans one event out to
    1,000 subscribers: bench/bench_turns.py)."""
    from agents_core.apikeys import create_key

    key = create_key(stack.store, "tenant-a")
    session = idle_session(sdk(stack.http, key))
    subs = subscribers(stack, key, session.id, live.CLAIM_CHUNK + 20)
    assert live.CLAIM_CHUNK == 100  # DynamoDB's limit of writes in one transaction
    store, messenger = stack.store, default_messenger()
    assert live.fanout(store, messenger, "tenant-a", session.id, 1_000, [EVENT]) == 120
    assert live.fanout(store, messenger, "tenant-a", session.id, 1_000, [EVENT]) == 0  # a redelivered batch
    assert all(len(got(sub)) == 1 for sub in subs)


def test_a_subscriber_that_already_had_the_commit_sends_its_page_to_claims_one_by_one(stack):
    from agents_core.apikeys import create_key

    key = create_key(stack.store, "tenant-a")
    session = idle_session(sdk(stack.http, key))
    subs = subscribers(stack, key, session.id, 5)
    store = stack.store
    store.transact(store.new_transaction().update(
        keys.subscription(subs[2].connection_id, session.id), "SET delivered_seq = :s", values={":s": 2_000}))  # it got commit 2,000 from an earlier, interrupted delivery
    store.delete(keys.subscription(subs[4].connection_id, session.id))  # it left meanwhile
    assert live.fanout(store, default_messenger(), "tenant-a", session.id, 2_000, [EVENT]) == 3
    assert [len(got(sub)) for sub in subs] == [1, 1, 0, 1, 0]


def outbox_records(stack, session_id):
    pk = keys.session_partition("tenant-a", session_id)
    items = stack.dynamodb.query(TableName=stack.table, KeyConditionExpression="PK = :pk",
                                 ExpressionAttributeValues={":pk": {"S": pk}}, ConsistentRead=True)["Items"]
    return [i for i in items if i["SK"]["S"].startswith("OUT#")]


def test_commits_of_a_session_nobody_watches_skip_the_subscriber_query_until_someone_subscribes(stack):
    from agents_core import engine
    from agents_core.apikeys import create_key
    from agents_core.store import TransactionConflict
    from tests.integration.test_live import send

    key = create_key(stack.store, "tenant-a")
    client = sdk(stack.http, key)
    session = idle_session(client)
    send(client, session.id, "say hi")  # no Runtime: the Turn stays queued
    assert outbox_records(stack, session.id)
    assert all(r.get("fanout") == {"BOOL": False} for r in outbox_records(stack, session.id))

    # A commit decided before a subscription fails its condition and is decided again.
    draft = engine.Draft(stack.store, "tenant-a", stack.store.get(keys.session("tenant-a", session.id)))
    draft.emit_session("agent.session.in_progress")
    sub = Subscriber(stack, key)
    assert sub.subscribe(session.id)["type"] == "subscribed"
    try:
        draft.commit()
        raise AssertionError("a commit decided before the subscription must not land")
    except TransactionConflict:
        pass

    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    newest = max(outbox_records(stack, session.id), key=lambda r: r["SK"]["S"])
    assert "fanout" not in newest  # the Session has a subscriber now
    from local.inprocess import wait_for
    assert wait_for(lambda: [e for e in sub.events if e["type"] == "agent.session.turn.cancelled"], timeout=10)
