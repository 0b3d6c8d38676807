import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"


def load_event(name: str) -> dict:
    """Shared sample events come from events/ (the same files `sam local invoke` uses)."""
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT
