"""The local stack as a user runs it (`python -m local` in its own process, a Runtime process):
start-up time, HTTP round trip of a Session retrieve, and the end-to-end call round trip over real
HTTP and WebSockets (message -> required action visible -> result -> Turn completed), p50/p95."""

from __future__ import annotations

try:
    from bench.common import SMOKE, emit, local_stack, percentiles
except ImportError:  # run as a script
    from common import SMOKE, emit, local_stack, percentiles  # type: ignore[no-redef]

import time

FN = {"type": "function", "name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}




def main() -> dict:
    from openai import OpenAI

    from local.inprocess import wait_for

    with local_stack({}) as info:  # with its own Runtime (scripted), as make dev runs it
        startup = info.get("startup_seconds_measured")  # None on a reused stack
        client = OpenAI(base_url=info["base_url"], api_key=info["api_key"], max_retries=0)
        first = client.beta.agents.sessions.create(environment={"type": "none"}, input="say hi",
                                                   agent={"model": "m", "tools": [FN]})
        retrieves = []
        for _ in range(2 if SMOKE else 50):
            s = time.perf_counter()
            client.beta.agents.sessions.retrieve(first.id)
            retrieves.append(time.perf_counter() - s)
        trips, to_action = [], []
        for _ in range(1 if SMOKE else 20):
            s = time.perf_counter()
            session = client.beta.agents.sessions.create(environment={"type": "none"}, input="call f {}\nsay done",
                                                         agent={"model": "m", "tools": [FN]})
            action = wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).required_actions,
                              interval=0.005)[0]
            to_action.append(time.perf_counter() - s)
            client.beta.agents.sessions.events.create(session.id, events=[{
                "type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id,
                "success": True, "output": "ok"}])
            wait_for(lambda: client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id).status
                     == "completed", interval=0.005)
            trips.append(time.perf_counter() - s)
    return emit("local_stack", {
        "benchmark": "local_stack_end_to_end",
        "startup_seconds": startup,
        "session_retrieve_http": percentiles(retrieves),
        "call_round_trip_http": {**percentiles(trips), "to_required_action": percentiles(to_action)},
        "note": "python -m local in its own process, the reference Runtime in another; polling every 5 ms",
    })


if __name__ == "__main__":
    main()
