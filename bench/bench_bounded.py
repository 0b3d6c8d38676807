"""Bounded commits (issue 13, case 1): Turns with 120 and 500 pending calls settled on cancel, on
completion and on Runtime loss, then a new Turn, on the in-process stack (moto). Runs the full
matrix of tests/integration/test_bounded_commits.py and reports each case's seconds."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def main() -> int:
    smoke = "--smoke" in sys.argv[1:]  # make test: one case (3 calls, completion), not the full matrix
    args = [str(ROOT / "tests" / "integration" / "test_bounded_commits.py"), "-q", "-p", "no:cacheprovider", "-p", "no:schemathesis",
            "-p", "no:hypothesispytest", "--durations=0", "-k",  # a faster start: neither of those plugins is used
            "many_pending and 3-completion" if smoke else "many_pending"]
    if smoke:  # in this interpreter (bench/smoke.py has imported the stack already), its report captured
        import contextlib
        import io

        import pytest

        # the smoke's one case at 3 calls (make test runs the 120-call cases itself: test_bounded_commits.py)
        os.environ["AGENTS_CORE_BOUNDED_SMOKE"] = "1"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            returncode = int(pytest.main(args))
        stdout = out.getvalue()
    else:
        env = {**os.environ, "AGENTS_CORE_BOUNDED_FULL": "1"}
        proc = subprocess.run([sys.executable, "-m", "pytest", *args], capture_output=True, text=True, cwd=ROOT,
                              env=env)
        returncode, stdout = proc.returncode, proc.stdout
    seconds = {m.group(2): float(m.group(1)) for m in
               re.finditer(r"([\d.]+)s call .*settles_and_the_session_runs_a_new_turn\[(\d+-\w+)\]", stdout)}
    print(json.dumps({"benchmark": "bounded_settlement", "passed": returncode == 0,
                      "seconds_per_case": seconds,
                      "note": "moto emulation; each case builds the calls, settles and runs a new Turn"}))
    return returncode


if __name__ == "__main__":
    sys.exit(main())
