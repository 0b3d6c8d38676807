"""Cold-start import time of each function's module: a fresh interpreter per sample, median of 5.

Measures `import app` (handler module plus the layer it pulls in) with the function's directory and
the layer on sys.path, as the Lambda runtime would load it; interpreter start-up is excluded.

`first_call_ms` adds what a first invocation builds before its first AWS call: the clients the
handler's cached factories create (`default_store`, and `default_messenger` / `default_workflow` where
the handler uses them). Importing botocore is part of both figures.

Bytecode: every sample reads compiled bytecode from a private cache (PYTHONPYCACHEPREFIX, filled by
one unmeasured warm-up run), so the figures do not depend on whether an edited file's `__pycache__` in
the tree happens to be stale. Lambda sees these figures only if the deployed artifacts carry bytecode
for the runtime's Python (its file system is read-only: source without bytecode is compiled again at
every cold start).
"""

from __future__ import annotations

try:
    from bench.common import ROOT, emit
except ImportError:  # run as a script
    from common import ROOT, emit  # type: ignore[no-redef]

import os
import statistics
import subprocess
import sys
import tempfile

PROBE = ("import sys, time; sys.path[:0] = [sys.argv[1], sys.argv[2]]; t = time.perf_counter(); import app; "
         "i = time.perf_counter() - t; "
         "from agents_core import store; store.default_store(); "
         "[getattr(app, f)() for f in ('default_messenger', 'default_workflow') if hasattr(app, f)]; "
         "print(i, time.perf_counter() - t)")
SAMPLES = 1 if "--smoke" in sys.argv[1:] else 5
SMOKE_FUNCTIONS = ("runtime_gateway",)  # make test's smoke: one function, one sample


def _env(cache: str | None, write: bool) -> dict[str, str]:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "POWERTOOLS_TRACE_DISABLED": "1", "POWERTOOLS_METRICS_NAMESPACE": "AgentsCore", "TABLE_NAME": "t",
           "STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:turn",
           "WEBSOCKET_ENDPOINT": "https://abc123.execute-api.us-east-1.amazonaws.com/dev",
           **({"PYTHONPYCACHEPREFIX": cache} if cache else {})}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _sample(directory: str, env: dict[str, str]) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", PROBE, directory, str(ROOT / "layers" / "contract")],
                         capture_output=True, text=True, env=env, check=True, cwd=directory)
    imported, first_call = out.stdout.split()
    return float(imported), float(first_call)


def main() -> dict:
    results = {}
    with tempfile.TemporaryDirectory(prefix="coldstart-pyc-") as cache:
        for directory in sorted((ROOT / "functions").iterdir()):
            if not (directory / "app.py").exists() or (SAMPLES == 1 and directory.name not in SMOKE_FUNCTIONS):
                continue
            if SAMPLES == 1:  # the smoke: one sample, no warm-up, the tree's bytecode (make test writes it)
                samples = [_sample(str(directory), _env(None, write=True))]
            else:
                _sample(str(directory), _env(cache, write=True))  # warm-up: writes the bytecode cache
                samples = [_sample(str(directory), _env(cache, write=False)) for _ in range(SAMPLES)]
            imports, first_calls = [s[0] for s in samples], [s[1] for s in samples]
            results[directory.name] = {"median_ms": round(statistics.median(imports) * 1000, 1),
                                       "min_ms": round(min(imports) * 1000, 1),
                                       "first_call_ms": round(statistics.median(first_calls) * 1000, 1)}
    return emit("coldstart", {"benchmark": "cold_start_import", "bytecode": "the tree's" if SAMPLES == 1 else "cached", "import_time": results,
                              "note": "local CPython, fresh interpreter per sample; Lambda arm64 differs"})


if __name__ == "__main__":
    main()
