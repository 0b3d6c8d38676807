"""A chatty Turn beside a waiting Turn at scale (`make test` runs it at 100 Items:
tests/integration/test_runtime_robustness.py).

One scripted Runtime on the in-process stack, its connection's messages delivered one at a time in order
(as `make dev`): a Turn waiting on a function call and a Turn saying 1,000 lines. Items lost and
duplicated, whether the waiting Turn outlived the flood (3 s heartbeat bound), the most messages queued
ahead of one of its heartbeats, and the seconds it took.

    .venv/bin/python bench/bench_chatty_turn.py [items]
"""

from __future__ import annotations

try:
    from bench.common import emit, in_process_stack
except ImportError:  # run as a script
    from common import emit, in_process_stack  # type: ignore[no-redef]

import sys
from typing import Any


def main(items: int = 1000) -> dict[str, Any]:
    from tests.integration.delivery_at_scale import chatty_beside_waiting

    with in_process_stack(heartbeat_seconds=3) as (stack, client):
        figures = chatty_beside_waiting(stack, client, items)
    return emit("chatty_turn", {"benchmark": "chatty_turn", **figures,
                                "note": "in process on moto; lost/duplicated: the chatty Turn's Items"})


if __name__ == "__main__":
    main(10 if "--smoke" in sys.argv[1:] else int(sys.argv[1]) if sys.argv[1:] else 1000)
