"""The outbox consumer: what the stream handler does with each committed outbox record.

Commands (dispatch a new Turn, start its execution, deliver results/input/cancellation to the
owning Runtime) are idempotent, so a redelivered stream batch repeats none of their effects.
"""

from __future__ import annotations

from typing import Any

from agents_contract import jsonutil

from . import live, runtimes
from .aws import Messenger, Workflow
from .store import DynamoStore


def process(image: dict[str, Any], store: DynamoStore, messenger: Messenger, workflow: Workflow) -> None:
    """image: the NEW_IMAGE of an OUT# record (plain Python values)."""
    tenant, session_id, seq = image["tenant"], image["session_id"], int(image["seq"])
    events = jsonutil.loads(image.get("events") or "[]")
    if events:
        live.fanout(store, messenger, tenant, session_id, seq, events)
    for command in jsonutil.loads(image.get("commands") or "[]"):
        kind = command["type"]
        if kind == "dispatch":
            runtimes.dispatch(store, workflow, tenant, session_id, command["turn_id"])
        elif kind == "start_execution":
            workflow.start(tenant, session_id, command["turn_id"])
        elif kind == "deliver":
            runtimes.post_safely(messenger, store, command["connection_id"], command["message"])
        else:
            raise ValueError(f"unknown outbox command {kind!r}")
