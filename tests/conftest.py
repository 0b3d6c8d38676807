import json
import os
import pathlib

import pytest

from local import clientcache

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"

# Every Runtime a test (or a stack a test started) spawns stops when its parent does, even when the test
# process is killed before its fixtures stop it: none is left reconnecting after the run.
os.environ.setdefault("AGENTS_CORE_EXIT_WITH_PARENT", "1")

# One botocore client per service and configuration in a test process, as a Lambda execution environment keeps
# its own (local/clientcache.py): the in-process stack is rebuilt for every test, and making its clients again
# was an eighth of an integration test's CPU. (pyproject's pythonpath puts the repository root on sys.path.)
clientcache.install()


def pytest_collection_modifyitems(config, items):
    """Coverage (`make test`: of the contract layer, agents_contract) is measured by the unit tests, which
    cover it whole (tests/unit: 98%). Integration tests run a whole stack in the test process (moto, Step
    Functions, the handlers, their threads) and e2e tests drive one in other processes: tracing them doubled
    an integration test's time for a few lines more, so pytest-cov's no_cover spares them."""
    traced = ROOT / "tests" / "unit"
    for item in items:
        if traced not in pathlib.Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.no_cover)


def load_event(name: str) -> dict:
    """Shared sample events come from events/ (the same files `sam local invoke` uses)."""
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT
