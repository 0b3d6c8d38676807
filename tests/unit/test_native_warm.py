"""A native Harness keeps at most `max_warm` idle processes; the least recently used stop first, a
Session that runs a Turn is never stopped, and a stopped Session starts again on its next Turn."""

import asyncio
import threading

from runtime.harnesses.native import NativeDriver, NativeTurn
from runtime.protocol import TurnChannel


class FakeSession:
    def __init__(self, driver, start):
        self.driver = driver
        self.session_id = start["session_id"]
        self.lock = asyncio.Lock()
        self.current = None
        self.spawned = 0
        self.stopped = 0
        self.process = False
        self.release = {}
        self._idle = None

    @property
    def alive(self):
        return self.process

    async def stop(self):
        self.process = False
        self.stopped += 1

    async def run(self, turn):
        async with self.lock:
            if self._idle is not None:
                self._idle.cancel()
            self.current = turn
            if not self.process:
                self.process, self.spawned = True, self.spawned + 1
            try:
                await turn.gate.wait()
                turn.channel.finish("turn.completed")
            finally:
                self.current = None
                self._idle = self.driver.idle_later(self)


class FakeTurn(NativeTurn):
    def __init__(self, session, start, channel):
        self.session, self.channel = session, channel
        self.gate = asyncio.Event()
        if start.get("quick", True):
            self.gate.set()

    async def _answer(self, call_id, result): ...

    async def _steer(self, item): ...

    async def _cancel(self): ...


class FakeDriver(NativeDriver):
    harness = "codex"

    def __init__(self, tmp_path, max_warm, idle_seconds=600.0):
        self._setup("fake", "0", None, str(tmp_path), idle_seconds, max_warm)
        self.session_class, self.turn_class = FakeSession, FakeTurn


def start(session_id, turn_id, quick=True):
    return {"tenant": "t", "session_id": session_id, "turn_id": turn_id, "quick": quick}


def run_turn(driver, session_id, turn_id, quick=True):
    channel = TurnChannel(start(session_id, turn_id), lambda message: None, heartbeat_seconds=60)
    turn = driver.start_turn(start(session_id, turn_id, quick), channel)
    if quick:
        assert channel.done.wait(5)
    return turn


def settle(driver):
    """Lets the loop run what the last Turn scheduled (trimming)."""
    for _ in range(3):
        driver.submit(asyncio.sleep(0.01)).result(5)


def test_at_most_max_warm_idle_processes_stay_and_the_least_recently_used_stop(tmp_path):
    driver = FakeDriver(tmp_path, max_warm=2)
    try:
        for n in range(4):
            run_turn(driver, f"sess_{n}", f"turn_{n}")
            settle(driver)
        alive = sorted(sid for sid, s in driver.sessions.items() if s.alive)
        assert alive == ["sess_2", "sess_3"]  # the two most recently used
        run_turn(driver, "sess_0", "turn_4")  # a stopped Session starts its process again
        settle(driver)
        assert driver.sessions["sess_0"].spawned == 2
        assert sorted(sid for sid, s in driver.sessions.items() if s.alive) == ["sess_0", "sess_3"]
    finally:
        driver.close()


def test_a_session_running_a_turn_is_never_stopped_to_make_room(tmp_path):
    driver = FakeDriver(tmp_path, max_warm=0)
    try:
        busy = run_turn(driver, "sess_busy", "turn_busy", quick=False)
        settle(driver)
        run_turn(driver, "sess_other", "turn_other")
        settle(driver)
        session = driver.sessions["sess_busy"]
        assert session.alive and session.stopped == 0 and session.current is busy
        driver.loop.call_soon_threadsafe(busy.gate.set)
        assert busy.channel.done.wait(5)
        settle(driver)
        assert not session.alive and not driver.sessions["sess_other"].alive  # nothing idle is kept
    finally:
        driver.close()


def test_an_idle_process_stops_after_idle_seconds(tmp_path):
    driver = FakeDriver(tmp_path, max_warm=4, idle_seconds=0.05)
    try:
        run_turn(driver, "sess_a", "turn_a")
        stopped = threading.Event()
        for _ in range(100):
            if not driver.sessions["sess_a"].alive:
                stopped.set()
                break
            settle(driver)
        assert stopped.is_set() and driver.sessions["sess_a"].stopped == 1
    finally:
        driver.close()
