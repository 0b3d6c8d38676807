"""WebSocket `$default`: the Runtime protocol (runtime.hello and turn.* observations).

Every rejected message is answered on the sending connection with {"type": "error", "error": {...}}
(the official envelope's fields, `param` naming the field) and logged with connection, Turn and
reason, never the payload; nothing is written for it, the connection stays open and the Runtime's
other Turns go on. Accepted observations are answered with a cumulative `turn.ack`, except a message marked
`ack: false` by a Runtime whose welcome granted `deferred_acks`: its heartbeat asks, and one `turn.acks` answers
(agents_core/runtimes/acks.py).
"""

import json

from agents_contract.errors import AgentsError, ServerError
from agents_contract.protocol import (
    ACTION,
    ENVIRONMENT_IDLE,
    EXECUTOR_ACTIONS,
    EXECUTOR_CONNECTED,
    EXECUTOR_HOST,
    RUNTIME_HEARTBEAT,
    RUNTIME_HELLO,
    SEQ,
    TURN_ID,
)
from agents_core.aws import default_messenger, default_workflow
from agents_core.observability import logger
from agents_core.runtimes import acks, connections, dispatch, instances, liveness, observations
from agents_core.store import default_store


def _reply(connection_id, message):
    connections.post_safely(default_messenger(), default_store(), connection_id, message)


def _field(message, name):
    value = message.get(name) if isinstance(message, dict) else None
    return value if isinstance(value, (str, int)) and not isinstance(value, bool) and len(str(value)) <= 256 else None


def _offer_queued(store, connection_id, queues):
    """The Turns waiting in these queues, offered to this connection (which now may serve them)."""
    for queue in queues:
        for turn in dispatch.queued_turns(store, queue):
            dispatch.dispatch(store, default_workflow(), turn["tenant"], turn["session_id"], turn["id"],
                              only=connection_id)


def _exec_server(store, connection_id, conn, action, message):
    """An operator's Runtime hosting exec-server connections (agents_core/environments/exec_server_hosts.py)."""
    from agents_core.environments import exec_server_hosts

    if action == EXECUTOR_HOST:
        _reply(connection_id, exec_server_hosts.announce_host(store, connection_id, conn, message))
    elif action == EXECUTOR_CONNECTED:  # it now serves that Environment: its waiting Turns are offered
        _, queue = exec_server_hosts.connected(store, connection_id, message)
        _offer_queued(store, connection_id, [queue])
    else:
        exec_server_hosts.disconnected(store, connection_id, message)


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    connection_id = event["requestContext"]["connectionId"]
    store = default_store()
    try:
        message = json.loads(event.get("body") or "{}")
        if not isinstance(message, dict):
            raise ValueError
    except (ValueError, RecursionError):
        error = AgentsError("Messages are JSON objects.", param=None)
        observations.log_rejection(connection_id, None, None, None, error)
        _reply(connection_id, observations.error_frame(error))
        return {"statusCode": 200}
    action, turn_id, seq = _field(message, ACTION), _field(message, TURN_ID), _field(message, SEQ)
    try:
        conn = connections.connection(store, connection_id)
        if conn is None or conn.get("role") != "runtime":
            raise AgentsError("This connection is not a Runtime connection.", param="action")
        if action == RUNTIME_HELLO:
            instance = instances.parse(message)  # checked before the hello writes anything
            welcome, conn = connections.greet(store, connection_id, message)
            # a rotation (or a return) takes its Turns, and what was held for them is posted here
            welcome.update(instances.welcome(store, connection_id, conn, instance, default_messenger()))
            _reply(connection_id, welcome)
            _offer_queued(store, connection_id, connections.queued_pools(conn, welcome["harnesses"]))
        elif conn.get("runtime_kind") == "enrolling":
            raise AgentsError("Say runtime.hello first: it spends the enrollment.", param="action")
        elif action == RUNTIME_HEARTBEAT:  # alive, with the Turns it runs; unanswered unless it asks for acks
            revived, answers = liveness.beat(store, default_workflow(), connection_id, message)
            for answer in answers:  # what it asked Core has applied (one turn.acks), results lost on their way
                _reply(connection_id, answer)
            if revived:  # its rows were stale: what queued meanwhile is offered to it, as at a hello
                _offer_queued(store, connection_id, connections.queued_pools(conn, revived))
        elif action == ENVIRONMENT_IDLE:
            connections.environment_idle(store, connection_id, message)
        elif action in EXECUTOR_ACTIONS:
            _exec_server(store, connection_id, conn, action, message)
        elif action == "environment.file.result":  # a file write or listing the API function waits for
            from agents_core.files import environment_files

            environment_files.record(store, connection_id, conn, message)
        else:
            message, deferred = acks.unmarked(message)  # `ack: false`: no turn.ack, the Runtime's heartbeat asks
            messenger = acks.WithoutAcks(default_messenger()) if deferred else default_messenger()
            observations.observe(store, default_workflow(), connection_id, message, messenger)
    except AgentsError as error:
        observations.log_rejection(connection_id, turn_id, action, seq, error)
        _reply(connection_id, observations.error_frame(error, action=action, seq=seq, turn_id=turn_id))
    except Exception:  # noqa: BLE001 - never drop the connection; the Runtime may resend
        logger.exception("runtime message failed", extra={"connection_id": connection_id, "turn_id": turn_id,
                                                           "action": action, "seq": seq})
        _reply(connection_id, observations.error_frame(ServerError(), action=action, seq=seq, turn_id=turn_id))
    return {"statusCode": 200}
