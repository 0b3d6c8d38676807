"""The Turn workflow's Settle / SettleLost / SettleLastResort tasks: the Turn's terminal state, in
bounded steps that converge (the last resort only ends the Turn and frees the Session). Also the
ConnectionWait workflow's Expire task (`environment_wait`): input no connection took within the bound fails."""

from agents_core import metrics
from agents_core.observability import logger
from agents_core.runtimes import settlement
from agents_core.store import default_store


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    logger.append_keys(session_id=event["session_id"], turn_id=event["turn_id"])
    with metrics.failure_reason(metrics.settle_reason(event)):  # why a Turn failed here (TurnsFailed's reason)
        if event.get("environment_wait"):
            return {"status": settlement.expire_environment_wait(default_store(), event["tenant"],
                                                               event["session_id"], event["turn_id"])}
        status = settlement.settle(default_store(), event["tenant"], event["session_id"], event["turn_id"],
                                 event.get("outcome"), bool(event.get("lost")), bool(event.get("last_resort")))
    return {"status": status}
