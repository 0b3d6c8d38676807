"""Every benchmark once at its smallest size, in one interpreter (`make test`: tests/integration/test_bench_smoke.py).

    .venv/bin/python bench/smoke.py --smoke [bench_x.py ...]

Each benchmark's `main()` runs in turn, so the imports are paid once; those on bench.common's in-process stack
share one (ON_ONE_STACK, started once). The benchmarks that drive `python -m local` are left to
tests/e2e/test_bench_smoke.py, which runs them on the e2e session's stack. Prints one JSON line: each benchmark's
last figures line, or the error it ended with; exits 1 if any failed. Figures go under BENCH_RESULTS.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ON_THE_LOCAL_STACK = ("bench_environments.py", "bench_local_stack.py", "bench_native.py")
# The smallest size of the benchmarks whose main() takes one (the others read `--smoke` themselves).
SIZES = {"bench_chatty_turn": (3,), "bench_out_of_order": (20,), "bench_latency_model": (1,)}
# The benchmarks on bench.common.in_process_stack: run first, on one stack (common.one_stack).
ON_ONE_STACK = ("bench_chatty_turn.py", "bench_files.py", "bench_out_of_order.py")


def in_process() -> list[str]:
    return sorted(p.name for p in HERE.glob("bench_*.py") if p.name not in ON_THE_LOCAL_STACK)


def order(names: list[str]) -> list[str]:
    """Those on one stack first; bench_bounded last: it runs pytest in this interpreter, whose fixtures and hooks
    stay loaded after it."""
    return sorted(names, key=lambda name: (name == "bench_bounded.py", name not in ON_ONE_STACK, name))


def run(name: str) -> dict:
    """One benchmark's main() at its smallest size: its last JSON figures line (stdout captured)."""
    module = importlib.import_module(name.removesuffix(".py"))
    out = io.StringIO()
    started = time.perf_counter()
    returned = None
    with contextlib.redirect_stdout(out):
        if name == "bench_turns.py":
            module.main(smoke=True)
            importlib.import_module("cost").main()  # the cost model reads the turns benchmark's figures
        else:
            returned = module.main(*SIZES.get(name.removesuffix(".py"), ()))
            if isinstance(returned, int) and returned:
                raise RuntimeError(f"{name} returned {returned}")
    lines = [line for line in out.getvalue().splitlines() if line.startswith('{"benchmark"')]
    if not lines and isinstance(returned, dict) and returned:  # a main() whose `__main__` block emits its figures
        lines = [json.dumps({"benchmark": name.removesuffix(".py").removeprefix("bench_"), **returned})]
    if not lines:
        raise RuntimeError(f"{name} printed no figures: {out.getvalue()[-2000:]}")
    return {"figures": [json.loads(line) for line in lines], "seconds": round(time.perf_counter() - started, 2)}


def attempt(name: str) -> dict:
    try:
        return run(name)
    except BaseException as exc:  # noqa: BLE001 - one benchmark's failure is reported, the others still run
        if isinstance(exc, KeyboardInterrupt):
            raise
        return {"error": "".join(traceback.format_exception(exc))[-4000:]}


def main() -> int:
    if "--smoke" not in sys.argv:
        sys.argv.append("--smoke")  # the benchmarks read it at import
    sys.path[:0] = [str(HERE)]
    names = [a for a in sys.argv[1:] if a.endswith(".py")] or in_process()
    common = importlib.import_module("common")
    sys.modules["bench.common"] = common  # one module whichever way a benchmark imports it (one_stack's state)
    report: dict[str, dict] = {}
    shared = [name for name in order(names) if name in ON_ONE_STACK]
    with common.one_stack() if shared else contextlib.nullcontext():
        for name in shared:
            report[name] = attempt(name)
    for name in order(names):
        if name not in shared:
            report[name] = attempt(name)
    print(json.dumps({"smoke": report}))
    return 1 if any("error" in r for r in report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
