"""Capability declarations the reference Runtime advertises: one complete declaration per Harness.

Serving `codex`, `claude_code` or `minimax_code` here means impersonating it with the scripted
engine and that Harness's capability set, so every Harness's flows run locally.
"""

from __future__ import annotations

import pathlib
import sys

try:
    from agents_contract import capabilities as _caps
except ImportError:  # running from a checkout: the contract layer lives beside us
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "layers" / "contract"))
    from agents_contract import capabilities as _caps


def declarations(harnesses: list[str]) -> list[dict[str, object]]:
    return [{"harness": h, "capabilities": _caps.full_declaration(_caps.HARNESS_CAPABILITIES[h])} for h in harnesses]
