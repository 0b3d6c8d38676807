"""Two fidelity fixes to moto's DynamoDB for the local stack and tests (emulation only; nothing
here runs in AWS):

1. Serializable operations. moto's backend takes no lock, so concurrent requests (threads of the
   local servers) can interleave inside a transaction. Every backend operation runs under one lock.
2. TransactWriteItems is all or nothing, with DynamoDB's rules: every condition is checked and
   every entry's new item is computed (and validated) before anything is applied; an item may hold
   at most 400 KB (its *new* size: moto counts old plus new on updates) and the request at most
   4 MB and 100 entries. moto applies entries one by one, restores deep copies of whole tables on
   a condition failure (O(table size) per transaction) and leaves partial writes behind when an
   entry fails validation midway.

It also wakes the local Streams pollers (`wake_on_stream_records`) whenever moto appends a stream
record, so a poller sleeps while nothing is written instead of asking moto twenty times a second,
parses each state machine definition once (`parse_each_definition_once`), makes a symmetric KMS key's
unused RSA private key only if something reads it (`private_keys_when_used`), writes DynamoDB results
as the JSON they already are (`plain_json_responses`), and has a Query read its partition, not the whole
table sorted (`queries_read_what_they_need`). StartExecution keeps one execution per name
(`one_execution_per_name`), as Step Functions does, and SendTaskFailure keeps its cause
(`task_failure_keeps_its_cause`). moto's ASL interpreter is loaded without its AWS Batch task (`no_batch_tasks`:
no state machine of ours runs one, and its import pulls in moto's EC2, 0.9 s of CPU in every process).
"""

from __future__ import annotations

import base64
import calendar
import copy
import datetime
import functools
import json
import threading
import weakref
from typing import Any

LOCK = threading.RLock()
_stream_listeners: weakref.WeakSet[threading.Event] = weakref.WeakSet()
_installed = False

ITEM_LIMIT = 400 * 1024
TRANSACTION_LIMIT = 4 * 1024 * 1024

_LOCKED = ("get_item", "put_item", "update_item", "delete_item", "query", "scan", "batch_get_item",
           "batch_write_item", "create_table", "delete_table", "describe_table", "update_time_to_live")


def _updated(table: Any, current: Any, hash_value: Any, range_value: Any, op: dict[str, Any]) -> Any:
    """The item an Update entry would leave, computed on a copy (the stored item is untouched)."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.dynamodb.parsing.validators import UpdateExpressionValidator

    expression = op["UpdateExpression"]
    names = op.get("ExpressionAttributeNames")
    values = op.get("ExpressionAttributeValues")
    ast = UpdateExpressionParser.make(expression)
    if current is None:
        item = Item(hash_value, range_value, {table.hash_key_attr: {hash_value.type: hash_value.value}})
        if range_value is not None:
            dict.__setitem__(item.attrs, table.range_key_attr, range_value)
    else:
        item = copy.deepcopy(current)
    plain: dict[str, Any] = dict(item.attrs)  # no moto "old + new" size accounting while updating
    item.attrs = plain  # type: ignore[assignment]
    validated = UpdateExpressionValidator(ast, expression_attribute_names=names, expression_attribute_values=values,
                                          item=item, table=table).validate()
    validated.normalize()
    UpdateExpressionExecutor(validated, item, names).execute()
    return item


def _check_size(item: Any) -> int:
    from moto.dynamodb.exceptions import MockValidationException

    size = item.size()
    if size > ITEM_LIMIT:
        raise MockValidationException("Item size has exceeded the maximum allowed size")
    return size


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MockValidationException,
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
    )
    from moto.dynamodb.models.dynamo_type import DynamoType, Item

    with LOCK:
        if len(transact_items) > 100:
            raise TooManyTransactionsException()
        seen: set[tuple[str, str]] = set()
        plan: list[tuple[str, Any, Any, Any, Any]] = []  # (op, table, hash, range, new item or None)
        errors: list[Any] = []
        total = 0
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table_name = op["TableName"]
            table = self.get_table(table_name)
            if op_type == "Put":
                attrs = op["Item"]
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            marker = (str(table_name), str(dict(sorted(key.items()))))
            if marker in seen:
                raise MultipleTransactionsException()
            seen.add(marker)
            hash_value, range_value = self.get_keys_value(table, key)
            current = table.get_item(hash_value, range_value)
            condition = op.get("ConditionExpression")
            if condition is not None:
                check = get_filter_expression(condition, op.get("ExpressionAttributeNames"),
                                              op.get("ExpressionAttributeValues"))
                if not check.expr(current):
                    old = None
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        old = current.to_json()["Attributes"]
                    errors.append(("ConditionalCheckFailed", "The conditional request failed", old))
                    continue
            errors.append((None, None, None))
            new: Any = None
            if op_type == "Put":
                table._validate_item_types(op["Item"])
                table._validate_key_sizes(op["Item"])
                new = Item.__new__(Item)
                new.hash_key, new.range_key = hash_value, range_value
                new.attrs = {k: DynamoType(v) for k, v in op["Item"].items()}
                total += _check_size(new)
            elif op_type == "Update":
                new = _updated(table, current, hash_value, range_value, op)
                total += _check_size(new)
            elif op_type == "Delete":
                total += len(str(key))
            plan.append((op_type, table, hash_value, range_value, new))
        if total > TRANSACTION_LIMIT:
            raise MockValidationException("Transaction request cannot be larger than 4 MB")
        if any(code is not None for code, _, _ in errors):
            raise TransactionCanceledException(errors)
        # Everything is valid: apply it all (nothing below can fail on the data).
        for op_type, table, hash_value, range_value, new in plan:
            if op_type == "Delete":
                table.delete_item(hash_value, range_value)
            elif op_type in ("Put", "Update"):
                current = table.get_item(hash_value, range_value)
                stored = Item(hash_value, range_value, {})
                for name, value in new.attrs.items():
                    dict.__setitem__(stored.attrs, name, value)
                if range_value is not None:
                    table.items[hash_value][range_value] = stored
                else:
                    table.items[hash_value] = stored
                if table.stream_shard is not None:
                    table.stream_shard.add(current, stored)


def _locked(method: Any) -> Any:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with LOCK:
            return method(*args, **kwargs)

    return wrapper


# moto's reads return the stored Item objects, and its responses serialize them after the backend call: an
# update_item in another thread (it mutates the stored item in place) then raised "dictionary changed size during
# iteration" in a get_item (a 500 of a fresh make test). So a whole DynamoDB request, its response's serialization
# included, runs under the lock (`DynamoHandler.call_action`); deep copies of every read's items, the earlier fix,
# were a sixteenth of a test process's CPU.


def method_names_once() -> None:
    """moto's BaseResponse.call_action lists the response class's methods with inspect.getmembers on every request
    (3.5% of a test process's CPU); a class's methods do not change, so each class is listed once."""
    from moto.core import responses

    listed = responses.method_names_from_class
    if getattr(listed, "cached", False):
        return
    names = functools.lru_cache(maxsize=None)(listed)
    names.cached = True  # type: ignore[attr-defined]
    responses.method_names_from_class = names  # type: ignore[assignment]


_STARTS = threading.RLock()


def one_execution_per_name() -> None:
    """StartExecution as Step Functions documents it for Standard workflows: a name is one execution; the same
    name and input while it runs answers that execution, a closed one or other input ExecutionAlreadyExists
    (API reference, StartExecution). moto checks the name, deep-copies the state machine, then appends the
    execution, and marks it RUNNING only after that (until then its `status` raises AttributeError): two
    concurrent starts of one name (a Turn's direct start and its outbox command) both passed the check, and
    the Turn ran two executions, each Dispatch task sending its own turn.start. Each start runs whole under
    one lock (the execution's own thread starts inside it and runs outside it)."""
    from moto.stepfunctions.models import StepFunctionBackend
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    for backend in (StepFunctionBackend, StepFunctionsParserBackend):
        start = vars(backend)["start_execution"]
        if getattr(start, "one_per_name", False):
            continue

        def locked(*args: Any, _start: Any = start, **kwargs: Any) -> Any:
            with _STARTS:
                return _start(*args, **kwargs)

        functools.update_wrapper(locked, start)
        locked.one_per_name = True  # type: ignore[attr-defined]
        backend.start_execution = locked  # type: ignore[method-assign]


def stops_wait_for_the_start() -> None:
    """StopExecution right after StartExecution stops it, as in Step Functions: moto's execution thread sets up its
    evaluation environment a moment after the start returns, and a stop in that moment raised AttributeError (a
    teardown that stopped a Turn's just-started workflow, in a fresh make test). The stop waits for the setup (it is
    the parse of the definition: milliseconds), then stops it as moto does."""
    import time

    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    stop = ExecutionWorker.stop
    if getattr(stop, "waits", False):
        return

    def stop_once_started(self: Any, stop_date: Any, error: Any, cause: Any) -> None:
        deadline = time.monotonic() + 5
        while self.env is None and time.monotonic() < deadline:
            time.sleep(0.001)
        stop(self, stop_date=stop_date, error=error, cause=cause)

    stop_once_started.waits = True  # type: ignore[attr-defined]
    ExecutionWorker.stop = stop_once_started  # type: ignore[method-assign]


def task_failure_keeps_its_cause() -> None:
    """SendTaskFailure's `cause` reaches the execution (moto's handler drops it, so a Catch saw Cause null): the
    Turn workflow's Settle task reads the outcome from the SettleNeeded failure's Cause (issue 36, item 5)."""
    from moto.stepfunctions.responses import StepFunctionResponse

    if getattr(StepFunctionResponse.send_task_failure, "keeps_cause", False):
        return

    def send_task_failure(self: Any) -> Any:
        from moto.core.responses import EmptyResult
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        backend = self.stepfunction_backend
        token, error, cause = self._get_param("taskToken"), self._get_param("error"), self._get_param("cause")
        if isinstance(backend, StepFunctionsParserBackend):
            backend.send_task_failure(token, error=error, cause=cause)
        else:
            backend.send_task_failure(token, error=error)
        return EmptyResult()

    send_task_failure.keeps_cause = True  # type: ignore[attr-defined]
    StepFunctionResponse.send_task_failure = send_task_failure  # type: ignore[method-assign]


def wake_on_stream_records(event: threading.Event) -> None:
    """`event` is set whenever moto appends a record to any table's stream in this process."""
    _stream_listeners.add(event)


_BATCH_TASK = "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_batch"


def no_batch_tasks() -> None:
    """moto's Step Functions interpreter imports every service integration it knows; its AWS Batch one imports
    moto.batch, which imports moto's EC2 models, whose region table parses botocore's endpoint data three times
    (0.9 s of CPU in every process that loads the interpreter: each local stack, each test worker). No state
    machine in template.yaml runs a Batch task, so that one module is replaced, before the interpreter loads, by
    one whose task fails at once saying the local stack does not emulate it (never silently)."""
    import sys
    import types

    if _BATCH_TASK in sys.modules:
        return
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )

    class StateTaskServiceBatch(StateTaskServiceCallback):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError("the local stack does not emulate AWS Batch tasks (local/motofix.py)")

        def _eval_service_task(self, *args: Any, **kwargs: Any) -> None:
            raise NotImplementedError("the local stack does not emulate AWS Batch tasks (local/motofix.py)")

    module = types.ModuleType(_BATCH_TASK)
    module.StateTaskServiceBatch = StateTaskServiceBatch  # type: ignore[attr-defined]
    sys.modules[_BATCH_TASK] = module


def parse_each_definition_once() -> None:
    """moto's Step Functions parses a state machine's ASL with ANTLR at every CreateStateMachine and again at
    every StartExecution (~0.1 s of CPU each: a stack's machines, then every Turn and every connection wait).
    The syntax tree of one definition never changes, so it is parsed once per process; each execution still
    builds its own evaluation components from it (the preprocessor's visit), as moto does."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    parse = AmazonStateLanguageParser.parse
    if getattr(parse, "parses_once", False):
        return
    trees: dict[str, Any] = {}

    def parse_once(definition: str) -> Any:
        tree = trees.get(definition)
        if tree is None:
            tree = trees[definition] = parse(definition)[1]  # a syntax error raises as before and is not kept
        return Preprocessor().visit(tree), tree

    parse_once.parses_once = True  # type: ignore[attr-defined]
    AmazonStateLanguageParser.parse = staticmethod(parse_once)  # type: ignore[method-assign]
    # CreateStateMachine validates the definition by building an execution's components and dropping them (the
    # preprocessor's visit: ~10 ms, twice per stack, and an in-process stack is built for every test). A definition
    # that validated is the same string the next time: it is valid again. A failing one is validated every time.
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    validate = StepFunctionsParserBackend._validate_definition
    valid: set[str] = set()

    def validate_once(definition: str) -> None:
        if definition not in valid:
            validate(definition=definition)
            valid.add(definition)

    StepFunctionsParserBackend._validate_definition = staticmethod(validate_once)  # type: ignore[method-assign]


class _KeyWhenUsed:
    """A symmetric KMS key's private key, made the first time anything reads it (nothing does)."""

    def __init__(self, generate: Any, key_spec: str):
        self._generate, self._spec, self._key = generate, key_spec, None

    def __getattr__(self, name: str) -> Any:
        if self._key is None:
            self._key = self._generate(self._spec)
        return getattr(self._key, name)


def private_keys_when_used() -> None:
    """moto's KMS generates an RSA-2048 private key for every key it creates, a symmetric one too (~60 ms of
    CPU each: the stack's keys at start, and every integration test's stack), though only an asymmetric key
    signs or verifies. A symmetric key's private key is made if and when something reads it."""
    import moto.kms.models as kms_models

    generate = kms_models.generate_private_key
    if isinstance(generate, functools.partial):
        return

    def generate_private_key(generate: Any, key_spec: str) -> Any:
        return _KeyWhenUsed(generate, key_spec) if key_spec == "SYMMETRIC_DEFAULT" else generate(key_spec)

    kms_models.generate_private_key = functools.partial(generate_private_key, generate)


# Data-plane operations whose results are plain DynamoDB JSON already (attribute values, counts, keys).
PLAIN_JSON_OPERATIONS = frozenset({
    ("dynamodb", op) for op in ("GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
                                "BatchWriteItem", "TransactGetItems", "TransactWriteItems")
} | {("dynamodbstreams", "GetRecords"), ("dynamodbstreams", "GetShardIterator")})


def _plain(value: Any, key: Any = None) -> Any:
    """moto's JSON serializer's output for a DynamoDB result, without walking the operation's shapes: None
    is left out, a blob (`B`, each of `BS`; bytes, or text as moto keeps a stream image's) is base64 of its
    bytes, a timestamp is Unix seconds truncated to milliseconds."""
    if isinstance(value, dict):
        return {k: _plain(v, k) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_plain(v, key) for v in value]
    if isinstance(value, (bytes, bytearray)) or (key in ("B", "BS") and isinstance(value, str)):
        raw = value.encode() if isinstance(value, str) else bytes(value)
        return base64.b64encode(raw).decode()
    if isinstance(value, datetime.datetime):
        seconds = calendar.timegm(value.utctimetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    return value


def plain_json_responses() -> None:
    """moto serializes every response by walking the operation's output shape member by member (its
    AttributePicker): about a quarter of the CPU of a local Turn went there, on DynamoDB reads, writes and
    stream records. Those results are DynamoDB JSON already, so they are written as JSON directly
    (`_plain` keeps the serializer's rules); every other response is moto's own. A test compares both on
    every attribute type and operation (tests/integration/test_motofix.py)."""
    from moto.core.responses import ActionResult

    original = ActionResult.execute_result
    if getattr(original, "original", None) is not None:
        return

    def execute_result(self: Any, context: Any) -> Any:
        service = context.service_model
        if (service.service_name, context.operation_model.name) in PLAIN_JSON_OPERATIONS \
                and isinstance(self.result, dict):
            content_type = f"application/x-amz-json-{service.metadata.get('jsonVersion', '1.0')}"
            members = context.operation_model.output_shape.members  # as the serializer, only the output's
            result = {k: v for k, v in self.result.items() if k in members}
            return 200, {"Content-Type": content_type}, json.dumps(_plain(result))
        return original(self, context)

    execute_result.original = original  # type: ignore[attr-defined]
    ActionResult.execute_result = execute_result  # type: ignore[method-assign]


def queries_read_what_they_need() -> None:
    """moto answers every Query by sorting the whole table (`Table.all_items`: every item, ordered by its
    keys) and then filtering it: O(n log n) DynamoType comparisons per query, which made the local stack
    slower the longer it ran (a fifth of its CPU in a long run). A table query reads only its partition
    (moto then keeps the items of that hash key and sorts them by range key, as before); an index query
    reads every item unsorted (moto filters them and sorts the matches by the index's keys and the table's,
    which are unique, so the order is the same). Both run under the backend lock (`_locked`), which is what
    makes the per-call view safe. A test compares both on every kind of query."""
    from moto.dynamodb.models.table import Table

    original = Table.query
    if getattr(original, "original", None) is not None:
        return

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
        if index_name:
            view = [item for group in self.items.values()
                    for item in (group.values() if self.range_key_attr else (group,))]
        elif hash_key is not None:
            group = self.items.get(hash_key)
            view = [] if group is None else list(group.values()) if self.range_key_attr else [group]
        else:
            return original(self, hash_key, *args, **kwargs)
        self.all_items = lambda: view  # this call's view (an instance attribute shadows the method)
        try:
            return original(self, hash_key, *args, **kwargs)
        finally:
            del self.all_items

    query.original = original  # type: ignore[attr-defined]
    Table.query = query  # type: ignore[method-assign]


def install() -> None:
    global _installed
    if _installed:
        return
    no_batch_tasks()
    method_names_once()
    parse_each_definition_once()
    one_execution_per_name()
    task_failure_keeps_its_cause()
    stops_wait_for_the_start()
    private_keys_when_used()
    plain_json_responses()
    queries_read_what_they_need()
    from moto.dynamodb.models import DynamoDBBackend

    for name in _LOCKED:
        setattr(DynamoDBBackend, name, _locked(getattr(DynamoDBBackend, name)))
    from moto.dynamodb.responses import DynamoHandler

    DynamoHandler.call_action = _locked(DynamoHandler.call_action)  # type: ignore[method-assign]
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    from moto.dynamodb.models.table import StreamShard

    original_add = StreamShard.add

    @functools.wraps(original_add)
    def add(self: Any, old: Any, new: Any) -> None:
        original_add(self, old, new)
        for event in list(_stream_listeners):
            event.set()

    StreamShard.add = add  # type: ignore[method-assign]
    _installed = True

