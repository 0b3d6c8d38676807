"""Benchmarks never rot (issue 36, item 6): every benchmark in bench/ runs once at its smallest size (`--smoke`)
and prints its JSON figures, so a change that breaks one cannot land. Nothing here asserts a timing. The
in-process ones run one after another in one interpreter (bench/smoke.py: the imports paid once), their figures
under a temporary BENCH_RESULTS (make bench's own results and docs/cost.md stay as they are); those that drive
`python -m local` run in tests/e2e/test_bench_smoke.py on the e2e session's stack."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_smoke_runner", ROOT / "bench" / "smoke.py")
assert _spec and _spec.loader
_runner = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_runner)  # stdlib only at import: nothing of the benchmarks is loaded here
ON_THE_LOCAL_STACK, in_process = _runner.ON_THE_LOCAL_STACK, _runner.in_process


def run_smoke(args: list[str], results: pathlib.Path, timeout: float = 600, **env: str) -> list[dict]:
    """`python bench/<args>`: its exit status 0 and its JSON lines (bench/smoke.py's report names what failed)."""
    proc = subprocess.run([sys.executable, *args, "--smoke"], cwd=ROOT, capture_output=True, text=True,  # noqa: S603
                          timeout=timeout, env={**os.environ, "BENCH_RESULTS": str(results), **env})
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    failed = {name: result["error"] for line in lines for name, result in line.get("smoke", {}).items()
              if "error" in result}
    assert not failed, "\n".join(f"{name} --smoke failed:\n{error}" for name, error in failed.items())
    assert proc.returncode == 0 and lines, f"{args} --smoke exited {proc.returncode}:\n{proc.stdout[-6000:]}\n" \
                                           f"{proc.stderr[-3000:]}"
    return lines


def test_every_in_process_benchmark_completes_at_its_smallest_size_and_prints_its_figures(tmp_path):
    report = run_smoke(["bench/smoke.py"], tmp_path)[-1]["smoke"]
    assert sorted(report) == in_process()
    for name, result in report.items():
        figures = result["figures"][-1]
        assert figures["benchmark"] and len(figures) > 1, (name, figures)  # figures, not just its name
    turns, cost = report["bench_turns.py"]["figures"]  # the cost model, from the smoke's own turns.json
    assert turns["smoke"] is True and cost["usd_per_million_turns"] > 0
    assert cost["usd_per_million_waiting_turn_minutes"] > 0
    assert "## Per 1 million waiting Turn-minutes" in (tmp_path / "cost.md").read_text()


def test_every_benchmark_has_a_smoke_size():
    """A new benchmark joins the smoke by taking `--smoke` (its smallest size); `make bench` finds it by name."""
    benches = {p.name for p in (ROOT / "bench").glob("bench_*.py")}
    assert [name for name in sorted(benches) if "smoke" not in (ROOT / "bench" / name).read_text().lower()] == []
    assert set(in_process()) | set(ON_THE_LOCAL_STACK) == benches
