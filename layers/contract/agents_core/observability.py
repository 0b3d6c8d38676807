"""The one place Logger, Tracer and Metrics are created (Powertools)."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
# The template sets POWERTOOLS_METRICS_NAMESPACE; the default keeps local runs from failing a flush.
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "AgentsCore"))
