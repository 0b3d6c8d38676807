"""The one place Logger and Metrics are created (Powertools).

No Powertools Tracer: importing the X-Ray SDK costs about 250 ms of every cold start (measured by
bench/bench_coldstart.py); the functions keep `Tracing: Active`, so Lambda still reports each
invocation's segment to X-Ray without it.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics


class InvocationLogger(Logger):
    """Every log line names only its own invocation.

    Powertools keeps keys appended with `append_keys` (and the Lambda context it adds) on the shared
    formatter, so without care a later invocation logs an earlier one's `session_id` and `turn_id`,
    and the local stack, which runs every handler in one process and several invocations on
    threads at once, logs one function's `function_name` on another's lines. Here appended keys are
    per invocation context (Powertools' thread-safe keys, a ContextVar) and are cleared when
    `inject_lambda_context` starts and ends an invocation.
    """

    def append_keys(self, **additional_keys: Any) -> None:
        self.thread_safe_append_keys(**additional_keys)

    def inject_lambda_context(self, lambda_handler: Any = None, log_event: Any = None,  # type: ignore[override]
                              correlation_id_path: Any = None, clear_state: Any = False, **kwargs: Any) -> Any:
        if lambda_handler is None:
            return functools.partial(self.inject_lambda_context, log_event=log_event,
                                     correlation_id_path=correlation_id_path, clear_state=clear_state, **kwargs)
        # clear_state=False: Powertools then appends the Lambda context through append_keys (per invocation).
        decorated = super().inject_lambda_context(lambda_handler, log_event=log_event,
                                                  correlation_id_path=correlation_id_path, clear_state=False,
                                                  **kwargs)

        @functools.wraps(lambda_handler)
        def handler(event: Any, context: Any, *args: Any, **kw: Any) -> Any:
            self.thread_safe_clear_keys()
            try:
                return decorated(event, context, *args, **kw)
            finally:
                self.thread_safe_clear_keys()

        return handler


logger = InvocationLogger()
# The template sets POWERTOOLS_METRICS_NAMESPACE; the default keeps local runs from failing a flush.
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "AgentsCore"))
