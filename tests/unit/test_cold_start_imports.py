"""A function's cold start imports only what its invocations need (bench/bench_coldstart.py measures it).

Each handler module is imported in a fresh interpreter, as Lambda loads it (its folder and the layer on
sys.path), and the modules it pulled in are checked.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.parent.name for p in (ROOT / "functions").glob("*/app.py"))
PROBE = ("import json, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import app; "
         "print(json.dumps(sorted(sys.modules)))")


def imported(function: str) -> set[str]:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "TABLE_NAME": "t", "POWERTOOLS_TRACE_DISABLED": "1"}
    env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, "-c", PROBE, str(ROOT / "functions" / function),
                          str(ROOT / "layers" / "contract")], capture_output=True, text=True, check=True, env=env,
                         cwd=str(ROOT / "functions" / function))
    return set(json.loads(out.stdout))


def packages(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_function_imports_boto3(function):
    """Clients come from botocore directly: boto3 (and the s3transfer it imports) is no cold start's cost."""
    assert packages(imported(function)) & {"boto3", "s3transfer"} == set()


def test_the_streaming_function_imports_neither_the_resolver_nor_the_parser():
    """It serves Starlette, not Powertools' resolver; only its create route parses a Session."""
    modules = imported("session_stream")
    assert not {m for m in modules if m.startswith("aws_lambda_powertools.event_handler")}
    assert "pydantic" not in packages(modules)
    assert "agents_contract.parser" not in modules


def test_the_admission_function_imports_the_runtime_protocol_only_for_stream_tickets():
    assert "agents_core.runtimes" not in imported("admission")
