"""The `automations` Agent tool ("Lets the agent manage its own scheduled wakeups"), served by Core.

A Session whose Agent has `{"type": "automations"}` may call the function `automations` with
`{"action": "create"|"list"|"update"|"delete", ...}`. Its Runtime reports the call as any function call; the
commit that records it makes no required action of it but queues an `automations_tool` command
(runtimes/observations.py), which the outbox consumer hands to the automations function (`run`). That creates, lists, updates or deletes automations
that target the calling Session (`existing_session`, `created_by: {type: agent, session_id, tool_call_id}`)
and answers the call with a tool result, as a client would answer a function call. A repeated delivery of the
command answers the same call once (the result's Idempotency-Key is the call) and creates nothing twice (an
automation already created by this call is answered again).
"""

from __future__ import annotations

import json
from typing import Any

from agents_contract import automations as contract
from agents_contract import validation
from agents_contract.errors import AgentsError, InvalidRequest, NotFound

from ..observability import logger
from ..pagination import ListParams
from ..store import DynamoStore
from . import manage

NAME, DESCRIPTION = contract.TOOL_NAME, contract.TOOL_DESCRIPTION  # the function the Harness calls


def serves(snapshot_tools: list[dict[str, Any]]) -> bool:
    return any(t.get("type") == "automations" for t in snapshot_tools)


def _own(store: DynamoStore, tenant: str, session_id: str, automation_id: str) -> dict[str, Any]:
    item = manage.load(store, tenant, automation_id)
    if item.get("target_session") != session_id:
        raise NotFound()  # an agent manages the automations that wake its own Session only
    return item


def _created_by_call(store: DynamoStore, tenant: str, session_id: str, call_id: str) -> dict[str, Any] | None:
    listed = manage.list_page(store, tenant, ListParams(None, 100, False), {"session_id": session_id})["data"]
    return next((a for a in listed if a["created_by"].get("tool_call_id") == call_id), None)


def _act(store: DynamoStore, tenant: str, session_id: str, call_id: str, arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            raise InvalidRequest("The automations tool's arguments are not JSON.", param=None) from None
    call = validation.parse(contract.AgentToolCall, arguments)
    if call.action == "list":
        return manage.list_page(store, tenant, ListParams(None, 100, False), {"session_id": session_id})
    if call.action == "create":
        existing = _created_by_call(store, tenant, session_id, call_id)
        if existing is not None:
            return existing  # a repeated delivery of this call
        body: dict[str, Any] = {"name": call.name or "wake-up", "target": {
            "type": "existing_session", "session_id": session_id, "instructions": call.instructions or ""}}
        if call.run_at is not None:
            body |= {"type": "once", "run_at": call.run_at}
        else:
            body |= {"type": "periodic", "expression": call.expression or "", "timezone": call.timezone or "UTC"}
        return manage.create(store, tenant, body,
                             created_by={"type": "agent", "session_id": session_id, "tool_call_id": call_id})
    if not call.automation_id:
        raise InvalidRequest("Missing required parameter: 'automation_id'.", param="automation_id")
    _own(store, tenant, session_id, call.automation_id)
    if call.action == "delete":
        return manage.delete(store, tenant, call.automation_id)
    update = {k: v for k, v in (("name", call.name), ("expression", call.expression), ("timezone", call.timezone),
                                ("run_at", call.run_at)) if v is not None}
    if call.instructions is not None:
        update["target"] = {"type": "existing_session", "session_id": session_id, "instructions": call.instructions}
    return manage.update(store, tenant, call.automation_id, update, creator_session=session_id)


def run(store: DynamoStore, tenant: str, session_id: str, turn_id: str, call_id: str, arguments: Any) -> None:
    """Serve one call of the tool and answer it (success with the result, or the refusal's message)."""
    try:
        output: dict[str, Any] = {"success": True, "output": json.dumps(_act(store, tenant, session_id, call_id,
                                                                              arguments))}
    except AgentsError as refused:
        output = {"success": False, "error": refused.message}
    from .. import results

    event = {"type": "agent.session.input.tool_result", "turn_id": turn_id, "call_id": call_id, **output}
    try:
        results.submit(store, tenant, session_id, {"events": [event]}, idempotency_key=f"automations-tool-{call_id}")
    except AgentsError as late:  # the Turn ended or the call was abandoned meanwhile: nothing to answer
        logger.info("automations tool result not admitted", extra={"call_id": call_id, "code": late.code})


def hand_over(tenant: str, session_id: str, command: dict[str, Any]) -> None:
    """The outbox consumer's part: invoke the automations function with the call (asynchronously, so the stream
    never waits on it; Lambda retries a failed asynchronous invocation, and `run` is idempotent per call)."""
    from ..aws import botocore_session
    from ..settings import get_settings

    settings = get_settings()
    client = botocore_session().create_client("lambda", region_name=settings.aws_region)
    payload = {"automations_tool": {"tenant": tenant, "session_id": session_id, "turn_id": command["turn_id"],
                                    "call_id": command["call_id"], "arguments": command.get("args")}}
    client.invoke(FunctionName=settings.automations_function_arn, InvocationType="Event",
                  Payload=json.dumps(payload).encode())
