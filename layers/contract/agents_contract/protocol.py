"""The Runtime protocol's vocabulary: its message types and envelope fields, named once for both sides.

Core (agents_core.runtimes, the runtime_gateway function) and the Runtime (runtime/) speak it over the
WebSocket API; docs/runtime-protocol.md says what each message means. Every value here is a wire string:
Runtimes already deployed send and read them, so a value never changes (the `executor.*` names included,
though the code calls that component the exec-server).
"""

from __future__ import annotations

# ---- envelope fields ---------------------------------------------------------------------------------

TYPE = "type"  # what a Core -> Runtime message is
ACTION = "action"  # what a Runtime -> Core message does (API Gateway routes on `$request.body.action`)
TENANT = "tenant"
SESSION_ID = "session_id"
TURN_ID = "turn_id"
SEQ = "seq"  # an observation's place in its Turn, from 1; `turn.ack` carries the last one applied
CALL_ID = "call_id"
DELIVERY_ID = "delivery_id"  # a delivered message's id: the Runtime applies the first, drops repeats
OBSERVATIONS_FIELD = "observations"  # a `turn.batch`'s list
REF = "ref"  # an error frame's: the `seq` of the message it rejects
TURNS = "turns"  # a `runtime.heartbeat`'s Turns: the routes of the Turns the Runtime runs now
HEARTBEAT_SECONDS_FIELD = "heartbeat_seconds"  # in runtime.hello (asked for) and runtime.welcome (the cadence)
# Deferred acknowledgements (docs/runtime-protocol.md, "Acknowledgements"): a hello and its welcome say
# `deferred_acks`; an observation message with `ack: false` gets no `turn.ack`; a `runtime.heartbeat`'s `acks` names
# the Turns whose observations the Runtime holds unacknowledged, and Core answers all of them in one `turn.acks`.
DEFERRED_ACKS_FIELD = "deferred_acks"
ACK = "ack"
ACKS = "acks"
# A Runtime that beats may take each tool result's single post: its hello and welcome say `waiting_calls`, and each
# Turn's entry in its `runtime.heartbeat` names the calls it still waits on (docs/runtime-protocol.md, "Liveness").
WAITING_CALLS = "waiting_calls"

# The routing fields Core sends in `turn.start` and every observation of the Turn carries back.
ROUTE = (TENANT, SESSION_ID, TURN_ID)
FIELDS = (TYPE, ACTION, TENANT, SESSION_ID, TURN_ID, SEQ, CALL_ID, DELIVERY_ID, OBSERVATIONS_FIELD, REF, TURNS,
          HEARTBEAT_SECONDS_FIELD, DEFERRED_ACKS_FIELD, ACK, ACKS, WAITING_CALLS)

# ---- liveness (docs/runtime-protocol.md, "Liveness") ---------------------------------------------------
# A Runtime connection that asked for it in its hello sends one `runtime.heartbeat` every cadence, idle or busy,
# naming every Turn it runs: one message and one invocation for all of them. Core's bound is the template's
# HeartbeatSeconds (the Step Functions task heartbeat of each Turn, and the age past which a connection's pool
# rows are stale and Dispatch passes them by); the welcome tells the Runtime the cadence, a third of the bound.
# 25 s (issue 36, item 5): a connection's beats then cost USD 5.12 per million minutes alone (at 15 s: 8.60; the
# message and invocation alone were 5.35, so no saving on writes could reach the 6.00 target at that cadence).
HEARTBEAT_CADENCE_SECONDS = 25
HEARTBEAT_BOUND_SECONDS = 3 * HEARTBEAT_CADENCE_SECONDS  # 75: the template's HeartbeatSeconds default
MAX_HEARTBEAT_TURNS = 100  # Turns named in one runtime.heartbeat (a Runtime running more sends several)
# What one runtime.heartbeat costs in AWS (bench/cost.py reads these): one WebSocket message, one Lambda
# invocation (the runtime gateway), one eventually consistent Query of the connection's declarations, one
# eventually consistent BatchGetItem of the Turns it names and the calls they wait on (0.5 RRU per item up to 4 KB;
# `waiting_calls`: runtimes/redelivery.py), one SendTaskHeartbeat
# per Turn (no charge), and, every other beat, one UpdateItem per declaration (seen_at; the pool row is in GSI1).
HEARTBEAT_COST = {"websocket_messages": 1, "lambda_invocations": 1, "queries": 1, "rru_per_query": 0.5,
                  "rru_per_turn": 0.5, "rru_per_waiting_call": 0.5,
                  "declaration_writes_per_beat": 0.5, "wru_per_declaration_write": 2}

# ---- Core -> Runtime (by `type`) -----------------------------------------------------------------------

RUNTIME_WELCOME = "runtime.welcome"  # the answer to runtime.hello
TURN_START = "turn.start"  # from the Turn's workflow (Dispatch)
TURN_INPUT = "turn.input"  # steering: a message that arrived after the Turn was claimed
TURN_TOOL_RESULT = "turn.tool_result"
TURN_CANCEL = "turn.cancel"
TURN_ACK = "turn.ack"  # cumulative: every observation up to `seq` is applied
TURN_ACKS = "turn.acks"  # the answer to a runtime.heartbeat's `acks`: a cumulative seq for each Turn it named
ERROR = "error"  # a rejected message
CHUNK = "chunk"  # one part of a message over 128 KB
EXECUTOR_EXPECT = "executor.expect"  # a registration picked this exec-server host

# Posted after the commit that admitted them and again from its outbox, each with a `delivery_id`.
DELIVERED = (TURN_INPUT, TURN_TOOL_RESULT, TURN_CANCEL)

# ---- Runtime -> Core: actions of the connection (by `action`) ------------------------------------------

RUNTIME_HELLO = "runtime.hello"
RUNTIME_HEARTBEAT = "runtime.heartbeat"  # the connection is alive, and so are the Turns it names
ENVIRONMENT_IDLE = "environment.idle"  # a hosted Runtime stopped an Environment's idle sandbox
EXECUTOR_HOST = "executor.host"  # takes exec-server connections at `url` (Core answers with the same type)
EXECUTOR_CONNECTED = "executor.connected"
EXECUTOR_DISCONNECTED = "executor.disconnected"
EXECUTOR_ACTIONS = (EXECUTOR_HOST, EXECUTOR_CONNECTED, EXECUTOR_DISCONNECTED)

# ---- Runtime -> Core: observations of a Turn (by `action`, with ROUTE and `seq`) -----------------------

TURN_BATCH = "turn.batch"  # several observations of one Turn, applied in one commit
TURN_ITEM_ADDED = "turn.item.added"
TURN_OUTPUT_TEXT_DELTA = "turn.output_text.delta"
TURN_ITEM_DONE = "turn.item.done"
TURN_FUNCTION_CALL = "turn.function_call"
TURN_TOOL_RESULT_APPLIED = "turn.tool_result.applied"  # the receipt
TURN_CALL_ABANDONED = "turn.call.abandoned"
TURN_SUBAGENT_OPENED = "turn.subagent.opened"
TURN_SUBAGENT_TURN_STARTED = "turn.subagent.turn.started"
TURN_SUBAGENT_TURN_ENDED = "turn.subagent.turn.ended"
TURN_SUBAGENT_CLOSED = "turn.subagent.closed"
TURN_ENVIRONMENT = "turn.environment"  # a hosted Environment's state
TURN_HEARTBEAT = "turn.heartbeat"  # needs no `seq`
TURN_COMPLETED = "turn.completed"
TURN_FAILED = "turn.failed"
TURN_CANCELLED = "turn.cancelled"

# The terminal observations and the Turn status each reports.
TERMINAL = {TURN_COMPLETED: "completed", TURN_FAILED: "failed", TURN_CANCELLED: "cancelled"}
OBSERVATIONS = (TURN_ITEM_ADDED, TURN_OUTPUT_TEXT_DELTA, TURN_ITEM_DONE, TURN_FUNCTION_CALL,
                TURN_TOOL_RESULT_APPLIED, TURN_CALL_ABANDONED, TURN_SUBAGENT_OPENED, TURN_SUBAGENT_TURN_STARTED,
                TURN_SUBAGENT_TURN_ENDED, TURN_SUBAGENT_CLOSED, TURN_ENVIRONMENT, TURN_HEARTBEAT, *TERMINAL)

# ---- the whole vocabulary ----------------------------------------------------------------------------

CORE_TO_RUNTIME = frozenset({RUNTIME_WELCOME, TURN_START, *DELIVERED, TURN_ACK, TURN_ACKS, ERROR, CHUNK, EXECUTOR_EXPECT,
                             EXECUTOR_HOST})
RUNTIME_TO_CORE = frozenset({RUNTIME_HELLO, RUNTIME_HEARTBEAT, ENVIRONMENT_IDLE, *EXECUTOR_ACTIONS, TURN_BATCH, *OBSERVATIONS})
MESSAGE_TYPES = CORE_TO_RUNTIME | RUNTIME_TO_CORE
