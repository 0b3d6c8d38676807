"""Out-of-order delivery at scale (`make test` runs it at 100: tests/integration/test_out_of_order_delivery.py).

1,000 observations of one Turn through the in-process gateway's `concurrent` delivery (as API Gateway's
concurrent Lambda invocations), shuffled in waves of 20 with two of each wave sent twice and whatever stays
unacknowledged 5 s sent again: Items and item.done events lost and duplicated, and the seconds it took
(moto, the real handlers, the ASL executed).

    .venv/bin/python bench/bench_out_of_order.py [messages]
"""

from __future__ import annotations

try:
    from bench.common import emit, in_process_stack
except ImportError:  # run as a script
    from common import emit, in_process_stack  # type: ignore[no-redef]

import sys
from typing import Any


def main(messages: int = 1000) -> dict[str, Any]:
    from tests.integration.delivery_at_scale import out_of_order_delivery

    # The bench is the Runtime and its heartbeats ride in its waves: a long bound keeps it about delivery.
    with in_process_stack(heartbeat_seconds=120) as (stack, client):
        figures = out_of_order_delivery(stack, client, messages)
    return emit("out_of_order", {"benchmark": "out_of_order", **figures,
                                 "note": "in process on moto; lost/duplicated: Items and item.done events"})


if __name__ == "__main__":
    main(20 if "--smoke" in sys.argv[1:] else int(sys.argv[1]) if sys.argv[1:] else 1000)
