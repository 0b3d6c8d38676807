"""The outbox consumer: what the stream handler does with each committed outbox record.

Commands (dispatch a new Turn, start its execution, deliver results/input/cancellation to the
owning Runtime) are idempotent, so a redelivered stream batch repeats none of their effects.

A commit larger than one record is written as several OUT# parts in its one transaction: the first
says how many (`parts`), the others name it (`part_of`). The commit is handled once, at its first
part, with every part read back in order; the other parts' stream records are skipped.
"""

from __future__ import annotations

from typing import Any

from agents_contract import jsonutil

from . import keys, live
from .aws import Messenger, Workflow
from .runtimes import connections, dispatch, instances
from .settings import get_settings
from .store import DynamoStore, unpack


def process(image: dict[str, Any], store: DynamoStore, messenger: Messenger, workflow: Workflow) -> None:
    """image: the NEW_IMAGE of an OUT# record (plain Python values)."""
    if image.get("part_of") is not None:
        return  # handled with its commit's first part
    tenant, session_id, seq = image["tenant"], image["session_id"], int(image["seq"])
    events = jsonutil.loads(unpack(image["events"]) if image.get("events") else "[]")
    commands = jsonutil.loads(unpack(image["commands"]) if image.get("commands") else "[]")
    last = seq
    parts = int(image.get("parts") or 1)
    if parts > 1:
        found = store.batch_get([keys.outbox_record(tenant, session_id, seq + i) for i in range(1, parts)])
        for i in range(1, parts):
            part = found.get(keys.address(keys.outbox_record(tenant, session_id, seq + i)))
            if part is None:
                continue  # the Session was deleted meanwhile
            events += jsonutil.loads(unpack(part["events"]) if part.get("events") else "[]")
            commands += jsonutil.loads(unpack(part["commands"]) if part.get("commands") else "[]")
        last = seq + parts - 1
    if events and image.get("fanout") is not False:  # False: no subscriber when it committed
        live.fanout(store, messenger, tenant, session_id, last, events)
    if events and get_settings().webhook_queue_url:  # the tenant's webhook endpoints (agents_core/webhooks)
        from .webhooks import deliveries

        deliveries.enqueue(store, tenant, session_id, seq, events)
    for command in commands:
        kind = command["type"]
        if kind == "dispatch":
            dispatch.dispatch(store, workflow, tenant, session_id, command["turn_id"])
        elif kind == "start_execution":
            workflow.start(tenant, session_id, command["turn_id"])
        elif kind == "await_environment":
            workflow.await_environment(tenant, session_id, command["turn_id"])
        elif kind == "end_wait":
            workflow.end_wait(command["turn_id"])
        elif kind == "deliver":
            if not connections.post_safely(messenger, store, command["connection_id"], command["message"]) \
                    and not instances.follow(store, messenger, command) and not instances.hold(store, command):
                # not moved (a rotation) and not held for a returning instance: it may have come back meanwhile
                instances.follow(store, messenger, command)
        elif kind == "automations_tool":  # a call of the automations tool: the automations function serves it
            from .automations.tool import hand_over

            hand_over(tenant, session_id, command)
        else:
            raise ValueError(f"unknown outbox command {kind!r}")
