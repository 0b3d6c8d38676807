"""Capability declarations the reference Runtime advertises: one complete declaration per Harness,
with the engine that serves it (`scripted`, or the native engine and its version).

A native name served by the scripted engine is impersonated: that Harness's capability set on the
scripted engine, so every Harness's flows run locally; `runtime.hello` says so in `engine`.
"""

from __future__ import annotations

from typing import Optional

from agents_contract import capabilities as _caps  # installed by runtime/requirements.txt


def declarations(harnesses: list[str], engines: Optional[dict[str, str]] = None) -> list[dict[str, object]]:
    engines = engines or {}
    return [{"harness": h, "capabilities": _caps.full_declaration(_caps.HARNESS_CAPABILITIES[h]),
             "engine": engines.get(h, "scripted")} for h in harnesses]
