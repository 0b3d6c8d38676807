"""Cost model: USD per 1 million Turns (one function call each) and per 1 million tool results,
computed from what the turns benchmark counted (DynamoDB request units by item kind, Lambda
invocations and their locally measured durations, Step Functions states, API Gateway requests and
WebSocket messages) and the public on-demand prices for us-east-1 below; and USD per open SSE
stream-hour from the streaming function's settings and template. Writes docs/cost.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

# Public on-demand list prices, us-east-1, as written down on 2026-12-02 (verify before relying on them).
PRICES = {
    "date": "2026-12-02",
    "dynamodb_write_request_unit": 0.625 / 1e6,   # on-demand, per WRU (a transactional write costs 2 per KB)
    "dynamodb_read_request_unit": 0.125 / 1e6,    # on-demand, per RRU (strongly consistent: 1 per 4 KB)
    "dynamodb_streams_lambda": 0.0,               # reads by a Lambda event source mapping are free
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "step_functions_standard_transition": 0.025 / 1000,
    "rest_api_request": 3.50 / 1e6,               # REST API, first 333 million per month (streamed ones too)
    "lambda_streamed_gb": 0.008,                  # Lambda response streaming, per GB beyond 6 MB per request
    "websocket_message": 1.00 / 1e6,              # per message, 32 KB increments
    "websocket_connection_minute": 0.25 / 1e6,
}
MEMORY_GB = {"default": 0.5, "AuthorizerFunction": 0.25, "WsConnectFunction": 0.25, "WsDisconnectFunction": 0.25,
             "ClientsFunction": 0.25}


def turn_costs(turns: dict) -> dict:
    life = turns["turn_lifecycle_one_call"]
    units = life["request_units"]
    lam = life["lambda"]
    dynamo = units["wru"] * PRICES["dynamodb_write_request_unit"] + units["rru"] * PRICES["dynamodb_read_request_unit"]
    invocations = sum(v["invocations"] for v in lam.values())
    gb_seconds = sum(v["invocations"] * v["p50_ms"] / 1000 * MEMORY_GB.get(k, MEMORY_GB["default"])
                     for k, v in lam.items())
    lambda_cost = invocations * PRICES["lambda_request"] + gb_seconds * PRICES["lambda_gb_second_arm64"]
    transitions = life["step_functions_states_entered"] + 1  # states entered plus the start transition
    sfn = transitions * PRICES["step_functions_standard_transition"]
    http = life["http_api_requests"] * PRICES["rest_api_request"]
    ws = life["websocket_messages"] * PRICES["websocket_message"]
    return {"dynamodb": dynamo, "lambda": lambda_cost, "step_functions": sfn, "rest_api": http, "websocket": ws,
            "total": dynamo + lambda_cost + sfn + http + ws, "invocations": invocations, "gb_seconds": gb_seconds,
            "transitions": transitions}


def result_costs(turns: dict) -> dict:
    r = turns["tool_result_marginal"]
    dynamo = r["wru"] * PRICES["dynamodb_write_request_unit"] + r["rru"] * PRICES["dynamodb_read_request_unit"]
    lambda_cost = r["invocations"] * PRICES["lambda_request"] + r["gb_seconds"] * PRICES["lambda_gb_second_arm64"]
    http = r["http_api_requests"] * PRICES["rest_api_request"]
    ws = r["websocket_messages"] * PRICES["websocket_message"]
    return {"dynamodb": dynamo, "lambda": lambda_cost, "rest_api": http, "websocket": ws,
            "total": dynamo + lambda_cost + http + ws}


def stream_hour_costs() -> dict:
    """One SSE stream kept open for an hour with no event (the worst case: the outbox is read every
    STREAM_POLL_MAX_MS; while events flow the reads are closer but carry them). The streaming function
    runs for the whole stream, so its duration dominates; a stream ends after STREAM_MAX_SECONDS and the
    caller opens the next one (one more REST API request and Lambda invocation)."""
    sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "contract")]
    from agents_core.settings import Settings
    from local import template

    settings = Settings()
    function = template.resources("AWS::Serverless::Function")["SessionStreamFunction"]["Properties"]
    memory_gb = function["MemorySize"] / 1024
    max_seconds = int(template.load()["Parameters"]["StreamMaxSeconds"]["Default"])
    streams = 3600 / max_seconds
    polls = 3600 / (settings.stream_poll_max_ms / 1000)
    checks = 3600 / settings.stream_ping_seconds  # the Session-exists GetItem beside each ping
    parts = {
        "lambda_duration": 3600 * memory_gb * PRICES["lambda_gb_second_arm64"],
        "lambda_requests": streams * PRICES["lambda_request"],
        "dynamodb_reads": (polls + checks + streams) * PRICES["dynamodb_read_request_unit"],  # 1 RRU each
        "rest_api_requests": streams * PRICES["rest_api_request"],
    }
    return {**parts, "total": sum(parts.values()), "memory_gb": memory_gb, "max_seconds": max_seconds,
            "streams": streams, "polls": polls, "checks": checks, "poll_max_ms": settings.stream_poll_max_ms,
            "ping_seconds": settings.stream_ping_seconds}


def main() -> int:
    path = RESULTS / "turns.json"
    if not path.exists():
        print("run bench/bench_turns.py first (make bench does)", file=sys.stderr)
        return 1
    turns = json.loads(path.read_text())
    per_turn = turn_costs(turns)
    per_result = result_costs(turns)
    stream = stream_hour_costs()
    million = 1e6
    life = turns["turn_lifecycle_one_call"]
    lines = [
        "# Cost model",
        "",
        "Generated by `bench/cost.py` from `bench/results/turns.json` (`make bench`). Prices: public on-demand",
        f"list prices for us-east-1 written into the script on {PRICES['date']} - verify them before relying on",
        "these figures. Lambda durations are **measured locally** (in-process handlers against moto, p50),",
        "billed at arm64 prices and the template's memory sizes; real DynamoDB latency differs.",
        "",
        "## Per 1 million Turns (one function call each)",
        "",
        "| part | what is counted per Turn | USD per 1M Turns |",
        "| --- | --- | --- |",
        f"| DynamoDB | {life['request_units']['wru']:.0f} WRU, {life['request_units']['rru']:.1f} RRU "
        f"({life['dynamodb_total']} requests) | {per_turn['dynamodb'] * million:,.2f} |",
        f"| Lambda | {per_turn['invocations']} invocations, {per_turn['gb_seconds']:.3f} GB-s | "
        f"{per_turn['lambda'] * million:,.2f} |",
        f"| Step Functions (Standard) | {per_turn['transitions']} state transitions | "
        f"{per_turn['step_functions'] * million:,.2f} |",
        f"| API Gateway REST API | {life['http_api_requests']} requests (create with input, one result) | "
        f"{per_turn['rest_api'] * million:,.2f} |",
        f"| API Gateway WebSocket | {life['websocket_messages']} messages (Runtime, no subscribers) | "
        f"{per_turn['websocket'] * million:,.2f} |",
        f"| **total** | | **{per_turn['total'] * million:,.2f}** |",
        "",
        "## Per 1 million tool results (the marginal cost of one more result in a Turn)",
        "",
        "| part | USD per 1M results |",
        "| --- | --- |",
        f"| DynamoDB ({turns['tool_result_marginal']['wru']:.0f} WRU, {turns['tool_result_marginal']['rru']:.1f} RRU) "
        f"| {per_result['dynamodb'] * million:,.2f} |",
        f"| Lambda | {per_result['lambda'] * million:,.2f} |",
        f"| API Gateway REST API | {per_result['rest_api'] * million:,.2f} |",
        f"| API Gateway WebSocket | {per_result['websocket'] * million:,.2f} |",
        f"| **total** | **{per_result['total'] * million:,.2f}** |",
        "",
        "## Per open SSE stream-hour",
        "",
        f"An SSE stream (`GET .../events`, `create(stream=True)`) holds one streaming function invocation "
        f"({stream['memory_gb'] * 1024:.0f} MB) open; it reads the Session's outbox with a consistent Query at "
        f"most {stream['poll_max_ms']} ms apart,",
        f"checks the Session beside each ping ({stream['ping_seconds']} s idle) and ends after "
        f"{stream['max_seconds']} s (API Gateway's limit is 15 minutes per stream, 5 minutes idle on regional",
        "endpoints), so the caller reconnects about "
        f"{stream['streams']:.1f} times an hour. Figures for an idle stream (the most reads per event):",
        "",
        "| part | per stream-hour | USD per stream-hour |",
        "| --- | --- | --- |",
        f"| Lambda duration (arm64) | {3600 * stream['memory_gb']:,.0f} GB-s | {stream['lambda_duration']:.5f} |",
        f"| Lambda requests | {stream['streams']:.1f} | {stream['lambda_requests']:.7f} |",
        f"| DynamoDB reads | {stream['polls'] + stream['checks'] + stream['streams']:,.0f} RRU (outbox polls, "
        f"Session checks, subscriptions) | {stream['dynamodb_reads']:.5f} |",
        f"| API Gateway REST API | {stream['streams']:.1f} requests | {stream['rest_api_requests']:.6f} |",
        f"| **total** | | **{stream['total']:.4f}** |",
        "",
        f"That is about USD {stream['total'] * 1000:,.2f} per 1,000 streams open for an hour (USD "
        f"{stream['total'] * 24 * 30:,.2f} per stream kept open all month). Events add nothing on the read side (a "
        "poll that finds a commit reads it in the same RRU up to 4 KB); bytes streamed past 6 MB per request "
        f"cost {PRICES['lambda_streamed_gb']} USD per GB.",
        "",
        "## Notes",
        "",
        "- Every commit rewrites the Session item (it carries the frozen snapshot, zlib-compressed, so that a Session read is one",
        "  GetItem), so write units grow with the snapshot's size: "
        f"{life['item_kb'].get('session', 0):.1f} KB here. Sessions with many tools pay more per commit.",
        "- Client reads (polling) are not included: each Session read is one strongly consistent GetItem",
        "  (1 RRU per 4 KB) plus one REST API request and one Lambda invocation.",
        "- Live subscribers add one conditional write (2 WRU) and one WebSocket message per event per subscriber.",
        "- DynamoDB storage, CloudWatch Logs and data transfer are not included.",
        "",
        "Prices used: " + ", ".join(f"{k} = {v}" for k, v in PRICES.items()),
    ]
    (ROOT / "docs" / "cost.md").write_text("\n".join(lines) + "\n")
    result = {"benchmark": "cost_model", "usd_per_million_turns": round(per_turn["total"] * million, 2),
              "usd_per_million_tool_results": round(per_result["total"] * million, 2),
              "usd_per_stream_hour": round(stream["total"], 5),
              "breakdown_per_million_turns": {k: round(v * million, 2) for k, v in per_turn.items()
                                              if k in ("dynamodb", "lambda", "step_functions", "rest_api",
                                                       "websocket")}}
    (RESULTS / "cost.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
