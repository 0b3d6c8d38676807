"""The Runtime protocol's vocabulary is named once (agents_contract.protocol) and used by both sides.

Given docs/runtime-protocol.md, every message type it names is a constant of the module, and every
constant the module names is documented; the Runtime and the functions spell no message type themselves.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agents_contract import protocol

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "runtime-protocol.md"
# Where the protocol is spoken with the module's constants (agents_core follows once its rewrite lands).
SPEAKERS = ("runtime", "functions", "local", "layers/contract/agents_core")


def documented_message_types() -> set[str]:
    """The message types the document names: a backticked `turn.*` name, the `type` or `action` of a
    JSON example (`"action": "runtime.hello"`), and the first column of a table headed `type` or `action`
    (which also holds `error` and `chunk`)."""
    text = DOC.read_text()
    names = {n for n in re.findall(r"`(turn\.[a-z_.]+)`", text)}
    names |= {n for n in re.findall(r'"(?:type|action)": "([a-z_]+\.[a-z_.]+)"', text)}
    header = None
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            header = None
        elif header is None:
            header = cells[0]
        elif header in ("type", "action") and not set(cells[0]) <= set("- "):
            names |= set(re.findall(r"`([a-z_.]+)`", cells[0]))
    return names


def module_message_types() -> dict[str, str]:
    return {name: value for name, value in vars(protocol).items()
            if name.isupper() and isinstance(value, str) and value not in protocol.FIELDS}


def test_every_documented_message_type_is_a_constant_and_every_constant_is_documented():
    documented = documented_message_types()
    assert {"turn.start", "turn.subagent.turn.ended", "runtime.hello", "executor.expect", "error", "chunk"} <= documented
    assert documented == protocol.MESSAGE_TYPES
    assert set(module_message_types().values()) == set(protocol.MESSAGE_TYPES)


def test_the_groups_split_the_vocabulary_by_direction():
    assert protocol.CORE_TO_RUNTIME | protocol.RUNTIME_TO_CORE == protocol.MESSAGE_TYPES
    # executor.host is both the host's announcement and Core's answer to it
    assert protocol.CORE_TO_RUNTIME & protocol.RUNTIME_TO_CORE == {protocol.EXECUTOR_HOST}
    assert set(protocol.TERMINAL) <= set(protocol.OBSERVATIONS)
    assert set(protocol.DELIVERED) <= protocol.CORE_TO_RUNTIME


def test_the_envelope_fields_are_named():
    assert protocol.ROUTE == ("tenant", "session_id", "turn_id")
    assert {"type", "action", "turn_id", "session_id", "call_id", "delivery_id", "seq"} <= set(protocol.FIELDS)


def _literals(path: Path) -> list[tuple[int, str]]:
    """String constants in code equal to a dotted message type (docstrings and comments may name them;
    `error` and `chunk` are also ordinary field names, so only the dotted names are looked for)."""
    dotted = {t for t in protocol.MESSAGE_TYPES if "." in t}
    tree = ast.parse(path.read_text(), filename=str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in dotted]


@pytest.mark.parametrize("folder", SPEAKERS)
def test_no_message_type_is_spelled_outside_the_vocabulary(folder):
    found = [f"{path.relative_to(ROOT)}:{line}: {value!r}"
             for path in sorted((ROOT / folder).rglob("*.py")) for line, value in _literals(path)]
    assert not found, "use agents_contract.protocol's constants:\n" + "\n".join(found)
