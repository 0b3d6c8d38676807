"""The one place Logger and Metrics are created (Powertools).

No Powertools Tracer: importing the X-Ray SDK costs about 250 ms of every cold start (measured by
bench/bench_coldstart.py); the functions keep `Tracing: Active`, so Lambda still reports each
invocation's segment to X-Ray without it.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
# The template sets POWERTOOLS_METRICS_NAMESPACE; the default keeps local runs from failing a flush.
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "AgentsCore"))
