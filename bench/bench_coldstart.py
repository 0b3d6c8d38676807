"""Cold-start import time of each function's module: a fresh interpreter per sample, median of 5.

Measures `import app` (handler module plus the layer it pulls in) with the function's directory and
the layer on sys.path, as the Lambda runtime would load it; interpreter start-up is excluded.
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

PROBE = ("import sys, time; sys.path[:0] = [sys.argv[1], sys.argv[2]]; t = time.perf_counter(); import app; "
         "print(time.perf_counter() - t)")


def main() -> dict:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "POWERTOOLS_TRACE_DISABLED": "1", "POWERTOOLS_METRICS_NAMESPACE": "AgentsCore", "TABLE_NAME": "t"}
    env.pop("PYTHONPATH", None)
    results = {}
    for directory in sorted((ROOT / "functions").iterdir()):
        if not (directory / "app.py").exists():
            continue
        samples = []
        for _ in range(5):
            out = subprocess.run([sys.executable, "-c", PROBE, str(directory), str(ROOT / "layers" / "contract")],
                                 capture_output=True, text=True, env=env, check=True, cwd=str(directory))
            samples.append(float(out.stdout.strip()))
        results[directory.name] = {"median_ms": round(statistics.median(samples) * 1000, 1),
                                   "min_ms": round(min(samples) * 1000, 1)}
    return emit("coldstart", {"benchmark": "cold_start_import", "import_time": results,
                              "note": "local CPython, fresh interpreter per sample; Lambda arm64 differs"})


if __name__ == "__main__":
    main()
