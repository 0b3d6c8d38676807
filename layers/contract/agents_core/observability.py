"""The one place Logger, Tracer and Metrics are created (Powertools)."""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()
