"""Routes Core's messages to harness drivers and their running Turns; transport-agnostic (`send`
posts one message). Which driver serves a Harness is decided once, at construction."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

from agents_contract.protocol import (
    ACKS,
    ACTION,
    CALL_ID,
    DEFERRED_ACKS_FIELD,
    DELIVERED,
    DELIVERY_ID,
    ENVIRONMENT_IDLE,
    ERROR,
    EXECUTOR_EXPECT,
    HEARTBEAT_SECONDS_FIELD,
    MAX_HEARTBEAT_TURNS,
    REF,
    RUNTIME_HEARTBEAT,
    RUNTIME_WELCOME,
    SEQ,
    TURN_ACK,
    TURN_ACKS,
    TURN_CANCEL,
    TURN_ENVIRONMENT,
    TURN_FAILED,
    TURN_ID,
    TURN_INPUT,
    TURN_START,
    TURN_TOOL_RESULT,
    TURNS,
    TYPE,
    WAITING_CALLS,
)

from .environments.workspace import WORKSPACE_PLACEMENTS, Workspace, WorkspaceError, check_hosted_variables
from .harnesses import HarnessDriver, TurnHandle
from .protocol import Emit, Reassembler, TurnChannel

log = logging.getLogger("runtime")

HELD_TURNS = 64  # Turns with messages waiting for their turn.start
HELD_PER_TURN = 100
HELD_SECONDS = 600.0
MAX_WAITING = 128  # call ids one Turn's heartbeat entry names (Core's limit)
ENDED_KEPT = 10_000  # ids of ended Turns remembered after their state is let go


class Runtime:
    def __init__(self, send: Emit, drivers: dict[str, HarnessDriver], heartbeat_seconds: float = 5.0,
                 workspace: Optional[Workspace] = None, on_welcome: Optional[Callable[[dict[str, Any]], None]] = None,
                 hosted: Any = None, egress: Any = None, namespace: Any = None):
        self.send = send
        # an operator's Runtime (shared or hosted): the egress proxy (runtime.environments.egress.EgressProxy) every
        # connection made for a tenant leaves through; None on an Environment's own machine
        self.egress = egress
        # a shared Runtime's native Harness processes run in a network namespace of their own
        # (runtime.environments.sandbox.HarnessNamespace), for `environment: none` Sessions
        self.namespace = namespace
        self.workspace = workspace  # an Environment's Runtime: its bound directory and tool variables
        self.hosted = hosted  # a host of hosted Environments (runtime.environments.sandbox.HostedEnvironments): one sandbox each
        if hosted is not None:
            for driver in drivers.values():
                driver.on_stopped = self._stopped
        self.on_welcome = on_welcome
        self.drivers = drivers
        self.heartbeat_seconds = heartbeat_seconds
        self.turns: dict[str, TurnHandle] = {}
        self.errors: list[dict[str, Any]] = []
        self.channels: dict[str, TurnChannel] = {}
        self.welcomed = threading.Event()
        self._lock = threading.Lock()
        self._delivered: dict[str, None] = {}  # delivery ids seen, oldest first
        self._chunks = Reassembler()
        self._ended: dict[str, None] = {}  # ids of ended Turns whose state was let go, oldest first
        self._held: dict[str, tuple[float, list[dict[str, Any]]]] = {}  # turn id -> (since, messages)
        # runtime.heartbeat: the cadence Core's welcome named (None: each Turn sends its own turn.heartbeat)
        self.beat_seconds: Optional[float] = None
        self.deferred_acks = False  # the welcome granted deferred_acks: runtime.heartbeat asks for acks
        self.waiting_calls = False  # the welcome granted waiting_calls: runtime.heartbeat names the calls awaited
        self._beats_stopped = threading.Event()
        self._beats: Optional[threading.Thread] = None

    def on_message(self, message: dict[str, Any]) -> None:
        whole = self._chunks.feed(message)  # Core sends a message over 128 KB in chunks
        if whole is None:
            return
        message = whole
        kind = message.get(TYPE)
        if kind == RUNTIME_WELCOME:
            self._liveness(message)
            if self.on_welcome is not None:
                self.on_welcome(message)  # an enrolled machine keeps its Environment's credential
            self.welcomed.set()
            log.info("connected; serving %s", ", ".join(f"{h} ({d.engine})" for h, d in self.drivers.items()))
        elif kind == TURN_START:
            self._start(message)
        elif kind in DELIVERED:
            if not self._first_delivery(message.get(DELIVERY_ID)):
                return  # Core posts after its commit and again from its outbox: at least once
            with self._lock:  # drivers' deliver() never blocks
                turn_id = str(message.get(TURN_ID, ""))
                handle = self.turns.get(turn_id)
                channel = self.channels.get(turn_id)
                if kind == TURN_TOOL_RESULT and channel is not None:  # no longer awaited: the beat stops naming it
                    channel.waiting_calls.pop(str(message.get(CALL_ID)), None)
                if handle is None:
                    if turn_id not in self._ended:
                        self._hold(turn_id, message)  # ahead of its turn.start, which travels another path
                elif not handle.done:
                    handle.deliver(message)
        elif kind in ("environment.file.write", "environment.file.list"):  # environments.files, between Turns
            threading.Thread(target=self._environment_file, args=(message,), daemon=True).start()
        elif kind == EXECUTOR_EXPECT and getattr(self, "exec_server_hub", None) is not None:
            self.exec_server_hub.on_message(message)  # an exec-server registered here (environments/exec_server.py)
        elif kind == TURN_ACK:
            channel = self.channels.get(str(message.get(TURN_ID)))
            if channel is not None and isinstance(message.get(SEQ), int):
                channel.ack(message[SEQ])
        elif kind == TURN_ACKS:  # the answer to a runtime.heartbeat's `acks`
            for entry in message.get(ACKS) or []:
                channel = self.channels.get(str(entry.get(TURN_ID))) if isinstance(entry, dict) else None
                if channel is not None and isinstance(entry.get(SEQ), int):
                    channel.acks_answered(entry[SEQ])
        elif kind == ERROR:
            self.errors.append(message)
            error = message.get("error") or {}
            log.warning("Core rejected a message (turn %s, %s, seq %s): %s", message.get(TURN_ID),
                        message.get(ACTION), message.get(REF), error.get("message"))
            channel = self.channels.get(str(message.get(TURN_ID)))
            if channel is not None and (error.get("type") == "server_error" or error.get("code") == "rate_limit_exceeded"):
                channel.resend_from(message.get(REF))  # transient: Core did not take it

    def _environment_file(self, message: dict[str, Any]) -> None:
        """Core's environments.files request for an Environment whose workspace this Runtime holds."""
        import pathlib

        from .environments.workspace_files import handle

        root, uid = None, None
        env_id = str(message.get("environment_id") or "")
        if self.hosted is not None and env_id.startswith("env_") and "/" not in env_id:
            root = pathlib.Path(self.hosted.directory) / "envs" / env_id / "workspace"
            uid_file = root.parent / "uid"
            uid = int(uid_file.read_text()) if uid_file.exists() and os.geteuid() == 0 else None
        elif self.workspace is not None:
            root = pathlib.Path(self.workspace.directory)
        try:
            self.send(handle(message, root, uid))
        except ConnectionError:
            log.info("environment file answer lost: the connection closed")

    def _hold(self, turn_id: str, message: dict[str, Any]) -> None:
        """Keeps a message for a Turn whose turn.start has not arrived yet (Core posts a steer or a
        cancel straight after its commit, while turn.start comes from the Turn's workflow). Bounded:
        at most HELD_TURNS Turns of HELD_PER_TURN messages, each kept HELD_SECONDS; a Turn that never
        starts here (claimed elsewhere, or its execution failed) is forgotten."""
        cutoff = time.monotonic() - HELD_SECONDS
        for stale in [t for t, (at, _) in self._held.items() if at < cutoff]:
            del self._held[stale]
        if turn_id not in self._held:
            while len(self._held) >= HELD_TURNS:
                self._held.pop(next(iter(self._held)))
            self._held[turn_id] = (time.monotonic(), [])
        held = self._held[turn_id][1]
        if len(held) < HELD_PER_TURN:
            held.append(message)
        else:
            log.warning("dropped a message for turn %s held ahead of its start", turn_id)

    def _forget_ended(self) -> None:
        """A long-lived Runtime keeps no ended Turn: once a Turn's terminal observation is acknowledged
        (or given up on) its handle and channel go, and only its id stays, among the last ENDED_KEPT,
        so a redelivered start or a late message for it is still dropped."""
        for turn_id in [t for t, h in self.turns.items()
                        if not isinstance(h, _Starting) and h.done and not h.channel.unacknowledged]:
            del self.turns[turn_id]
            self.channels.pop(turn_id, None)
            self._ended[turn_id] = None
        while len(self._ended) > ENDED_KEPT:
            self._ended.pop(next(iter(self._ended)))

    def _first_delivery(self, delivery_id: Any) -> bool:
        if not isinstance(delivery_id, str):
            return True
        with self._lock:
            if delivery_id in self._delivered:
                return False
            self._delivered[delivery_id] = None
            while len(self._delivered) > 10_000:  # the repeat comes within seconds
                self._delivered.pop(next(iter(self._delivered)))
            return True

    def _start(self, message: dict[str, Any]) -> None:
        with self._lock:
            if message["turn_id"] in self.turns or message["turn_id"] in self._ended:
                return  # a redelivered start (the Dispatch task retried): the Turn runs once
            self._forget_ended()
            held = self._held.pop(message["turn_id"], (0.0, []))[1]
            channel = TurnChannel(message, self.send, self.heartbeat_seconds)
            channel.per_turn_heartbeats = self.beat_seconds is None  # else runtime.heartbeat names it
            self._defer_acks(channel)
            self.channels[message["turn_id"]] = channel
            driver = self.drivers.get(message.get("harness", ""))
            try:
                message = self._place(message)
            except WorkspaceError as exc:
                channel.finish(TURN_FAILED, error={"message": str(exc)[:500]})
                return
            if driver is None:
                channel.finish(TURN_FAILED, error={"message": f"This Runtime does not serve '{message.get('harness')}'."})
                return
            starting = _Starting(channel)
            starting.queued.extend(held)  # what arrived ahead of this start, in arrival order
            self.turns[message["turn_id"]] = starting
        if self.hosted is not None:  # preparing an Environment can take minutes: never on the socket's thread
            threading.Thread(target=self._start_hosted, args=(driver, message, channel),
                             name=f"prepare-{message['turn_id']}", daemon=True).start()
            return
        self._run(driver, message, channel)

    def _start_hosted(self, driver: HarnessDriver, message: dict[str, Any], channel: TurnChannel) -> None:
        """A hosted Environment's Turn: its sandbox (prepared once on this host), then the Harness in it.
        `turn.environment` tells Core the Environment's state before the Turn's own observations."""
        from .environments.sandbox import PreparationFailed, SandboxError

        channel.start_heartbeats()  # preparation counts as the Turn being alive
        try:
            sandbox = self.hosted.sandbox(message["environment"])
            prepared = sandbox.prepare()
        except SandboxError as exc:
            code = exc.code if isinstance(exc, PreparationFailed) else "sandbox_unavailable"
            log.warning("hosted Environment of turn %s failed: %s", message["turn_id"], exc)
            channel.emit(TURN_ENVIRONMENT, status="failed", prepared=False,
                         error={"code": code, "message": str(exc)[:500], "type": "sandbox_error"})
            channel.finish(TURN_FAILED, error={"message": str(exc)[:500]})
            self._drop_starting(message["turn_id"])
            return
        channel.emit(TURN_ENVIRONMENT, status="connected", prepared=prepared)
        from .environments import artifacts  # what the Turn leaves new or changed under /workspace/outputs

        form = (message["environment"].get("hosted") or {}).get("artifacts")
        baseline = artifacts.scan(str(sandbox.workspace), form)[0]
        channel.on_complete = lambda: artifacts.publish(str(sandbox.workspace), form, baseline)
        self._run(driver, {**message, "sandbox": sandbox}, channel)

    def _stopped(self, session: Any) -> None:
        """An idle Session's process stopped: when no process of its Environment runs any more, its sandbox
        is gone and Core hears the Environment is `ready` again (the next Turn starts a new sandbox)."""
        box = getattr(session, "box", None)
        if box is None:
            return
        running = [s for d in self.drivers.values() for s in getattr(d, "sessions", {}).values()
                   if getattr(s, "box", None) is not None and s.box.env_id == box.env_id and s.alive]
        if running:
            return
        try:
            self.send({"action": ENVIRONMENT_IDLE, "environment_id": box.env_id})
        except ConnectionError:
            log.info("environment %s idle while disconnected", box.env_id)

    def _drop_starting(self, turn_id: str) -> None:
        with self._lock:
            if isinstance(self.turns.get(turn_id), _Starting):
                self.turns[turn_id] = _Ended(self.channels[turn_id])

    def _run(self, driver: HarnessDriver, message: dict[str, Any], channel: TurnChannel) -> None:
        try:
            handle = driver.start_turn(message, channel)
        except Exception as exc:  # noqa: BLE001 - a driver bug fails its Turn, never the Runtime
            log.exception("driver %s could not start turn %s", driver.harness, message["turn_id"])
            channel.finish(TURN_FAILED, error={"message": f"The Harness could not start: {exc}"[:300]})
            return
        with self._lock:
            pending = self.turns.get(message["turn_id"])
            if isinstance(pending, _Starting):
                for queued in pending.queued:
                    handle.deliver(queued)
            self.turns[message["turn_id"]] = handle

    def _place(self, message: dict[str, Any]) -> dict[str, Any]:
        """Placement is a security boundary here too: a shared Runtime runs `environment: none` only;
        an Environment's Runtime runs its Sessions in its bound workspace."""
        placement = (message.get("environment") or {}).get("type")
        if self.egress is not None:
            message = {**message, "egress": self.egress}
        if self.hosted is not None:
            if placement != "openai_hosted":
                raise WorkspaceError("This Runtime hosts openai_hosted Environments only.")
            check_hosted_variables(message)  # stdio env_vars the Environment does not set fail the start
            return message
        if placement == "openai_hosted":
            raise WorkspaceError("An openai_hosted Session runs on a Runtime that isolates each Environment "
                                 "(--hosted-environments).")
        if self.workspace is not None:
            return self.workspace.bind(message)
        hub = getattr(self, "exec_server_hub", None)  # an exec-server host: Environments joined by exec-servers
        bound = hub.bind(message) if hub is not None and placement == "self_hosted" else None
        if bound is not None:
            return bound
        if placement in WORKSPACE_PLACEMENTS:
            raise WorkspaceError("This Runtime serves environment none only; a workspace Session runs in its own "
                                 "Environment.")
        if self.namespace is not None:
            message = {**message, "namespace": self.namespace}
        return message

    def resend_unacknowledged(self) -> None:
        """After a rotation: every observation Core has not acknowledged goes again, on the new connection
        (one sent on the old connection just as Core moved its Turn there was not taken; Core applies each
        `seq` once)."""
        for channel in list(self.channels.values()):
            channel.resend_now()

    # -- liveness: one runtime.heartbeat per cadence for the connection and all its Turns -------------------
    def _liveness(self, welcome: dict[str, Any]) -> None:
        """Core's welcome names the cadence (a third of its bound): from now on this connection beats, idle or
        busy, and each Turn's heartbeat rides in that one message (docs/runtime-protocol.md, "Liveness")."""
        cadence = welcome.get(HEARTBEAT_SECONDS_FIELD)
        if isinstance(cadence, bool) or not isinstance(cadence, (int, float)) or cadence <= 0:
            return  # an older Core: each Turn sends turn.heartbeat
        self.beat_seconds = float(cadence)  # what the hello asked, or shorter: Core's bound decides
        self.deferred_acks = welcome.get(DEFERRED_ACKS_FIELD) is True  # else (an older Core) every message is acked
        self.waiting_calls = welcome.get(WAITING_CALLS) is True  # else each result comes twice (commit and outbox)
        for channel in list(self.channels.values()):
            channel.per_turn_heartbeats = False
            self._defer_acks(channel)
        if self._beats is None:
            self._beats = threading.Thread(target=self._beat_forever, name="runtime-heartbeat", daemon=True)
            self._beats.start()

    def _beat_forever(self) -> None:
        while not self._beats_stopped.wait(self.beat_seconds or self.heartbeat_seconds):
            self.heartbeat()

    def _defer_acks(self, channel: TurnChannel) -> None:
        channel.deferred_acks = self.deferred_acks
        if self.deferred_acks and self.beat_seconds:  # a lost answer is asked for again at the next beats
            channel.linger = max(channel.linger, 3 * self.beat_seconds)

    def heartbeat(self) -> int:
        """One runtime.heartbeat naming every Turn that runs here (several messages past MAX_HEARTBEAT_TURNS) and,
        with deferred acks, asking about every Turn (running or ended) that holds unacknowledged observations;
        returns the messages sent."""
        channels = list(self.channels.values())
        routes = [{**c.route, **({WAITING_CALLS: list(c.waiting_calls)[:MAX_WAITING]}
                                 if self.waiting_calls and c.waiting_calls else {})} for c in channels if c.alive]
        asks = [a for a in (c.ack_request() for c in channels) if a is not None]
        size = MAX_HEARTBEAT_TURNS
        parts = [(routes[i:i + size], asks[i:i + size]) for i in range(0, max(len(routes), len(asks)), size)]
        sent = 0
        for turns, asked in parts or [([], [])]:
            try:
                self.send({ACTION: RUNTIME_HEARTBEAT, TURNS: turns, **({ACKS: asked} if asked else {})})
                sent += 1
            except ConnectionError:
                log.info("runtime.heartbeat not sent: not connected")
                break
        return sent

    def stop_heartbeats(self) -> None:
        self._beats_stopped.set()

    def close(self) -> None:
        self.stop_heartbeats()
        for driver in self.drivers.values():
            driver.close()


class _Ended(TurnHandle):
    """A Turn that ended before its driver started (its Environment could not be prepared)."""

    def __init__(self, channel: TurnChannel):
        self.channel = channel

    @property
    def done(self) -> bool:
        return True

    def deliver(self, message: dict[str, Any]) -> None:
        pass

    def deliver_result(self, call_id: str, result: dict[str, Any]) -> None:
        pass

    def steer(self, item: dict[str, Any]) -> None:
        pass

    def cancel(self) -> None:
        pass


class _Starting(TurnHandle):
    """A Turn whose driver is still starting: Core's messages wait here, in order."""

    def __init__(self, channel: TurnChannel):
        self.channel = channel
        self.queued: list[dict[str, Any]] = []

    def deliver(self, message: dict[str, Any]) -> None:
        self.queued.append(message)

    def deliver_result(self, call_id: str, result: dict[str, Any]) -> None:
        self.queued.append({"type": TURN_TOOL_RESULT, "call_id": call_id, "result": result})

    def steer(self, item: dict[str, Any]) -> None:
        self.queued.append({"type": TURN_INPUT, "item": item})

    def cancel(self) -> None:
        self.queued.append({"type": TURN_CANCEL})
