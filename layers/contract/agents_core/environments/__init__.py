"""Environments: where a workspace Session's Turns run, one module per concern.

- `resource`: the Environment item, its views and reads (`environments.retrieve/list`), its events and
  its final states.
- `placement`: who may run what, where (shared, enrolled and hosted connections; their pools and queues).
- `connection`: connected / disconnected, and the `environment_connection` action pending input waits on.
- `enrollment`: enrollments and durable credentials of a self_hosted Environment's machine, and what
  goes with a deleted Session's Environment.
- `exec_server`: the stock `codex exec-server`: its key pair, SigV4 verification, the registry and the
  pick of its host; `exec_server_hosts`: the operator's Runtimes that host exec-server connections.
- `hosted_lifecycle`: openai_hosted Environments on the operator's hosts: affinity to a host and the
  lifecycle it drives; `hosted_preparation`: their configuration and sealed preparation (admitted by
  the pure `agents_contract.hosted`), created on their own or with a Session.

Dependencies go one way: placement <- resource <- connection <- exec_server_hosts; exec_server <-
enrollment; resource <- hosted_lifecycle, hosted_preparation. Nothing is imported with the package: the
exec-server registry loads `exec_server` alone and the engine `placement` alone; `environments.NAME`, for
a module that imports the package, loads the module that owns NAME on first use (`__getattr__`).
"""

from __future__ import annotations

from typing import Any

# What modules that import the package read from it, and the module that owns each name.
_HOMES = {
    "remote_url": "resource", "LIVE": "resource", "final_message": "resource", "turn_error": "resource",
    "retrieve": "resource", "list_page": "resource",
    "is_connected": "connection", "ask_for_connection": "connection", "clear_connection_action": "connection",
    "mark_connected": "connection", "mark_disconnected": "connection",
    "exchange": "enrollment", "enroll": "enrollment", "delete_for_session": "enrollment",
    "bind_host": "hosted_lifecycle", "host_is_connected": "hosted_lifecycle", "host_connected": "hosted_lifecycle",
    "host_disconnected": "hosted_lifecycle", "idle": "hosted_lifecycle", "observe_turn": "hosted_lifecycle",
    "expire": "hosted_lifecycle", "refuse_input": "hosted_lifecycle",
    "preparation": "hosted_preparation", "preparation_context": "hosted_preparation",
    "create": "hosted_preparation", "for_session": "hosted_preparation", "announce": "hosted_preparation",
    "write_for_session": "hosted_preparation",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:  # a submodule not imported yet (the import system asks first), or no such name
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import connection, enrollment, hosted_lifecycle, hosted_preparation, resource

    modules = {"resource": resource, "connection": connection, "enrollment": enrollment,
               "hosted_lifecycle": hosted_lifecycle, "hosted_preparation": hosted_preparation}
    return getattr(modules[home], name)
