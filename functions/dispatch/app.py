"""The Turn workflow's Dispatch task (lambda:invoke.waitForTaskToken): store the task token on the
claimed Turn and send turn.start to its Runtime. A closed connection fails the task (no replay)."""

from agents_core.aws import default_messenger
from agents_core.observability import logger
from agents_core.runtimes import dispatch
from agents_core.store import default_store


@logger.inject_lambda_context(log_event=False)
def handler(event, context):
    logger.append_keys(session_id=event["session_id"], turn_id=event["turn_id"])
    dispatch.begin(default_store(), default_messenger(), event["tenant"], event["session_id"], event["turn_id"],
                   event["task_token"])
    return {"dispatched": True}
