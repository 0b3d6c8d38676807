"""Parse and admit a Session with 64 function tools and 4 MCP servers, next to pydantic alone.

Prints JSON: {"parse_and_admit_us": ..., "pydantic_only_us": ..., "ratio": ..., "breakdown_us": {...}}
(medians; the breakdown times the steps beyond pydantic's validation one by one).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "layers" / "contract"))

from agents_contract import admission, parser, wire  # noqa: E402


def payload() -> dict:
    tools = [
        {"type": "function", "name": f"fn_{i}", "description": f"Function {i}",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
                        "required": ["city"]}}
        for i in range(64)
    ]
    tools += [
        {"type": "mcp", "server_label": f"srv{i}", "transport": {"type": "http",
         "server_url": f"https://mcp{i}.example.com/mcp", "headers": {"X-Team": "core"}}, "allowed_tools": ["a", "b"]}
        for i in range(4)
    ]
    return {"environment": {"type": "none"}, "input": "hello", "agent": {"model": "gpt-5", "tools": tools},
            "x_agents_core": {"harness": "codex"}}


SMOKE = "--smoke" in sys.argv[1:]  # make test: a few rounds, the same figures


def measure_pair(a, b, rounds: int = 2000) -> tuple[float, float]:
    """Interleaved samples, so machine noise hits both sides alike; medians in microseconds."""
    rounds = min(rounds, 5) if SMOKE else rounds
    for _ in range(2 if SMOKE else 50):
        a()
        b()
    sa, sb = [], []
    clock = time.perf_counter
    for _ in range(rounds):
        t0 = clock()
        a()
        t1 = clock()
        b()
        t2 = clock()
        sa.append(t1 - t0)
        sb.append(t2 - t1)
    return statistics.median(sa) * 1e6, statistics.median(sb) * 1e6


def breakdown(body: dict) -> dict:
    """Where "ours" goes beyond pydantic: each step timed alone (medians, interleaved with pydantic)."""
    request = parser.parse_session_create(body)
    tools = request.agent.tools
    parameters = [t.parameters for t in tools if isinstance(t, wire.FunctionTool)]
    validator = parser._fast_parameters_validator()
    steps = {
        "tool_checks": lambda: parser.check_tools(tools, "agent."),
        "of_which_schema_meta_validation": lambda: validator.is_valid(parameters),
        "resolve_and_admit": lambda: admission.resolve_session(request, None, default_harness=None,
                                                                agent_id="agent_bench", body=body),
    }
    return {name: round(measure_pair(step, lambda: wire.SessionCreate.model_validate(body), 500)[0], 1)
            for name, step in steps.items()}


def main() -> dict:
    body = payload()

    def ours():
        request = parser.parse_session_create(body)
        admission.resolve_session(request, None, default_harness=None, agent_id="agent_bench", body=body)

    def pydantic_only():
        wire.SessionCreate.model_validate(body)

    a, b = measure_pair(ours, pydantic_only)
    result = {"benchmark": "parse_and_admit_64_functions_4_mcp", "parse_and_admit_us": round(a, 1),
              "pydantic_only_us": round(b, 1), "ratio": round(a / b, 3), "breakdown_us": breakdown(body)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
