"""Every operational metric's name and dimensions, and the one function that emits them (EMF, Powertools).

Each metric is one CloudWatch Embedded Metric Format line on stdout, which CloudWatch Logs turns into metrics
without an API call (so no function needs `cloudwatch:PutMetricData`). One namespace per stack
(`POWERTOOLS_METRICS_NAMESPACE`, `AgentsCore/<stack>` in template.yaml); every line carries the dimension set
`service` alone (the total the alarms read) plus the sets named at each call. Dimensions are low-cardinality
only (`DIMENSIONS`): a tenant, Session, Turn or connection id is never one; those go in the log lines.

A line per fact, not Powertools' per-invocation `Metrics` buffer: one EMF document has one set of dimensions for
all its metrics, and the local stack runs many invocations on threads at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Iterator
from typing import Any, Optional

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from . import keys

# ---- names (template.yaml's alarms and dashboard name the same; tests/unit/test_template_operations.py) ----
TURNS_STARTED = "TurnsStarted"  # a Runtime claimed the Turn (turn.start follows the commit)
TURNS_COMPLETED = "TurnsCompleted"
TURNS_FAILED = "TurnsFailed"
TURNS_CANCELLED = "TurnsCancelled"
TURN_QUEUE_WAIT = "TurnQueueWait"  # ms from the input that created the Turn to its claim (turn.start)
FUNCTION_ROUND_TRIP = "FunctionRoundTrip"  # ms from the required action to the result applied (the receipt)
RUNTIME_CONNECTIONS = "RuntimeConnections"  # WebSocket connections accepted at $connect, by kind
REJECTED_REQUESTS = "RejectedRequests"  # 4xx answers of the public API, by error code
OUTBOX_RECORDS_FAILED = "OutboxRecordsFailed"  # an outbox record the stream consumer failed (retried, then DLQ)
DLQ_REDRIVES = "DlqRedrives"  # an outbox DLQ message redriven (agents_core/outbox_redrive.py), by outcome

ENDED = {"completed": TURNS_COMPLETED, "failed": TURNS_FAILED, "cancelled": TURNS_CANCELLED}
DIMENSIONS = ("service", "harness", "placement", "outcome", "reason", "kind", "code")
# Why a Turn failed (the `reason` dimension of TurnsFailed): a closed set.
REASONS = ("heartbeat_timeout", "turn_timeout", "runtime_lost", "failed_before_start", "execution_lost",
           "settle_failed", "wait_expired", "environment", "credential", "harness_error", "missing_final_answer",
           "other")
_SETTLE_ERRORS = {"States.HeartbeatTimeout": "heartbeat_timeout", "States.Timeout": "turn_timeout",
                  "RuntimeLost": "runtime_lost", "TurnFailedBeforeStart": "failed_before_start"}
_ERROR_CODES = {"sandbox_error": "environment", "authentication_error": "credential"}

SERVICE = "agents-core"
_reason: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("turn_failure_reason", default=None)


def emit(name: str, unit: MetricUnit, value: float, *dimension_sets: dict[str, str]) -> None:
    """One EMF line: `name` with the `service` set and each of `dimension_sets` (values must be low-cardinality)."""
    if is_metrics_disabled():
        return
    provider = AmazonCloudWatchEMFProvider(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "AgentsCore"),
                                           service=os.environ.get("POWERTOOLS_SERVICE_NAME", SERVICE))
    provider.add_metric(name=name, unit=unit, value=value)
    for dimensions in dimension_sets:
        unknown = set(dimensions) - set(DIMENSIONS)
        if unknown:
            raise ValueError(f"not a metric dimension: {sorted(unknown)}")
        provider.add_dimensions(**dimensions)
    provider.flush_metrics()


def now_ms() -> int:
    return int(time.time() * 1000)


# ---- the facts ---------------------------------------------------------------------------------------------

def rejected_request(status: int, code: str) -> None:
    if 400 <= status < 500:
        emit(REJECTED_REQUESTS, MetricUnit.Count, 1, {"code": code or "unknown"})


def runtime_connected(kind: str) -> None:
    emit(RUNTIME_CONNECTIONS, MetricUnit.Count, 1, {"kind": kind})


def outbox_record_failed(kind: str) -> None:
    emit(OUTBOX_RECORDS_FAILED, MetricUnit.Count, 1, {"kind": kind})


def dlq_redrive(outcome: str) -> None:
    emit(DLQ_REDRIVES, MetricUnit.Count, 1, {"outcome": outcome})  # redriven, failed or expired


@contextlib.contextmanager
def failure_reason(reason: Optional[str]) -> Iterator[None]:
    """Turns failed inside this block failed for `reason` (the Settle task knows why: its workflow's error)."""
    token = _reason.set(reason)
    try:
        yield
    finally:
        _reason.reset(token)


def settle_reason(event: dict[str, Any]) -> Optional[str]:
    """Why the Turn a workflow task fails failed: the ConnectionWait's expiry, the last resort, or the error of
    the Turn workflow's Catch (`{"Error", "Cause"}`) for SettleLost; None for Settle (the Runtime's outcome)."""
    if event.get("environment_wait"):
        return "wait_expired"
    if event.get("last_resort"):
        return "settle_failed"
    if not event.get("lost"):
        return None
    error = event.get("error")
    name = error.get("Error") if isinstance(error, dict) else None
    return _SETTLE_ERRORS.get(name or "", "execution_lost")


def _failure_reason(turn: Any) -> str:
    code = (turn.doc.get("error") or {}).get("code")
    if code in _ERROR_CODES:
        return _ERROR_CODES[code]
    hinted = _reason.get()
    if hinted:
        return hinted
    if turn.closing == "completed":  # the Runtime completed it without the structured answer the Agent requires
        return "missing_final_answer"
    if turn.closing == "failed" or (turn.doc.get("x_agents_core") or {}).get("error"):
        return "harness_error"
    return "other"


class TurnFacts:
    """What one commit does to its Turns, read from its Draft before the commit (the Draft forgets what changed
    when it builds the transaction) and emitted once it committed (`engine.attempt`, `engine.create`)."""

    __slots__ = ("lines",)

    def __init__(self, draft: Any) -> None:
        self.lines: list[tuple[str, MetricUnit, float, tuple[dict[str, str], ...]]] = []
        if is_metrics_disabled():
            return
        where: Optional[dict[str, str]] = None
        for event in draft.events:
            kind = event.get("type", "")
            if not kind.startswith("agent.session.turn.") or "turn" not in event:
                continue
            status = kind.rsplit(".", 1)[1]
            turn = draft.turns.get(event["turn_id"])
            if turn is None or turn.doc.get("subagent_id") or status not in ("in_progress", *ENDED):
                continue  # a Subagent's child Turn ends with its root Turn, which is counted
            if where is None:
                snapshot = draft.snapshot
                where = {"harness": snapshot.harness, "placement": snapshot.environment["type"]}
            if status == "in_progress":
                if "claimed_by" not in turn.changed or not turn.claimed_by:
                    continue  # resumed after its required actions, not a start
                accepted = getattr(turn, "accepted_ms", 0) or int(turn.doc.get("created_at") or 0) * 1000
                self.lines.append((TURNS_STARTED, MetricUnit.Count, 1, (where,)))
                if accepted:
                    self.lines.append((TURN_QUEUE_WAIT, MetricUnit.Milliseconds, max(0, now_ms() - accepted),
                                       (where,)))
            elif status == "failed":
                self.lines.append((TURNS_FAILED, MetricUnit.Count, 1, (where, {"reason": _failure_reason(turn)})))
            else:
                self.lines.append((ENDED[status], MetricUnit.Count, 1, (where,)))
        for call_id, state in draft.call_states.items():
            if state != "applied":
                continue
            # the CALL item as read with the Session (observations prefetch it): no extra read
            call = draft.prefetched.get(keys.address(keys.call(draft.tenant, draft.session_id, call_id)))
            created = (call or {}).get("created_ms") or int((call or {}).get("created_at") or 0) * 1000
            if created:
                self.lines.append((FUNCTION_ROUND_TRIP, MetricUnit.Milliseconds, max(0, now_ms() - int(created)),
                                   ()))

    def emit(self) -> None:
        for name, unit, value, dimension_sets in self.lines:
            emit(name, unit, value, *dimension_sets)
