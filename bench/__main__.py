"""`make bench`: run every benchmark in bench/ (each in a fresh interpreter), write one JSON
report under bench/results/ and print a short table."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
RESULTS = HERE / "results"


def main() -> int:
    RESULTS.mkdir(exist_ok=True)
    report: dict[str, object] = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "results": {}}
    failed = []
    for script in [*sorted(HERE.glob("bench_*.py")), HERE / "cost.py"]:  # the cost model reads turns.json
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(script), *sys.argv[1:]], capture_output=True, text=True,
                              cwd=HERE.parent)  # `python -m bench --smoke`: every benchmark at its smallest size
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{\"benchmark\"")]
        if proc.returncode != 0 or not lines:
            failed.append(script.name)
            print(f"{script.name}: FAILED\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        report["results"][script.stem] = {**json.loads(lines[-1]), "seconds": round(time.perf_counter() - t0, 1)}
    if "bench_latency_model" in report["results"]:  # type: ignore[operator]
        report["results"]["aws_latency_model"] = report["results"]["bench_latency_model"]  # type: ignore[index]
    (RESULTS / "report.json").write_text(json.dumps(report, indent=2))
    print(f"\n{'benchmark':<40} figures")
    for name, result in report["results"].items():  # type: ignore[union-attr]
        figures = {k: v for k, v in result.items() if k not in ("benchmark", "note")}
        print(f"{name:<40} {json.dumps(figures)[:400]}")
    print(f"\nreport: {RESULTS / 'report.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
