"""A Runtime started by a local stack or a test stops when the process that started it is gone
(AGENTS_CORE_EXIT_WITH_PARENT=1), instead of reconnecting forever to a stack that no longer exists."""

import os
import subprocess
import sys
import time

from tests.conftest import ROOT


def runtime_of_a_parent_that_exits(flag: str) -> int:
    """A shell starts a Runtime in the background and exits at once: the Runtime's parent is gone."""
    env = {**os.environ, "AGENTS_CORE_EXIT_WITH_PARENT": flag, "AGENTS_CORE_RUNTIME_TOKEN": "rt-unused",
           "PYTHONPATH": f"{ROOT / 'layers' / 'contract'}:{ROOT}"}
    out = subprocess.run(["/bin/sh", "-c", f"{sys.executable} -m runtime --url ws://127.0.0.1:9 --harness scripted "  # noqa: S603
                          ">/dev/null 2>&1 & echo $!"], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_runtime_whose_parent_is_gone_stops():
    pid = runtime_of_a_parent_that_exits("1")
    deadline = time.monotonic() + 20
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)


def test_without_the_setting_a_runtime_outlives_its_parent_and_keeps_reconnecting():
    pid = runtime_of_a_parent_that_exits("0")
    try:
        time.sleep(3)
        assert alive(pid)
    finally:
        os.kill(pid, 15)
