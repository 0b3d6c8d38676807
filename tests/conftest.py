import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"

# Every Runtime a test (or a stack a test started) spawns stops when its parent does, even when the test
# process is killed before its fixtures stop it: none is left reconnecting after the run.
os.environ.setdefault("AGENTS_CORE_EXIT_WITH_PARENT", "1")


def load_event(name: str) -> dict:
    """Shared sample events come from events/ (the same files `sam local invoke` uses)."""
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT
