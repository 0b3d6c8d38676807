import functools
import json
import os
import pathlib

import pytest

from local import clientcache, gcsettings, inprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
EVENTS = ROOT / "events"

# Every Runtime a test (or a stack a test started) spawns stops when its parent does, even when the test
# process is killed before its fixtures stop it: none is left reconnecting after the run.
os.environ.setdefault("AGENTS_CORE_EXIT_WITH_PARENT", "1")

# One botocore client per service and configuration in a test process, as a Lambda execution environment keeps
# its own (local/clientcache.py): the in-process stack is rebuilt for every test, and making its clients again
# was an eighth of an integration test's CPU. (pyproject's pythonpath puts the repository root on sys.path.)
clientcache.install()
# A test's wait polls every 20 ms at first, then less and less often, at most every 0.2 s (local/inprocess.py):
# each poll is a request its stack serves.
inprocess.POLL_MAX_INTERVAL = 0.2
# The in-process stacks allocate a great deal (moto's item copies, JSON): a young-generation collection every 50,000
# allocations instead of every 700 spends about 8% less CPU in a test process, as in a local stack's (local/gcsettings.py).
gcsettings.apply()


# The longest files, longest first (`make test` measured them). With `-n 4 --dist loadfile --no-loadscope-reorder`
# (xdist would otherwise put the files with the most tests first) a worker takes the next file when it is free, so
# the long ones start while the others still run and none is left for the end, when the other workers would wait
# for it. Then the other end-to-end files (mostly waiting on processes, which the in-process tests fill with CPU),
# the integration files, the unit files.
LONGEST_FIRST = ("e2e/test_claude_code.py", "e2e/test_egress.py", "e2e/test_environments.py",
                 "e2e/test_exec_server.py", "e2e/test_dashboard.py", "e2e/test_native_tool_sets.py",
                 "e2e/test_native_subagents.py", "e2e/test_streaming.py", "e2e/test_bench_smoke.py",
                 "integration/test_bench_smoke.py", "integration/test_sam_build.py", "e2e/test_codex.py",
                 "e2e/test_dashboard_automations.py", "e2e/test_gone_runtime.py", "e2e/test_automations_webhooks.py")


def _order(item) -> tuple[int, int]:
    return _file_order(str(item.path))


@functools.cache
def _file_order(item_path: str) -> tuple[int, int]:  # once per file, not per test (3,000 path resolutions)
    resolved = pathlib.Path(item_path).resolve()
    path = resolved.relative_to(ROOT / "tests").as_posix() if (ROOT / "tests") in resolved.parents else ""
    if path in LONGEST_FIRST:
        return 0, LONGEST_FIRST.index(path)
    return {"e2e": 1, "integration": 2}.get(path.split("/")[0], 3), 0


def pytest_collection_modifyitems(config, items):
    """Coverage (`make test`: of the contract layer, agents_contract) is measured by the unit tests, which
    cover it whole (tests/unit: 98%). Integration tests run a whole stack in the test process (moto, Step
    Functions, the handlers, their threads) and e2e tests drive one in other processes: tracing them doubled
    an integration test's time for a few lines more, so pytest-cov's no_cover spares them. The files run in
    `LONGEST_FIRST` order (a stable sort: a file's tests keep theirs)."""
    traced = ROOT / "tests" / "unit"
    for item in items:
        if traced not in pathlib.Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.no_cover)
    items.sort(key=_order)


def load_event(name: str) -> dict:
    """Shared sample events come from events/ (the same files `sam local invoke` uses)."""
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT
