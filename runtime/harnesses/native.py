"""What the native Harnesses (Codex, Claude Code) share, beneath the driver interface (runtime/harnesses/__init__.py).

- `NativeDriver`: one asyncio loop thread per driver; a Session's process stays warm between Turns within
  bounds (`idle_seconds`, `max_warm`).
- `NativeSession`: one Session's native state: its directory (under the driver's state directory, or in its
  hosted Environment's sandbox), the native id it resumes after a Runtime restart, the Vault bearers its
  process was started with, and its Turns, run one at a time.
- `NativeTurn`: a Turn's life on the driver's loop: steering that arrives before the native turn started waits
  for it, a cancel before then ends the Turn without starting it and after it interrupts natively; receipts
  and abandonments; a Subagent's messages and a declared MCP server's calls as public Items.

Each harness folder keeps what is its own: how its process starts and speaks (`session.py`) and how its
native events map to the Runtime protocol (`driver.py`).
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import os
import pathlib
import subprocess
import threading
import time
from concurrent.futures import Future
from typing import Any, Optional

from agents_contract.protocol import (
    TURN_CALL_ABANDONED,
    TURN_CANCELLED,
    TURN_FAILED,
    TURN_ITEM_ADDED,
    TURN_ITEM_DONE,
    TURN_TOOL_RESULT_APPLIED,
)

from ..protocol import TurnChannel, assistant_message
from . import HarnessDriver, TurnHandle

log = logging.getLogger("runtime")

DEFAULT_MAX_WARM = 4  # idle native processes kept per Harness (`--warm-sessions`)


class HarnessUnavailable(Exception):
    """A native Harness's binary is missing or does not run: a Runtime start error, never a hang."""


def executable(candidate: str, title: str, unavailable: type[HarnessUnavailable]) -> str:
    if not os.access(candidate, os.X_OK):
        raise unavailable(f"The {title} binary '{candidate}' is not an executable file.")
    return candidate


def version_output(binary: str, title: str, unavailable: type[HarnessUnavailable]) -> str:
    """What `BINARY --version` prints (a binary that does not run is a start error)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=True)  # noqa: S603
    except (OSError, subprocess.SubprocessError) as exc:
        raise unavailable(f"The {title} binary '{binary}' does not run: {exc}") from None
    return out.stdout.strip()


def safe_name(name: str) -> str:
    """A Session id as a directory name."""
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:120]


def mcp_call(item_id: str, server_label: str, name: str, arguments: Any, *, output: Any = None, error: Any = None,
             status: str = "in_progress") -> dict[str, Any]:
    """A declared MCP server's tool call as a public mcp_call Item: the original server and tool names."""
    return {"id": item_id, "type": "mcp_call", "server_label": server_label, "name": name, "arguments": arguments,
            "output": output, "error": error, "status": status}


class NativeTurn(TurnHandle):
    """A Turn of a NativeDriver: Core's messages, arriving on the Runtime's thread, become coroutines
    (`_answer`, `_steer`, `_cancel`) on the driver's loop.

    `run` ensures the Session's process (`session._ensure`), starts the native turn (`_begin`), then sends the
    steering that arrived meanwhile and waits until `finished`. A driver's Turn says when its native turn has
    `started` and how it steers (`_steer_now`) and interrupts (`_interrupt`) it."""

    session: Any

    def __init__(self, session: Any, start: dict[str, Any], channel: TurnChannel):
        self.session = session
        self.start = start
        self.channel = channel
        self.cancel_requested = False
        self.last_error: Optional[str] = None  # the Harness's last error report, for a failure without reason
        self.finished = asyncio.Event()  # the native turn ended, or its process did
        self._early: list[dict[str, Any]] = []  # steering that arrived before the native turn started

    def deliver_result(self, call_id: str, result: dict[str, Any]) -> None:
        self.session.driver.submit(self._answer(call_id, result))

    def steer(self, item: dict[str, Any]) -> None:
        self.session.driver.submit(self._steer(item))

    def cancel(self) -> None:
        self.session.driver.submit(self._cancel())

    # -- on the driver's loop --------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """The native turn was started: steering and interrupts reach it."""
        raise NotImplementedError

    async def run(self) -> None:
        native = await self.session._ensure(self.start)
        if self.cancel_requested:
            self.channel.finish(TURN_CANCELLED)
            return
        await self._begin(native)
        for item in self._early:  # steering that arrived while the process started
            await self._send_early(native, item)
        self._early.clear()
        if self.cancel_requested:  # cancelled while the native turn was being started
            await self._interrupt()
        await self.finished.wait()

    async def _begin(self, native: Any) -> None:
        """Start the native turn with the Turn's input, on the process `session._ensure` gave."""
        raise NotImplementedError

    async def _send_early(self, native: Any, item: dict[str, Any]) -> None:
        await self._steer_now(item)

    @abc.abstractmethod
    async def _answer(self, call_id: str, result: dict[str, Any]) -> None:
        """An admitted result for a call of this Turn, answered natively (once)."""

    async def _steer(self, item: dict[str, Any]) -> None:
        if not self.started:
            self._early.append(item)
            return
        await self._steer_now(item)

    async def _steer_now(self, item: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _cancel(self) -> None:
        self.cancel_requested = True
        if self.started:
            await self._interrupt()

    async def _interrupt(self) -> None:
        raise NotImplementedError

    # -- Harness -> Core -------------------------------------------------------------------------------
    def receipt(self, call_id: str, applied: bool) -> None:
        """A call's native result appeared in the live Turn: the receipt when it is the admitted result we
        answered with, otherwise an abandonment, never a receipt."""
        self.channel.emit(TURN_TOOL_RESULT_APPLIED if applied else TURN_CALL_ABANDONED, call_id=call_id)

    def abandon(self, call_id: str) -> None:
        """A call the native turn ended without completing."""
        self.channel.emit(TURN_CALL_ABANDONED, call_id=call_id)

    def fail(self, message: str) -> None:
        """The process went away under this Turn: it fails, and `run` returns."""
        if not self.done:
            self.channel.finish(TURN_FAILED, error={"message": message[:400]})
            self.finished.set()

    def child_message(self, child_turn: str, item_id: str, phase: str, text: str) -> None:
        """A Subagent's whole assistant message, in its child Turn's history."""
        self.channel.emit_batch([
            (TURN_ITEM_ADDED, {"child_turn_id": child_turn,
                                 "item": assistant_message(item_id, phase, "in_progress", None)}),
            (TURN_ITEM_DONE, {"child_turn_id": child_turn,
                                "item": assistant_message(item_id, phase, "completed", text)})])


class NativeSession:
    """One Session's native state and the process that runs its Turns, one at a time (`lock`). A driver's
    Session starts its process in `_ensure` (which gives `run` what `_begin` needs), says whether it is `alive`
    and `stop`s it; its native id (a thread, a session) is kept in `root / state_file` under `state_key`."""

    state_file: str
    state_key: str
    # What fails a Turn with its own message (`failure_message`); anything else is a driver bug.
    failures: tuple[type[BaseException], ...] = ()

    def __init__(self, driver: NativeDriver, start: dict[str, Any]):
        self.driver = driver
        self.session_id = start["session_id"]
        self.box = start.get("sandbox")  # a hosted Environment's sandbox (runtime.environments.sandbox), or None
        self.root = driver.state_dir / safe_name(self.session_id) if self.box is None else \
            self.box.session_dir(driver.harness, self.session_id)
        self.current: Optional[NativeTurn] = None
        self.lock = asyncio.Lock()
        self._bearers: dict[str, str] = {}  # the Vault bearers the running process was started with
        self._idle: Optional[asyncio.TimerHandle] = None

    # -- state -----------------------------------------------------------------------------------------
    def saved_id(self) -> Optional[str]:
        try:
            return json.loads((self.root / self.state_file).read_text())[self.state_key]
        except (OSError, ValueError, KeyError):
            return None

    def keep_id(self, native_id: str) -> None:
        (self.root / self.state_file).write_text(json.dumps({self.state_key: native_id}))

    # -- the process -----------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        raise NotImplementedError

    async def _ensure(self, start: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def reuse(self, bearers: dict[str, str]) -> bool:
        """Whether the running process serves the next Turn as it is: not once the Session's Vault bearers were
        refreshed or rotated (it stops, and a new one, started with these, resumes the native thread)."""
        if self.alive and bearers != self._bearers:
            await self.stop()
        if self.alive:
            return True
        self._bearers = bearers
        return False

    # -- a Turn ----------------------------------------------------------------------------------------
    async def run(self, turn: NativeTurn) -> None:
        async with self.lock:
            if self._idle is not None:
                self._idle.cancel()
            self.current = turn
            try:
                await turn.run()
            except self.failures as exc:
                turn.channel.finish(TURN_FAILED, error={"message": self.failure_message(exc)})
            except Exception as exc:  # noqa: BLE001 - a driver bug fails this Turn only
                logging.getLogger(f"runtime.{self.driver.harness}").exception(
                    "%s turn %s failed", self.driver.harness, turn.channel.turn_id)
                turn.channel.finish(TURN_FAILED,
                                    error={"message": f"The {self.driver.title} driver failed: {exc}"[:400]})
            finally:
                self.current = None
                self._idle = self.driver.idle_later(self)

    def failure_message(self, exc: BaseException) -> str:
        return str(exc)[:400] or type(exc).__name__


class NativeDriver(HarnessDriver):
    """A Harness run by native processes, one per Session, all driven from one asyncio loop thread.
    Subclasses name their per-Session and per-Turn classes; a Session object has `run(turn)` and
    `stop()` coroutines, an `alive` property (its process runs), `current` (the Turn it runs) and
    `lock` (held while a Turn runs).

    A Session's process stays warm between Turns for `idle_seconds`; at most `max_warm` idle ones are
    kept, the least recently used stopping first (a stopped Session resumes its native thread on its
    next Turn), so a Runtime serving many Sessions does not hold one process per Session it ever saw."""

    title: str  # the Harness's name in messages ("Codex", "Claude Code")
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
