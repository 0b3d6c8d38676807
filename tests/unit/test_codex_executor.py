"""The Codex driver of an exec-server Environment waits, before a Turn, for the app-server's connection to
the executor to settle (runtime/harnesses/codex/exec_server.py `settle`): while the app-server resumes the
previous exec-server session it waits; once that resume failed, it makes the app-server connect afresh. These
are the answers the pinned app-server gives (`environment/status`, `environment/info`), replayed."""

from __future__ import annotations

import asyncio

from runtime.harnesses.codex import exec_server
from runtime.harnesses.codex.rpc import RpcError

RECOVERING = {"status": "disconnected", "error": "exec-server environment is recovering"}
FAILED = {"status": "disconnected", "error": "exec-server transport disconnected; failed to resume exec-server "
          "session: exec-server rejected request (-32600): unknown session id 6c9c"}


class ReplayedAppServer:
    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    async def request(self, method, params=None, timeout=60.0):
        self.calls.append((method, params))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def settle(peer, bound=5.0):
    return asyncio.run(exec_server.settle(peer, "env_1", bound=bound))


def test_a_ready_executor_is_one_status_read():
    peer = ReplayedAppServer({"status": "ready"})
    assert settle(peer) == "ready"
    assert peer.calls == [("environment/status", {"environmentId": "env_1"})]


def test_a_refused_resume_is_waited_for_then_the_app_server_connects_afresh():
    peer = ReplayedAppServer(RECOVERING, RECOVERING, FAILED, {"cwd": "file:///w", "shell": {}})
    assert settle(peer) == "ready"
    assert [m for m, _ in peer.calls] == ["environment/status"] * 3 + ["environment/info"]


def test_a_fresh_connection_that_fails_is_tried_again_within_the_bound():
    peer = ReplayedAppServer(FAILED, RpcError("environment/info", {"code": -32000, "message": "exec-server is not connected"}), FAILED,
                             {"cwd": "file:///w", "shell": {}})
    assert settle(peer) == "ready"
    assert [m for m, _ in peer.calls] == ["environment/status", "environment/info"] * 2


def test_past_the_bound_the_turn_goes_on_and_its_command_fails_visibly():
    peer = ReplayedAppServer(*[RECOVERING] * 50)
    assert settle(peer, bound=0.5) == "disconnected"
    assert 1 < len(peer.calls) < 10


def test_an_app_server_without_the_method_is_not_waited_on():
    peer = ReplayedAppServer(RpcError("environment/status", {"code": -32601, "message": "method not found"}))
    assert settle(peer) == "unknown"
    assert len(peer.calls) == 1
