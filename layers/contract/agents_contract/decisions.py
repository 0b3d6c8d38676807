"""Input decisions: how each tool_result of a batch is classified (the spec's Results table).

| Identical retry, also after the Turn ends or the call is abandoned | Accepted
| Different result for the same call                                 | 409 conflict_error
| First result after the Turn was cancelled                          | 409 conflict_error
| First result for a call the native Harness abandoned               | 409 conflict_error
| Unknown call, or a call of another Turn, in the caller's Session   | 400; the pending action is unchanged
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from . import jsonutil, wire
from .errors import Conflict, InvalidRequest, UnsupportedConfiguration
from .harnessconfig import HarnessDeclaration

DIFFERENT_RESULT = "The tool call already has a different result."
CANNOT_ACCEPT = "The Turn cannot accept this input in its current state."
UNKNOWN_CALL = "Unknown pending tool call."
OTHER_TURN = "The tool call belongs to a different Turn."


class CallState(enum.StrEnum):
    PENDING = "pending"  # a required action, waiting for a result
    SUBMITTED = "submitted"  # a result admitted, not yet applied natively
    APPLIED = "applied"  # the receipt arrived: the native tool result appeared in the live Turn
    ABANDONED = "abandoned"  # the native Harness abandoned the call
    CANCELLED = "cancelled"  # the Turn was cancelled before a result
    SETTLED = "settled"  # the Turn ended (completed or failed) without a result


@dataclass(frozen=True)
class CallRecord:
    """The stored state of one function call (the CALL item)."""

    call_id: str
    turn_id: str  # the root Turn that owns the required action
    state: CallState
    child_turn_id: Optional[str] = None  # a Subagent call: the child Turn id its item.added names
    result_digest: Optional[str] = None

    @property
    def has_result(self) -> bool:
        return self.result_digest is not None


class Outcome(enum.StrEnum):
    ACCEPT = "accept"  # a new result: write it
    IDENTICAL = "identical"  # an identical retry: accepted, nothing written


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    call: CallRecord
    digest: str


def result_as_sent(event: wire.ToolResultEvent) -> dict[str, Any]:
    """The result exactly as submitted: only the members the caller sent (presence kept)."""
    return event.model_dump(exclude_unset=True, mode="python")


def result_digest(event: wire.ToolResultEvent) -> str:
    """Canonical digest of a submitted result, field presence and original content preserved.

    The Turn id is not part of the identity: a Subagent call may be answered under the root or the
    child Turn id, and both name the same call.
    """
    sent = result_as_sent(event)
    sent.pop("turn_id", None)
    return jsonutil.digest(sent)


def classify(event: wire.ToolResultEvent, call: Optional[CallRecord], digest: Optional[str] = None) -> Decision:
    digest = digest or result_digest(event)
    # The official fields of both: 400 invalid_request_error with a null param.
    if call is None:
        raise InvalidRequest(UNKNOWN_CALL, param=None)
    if event.turn_id not in (call.turn_id, call.child_turn_id):
        raise InvalidRequest(OTHER_TURN, param=None)
    if call.has_result:
        if call.result_digest == digest:
            return Decision(Outcome.IDENTICAL, call, digest)
        raise Conflict(DIFFERENT_RESULT)
    if call.state is not CallState.PENDING:
        raise Conflict(CANNOT_ACCEPT)
    return Decision(Outcome.ACCEPT, call, digest)


def classify_batch(
    events: Sequence[wire.ToolResultEvent], calls: Mapping[str, CallRecord]
) -> list[Decision]:
    """All or nothing: the first rejection rejects the whole batch. Results for the same call
    inside one batch are treated like a retry of the earlier one."""
    decisions: list[Decision] = []
    pending: dict[str, CallRecord] = dict(calls)
    for event in events:
        decision = classify(event, pending.get(event.call_id))
        decisions.append(decision)
        if decision.outcome is Outcome.ACCEPT:
            call = decision.call
            pending[event.call_id] = CallRecord(
                call.call_id, call.turn_id, CallState.SUBMITTED, call.child_turn_id, decision.digest
            )
    return decisions


def check_result_content(decl: HarnessDeclaration, event: wire.ToolResultEvent, index: int) -> None:
    """Output is a string or ordered text and image parts, subject to the Harness."""
    output = event.output
    if not isinstance(output, list):
        return
    images = [p for p in output if isinstance(p, wire.InputImage)]
    if not images:
        return
    at = f"events[{index}].output"
    if not decl.function_result_images:
        raise UnsupportedConfiguration("The harness does not support images in function results.", param=at)
    if decl.function_result_images_success_only and not event.success:
        raise UnsupportedConfiguration(
            "The harness accepts images only in successful function results.", param=at
        )
    if decl.function_result_image_types is not None:
        for image in images:
            media = image.image_url.split(";", 1)[0].removeprefix("data:")
            if not image.image_url.startswith("data:") or media not in decl.function_result_image_types:
                raise UnsupportedConfiguration(
                    "The harness accepts only inline PNG or JPEG images (data: URLs) in function results.", param=at
                )
