"""Cost model: USD per 1 million one-call Turns and per 1 million waiting Turn-minutes, with every hop
counted, from what the turns benchmark measured (bench/results/turns.json: DynamoDB request units of the
table and of GSI1 by item, Lambda invocations and their locally measured durations, Step Functions states,
API Gateway requests and WebSocket messages, KMS requests, and a waiting Turn's heartbeats) and the public
on-demand prices for us-east-1 below; also USD per 1 million tool results and per open SSE stream-hour.
Writes docs/cost.md with the arithmetic of each line.

    .venv/bin/python bench/cost.py            # after bench/bench_turns.py (make bench runs both)
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SMOKE = "--smoke" in sys.argv[1:]  # make test: from the smoke's turns.json, the report beside it (docs/ untouched)
RESULTS = Path(os.environ.get("BENCH_RESULTS") or ROOT / "bench" / "results")
sys.path[:0] = [str(ROOT), str(ROOT / "layers" / "contract")]

# Public on-demand list prices, us-east-1, as written down on 2026-12-02 (verify before relying on them).
PRICES = {
    "date": "2026-12-02",
    "dynamodb_write_request_unit": 0.625 / 1e6,   # on-demand, per WRU (a transactional write costs 2 per KB)
    "dynamodb_read_request_unit": 0.125 / 1e6,    # on-demand, per RRU (strongly consistent: 1 per 4 KB)
    "dynamodb_streams_lambda": 0.0,               # reads by a Lambda event source mapping are free
    "lambda_request": 0.20 / 1e6,
    "lambda_gb_second_arm64": 0.0000133334,
    "step_functions_standard_transition": 0.025 / 1000,
    "step_functions_task_heartbeat": 0.0,         # SendTaskHeartbeat/Success/Failure: API calls, not transitions
    "rest_api_request": 3.50 / 1e6,               # REST API, first 333 million per month (streamed ones too)
    "lambda_streamed_gb": 0.008,                  # Lambda response streaming, per GB beyond 6 MB per request
    "websocket_message": 1.00 / 1e6,              # per message, 32 KB increments, either direction
    "websocket_connection_minute": 0.25 / 1e6,
    "kms_request": 0.03 / 10_000,
}
TARGETS = {"usd_per_million_turns": 100.0, "usd_per_million_waiting_turn_minutes": 6.0}  # issue 36, item 5
MILLION = 1e6


def memory_gb() -> dict[str, float]:
    """Each function's memory from template.yaml (Globals, then the function's own MemorySize)."""
    from local import template

    default = template.load()["Globals"]["Function"]["MemorySize"]
    return {name: fn["Properties"].get("MemorySize", default) / 1024
            for name, fn in template.resources("AWS::Serverless::Function").items()}


def heartbeat_settings() -> dict[str, Any]:
    """The deployed heartbeat: the bound (template HeartbeatSeconds) and the cadence a Runtime beats at (the
    welcome's: a third of the bound, never slower than the reference Runtime asks), or, with a Core that takes no
    `runtime.heartbeat`, the reference Runtime's per-Turn `turn.heartbeat` every 5 s."""
    from agents_contract import protocol
    from local import template

    bound = float(template.load()["Parameters"]["HeartbeatSeconds"]["Default"])
    asked = getattr(protocol, "HEARTBEAT_CADENCE_SECONDS", None)
    if asked is None:
        return {"bound_seconds": bound, "cadence_seconds": 5.0, "kind": "turn.heartbeat (one per Turn)"}
    return {"bound_seconds": bound, "cadence_seconds": min(float(asked), round(bound / 3, 2)),
            "kind": "runtime.heartbeat (one per connection, naming its Turns)"}


def lambda_cost(functions: dict[str, dict[str, float]], memory: dict[str, float]) -> dict[str, float]:
    invocations = sum(v["invocations"] for v in functions.values())
    gb_seconds = sum(v["invocations"] * v["p50_ms"] / 1000 * memory.get(_function(k), 0.5)
                     for k, v in functions.items())
    usd = invocations * PRICES["lambda_request"] + gb_seconds * PRICES["lambda_gb_second_arm64"]
    return {"invocations": invocations, "gb_seconds": gb_seconds, "usd": usd}


def _function(name: str) -> str:
    return "RuntimeGatewayFunction" if name == "Heartbeat" else name


def turn_costs(turns: dict[str, Any], memory: dict[str, float]) -> dict[str, Any]:
    """One Turn with one function call, from its create to its settlement, heartbeats apart (they are billed per
    minute the Turn runs: `waiting_costs`)."""
    life = turns["turn_lifecycle_one_call"]
    units = life["request_units"]
    table = units["wru"] * PRICES["dynamodb_write_request_unit"]
    index = units.get("index_wru", 0) * PRICES["dynamodb_write_request_unit"]
    reads = units["rru"] * PRICES["dynamodb_read_request_unit"]
    lam = lambda_cost(life["lambda"], memory)
    transitions = life["step_functions_states_entered"] + 1  # the states entered plus the execution's start
    parts = {
        "dynamodb_table_writes": table,
        "dynamodb_index_writes": index,
        "dynamodb_reads": reads,
        "lambda": lam["usd"],
        "step_functions": transitions * PRICES["step_functions_standard_transition"],
        "rest_api": life["http_api_requests"] * PRICES["rest_api_request"],
        "websocket": life["websocket_messages"] * PRICES["websocket_message"],
        "kms": life.get("kms_requests", 0) * PRICES["kms_request"],
    }
    return {"parts": parts, "total": sum(parts.values()), "transitions": transitions, **lam}


def waiting_costs(turns: dict[str, Any], memory: dict[str, float], beat: dict[str, Any]) -> dict[str, Any]:
    """A Turn waiting (for a tool result) costs only its heartbeats: the measured hops of one beat (the window's
    totals over its beats, the Turn alone on its Runtime's connection) times the beats of a minute at the
    deployed cadence, plus the connection's minute. `marginal`: one more waiting Turn on a connection that beats
    anyway (its share of the beat: its item and the call it waits on in the eventually consistent BatchGetItem)."""
    w = turns["waiting_turn"]
    n = max(1, w["per_beat_of"])
    per_minute = 60 / beat["cadence_seconds"]
    lam = lambda_cost(w["lambda"], memory)
    per_beat = {
        "websocket": w["websocket_messages"] / n * PRICES["websocket_message"],
        "lambda": lam["usd"] / n,
        "dynamodb_reads": w["rru"] / n * PRICES["dynamodb_read_request_unit"],
        "dynamodb_table_writes": w["wru"] / n * PRICES["dynamodb_write_request_unit"],
        "dynamodb_index_writes": w["index_wru"] / n * PRICES["dynamodb_write_request_unit"],
        "kms": w.get("kms_requests", 0) / n * PRICES["kms_request"],
        "step_functions": 0.0,  # SendTaskHeartbeat is not a state transition
    }
    parts = {k: v * per_minute for k, v in per_beat.items()}
    parts["websocket_connection_minute"] = PRICES["websocket_connection_minute"]
    item_kb = turns["turn_lifecycle_one_call"]["item_kb"]
    # the Turn item, and the call it waits on (the beat names it: runtimes/redelivery.py)
    marginal_rru = 0.5 * math.ceil(item_kb.get("turn", 1.0) / 4) + 0.5 * math.ceil(item_kb.get("call", 1.0) / 4)
    marginal = per_minute * marginal_rru * PRICES["dynamodb_read_request_unit"]
    return {"parts": parts, "total": sum(parts.values()), "per_beat": sum(per_beat.values()),
            "beats_per_minute": per_minute, "marginal": marginal, "marginal_rru_per_beat": marginal_rru,
            "measured": {"beats": n, "websocket_messages": w["websocket_messages"], "invocations": lam["invocations"],
                         "gb_seconds": lam["gb_seconds"], "rru": w["rru"], "wru": w["wru"],
                         "index_wru": w["index_wru"], "kms_requests": w.get("kms_requests", 0),
                         "window_seconds": w["window_seconds"], "bound_seconds": w["heartbeat_bound_seconds"],
                         "dynamodb_requests": w.get("dynamodb_requests", {})}}


def result_costs(turns: dict[str, Any]) -> dict[str, float]:
    r = turns["tool_result_marginal"]
    dynamo = (r["wru"] + r.get("index_wru", 0)) * PRICES["dynamodb_write_request_unit"] + \
        r["rru"] * PRICES["dynamodb_read_request_unit"]
    lam = r["invocations"] * PRICES["lambda_request"] + r["gb_seconds"] * PRICES["lambda_gb_second_arm64"]
    http = r["http_api_requests"] * PRICES["rest_api_request"]
    ws = r["websocket_messages"] * PRICES["websocket_message"]
    return {"dynamodb": dynamo, "lambda": lam, "rest_api": http, "websocket": ws, "total": dynamo + lam + http + ws}


def stream_hour_costs() -> dict[str, Any]:
    """One SSE stream kept open for an hour with no event (the worst case: the outbox is read every
    STREAM_POLL_MAX_MS; while events flow the reads are closer but carry them). The streaming function
    runs for the whole stream, so its duration dominates; a stream ends after STREAM_MAX_SECONDS and the
    caller opens the next one (one more REST API request and Lambda invocation)."""
    from agents_core.settings import Settings
    from local import template

    settings = Settings()
    function = template.resources("AWS::Serverless::Function")["SessionStreamFunction"]["Properties"]
    gb = function["MemorySize"] / 1024
    max_seconds = int(template.load()["Parameters"]["StreamMaxSeconds"]["Default"])
    streams = 3600 / max_seconds
    polls = 3600 / (settings.stream_poll_max_ms / 1000)
    checks = 3600 / settings.stream_ping_seconds  # the Session-exists GetItem beside each ping
    parts = {
        "lambda_duration": 3600 * gb * PRICES["lambda_gb_second_arm64"],
        "lambda_requests": streams * PRICES["lambda_request"],
        "dynamodb_reads": (polls + checks + streams) * PRICES["dynamodb_read_request_unit"],  # 1 RRU each
        "rest_api_requests": streams * PRICES["rest_api_request"],
    }
    return {**parts, "total": sum(parts.values()), "memory_gb": gb, "max_seconds": max_seconds,
            "streams": streams, "polls": polls, "checks": checks, "poll_max_ms": settings.stream_poll_max_ms,
            "ping_seconds": settings.stream_ping_seconds}


def _usd(value: float) -> str:
    return f"{value * MILLION:,.2f}"


def turn_lines(turns: dict[str, Any], per_turn: dict[str, Any], memory: dict[str, float]) -> list[str]:
    life = turns["turn_lifecycle_one_call"]
    units = life["request_units"]
    p = per_turn["parts"]
    wru, rru, index_wru = units["wru"], units["rru"], units.get("index_wru", 0)
    fns = ", ".join(f"{k} {v['invocations']} x {v['p50_ms']:.0f} ms x {memory.get(_function(k), 0.5) * 1024:.0f} MB"
                    for k, v in sorted(life["lambda"].items()))
    writes = "; ".join(f"{fn}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
                       for fn, kinds in sorted(life.get("transactional_writes_by_function", {}).items()))
    return [
        "| part | what is counted per Turn | arithmetic | USD per 1M Turns |",
        "| --- | --- | --- | --- |",
        f"| DynamoDB table writes | {wru:.0f} WRU: transactional entries by function and item ({writes}), 2 WRU "
        f"per KB each | {wru:.0f} x 0.625 | {_usd(p['dynamodb_table_writes'])} |",
        f"| DynamoDB GSI1 writes | {index_wru:.0f} WRU: {life.get('index_writes', 0)} index write(s) (projection ALL: "
        f"every write of a listed item writes its index entry; the Session's list entry is written once, with the "
        f"create, and the Session item itself is not listed), counted at the transactional rate | "
        f"{index_wru:.0f} x 0.625 | {_usd(p['dynamodb_index_writes'])} |",
        f"| DynamoDB reads | {rru:.1f} RRU ({life['dynamodb_total']} requests; eventually consistent ones half) | "
        f"{rru:.1f} x 0.125 | {_usd(p['dynamodb_reads'])} |",
        f"| Lambda | {per_turn['invocations']} invocations ({fns}): {per_turn['gb_seconds']:.3f} GB-s | "
        f"{per_turn['invocations']} x 0.20 + {per_turn['gb_seconds']:.3f} x 13.3334 | {_usd(p['lambda'])} |",
        f"| Step Functions (Standard) | {per_turn['transitions']} state transitions: the start and "
        f"{life['step_functions_states_entered']} state(s) entered (Dispatch; Settle only when the terminal commit "
        f"left something) | {per_turn['transitions']} x 25 | {_usd(p['step_functions'])} |",
        f"| API Gateway REST API | {life['http_api_requests']} requests (create with input, one result); the "
        "authorizer's answer is cached 300 s per key | "
        f"{life['http_api_requests']} x 3.50 | {_usd(p['rest_api'])} |",
        f"| API Gateway WebSocket | {life['websocket_messages']} messages, both directions (Runtime, no "
        f"subscribers; heartbeats apart, but their `turn.acks` answer acknowledging the Turn's observations "
        f"counted) | {life['websocket_messages']} x 1.00 | {_usd(p['websocket'])} |",
        f"| KMS | {life.get('kms_requests', 0)} requests (the table's key is AWS owned; a Vault's only with "
        f"credentials) | {life.get('kms_requests', 0)} x 3.00 | {_usd(p['kms'])} |",
        "| DynamoDB Streams | read by the stream function's event source mapping | free | 0.00 |",
        f"| **total** | | | **{_usd(per_turn['total'])}** |",
    ]


def waiting_lines(wait: dict[str, Any], beat: dict[str, Any]) -> list[str]:
    m, p, n = wait["measured"], wait["parts"], wait["measured"]["beats"]
    per_min = wait["beats_per_minute"]
    requests = ", ".join(f"{v} {k}" for k, v in sorted(m["dynamodb_requests"].items()))
    return [
        f"Measured: a Turn waiting on a function call, alone on its Runtime's connection, watched for "
        f"{m['window_seconds']:.1f} s with a {m['bound_seconds']} s bound: {n} beats made {m['websocket_messages']} "
        f"WebSocket messages, {m['invocations']} invocations ({m['gb_seconds']:.4f} GB-s), DynamoDB {requests} "
        f"({m['rru']:.1f} RRU, {m['wru']:.1f} WRU, {m['index_wru']:.0f} GSI1 WRU) and {m['kms_requests']} KMS requests. "
        f"Deployed: {beat['kind']} every {beat['cadence_seconds']:g} s (bound {beat['bound_seconds']:g} s), "
        f"{per_min:g} beats a minute.",
        "",
        "| part | arithmetic (per beat x beats a minute) | USD per 1M waiting Turn-minutes |",
        "| --- | --- | --- |",
        f"| API Gateway WebSocket | {m['websocket_messages']}/{n} messages x 1.00 x {per_min:g} | {_usd(p['websocket'])} |",
        f"| Lambda | ({m['invocations']}/{n} x 0.20 + {m['gb_seconds']:.4f}/{n} x 13.3334) x {per_min:g} | "
        f"{_usd(p['lambda'])} |",
        f"| DynamoDB reads | {m['rru']:.1f}/{n} RRU x 0.125 x {per_min:g} | {_usd(p['dynamodb_reads'])} |",
        f"| DynamoDB table writes | {m['wru']:.1f}/{n} WRU x 0.625 x {per_min:g} | {_usd(p['dynamodb_table_writes'])} |",
        f"| DynamoDB GSI1 writes | {m['index_wru']:.0f}/{n} WRU x 0.625 x {per_min:g} | "
        f"{_usd(p['dynamodb_index_writes'])} |",
        f"| KMS | {m['kms_requests']}/{n} x 3.00 x {per_min:g} | {_usd(p['kms'])} |",
        "| Step Functions | SendTaskHeartbeat is no state transition | 0.00 |",
        f"| WebSocket connection-minute | the Runtime's connection, all of it charged to this one Turn | "
        f"{_usd(p['websocket_connection_minute'])} |",
        f"| **total** | | **{_usd(wait['total'])}** |",
        "",
        f"One more waiting Turn on a connection that beats anyway adds only its item and the call it waits on (the "
        f"beat names it, so a lost result is posted again) to the beat's eventually "
        f"consistent BatchGetItem ({wait['marginal_rru_per_beat']:g} RRU x 0.125 x {per_min:g}): USD "
        f"{_usd(wait['marginal'])} per 1M waiting Turn-minutes. The connection's own beat (idle or busy) is USD "
        f"{(wait['total'] - wait['marginal']) * 60 * 24 * 30:,.4f} per Runtime connection-month.",
    ]


def levers(turns: dict[str, Any], per_turn: dict[str, Any], wait: dict[str, Any],
           memory: dict[str, float]) -> list[str]:
    """What the measured model says is left to take out, each from the figures above."""
    life = turns["turn_lifecycle_one_call"]
    gateway = life["lambda"].get("RuntimeGatewayFunction", {"invocations": 0, "p50_ms": 0})
    n = max(1, gateway["invocations"])
    writes = life.get("transactional_writes_by_function", {}).get("RuntimeGatewayFunction", {})
    wru = 2 * sum(writes.values()) / n  # at most 1 KB each here
    index = life.get("index_wru_by_function", {}).get("RuntimeGatewayFunction", 0) / n
    stream = life["lambda"].get("StreamFunction", {"invocations": 0, "p50_ms": 0})
    one_message = ((wru + index) * PRICES["dynamodb_write_request_unit"] + PRICES["websocket_message"]
                   + PRICES["lambda_request"] * 2
                   + gateway["p50_ms"] / 1000 * memory.get("RuntimeGatewayFunction", 0.5)
                   * PRICES["lambda_gb_second_arm64"]
                   + stream["p50_ms"] / 1000 * memory.get("StreamFunction", 0.5) * PRICES["lambda_gb_second_arm64"])
    start_free = per_turn["total"] - PRICES["step_functions_standard_transition"]
    beat = wait["parts"]
    return [
        "## What is left to take out (from the figures above)",
        "",
        f"- **One Runtime message fewer per Turn.** The Runtime sends {n} observation messages for this Turn (the "
        "function call, its result applied, the answer with the end: the drivers send their held answer and "
        "`turn.completed` in one `turn.batch`); each is one commit of the Session item, what it adds (Items, calls; "
        "the Turn item in the last only) and an outbox record "
        f"({wru:.0f} WRU and {index:.0f} GSI1 WRU on average here), one gateway and one stream invocation (its "
        f"acknowledgement rides the beat's one `turn.acks` for the whole Turn): about USD {_usd(one_message)} per 1M "
        "Turns. The receipt of a result (`turn.tool_result.applied`) "
        "is its own message because the Harness applies the result long before its next output; carrying it with "
        "that output would delay the function_call_output Item the receipt publishes.",
        f"- **The execution's start.** The model bills it as a transition, as the issue counts it; AWS's pricing "
        "says it counts \"a state transition each time a step of your workflow is executed\". If the start is not "
        f"billed, a Turn is USD {_usd(start_free)} per 1M.",
        "- **The per-tenant running-Turn counter** (`MAX_RUNNING_TURNS`) is one more transactional entry in the "
        "start's commit and one in the settlement's: 4 WRU x 0.625 = USD 2.50 per 1M Turns. It is one item per "
        "tenant, which no Turn commit writes otherwise: it cannot be folded into one, and only a transactional "
        "change keeps the limit exact (a refused start writes nothing, a slot is released exactly once).",
        "- **The claim row** (`CONN#.../CLAIM#turn`: how a lost or rotated connection finds its Turns) is put in the "
        "commit that claims the Turn and deleted in the one that ends it: 4 WRU x 0.625 = USD 2.50 per 1M Turns. "
        "It lives in the connection's partition, which no Turn commit writes otherwise; an index on the Turn "
        "would cost the same two index writes, and leaving it to expire would leave the claims of ended Turns for "
        "every rotation and `$disconnect` to read.",
        f"- **The Session's list entry** is the one index write left (USD "
        f"{_usd(per_turn['parts']['dynamodb_index_writes'])} per 1M Turns): a create with input folds it into its "
        "first message's Item (written once), so it adds no table write; the Session item is off GSI1 and its "
        "commits write no index entry (they wrote one each, projection ALL). A Session created before is listed "
        "by its own item until it is deleted. A list page reads the Sessions it names (one BatchGetItem).",
        f"- **Waiting, alone on a connection**: the beat's WebSocket message (USD {_usd(beat['websocket'])}) and "
        "the rewrite of the connection's pool rows' `seen_at` every other beat with its GSI1 entry (USD "
        f"{_usd(beat['dynamodb_table_writes'] + beat['dynamodb_index_writes'])}) are most of it; a waiting Turn "
        f"on a connection that beats anyway costs USD {_usd(wait['marginal'])} per 1M minutes.",
        "- **The second post of a delivered message is gone** for the reference Runtime: its heartbeat names the "
        "calls it waits on, so a result is posted once, straight after the Results commit, and a lost post is made "
        "again by the next beat once the result is 5 s old (docs/runtime-protocol.md, \"A tool result posted "
        "once\"); the Results commit then carries no outbox command, and with nothing else to publish writes no "
        "outbox record (one message, one transactional entry and one stream invocation fewer per result). A "
        "Runtime that does not name its calls still gets both posts. What it costs instead: the waiting Turn's beat "
        "reads its call (0.5 RRU a beat, in the waiting figures above).",
    ]


def main() -> int:
    path = RESULTS / "turns.json"
    if not path.exists():
        print("run bench/bench_turns.py first (make bench does)", file=sys.stderr)
        return 1
    turns = json.loads(path.read_text())
    memory = memory_gb()
    beat = heartbeat_settings()
    per_turn = turn_costs(turns, memory)
    wait = waiting_costs(turns, memory, beat)
    per_result = result_costs(turns)
    stream = stream_hour_costs()
    life = turns["turn_lifecycle_one_call"]
    met = {"turns": per_turn["total"] * MILLION <= TARGETS["usd_per_million_turns"],
           "waiting": wait["total"] * MILLION <= TARGETS["usd_per_million_waiting_turn_minutes"]}
    lines = [
        "# Cost model",
        "",
        "Generated by `bench/cost.py` from `bench/results/turns.json` (`make bench`; edit the script, not this "
        "file). Prices: public",
        f"on-demand list prices for us-east-1 written into the script on {PRICES['date']} - verify them before "
        "relying on these figures.",
        "Every hop is counted where the in-process stack makes it (moto executing our ASL, the real handlers, the "
        "scripted Runtime).",
        "Lambda durations are **measured locally** (in-process handlers against moto, p50), billed at arm64 prices "
        "and the template's",
        "memory sizes; real DynamoDB latency differs. Unit prices in the arithmetic columns are USD per million "
        "(Step Functions: 25 per million transitions).",
        "",
        "| figure | USD | target (issue 36) | met |",
        "| --- | --- | --- | --- |",
        f"| per 1M one-call Turns | {_usd(per_turn['total'])} | {TARGETS['usd_per_million_turns']:.2f} | "
        f"{'yes' if met['turns'] else '**no**'} |",
        f"| per 1M waiting Turn-minutes (the Turn alone on its connection) | {_usd(wait['total'])} | "
        f"{TARGETS['usd_per_million_waiting_turn_minutes']:.2f} | {'yes' if met['waiting'] else '**no**'} |",
        f"| per 1M waiting Turn-minutes (one more Turn on a connection that beats anyway, idle or busy) | "
        f"{_usd(wait['marginal'])} | {TARGETS['usd_per_million_waiting_turn_minutes']:.2f} | "
        f"{'yes' if wait['marginal'] * MILLION <= TARGETS['usd_per_million_waiting_turn_minutes'] else '**no**'} |",
        "",
        "## Per 1 million Turns (one function call each)",
        "",
        *turn_lines(turns, per_turn, memory),
        "",
        "## Per 1 million waiting Turn-minutes (heartbeats)",
        "",
        *waiting_lines(wait, beat),
        "",
        "## Per 1 million tool results (the marginal cost of one more result in a Turn)",
        "",
        "| part | USD per 1M results |",
        "| --- | --- |",
        f"| DynamoDB ({turns['tool_result_marginal']['wru']:.0f} WRU, "
        f"{turns['tool_result_marginal'].get('index_wru', 0):.0f} GSI1 WRU, "
        f"{turns['tool_result_marginal']['rru']:.1f} RRU) | {_usd(per_result['dynamodb'])} |",
        f"| Lambda | {_usd(per_result['lambda'])} |",
        f"| API Gateway REST API | {_usd(per_result['rest_api'])} |",
        f"| API Gateway WebSocket | {_usd(per_result['websocket'])} |",
        f"| **total** | **{_usd(per_result['total'])}** |",
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
        *levers(turns, per_turn, wait, memory),
        "",
        "## Notes",
        "",
        "- Acknowledgements are deferred (docs/runtime-protocol.md, \"Acknowledgements\"): the reference Runtime marks "
        "its observation messages `ack: false`, and the connection's beat, sent anyway, asks about the Turns whose "
        "observations it holds 5 s or more unacknowledged; one `turn.acks` answers them all (counted in the Turn's "
        "messages above: one for a Turn whose observations go within a cadence, one more per later cadence a long "
        "Turn sends in). Its read rides the beat's batch read and invocation: about 1 RRU (the Turn and its Session "
        "item, eventually consistent) once per Turn, USD 0.13 per 1M Turns, not in the figures above (the beat's "
        "invocation is counted apart). A Runtime that does not ask gets a `turn.ack` per message (3 here).",
        "- Every commit rewrites the Session item (it carries the frozen snapshot, zlib-compressed, so that a Session "
        "read is one",
        "  GetItem), so write units grow with the snapshot's size: "
        f"{life['item_kb'].get('session', 0):.1f} KB here. Sessions with many tools pay more per commit. The Session "
        "item is not on GSI1",
        "  (its list entry is), so those writes write no index entry.",
        "- Rows a commit does not write: a function call's Item ref when its call id names the Item (the CALL row "
        "holds it), and an Item",
        "  opened and finished in the commit that ends its Turn (nothing can name it later). Each was a "
        "transactional entry (2 WRU).",
        "- The Turn item is not written by a Runtime's observation commits while the Turn runs: its status, last "
        "observation applied",
        "  and output count ride on the Session item (`active_turn`), which every commit rewrites; a commit that "
        "claims, ends or",
        "  otherwise changes the Turn (its claim moved, a cancellation) writes the Turn item, those fields included. "
        "It was one",
        "  transactional entry (2 WRU) in each of the function call's and the receipt's commits.",
        "- Index writes are counted at the transactional rate (2 WRU per KB) when the table write is transactional: "
        "the conservative reading",
        "  (DynamoDB documents the doubling for the items of a transaction; an index entry is propagated from them).",
        "- A tool result is posted once to the reference Runtime (its heartbeat is the backstop: see above); "
        "`turn.input` and `turn.cancel` are posted by the committing function and again by the outbox's",
        "  at-least-once path (the Runtime drops the repeat).",
        "- Client reads (polling) are not included: each Session read is one strongly consistent GetItem",
        "  (1 RRU per 4 KB) plus one REST API request and one Lambda invocation; a read of a running Turn also "
        "reads it with its",
        "  Session in one TransactGetItems (its live status is on the Session item).",
        "- Live subscribers add one conditional write (2 WRU) and one WebSocket message per event per subscriber.",
        "- DynamoDB storage, CloudWatch Logs and metrics, X-Ray traces and data transfer are not included.",
        "",
        "Prices used: " + ", ".join(f"{k} = {v}" for k, v in PRICES.items()),
    ]
    (RESULTS / "cost.md" if SMOKE else ROOT / "docs" / "cost.md").write_text("\n".join(lines) + "\n")
    result = {"benchmark": "cost_model", "usd_per_million_turns": round(per_turn["total"] * MILLION, 2),
              "usd_per_million_waiting_turn_minutes": round(wait["total"] * MILLION, 2),
              "usd_per_million_waiting_turn_minutes_marginal": round(wait["marginal"] * MILLION, 3),
              "usd_per_million_tool_results": round(per_result["total"] * MILLION, 2),
              "usd_per_stream_hour": round(stream["total"], 5),
              "targets": TARGETS, "targets_met": met, "heartbeat": beat,
              "breakdown_per_million_turns": {k: round(v * MILLION, 2) for k, v in per_turn["parts"].items()},
              "breakdown_per_million_waiting_turn_minutes": {k: round(v * MILLION, 3)
                                                             for k, v in wait["parts"].items()}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cost.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
