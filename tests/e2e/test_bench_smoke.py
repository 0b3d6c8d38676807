"""Benchmarks never rot (issue 36, item 6), those that drive `python -m local`: each runs once at its smallest size
(`--smoke`) on this session's stack (BENCH_STACK_FILE: no stack of its own) and prints its JSON figures; nothing
asserts a timing. The other benchmarks: tests/integration/test_bench_smoke.py."""

from __future__ import annotations

import pytest

from tests.integration.test_bench_smoke import ON_THE_LOCAL_STACK, run_smoke


@pytest.mark.parametrize("name", ON_THE_LOCAL_STACK)
def test_each_local_stack_benchmark_completes_on_the_running_stack(name, local_stack, runtime_process, tmp_path):
    figures = [line for line in run_smoke([f"bench/{name}"], tmp_path, BENCH_STACK_FILE=local_stack["stack_file"])
               if "benchmark" in line][-1]
    assert figures["benchmark"] and len(figures) > 1
