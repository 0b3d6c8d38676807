"""The garbage collector's thresholds for the local stack's process and test processes (emulation only; nothing here runs
in AWS). moto and the handlers allocate many short-lived objects (item copies, parsed JSON), and CPython's default
young-generation threshold (700 allocations) ran a collection every few requests: 8 to 10% of a test process's CPU
(tests/integration, measured). Collections still run, only less often; reference counting frees most objects anyway."""

from __future__ import annotations

import gc

THRESHOLDS = (50_000, 20, 100)


def apply() -> None:
    gc.set_threshold(*THRESHOLDS)
