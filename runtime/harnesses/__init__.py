"""Harness drivers: where each Harness ends and the Runtime protocol begins.

Each Harness has its own home here: `scripted/` (the reference harness), `codex/` (`codex app-server`),
`claude_code/` (the Claude Agent SDK and its bundled CLI) and `minimax_code/` (configuration translation
only: MiniMax Code cannot be installed here, so it is served by impersonation); what the two native ones
share (one loop thread, warm processes, a Turn's life on the loop) is `native.py`. A driver opens or resumes
the native thread of a Session from its frozen snapshot, runs a Turn, delivers a function result, steers and
cancels; it reports what the Harness observably did through the Turn's `TurnChannel` (runtime/protocol.py).
Core adds no second loop: the Harness runs the model and tool loop.
"""

from __future__ import annotations

import abc
from typing import Any

from agents_contract.protocol import TURN_CANCEL, TURN_INPUT, TURN_TOOL_RESULT

from ..protocol import TurnChannel


class TurnHandle(abc.ABC):
    """One running Turn of a driver. Core's turn.* messages arrive here, in order."""

    channel: TurnChannel

    @property
    def done(self) -> bool:
        return self.channel.done.is_set()

    @abc.abstractmethod
    def deliver_result(self, call_id: str, result: dict[str, Any]) -> None:
        """An admitted result (exactly as submitted) for a call this Turn made. May repeat: a no-op then."""

    @abc.abstractmethod
    def steer(self, item: dict[str, Any]) -> None:
        """A user message that joins the running Turn."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """The caller cancelled: interrupt natively; the Turn ends `cancelled`."""

    def deliver(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == TURN_TOOL_RESULT:
            self.deliver_result(str(message.get("call_id")), message.get("result") or {})
        elif kind == TURN_INPUT:
            self.steer(message.get("item") or {})
        elif kind == TURN_CANCEL:
            self.cancel()


class HarnessDriver(abc.ABC):
    """Serves one Harness name. `engine` names what actually runs it (`scripted`, `codex 0.163.0`)."""

    harness: str
    engine: str

    @abc.abstractmethod
    def start_turn(self, start: dict[str, Any], channel: TurnChannel) -> TurnHandle:
        """Begin a Turn from a turn.start message (the frozen snapshot rides on every start).
        Failures are reported on the channel (turn.failed), never raised."""

    def close(self) -> None:  # noqa: B027 - optional: stop native processes
        """Stop whatever the driver started."""

