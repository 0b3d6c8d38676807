"""Benchmarks never rot (issue 36, item 6), those that drive `python -m local`: each runs once at its smallest size
(`--smoke`) on this session's stack (BENCH_STACK_FILE: no stack of its own), all three in one interpreter
(bench/smoke.py: the imports paid once), and prints its JSON figures; nothing asserts a timing. The other
benchmarks: tests/integration/test_bench_smoke.py."""

from __future__ import annotations

from tests.integration.test_bench_smoke import ON_THE_LOCAL_STACK, run_smoke


def test_each_local_stack_benchmark_completes_on_the_running_stack(local_stack, runtime_process, tmp_path):
    report = run_smoke(["bench/smoke.py", *ON_THE_LOCAL_STACK], tmp_path,
                       BENCH_STACK_FILE=local_stack["stack_file"])[-1]["smoke"]
    assert sorted(report) == sorted(ON_THE_LOCAL_STACK)
    for name, result in report.items():
        figures = result["figures"][-1]
        assert figures["benchmark"] and len(figures) > 1, (name, figures)  # figures, not just its name
