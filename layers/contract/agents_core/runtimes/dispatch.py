"""Claiming Turns: dispatch a queued Turn to an eligible Runtime, claim at commit, and the
Dispatch task (`turn.start`)."""

from __future__ import annotations

from typing import Any, Optional

from agents_contract import capabilities, jsonutil, protocol
from agents_contract.parser import Snapshot

from .. import engine, environments, keys
from ..aws import ConnectionGone, Messenger, Workflow
from ..environments import placement
from ..ids import now
from ..observability import logger
from ..settings import get_settings
from ..store import DynamoStore, unpack
from ..vault_crypto import SecretUnavailable
from . import instances
from .connections import eligible_runtimes

MAX_GONE = 5  # gone connections one turn.start meets before its Turn waits in its queue

# ---- claiming Turns ------------------------------------------------------------------------------

def dispatch(store: DynamoStore, workflow: Workflow, tenant: str, session_id: str, turn_id: str,
             only: Optional[str] = None) -> Optional[str]:
    """Claim a queued Turn for a connected Runtime whose capabilities cover the Session, then start
    its execution. With no eligible Runtime the Turn stays queued until one says hello. A Turn requeued after
    its Runtime was gone (`requeue`) has its execution waiting in Dispatch already: it gets turn.start now."""
    waiting: list[Optional[str]] = [None]

    def work(draft: engine.Draft) -> Optional[str]:
        waiting[0] = None
        turn = draft.turn(turn_id)
        if turn is None or turn.status != "queued":
            return turn.claimed_by if turn is not None and turn.status not in engine.TERMINAL else None
        snapshot = draft.snapshot
        messages = [i["content"] for i in _turn_input(store, tenant, session_id, turn_id, turn)]
        required = capabilities.required_capabilities(snapshot, messages=[{"content": c} for c in messages])
        candidates = _candidates(draft, required)
        if only is not None:
            candidates = [c for c in candidates if c["connection_id"] == only]
        if not candidates:
            logger.info("no eligible runtime; turn stays queued", extra={"turn_id": turn_id})
            return None
        waiting[0] = turn.task_token
        return _claim(draft, turn, candidates[0])

    claimed = engine.run(store, tenant, session_id, work, turn_id=turn_id)
    if claimed and waiting[0]:
        from ..aws import default_messenger

        try:
            post_start(store, default_messenger(), tenant, session_id, turn_id, claimed)
        except TurnFailedBeforeStart as exc:
            workflow.fail(waiting[0], "TurnFailedBeforeStart", str(exc))
    elif claimed:
        # Start now for latency; the claim's outbox command starts it again if this process dies
        # between the claim and the start. Both are idempotent (execution name = Turn id).
        workflow.start(tenant, session_id, turn_id)
    return claimed


def _claim(draft: engine.Draft, turn: engine.TurnState, runtime: dict[str, Any]) -> str:
    """Claim `turn` for `runtime` in this commit; its execution starts after the commit."""
    chosen = runtime["connection_id"]
    was = turn.status
    # Provenance: which engine runs this Turn (`scripted`, or the native engine and version).
    turn.set(status="in_progress", started_at=turn.doc.get("started_at") or now(), claimed_by=chosen,
             x_agents_core={"engine": runtime.get("engine", "unknown")},
             input_through=draft.item_seq)  # turn.start carries these; later messages go as turn.input
    if turn.doc.get("error"):  # requeued, then claimed: the wait's error no longer applies
        turn.set(error=None)
    # The connection remembers what it claimed, so losing it fails those Turns at once.
    draft.tx.put({**keys.claim(chosen, turn.id), "kind": "claim", "tenant": draft.tenant,
                  "session_id": draft.session_id, "turn_id": turn.id, "ttl": now() + 2 * 3600})
    draft.active_turn = {**(draft.active_turn or {}), "id": turn.id, "status": "in_progress", "claimed_by": chosen}
    if was != "in_progress":
        draft.emit_turn("agent.session.turn.in_progress", turn)
    if runtime.get("runtime_kind") == "hosted":  # its Environment's workspace lives on this host from now on
        env_id = placement.session_environment_id(draft.session_id, draft.snapshot.environment)
        environments.bind_host(draft, env_id, draft.hosted_environment, runtime["host_id"])  # type: ignore[arg-type]
    if environments.clear_connection_action(draft) and draft.status == "requires_action" \
            and not draft.required_actions:
        draft.status = "in_progress"  # the Environment connected: the waiting input runs
        draft.emit_session("agent.session.in_progress")
    if not turn.task_token:  # a requeued Turn's execution runs already (its Dispatch task waits)
        draft.command({"type": "start_execution", "turn_id": turn.id})
    if draft.started is not turn and draft.snapshot.environment["type"] in placement.WORKSPACE:
        draft.command({"type": "end_wait", "turn_id": turn.id})  # its ConnectionWait, if one waits, is stopped
    return chosen


def _candidates(draft: engine.Draft, required: frozenset[str]) -> list[dict[str, Any]]:
    """The Runtimes that may serve this Session's Turns: its placement's kind only (`placement`)."""
    where = draft.snapshot.environment["type"]
    env_id = placement.session_environment_id(draft.session_id, draft.snapshot.environment)
    host_id = None
    if where == "openai_hosted":  # bound to the host that holds its workspace, once one claimed a Turn of it
        env = draft.store.get(keys.environment(draft.tenant, env_id))  # type: ignore[arg-type]
        draft.hosted_environment = env
        if (env is None and not draft.environment_in_commit) or \
                (env is not None and env.get("status") not in environments.LIVE):
            return []  # expired, failed or deleted: nothing runs in it again
        host_id = (env or {}).get("host_id") or draft.bound_host
    return eligible_runtimes(draft.store, draft.snapshot.harness, required, where, env_id, host_id)


def wait_for_environment(draft: engine.Draft, turn: engine.TurnState) -> None:
    """A workspace Turn no connection can claim now waits a bounded time (the ConnectionWait workflow
    fails it after `environment_wait_seconds`); on an offline self_hosted Environment the Session asks
    for the connection: "An offline self_hosted Environment with pending input shows
    {environment_id, type: "environment_connection"}"."""
    where = draft.snapshot.environment["type"]
    if where not in placement.WORKSPACE:
        return
    env_id = placement.session_environment_id(draft.session_id, draft.snapshot.environment)
    draft.command({"type": "await_environment", "turn_id": turn.id})
    if where == "self_hosted" and not environments.is_connected(draft.store.get(keys.environment(
            draft.tenant, env_id))):
        environments.ask_for_connection(draft, env_id)


def start_turn(draft: engine.Draft, messages: list[list[dict[str, Any]]]) -> engine.TurnState:
    """A new Turn (`engine.start_turn`), claimed in the commit that starts it (`claim_started_turn`, which the
    engine runs once every decision of the commit is made, just before its transaction)."""
    turn = engine.start_turn(draft, messages)
    draft.before_commit(claim_started_turn)
    return turn


def claim_started_turn(draft: engine.Draft) -> Optional[str]:
    """The Turn this commit starts is claimed in the same commit when a connected Runtime covers it,
    so no Streams hop lies between a message and `turn.start`: the committing Lambda starts the
    execution right after its commit (`start_now`, an after-commit hook), and the commit's outbox starts
    it again if that fails (starting is idempotent). With no eligible Runtime it stays queued for its
    dispatch command."""
    turn = draft.started
    active = draft.active_turn or {}
    if turn is None or turn.status != "queued" or active.get("id") != turn.id or active.get("cancel_requested"):
        return None
    required = capabilities.required_capabilities(
        draft.snapshot, messages=[{"content": i["content"]} for i in draft.items_of(turn.id)])
    candidates = _candidates(draft, required)
    if not candidates:
        wait_for_environment(draft, turn)
        return None
    draft.commands = [c for c in draft.commands if not (c["type"] == "dispatch" and c["turn_id"] == turn.id)]
    claimed = _claim(draft, turn, candidates[0])
    draft.after_commit(lambda: start_now(draft))
    return claimed


def start_now(draft: engine.Draft) -> None:
    """After a commit that claimed the Turn it started, start its execution at once. Best effort: the
    commit's outbox record starts it again (idempotent: execution name = Turn id), so a failure here
    loses nothing and never fails the request."""
    turn = draft.started
    if turn is None or not turn.claimed_by:
        return
    from .. import aws  # looked up now: the workflow client is built on first use

    try:
        aws.default_workflow().start(draft.tenant, draft.session_id, turn.id)
    except Exception:  # noqa: BLE001 - the outbox starts it
        logger.warning("direct start failed; the outbox starts it", extra={"turn_id": turn.id})


def queued_turns(store: DynamoStore, queue: str) -> list[dict[str, Any]]:
    """Queued Turns of one queue (`placement.queue`; a plain Harness name is the shared queue)."""
    return store.query(**keys.queued_turns(queue), limit=100, ascending=True).items


def _turn_input(store: DynamoStore, tenant: str, session_id: str, turn_id: str,
                turn: Optional[engine.TurnState] = None) -> list[dict[str, Any]]:
    """The Turn's input Items: from its first message through the last one added before its claim
    (all of them while it is queued). One range read; a Turn stored without its range (written before
    the range existed) is found by a filtered read of the Session's Items."""
    items = keys.items_of_session(tenant, session_id)
    if turn is None or not turn.input_from:
        rows = store.query(**items, limit=1000, consistent=True,
                           filter_expression="turn_id = :t", values={":t": turn_id}).items
    else:
        through = turn.input_through or None
        limit = min(1000, through - turn.input_from + 1) if through else 1000
        rows = [i for i in store.query(**items, after=keys.item_sk(turn.input_from - 1), limit=limit,
                                       consistent=True).items
                if i.get("turn_id") == turn_id and (through is None or keys.item_position(keys.sort_key(i)) <= through)]
    docs = [jsonutil.loads(i["doc"]) for i in rows]
    return [d for d in docs if d.get("role") == "user"]


def start_message(store: DynamoStore, tenant: str, session_id: str, turn_id: str,
                  session: Optional[dict[str, Any]] = None,
                  turn: Optional[engine.TurnState] = None) -> dict[str, Any]:
    """turn.start: the frozen configuration (schema included, on every Turn) and the Turn's input as
    it stood when the Turn was claimed; a message added after the claim was sent as turn.input, and
    may reach the Runtime before this start (it travels another path), so it is never repeated here."""
    session = session or store.get(keys.session(tenant, session_id))
    if session is None:
        raise ConnectionError("session vanished")
    snapshot = Snapshot.from_json(unpack(session["snapshot"]))
    items = _turn_input(store, tenant, session_id, turn_id, turn)
    agent = _offered(snapshot.agent)
    return {
        "type": protocol.TURN_START, "tenant": tenant, "session_id": session_id, "turn_id": turn_id,
        "harness": snapshot.harness, "impersonate": snapshot.impersonate,
        "agent": agent, "environment": _environment(store, tenant, session_id, snapshot.environment, turn_id),
        "input": items,
        "execution_controls": {
            "output_format": agent["text"]["format"],
            "verbosity": agent["text"]["verbosity"],
            "reasoning": agent["reasoning"],
            "service_tier": agent["service_tier"],
            "tool_search": any(t["type"] == "tool_search" for t in agent["tools"]),
        },
    }


def _offered(agent: dict[str, Any]) -> dict[str, Any]:
    """The agent as the Runtime gets it: the `automations` tool, which Core serves, becomes the function the
    Harness offers its model (agents_core.automations.tool answers its calls), like any declared function."""
    if not any(t["type"] == "automations" for t in agent["tools"]):
        return agent
    from agents_contract.automations import tool_function

    return {**agent, "tools": [tool_function() if t["type"] == "automations" else t for t in agent["tools"]]}


def _environment(store: DynamoStore, tenant: str, session_id: str, environment: dict[str, Any],
                 turn_id: str) -> dict[str, Any]:
    """The Session's placement; an openai_hosted one with its id and its preparation (files, packages,
    setup commands, env, network), read from the Environment: the Runtime prepares it once, on its disk."""
    if environment.get("type") != "openai_hosted":
        return environment
    env_id = placement.session_environment_id(session_id, environment)
    from ..files import artifacts
    from ..files import environment as environment_files  # file_id entries: presigned URLs of the tenant's Files

    preparation = environment_files.deliver(store, tenant, environments.preparation(store, tenant, env_id))  # type: ignore[arg-type]
    # the Turn's outputs: a form that uploads under this Turn's artifact prefix only (files/artifacts.py)
    upload = artifacts.upload_form(tenant, session_id, turn_id, get_settings().turn_timeout_seconds)
    return {**environment, "id": env_id, "hosted": {**preparation, "artifacts": upload}}


def begin(store: DynamoStore, messenger: Messenger, tenant: str, session_id: str, turn_id: str,
          task_token: str) -> None:
    """The Dispatch task: store the task token on the claimed Turn and send turn.start."""
    key = keys.turn(tenant, session_id, turn_id)
    # one consistent BatchGetItem (1 RRU per 4 KB each; a TransactGetItems was 2): no snapshot of the two is needed,
    # the Session's snapshot never changes and the Turn's state is guarded by the conditional update below
    both = store.batch_get([key, keys.session(tenant, session_id)])
    item, session = both.get(keys.address(key)), both.get(keys.address(keys.session(tenant, session_id)))
    if item is None or not item.get("claimed_by") or item.get("status") in engine.TERMINAL:
        raise RuntimeError("Turn is not claimed or already settled")  # the task fails; Settle is a no-op
    # One UpdateItem with the condition (1 WRU per KB; a one-entry transaction was 2: issue 36, item 5).
    if store.update_returning(key, "SET task_token = :t", "attribute_exists(claimed_by) AND NOT #st IN (:c, :f, :x)",
                              {":t": task_token, ":c": "completed", ":f": "failed", ":x": "cancelled"},
                              names={"#st": "status"}) is None:
        raise RuntimeError("Turn is not claimed or already settled")
    post_start(store, messenger, tenant, session_id, turn_id, item["claimed_by"],
               _start_of(store, tenant, session_id, turn_id, session, item))


def _start_of(store: DynamoStore, tenant: str, session_id: str, turn_id: str, session: Optional[dict[str, Any]],
              item: dict[str, Any]) -> dict[str, Any]:
    """The claimed Turn's turn.start, with its MCP credentials; one that cannot be built fails the Turn."""
    try:
        message = start_message(store, tenant, session_id, turn_id, session, engine.TurnState.from_item(item))
    except SecretUnavailable:  # a hosted Environment's sealed preparation does not open (key disabled, tampered)
        reason = "The Environment's preparation could not be opened (its KMS key is unavailable); the Turn did not start."
        fail_unstarted(store, tenant, session_id, turn_id, reason, code="sandbox_error")
        raise TurnFailedBeforeStart(reason) from None
    try:
        credentials = mcp_credentials(store, tenant, session_id, session)
    except CredentialUnavailable as exc:
        fail_unstarted(store, tenant, session_id, turn_id, str(exc))
        # The task fails (States.TaskFailed): SettleLost ends the Turn at once, as failed, keeping the reason.
        raise TurnFailedBeforeStart(str(exc)) from None
    if credentials:
        message["mcp_credentials"] = credentials  # this Runtime, this Turn, over its connection only
    return message


def post_start(store: DynamoStore, messenger: Messenger, tenant: str, session_id: str, turn_id: str,
               connection_id: str, message: Optional[dict[str, Any]] = None) -> Optional[str]:
    """Post turn.start to the connection that claimed the Turn. A connection that answers GoneException is gone
    though its `$disconnect` never came (API Gateway delivers it on a best-effort basis): its rows go (the
    connection, its pool declarations, its claims) and the Turn is claimed again for another live Runtime, or
    waits in its queue for one (`requeue`). Returns the connection that got it, or None (the Turn waits)."""
    for _ in range(MAX_GONE):
        if message is None:
            item = store.get(keys.turn(tenant, session_id, turn_id))
            if item is None or item.get("claimed_by") != connection_id or item.get("status") in engine.TERMINAL:
                return None
            message = _start_of(store, tenant, session_id, turn_id, None, item)
        try:
            messenger.post(connection_id, message)
            return connection_id
        except ConnectionGone:
            logger.warning("turn.start met a gone connection; the Turn is claimed again",
                           extra={"turn_id": turn_id, "connection_id": connection_id})
            instances.forget(store, connection_id)  # a Runtime instance's other claims stay for its return
            moved = requeue(store, tenant, session_id, turn_id, connection_id)
            if moved is None:
                return None
            connection_id, message = moved, None  # rebuilt: the new claim's input
    return None


def requeue(store: DynamoStore, tenant: str, session_id: str, turn_id: str, gone: str) -> Optional[str]:
    """The Runtime that claimed the Turn is gone before turn.start reached it: claim the Turn for another live
    Runtime in one commit (its claim row replaced), or put it back in its queue, where the next Runtime that says
    hello takes it (its execution keeps waiting in Dispatch). It waits up to the heartbeat bound: then the
    Dispatch task's heartbeat timeout fails it, with the error set here, which says so."""

    def work(draft: engine.Draft) -> Optional[str]:
        turn = draft.turn(turn_id)
        if turn is None or turn.status in engine.TERMINAL or turn.closing:
            return None
        if turn.claimed_by != gone:
            return turn.claimed_by  # it moved meanwhile (its Runtime instance's next connection took it)
        draft.tx.delete(keys.claim(gone, turn_id))
        messages = [{"content": i["content"]} for i in _turn_input(store, tenant, session_id, turn_id, turn)]
        required = capabilities.required_capabilities(draft.snapshot, messages=messages)
        candidates = [c for c in _candidates(draft, required) if c["connection_id"] != gone]  # the index lags
        if candidates and not turn.cancel_requested:
            return _claim(draft, turn, candidates[0])
        seconds = get_settings().heartbeat_seconds
        message = (f"The Runtime that claimed this Turn was gone before the Turn reached it (its connection answered "
                   f"GoneException), and no other live Runtime took the Turn within {seconds} seconds.")
        turn.set(status="queued", claimed_by=None, error={"code": "internal_error", "message": message},
                 x_agents_core={**(turn.doc.get("x_agents_core") or {}), "error": {"message": message}})
        draft.active_turn = {**(draft.active_turn or {}), "status": "queued", "claimed_by": None}
        draft.dirty = True
        return None

    return engine.run(store, tenant, session_id, work, turn_id=turn_id)


class CredentialUnavailable(Exception):
    """The Session's frozen Vault credential cannot serve this Turn (see vaults.CredentialUnavailable)."""


class TurnFailedBeforeStart(RuntimeError):
    """The Dispatch task fails: its Turn never reached a Runtime (the reason is on the Turn)."""


def mcp_credentials(store: DynamoStore, tenant: str, session_id: str,
                    session: Optional[dict[str, Any]] = None) -> dict[str, dict[str, str]]:
    """server label -> {"type": "bearer", "token"} for each HTTP MCP server whose frozen credential_id
    names a Vault credential, decrypted now (an expired OAuth token refreshed first). Never stored:
    it exists only in this turn.start. A deleted or undecryptable credential fails the Turn; it never
    falls back to anonymous."""
    session = session or store.get(keys.session(tenant, session_id))
    snapshot = Snapshot.from_json(unpack(session["snapshot"])) if session else None
    if snapshot is None or not snapshot.credentials:
        return {}
    from .. import vaults  # only a Session with a credential decrypts (kms:Decrypt is Dispatch's alone)

    out: dict[str, dict[str, str]] = {}
    for tool in snapshot.tools:
        credential_id = tool.get("credential_id") if tool["type"] == "mcp" else None
        if not credential_id:
            continue
        vault_id = snapshot.credentials.get(credential_id)
        try:
            if vault_id is None:
                raise vaults.CredentialUnavailable(f"The MCP credential {credential_id} has no Vault binding.")
            token = vaults.bearer(store, tenant, vault_id, credential_id)
        except vaults.CredentialUnavailable as exc:
            raise CredentialUnavailable(f"MCP server '{tool['server_label']}': {exc}") from None
        out[tool["server_label"]] = {"type": "bearer", "token": token}
    return out


def fail_unstarted(store: DynamoStore, tenant: str, session_id: str, turn_id: str, message: str,
                   code: str = "authentication_error") -> None:
    """The Turn fails before its Runtime hears of it, saying why (x_agents_core.error); the workflow's
    SettleLost ends it (Dispatch has no Step Functions rights: the state machine names Dispatch)."""

    def work(draft: engine.Draft) -> None:
        turn = draft.turn(turn_id)
        if turn is None or turn.status in engine.TERMINAL:
            return
        # The SDK's customer-safe category (authentication_error: a credential that cannot be used, naming the
        # server and the credential, never a secret; sandbox_error: an Environment that cannot be prepared).
        turn.set(closing="failed", error={"code": code, "message": message},
                 x_agents_core={**(turn.doc.get("x_agents_core") or {}), "error": {"message": message}})
        draft.dirty = True

    engine.run(store, tenant, session_id, work, turn_id=turn_id)
    logger.warning("turn failed before start", extra={"turn_id": turn_id, "code": code})
