"""Settlement (the Settle task) and failing a lost Runtime's claimed Turns."""

from __future__ import annotations

from typing import Any, Optional

from agents_contract.errors import NotFound

from .. import engine, environments, keys, subagents
from ..aws import Workflow
from ..environments import placement
from ..settings import get_settings
from ..store import DynamoStore

# ---- settlement (the Settle task) ---------------------------------------------------------------

# The task failure with which the Runtime gateway hands a Turn its terminal commit could not settle to
# the workflow's Settle task (statemachines/turn.asl.json catches it by this name; its Cause is the
# outcome as JSON). A Turn the terminal commit settled ends with Dispatch's success instead: no Choice
# state, so the common Turn bills two state transitions (the start and Dispatch).
SETTLE_NEEDED = "SettleNeeded"

def settlement_status(draft: engine.Draft, turn: engine.TurnState, reported: str, lost: bool) -> str:
    """How a Turn ends: a requested cancellation settles as cancelled; execution loss fails it; a
    completed Turn without the structured answer its Agent requires fails."""
    if turn.cancel_requested:
        return "cancelled"
    if lost or reported not in engine.TERMINAL:
        return "failed"
    if reported == "completed" and draft.snapshot.output_schema is not None and not turn.has_final_answer:
        return "failed"
    return reported


def end_turn(draft: engine.Draft, turn: engine.TurnState, status: str) -> None:
    """The final settlement commit (`engine.settle`): the Turn's Subagent child Turns end before it does."""
    if turn.status not in engine.TERMINAL:
        subagents.end_children(draft, turn, status)
    engine.settle(draft, turn, status)


def settle(store: DynamoStore, tenant: str, session_id: str, turn_id: str, outcome: Optional[dict[str, Any]],
           lost: bool, last_resort: bool = False) -> str:
    """Execution loss fails the claimed Turn without replay; a missing structured answer fails it.

    Converges for every Turn shape, in bounded steps that are each safe to repeat: (1) the Turn is
    marked closing (observations are ignored from then on), (2) its open calls are closed
    SETTLE_CHUNK per transaction, (3) its unfinished Items become incomplete SETTLE_CHUNK per
    commit, (4) one small final commit ends the Turn and frees the Session. `last_resort` (the
    workflow's Catch after Settle failed) runs step 4 only: the Session is never left wedged, and the
    calls still open take no result (their Turn is no longer active)."""

    def decide(draft: engine.Draft) -> Optional[str]:
        turn = draft.turn(turn_id)
        if turn is None:
            return None
        if turn.status in engine.TERMINAL:
            return "settled:" + turn.status
        status = settlement_status(draft, turn, (outcome or {}).get("status", "failed"), lost=lost or last_resort)
        if not turn.closing:
            turn.set(closing=status)
        return status

    try:
        status = engine.run(store, tenant, session_id, decide, turn_id=turn_id)
        if status is None:
            return "missing"
        if status.startswith("settled:"):
            return status.split(":", 1)[1]
        if not last_resort:
            engine.close_open_calls(store, tenant, session_id, turn_id,
                                    "cancelled" if status == "cancelled" else "settled")

        def step(draft: engine.Draft) -> bool:
            turn = draft.turn(turn_id)
            if turn is None or turn.status in engine.TERMINAL:
                return True
            refs = [] if last_resort else engine.open_item_refs(store, tenant, session_id, turn_id)
            if refs:
                engine.close_open_items(draft, turn, refs)
                return False
            if turn.claimed_by:  # the claim row is no longer needed once the Turn ends
                draft.tx.delete(keys.claim(turn.claimed_by, turn_id))
            end_turn(draft, turn, status)
            return True

        while not engine.run(store, tenant, session_id, step, turn_id=turn_id):
            pass
    except NotFound:
        return "missing"  # the Session was deleted: nothing left to settle
    return status


def expire_environment_wait(store: DynamoStore, tenant: str, session_id: str, turn_id: str) -> str:
    """The ConnectionWait workflow's end: input that no connection took within the bound fails with
    an error that says why, and the Session takes new input again. A claimed Turn is left alone."""
    seconds = get_settings().environment_wait_seconds

    def work(draft: engine.Draft) -> str:
        turn = draft.turn(turn_id)
        if turn is None or turn.status != "queued" or turn.claimed_by:
            return "claimed" if turn is not None else "missing"
        where = draft.snapshot.environment["type"]
        env_id = placement.session_environment_id(session_id, draft.snapshot.environment)
        hosted = store.get(keys.environment(tenant, env_id)) if where == "openai_hosted" else None  # type: ignore[arg-type]
        if hosted is not None and hosted.get("host_id") and not environments.host_is_connected(store, hosted["host_id"]):
            # The host that holds its workspace is gone: the Environment expires (no checkpoint moves it).
            message = (f"The Environment {env_id} cannot run this Turn: the host that holds its workspace is gone "
                       f"(not back within {seconds} seconds), so the Environment is expired. Create a Session with "
                       "a new Environment.")
            if hosted.get("status") in environments.LIVE:
                environments.expire(draft, hosted, turn_id)
        elif hosted is not None and hosted.get("status") not in environments.LIVE:
            message = environments.final_message(hosted)
        elif where == "self_hosted" and not environments.is_connected(store.get(keys.environment(tenant, env_id))):
            message = (f"The Environment {env_id} did not connect within {seconds} seconds. Connect that machine "
                       f"with an enrollment (POST /v1/agents/environments/{env_id}/enrollments), then send the "
                       "input again.")
        elif where == "self_hosted":
            message = (f"The Environment {env_id} is connected, but its Runtime does not serve this Session's "
                       f"Harness or capabilities; the input waited {seconds} seconds.")
        else:
            message = (f"No hosted-environment Runtime took this Turn within {seconds} seconds; this deployment "
                       "runs openai_hosted Environments only on Runtimes that isolate each one.")
        turn.set(error=environments.turn_error(message),
                 x_agents_core={**(turn.doc.get("x_agents_core") or {}), "error": {"message": message}})
        end_turn(draft, turn, "failed")
        return "failed"

    try:
        return engine.run(store, tenant, session_id, work, turn_id=turn_id)
    except NotFound:
        return "missing"


def fail_claimed_turns(store: DynamoStore, workflow: Workflow, connection_id: str) -> int:
    """A Runtime's connection closed: fail the Turns it claimed now rather than at the heartbeat
    bound (their executions catch the task failure and settle them as failed, without replay)."""
    failed = 0
    claims = store.query(**keys.claims_of_connection(connection_id), limit=1000, consistent=True).items
    for claim in claims:
        turn = store.get(keys.turn(claim["tenant"], claim["session_id"], claim["turn_id"]))
        if turn and turn.get("task_token") and turn.get("status") not in engine.TERMINAL:
            if workflow.fail(turn["task_token"], "RuntimeLost", "The Runtime's connection closed."):
                failed += 1
    return failed
