"""Harness drivers: where each Harness ends and the Runtime protocol begins.

Each Harness has its own home here: `scripted/` (the reference harness), `codex/` (`codex app-server`),
`claude_code/` (the Claude Agent SDK and its bundled CLI) and `minimax_code/` (configuration translation
only: MiniMax Code cannot be installed here, so it is served by impersonation). A driver opens or resumes the native thread of a Session from its frozen snapshot, runs
a Turn, delivers a function result, steers and cancels; it reports what the Harness observably did
through the Turn's `TurnChannel` (runtime/protocol.py). Core adds no second loop: the Harness runs the
model and tool loop.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import pathlib
import threading
import time
from concurrent.futures import Future
from typing import Any

from ..protocol import TurnChannel

log = logging.getLogger("runtime")

DEFAULT_MAX_WARM = 4  # idle native processes kept per Harness (`--warm-sessions`)


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
        if kind == "turn.tool_result":
            self.deliver_result(str(message.get("call_id")), message.get("result") or {})
        elif kind == "turn.input":
            self.steer(message.get("item") or {})
        elif kind == "turn.cancel":
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


class NativeTurn(TurnHandle):
    """A Turn of a NativeDriver: Core's messages, arriving on the Runtime's thread, become coroutines
    (`_answer`, `_steer`, `_cancel`) on the driver's loop."""

    session: Any

    def deliver_result(self, call_id: str, result: dict[str, Any]) -> None:
        self.session.driver.submit(self._answer(call_id, result))

    def steer(self, item: dict[str, Any]) -> None:
        self.session.driver.submit(self._steer(item))

    def cancel(self) -> None:
        self.session.driver.submit(self._cancel())

    @abc.abstractmethod
    async def _answer(self, call_id: str, result: dict[str, Any]) -> None: ...

    @abc.abstractmethod
    async def _steer(self, item: dict[str, Any]) -> None: ...

    @abc.abstractmethod
    async def _cancel(self) -> None: ...


class NativeDriver(HarnessDriver):
    """A Harness run by native processes, one per Session, all driven from one asyncio loop thread.
    Subclasses name their per-Session and per-Turn classes; a Session object has `run(turn)` and
    `stop()` coroutines, an `alive` property (its process runs), `current` (the Turn it runs) and
    `lock` (held while a Turn runs).

    A Session's process stays warm between Turns for `idle_seconds`; at most `max_warm` idle ones are
    kept, the least recently used stopping first (a stopped Session resumes its native thread on its
    next Turn), so a Runtime serving many Sessions does not hold one process per Session it ever saw."""

    session_class: Any
    turn_class: Any
    stop_seconds: float = 10.0

    def _setup(self, binary: str, version: str, provider: Any, state_dir: str, idle_seconds: float,
               max_warm: int = DEFAULT_MAX_WARM) -> None:
        self.binary = binary
        self.version = version
        self.engine = f"{self.harness} {version}"
        self.provider = provider
        self.state_dir = pathlib.Path(state_dir).expanduser().resolve() / self.harness
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.idle_seconds = idle_seconds
        self.max_warm = max(0, max_warm)
        self.sessions: dict[str, Any] = {}
        self._used: dict[str, float] = {}  # Session id -> when a Turn last started in it
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"{self.harness}-driver", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def start_turn(self, start: dict[str, Any], channel: TurnChannel) -> TurnHandle:
        session_id = start["session_id"]
        session = self.sessions.get(session_id)
        if session is None:
            session = self.sessions[session_id] = self.session_class(self, start)
        turn = self.turn_class(session, start, channel)
        channel.start_heartbeats()
        self._used[session_id] = time.monotonic()
        self.submit(session.run(turn))
        return turn

    def idle_later(self, session: Any) -> asyncio.TimerHandle:
        """After a Turn: stop this Session's process once it has been idle `idle_seconds`, and keep at
        most `max_warm` idle processes now. Runs on the driver's loop."""
        asyncio.ensure_future(self.trim())
        return asyncio.get_running_loop().call_later(self.idle_seconds,
                                                     lambda: asyncio.ensure_future(self.retire(session)))

    async def trim(self) -> None:
        idle = [(self._used.get(sid, 0.0), sid, s) for sid, s in list(self.sessions.items())
                if s.alive and s.current is None and not s.lock.locked()]
        idle.sort(key=lambda entry: entry[0])
        for _, sid, session in idle[:max(0, len(idle) - self.max_warm)]:
            log.info("%s: stopping the idle process of %s (more than %d warm)", self.harness, sid, self.max_warm)
            await self.retire(session)

    async def retire(self, session: Any) -> None:
        """Stops an idle Session's process; never one that runs a Turn (the lock orders them)."""
        async with session.lock:
            if session.current is None and session.alive:
                await session.stop()
                if self.on_stopped is not None:
                    self.on_stopped(session)  # a hosted Environment's sandbox may have stopped with it

    on_stopped: Any = None  # set by the Runtime that hosts Environments

    async def stop_sessions(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.sessions.values()), return_exceptions=True)

    def close(self) -> None:
        try:
            self.submit(self.stop_sessions()).result(timeout=self.stop_seconds)
        except Exception:  # noqa: BLE001 - shutting down anyway
            log.warning("some %s processes did not stop cleanly", self.harness)
        self.loop.call_soon_threadsafe(self.loop.stop)
