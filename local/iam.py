"""IAM as AWS enforces it, for the local stack and the tests: every AWS call a function makes is evaluated
against THAT function's own policies from template.yaml (and a state machine's task calls against the state
machine's role), and a denied call raises the ClientError AccessDeniedException botocore raises against AWS.

How it works:
- The principal: `apigw.load_handlers` wraps each handler (`wrap`) so the call runs with the function's
  logical id in a context variable; a Step Functions Lambda task runs as its state machine
  (moto's Lambda task integration is patched), and a task token remembers the state machine that issued it.
  A call made with no principal (a test's or the stack's own setup) is not checked: that is the operator.
- The hook: `before-parameter-build` (every client of every botocore session, through BUILTIN_HANDLERS as
  moto registers its own stubber) turns the API call into IAM requests (`requests`): the action, the
  resource ARN and the condition context, one request per item DynamoDB authorizes (each member of
  TransactWriteItems / TransactGetItems / BatchGetItem / BatchWriteItem, with its `dynamodb:LeadingKeys`).
  A denial is answered at `before-call` with AWS's error response, so botocore raises it as it would.
- The policies: the template's `Policies` (inline statements, SAM policy templates expanded to their
  documented statements, managed policies SAM attaches) with intrinsics resolved to local values, compiled
  once per principal and cached.
- The evaluation (`evaluate`): explicit Deny wins, then any Allow; Action/NotAction (case-insensitive
  wildcards), Resource/NotResource (ARN wildcards), Condition with IAM's operators, `...IfExists`,
  `ForAllValues:` / `ForAnyValue:` set semantics and IAM's rules for a key absent from the request.

`AGENTS_CORE_IAM=off` turns it off (debugging only).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

from . import template
from .iam_requests import LOCAL_WS_API, requests

_principal: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("iam_principal", default=None)
_overrides: dict[str, list[dict[str, Any]]] = {}
_tokens: OrderedDict[str, str] = OrderedDict()  # task token -> the state machine that issued it
_lock = threading.Lock()
log = logging.getLogger("local.iam")
_installed = False


def enabled() -> bool:
    return os.environ.get("AGENTS_CORE_IAM", "on").lower() not in ("off", "0", "false", "no")


# ---- the principal -------------------------------------------------------------------------------------

def current() -> Optional[str]:
    return _principal.get()


@contextlib.contextmanager
def acting_as(logical_id: Optional[str]) -> Iterator[None]:
    token = _principal.set(logical_id)
    try:
        yield
    finally:
        _principal.reset(token)


def wrap(logical_id: str, handler: Callable[..., Any], asgi: bool = False) -> Callable[..., Any]:
    """The handler, running as its function's role."""
    if asgi:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            token = _principal.set(logical_id)
            try:
                await handler(scope, receive, send)
            finally:
                _principal.reset(token)

        return app

    @functools.wraps(handler)
    def run(event: Any, context: Any) -> Any:
        token = _principal.set(logical_id)
        try:
            return handler(event, context)
        finally:
            _principal.reset(token)

    return run


def role_arn(logical_id: str) -> str:
    return f"arn:aws:iam::{template.ACCOUNT}:role/agents-core-local-{logical_id}Role"


def _assumed_role(logical_id: str) -> str:
    return f"arn:aws:sts::{template.ACCOUNT}:assumed-role/agents-core-local-{logical_id}Role/{logical_id}"


# ---- the policies ----------------------------------------------------------------------------------------

# SAM policy templates, as samtranslator/policy_templates_data/policy_templates.json defines them.
_DYNAMODB_TABLE = ["arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${TableName}",
                   "arn:${AWS::Partition}:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${TableName}/index/*"]
SAM_POLICY_TEMPLATES: dict[str, list[dict[str, Any]]] = {
    "LambdaInvokePolicy": [{"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": [
        "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${FunctionName}*"]}],
    "DynamoDBCrudPolicy": [{"Effect": "Allow", "Action": [
        "dynamodb:GetItem", "dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:Scan", "dynamodb:Query",
        "dynamodb:UpdateItem", "dynamodb:BatchWriteItem", "dynamodb:BatchGetItem", "dynamodb:DescribeTable",
        "dynamodb:ConditionCheckItem"], "Resource": _DYNAMODB_TABLE}],
    "DynamoDBReadPolicy": [{"Effect": "Allow", "Action": [
        "dynamodb:GetItem", "dynamodb:Scan", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:DescribeTable"],
        "Resource": _DYNAMODB_TABLE}],
    "SQSSendMessagePolicy": [{"Effect": "Allow", "Action": ["sqs:SendMessage*"], "Resource": [
        "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${QueueName}"]}],
    "SQSPollerPolicy": [{"Effect": "Allow", "Action": [
        "sqs:ChangeMessageVisibility", "sqs:ChangeMessageVisibilityBatch", "sqs:DeleteMessage",
        "sqs:DeleteMessageBatch", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"], "Resource": [
        "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${QueueName}"]}],
}
# The managed policy SAM attaches to a function with a DynamoDB event (its event source mapping reads the
# stream with the function's role): AWSLambdaDynamoDBExecutionRole.
DYNAMODB_EXECUTION_ROLE = [{"Effect": "Allow", "Action": [
    "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
    "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"}]


def _values() -> dict[str, str]:
    """What the template's names resolve to here (the table and key exist under these ids at run time)."""
    table = os.environ.get("TABLE_NAME", "agents-core-local")
    table_arn = f"arn:aws:dynamodb:{template.REGION}:{template.ACCOUNT}:table/{table}"
    key = os.environ.get("VAULT_KEY_ID", "")
    out = {"AWS::Partition": "aws", "AWS::Region": template.REGION, "AWS::AccountId": template.ACCOUNT,
           "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "agents-core-local"}
    doc = template.load()
    for name, spec in (doc.get("Parameters") or {}).items():
        out[name] = str(spec.get("Default", ""))
    for logical_id, res in doc["Resources"].items():
        kind = res["Type"]
        if kind == "AWS::DynamoDB::Table":
            out |= {logical_id: table, f"{logical_id}.Arn": table_arn, f"{logical_id}.StreamArn": f"{table_arn}/stream/*"}
        elif kind == "AWS::S3::Bucket":
            bucket = template.bucket_name(logical_id)
            out |= {logical_id: bucket, f"{logical_id}.Arn": f"arn:aws:s3:::{bucket}"}
        elif kind == "AWS::KMS::Key":
            out |= {logical_id: key, f"{logical_id}.Arn": f"arn:aws:kms:{template.REGION}:{template.ACCOUNT}:key/{key}"}
        elif kind == "AWS::Scheduler::ScheduleGroup":  # named by its logical id here (local/scheduler.py)
            out |= {logical_id: logical_id,
                    f"{logical_id}.Arn": f"arn:aws:scheduler:{template.REGION}:{template.ACCOUNT}:schedule-group/{logical_id}"}
        elif kind == "AWS::IAM::Role":
            out |= {logical_id: logical_id, f"{logical_id}.Arn": f"arn:aws:iam::{template.ACCOUNT}:role/{logical_id}"}
        elif kind == "AWS::Serverless::StateMachine":
            arn = f"arn:aws:states:{template.REGION}:{template.ACCOUNT}:stateMachine:{logical_id}"
            out |= {logical_id: arn, f"{logical_id}.Arn": arn, f"{logical_id}.Name": logical_id}
        elif kind == "AWS::Serverless::Function":
            out |= {logical_id: logical_id, f"{logical_id}.Arn": template.function_arn(logical_id)}
        elif kind == "AWS::SQS::Queue":
            out |= {logical_id: f"https://sqs.{template.REGION}.amazonaws.com/{template.ACCOUNT}/{logical_id}",
                    f"{logical_id}.Arn": f"arn:aws:sqs:{template.REGION}:{template.ACCOUNT}:{logical_id}",
                    f"{logical_id}.QueueName": logical_id}
        elif kind == "AWS::ApiGatewayV2::Api" and res["Properties"].get("ProtocolType") == "WEBSOCKET":
            out[logical_id] = LOCAL_WS_API
    return out


def _resolve(value: Any, values: dict[str, str], extra: Optional[dict[str, str]] = None) -> Any:
    if isinstance(value, list):
        return [_resolve(v, values, extra) for v in value]
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        name = value["Ref"]
        return (extra or {}).get(name) or values[name]
    if "Fn::GetAtt" in value:
        target = value["Fn::GetAtt"]
        return values[".".join(target) if isinstance(target, list) else target]
    if "Fn::Sub" in value:
        spec = value["Fn::Sub"]
        text, local = (spec, {}) if isinstance(spec, str) else (spec[0], spec[1])
        scope = {**values, **(extra or {}), **{k: _resolve(v, values, extra) for k, v in local.items()}}
        return re.sub(r"\$\{([^}!]+)\}", lambda m: scope[m.group(1)], text)
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_resolve(parts, values, extra))
    return {k: _resolve(v, values, extra) for k, v in value.items()}


def _sam_template(name: str, params: dict[str, Any], values: dict[str, str]) -> list[dict[str, Any]]:
    if name not in SAM_POLICY_TEMPLATES:
        raise ValueError(f"local/iam.py does not know the SAM policy template {name}: add its documented statements")
    resolved = {k: str(_resolve(v, values)) for k, v in (params or {}).items()}
    return [_resolve({**s, "Resource": [{"Fn::Sub": r} for r in s["Resource"]]}, values, resolved)
            for s in SAM_POLICY_TEMPLATES[name]]


def statements(logical_id: str) -> list[dict[str, Any]]:
    """The resolved statements of a function's or a state machine's role, as SAM would create it."""
    if logical_id in _overrides:
        return _overrides[logical_id]
    values = _values()
    props = template.resources()[logical_id]["Properties"]
    out: list[dict[str, Any]] = []
    for policy in props.get("Policies") or []:
        if isinstance(policy, str):
            if policy.endswith("AWSLambdaDynamoDBExecutionRole"):
                out += DYNAMODB_EXECUTION_ROLE
                continue
            raise ValueError(f"local/iam.py does not know the managed policy {policy}")
        if "Statement" in policy:
            statements_ = policy["Statement"]
            out += [_resolve(s, values) for s in (statements_ if isinstance(statements_, list) else [statements_])]
            continue
        for name, params in policy.items():
            out += _sam_template(name, params, values)
    if any(e.get("Type") == "DynamoDB" for e in (props.get("Events") or {}).values()):
        out += DYNAMODB_EXECUTION_ROLE
    return out


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: Optional[re.Pattern[str]]
    not_actions: Optional[re.Pattern[str]]
    resources: Optional[re.Pattern[str]]
    not_resources: Optional[re.Pattern[str]]
    condition: dict[str, dict[str, list[str]]]


def _listed(value: Any) -> list[str]:
    return [] if value is None else [str(v) for v in (value if isinstance(value, list) else [value])]


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)


def _patterns(values: Any, ignore_case: bool = False) -> Optional[re.Pattern[str]]:
    if values is None:
        return None
    return re.compile("(?:" + "|".join(_glob(v) for v in _listed(values)) + r")\Z", re.I if ignore_case else 0)


def compile_statements(raw: list[dict[str, Any]]) -> list[Statement]:
    out = []
    for s in raw:
        condition = {op: {k: _listed(v) for k, v in keys.items()} for op, keys in (s.get("Condition") or {}).items()}
        out.append(Statement(s["Effect"], _patterns(s.get("Action"), True), _patterns(s.get("NotAction"), True),
                             _patterns(s.get("Resource")), _patterns(s.get("NotResource")), condition))
    return out


_compiled: dict[tuple[str, str, str], list[Statement]] = {}


def policy(logical_id: str) -> list[Statement]:
    """The principal's compiled statements, cached per (principal, table, key) as they resolve here."""
    cache_key = (logical_id, os.environ.get("TABLE_NAME", ""), os.environ.get("VAULT_KEY_ID", ""))
    found = _compiled.get(cache_key)
    if found is None:
        found = _compiled[cache_key] = compile_statements(statements(logical_id))
    return found


@contextlib.contextmanager
def overridden(logical_id: str, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> Iterator[None]:
    """Run with a principal's statements edited (a test of what a missing permission does)."""
    new = edit(json.loads(json.dumps(statements(logical_id))))
    _overrides[logical_id] = new
    _compiled.clear()
    try:
        yield
    finally:
        _overrides.pop(logical_id, None)
        _compiled.clear()


# ---- the evaluation --------------------------------------------------------------------------------------

def _string_match(op: str, actual: str, wanted: str) -> bool:
    if op in ("StringEquals", "ArnEquals"):
        return actual == wanted
    if op == "StringEqualsIgnoreCase":
        return actual.lower() == wanted.lower()
    if op in ("StringLike", "ArnLike"):
        return re.match(_glob(wanted) + r"\Z", actual, re.S) is not None
    if op.startswith("Numeric"):
        a, w = float(actual), float(wanted)
        return {"NumericEquals": a == w, "NumericLessThan": a < w, "NumericLessThanEquals": a <= w,
                "NumericGreaterThan": a > w, "NumericGreaterThanEquals": a >= w}[op]
    if op == "Bool":
        return actual.lower() == wanted.lower()
    raise ValueError(f"condition operator {op} is not supported by local/iam.py")


_NEGATED = {"StringNotEquals": "StringEquals", "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
            "StringNotLike": "StringLike", "ArnNotEquals": "ArnEquals", "ArnNotLike": "ArnLike",
            "NumericNotEquals": "NumericEquals"}


def _condition_holds(op: str, wanted: list[str], actual: Optional[list[str]]) -> bool:
    """One operator on one key, with IAM's rules: several condition values are OR'ed; a key absent from the
    request fails a positive operator and satisfies a negated one (and `...IfExists`), `ForAllValues` holds
    on an empty or absent set, `ForAnyValue` does not."""
    qualifier, _, op = op.rpartition(":")
    if_exists = op.endswith("IfExists")
    op = op.removesuffix("IfExists")
    if op == "Null":
        return (actual is None or actual == []) == (wanted[0].lower() == "true")
    negated = op in _NEGATED
    base = _NEGATED.get(op, op)

    def one(value: str) -> bool:
        hit = any(_string_match(base, value, w) for w in wanted)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return all(one(v) for v in (actual or []))
    if qualifier == "ForAnyValue":
        return any(one(v) for v in (actual or []))
    if actual is None:
        return if_exists or negated
    return any(one(v) for v in actual)  # a single-valued operator on the request's value(s)


def _conditions_hold(condition: dict[str, dict[str, list[str]]], context: dict[str, list[str]]) -> bool:
    return all(_condition_holds(op, wanted, context.get(key.lower()))
               for op, keys in condition.items() for key, wanted in keys.items())


def _applies(s: Statement, action: str, resource: str, context: dict[str, list[str]]) -> bool:
    if s.actions is not None and not s.actions.match(action):
        return False
    if s.not_actions is not None and s.not_actions.match(action):
        return False
    if s.resources is not None and not s.resources.match(resource):
        return False
    if s.not_resources is not None and s.not_resources.match(resource):
        return False
    return _conditions_hold(s.condition, context)


def evaluate(policy_: list[Statement], action: str, resource: str, context: dict[str, list[str]]) -> str:
    """'Allow', 'ExplicitDeny' or 'ImplicitDeny' for one request (context keys lower-cased, values lists)."""
    allowed = False
    for s in policy_:
        if _applies(s, action, resource, context):
            if s.effect == "Deny":
                return "ExplicitDeny"
            allowed = True
    return "Allow" if allowed else "ImplicitDeny"


def denial(principal: str, service: str, operation: str, params: dict[str, Any]) -> Optional[dict[str, Any]]:
    """AWS's error response for a call this principal may not make, or None when every request is allowed."""
    statements_ = policy(principal)
    for action, resource, context in requests(service, operation, params, _tokens):
        verdict = evaluate(statements_, action, resource, context)
        if verdict != "Allow":
            reason = ("with an explicit deny in an identity-based policy" if verdict == "ExplicitDeny"
                      else f"because no identity-based policy allows the {action} action")
            message = (f"User: {_assumed_role(principal)} is not authorized to perform: {action} "
                       f"on resource: {resource} {reason}")
            status = 403 if service in ("lambda", "apigatewaymanagementapi") else 400
            log.warning("IAM denied %s", message)  # in make dev's log: the statement template.yaml lacks
            request_id = str(uuid.uuid4())
            return {"Error": {"Code": "AccessDeniedException", "Message": message},
                    "ResponseMetadata": {"RequestId": request_id, "HTTPStatusCode": status, "HTTPHeaders": {
                        "x-amzn-requestid": request_id, "x-amzn-errortype": "AccessDeniedException",
                        "content-type": "application/x-amz-json-1.0"}, "RetryAttempts": 0}}
    return None


# ---- the botocore hook and moto's Step Functions -----------------------------------------------------------

def _before_parameter_build(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
    principal = _principal.get()
    if principal is None or not enabled() or context.get("is_presign_request"):
        return  # a presigned URL or form makes no call: AWS checks the signer's role when it is used
    service = model.service_model.service_name
    answer = denial(principal, service, model.name, params)
    if answer is not None:
        context["iam_denied"] = answer


def _before_call(context: dict[str, Any], **_: Any) -> Any:
    answer = context.get("iam_denied")
    if answer is None:
        return None
    from botocore.awsrequest import AWSResponse

    status = answer["ResponseMetadata"]["HTTPStatusCode"]
    return AWSResponse("https://iam.local", status, answer["ResponseMetadata"]["HTTPHeaders"], None), answer


def _remember_token(original: Callable[..., str]) -> Callable[..., str]:
    def update_task_token(self: Any) -> str:
        token = original(self)
        with _lock:
            _tokens[token] = self.context_object_data["StateMachine"]["Id"]
            while len(_tokens) > 100_000:
                _tokens.popitem(last=False)
        return token

    return update_task_token


def _as_state_machine(original: Callable[..., Any]) -> Callable[..., Any]:
    """A Lambda task of the ASL interpreter (on whatever thread runs the state), as its state machine."""
    def invoke(env: Any, *args: Any, **kwargs: Any) -> Any:
        with acting_as(env.states.context_object.context_object_data["StateMachine"]["Name"]):
            return original(env, *args, **kwargs)

    return invoke


class _ContextPool:
    """A ThreadPoolExecutor whose tasks run in the submitter's context (its principal): a Lambda's own
    threads act with its role."""

    def __init__(self, pool: Any):
        self._pool = pool

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)

    def map(self, fn: Callable[..., Any], *iterables: Any) -> Iterator[Any]:
        futures = [self.submit(fn, *args) for args in zip(*iterables, strict=False)]
        return (f.result() for f in futures)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)


def install() -> None:
    """Hook every botocore client created from now on (idempotent), and moto's Step Functions."""
    global _installed
    with _lock:
        if _installed:
            return
        import botocore.handlers
        from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils as tasks
        from moto.stepfunctions.parser.asl.eval import states

        from agents_core import live

        botocore.handlers.BUILTIN_HANDLERS.append(("before-parameter-build", _before_parameter_build))
        botocore.handlers.BUILTIN_HANDLERS.append(("before-call", _before_call))
        states.ContextObject.update_task_token = _remember_token(states.ContextObject.update_task_token)  # type: ignore[method-assign]
        tasks.execute_lambda_function_integration = _as_state_machine(tasks.execute_lambda_function_integration)
        tasks.exec_lambda_function = _as_state_machine(tasks.exec_lambda_function)
        live._pool = _ContextPool(live._pool)  # type: ignore[assignment]
        from agents_core import aws

        aws.botocore_session.cache_clear()  # a session made before the hook would make unchecked clients
        import boto3

        if boto3.DEFAULT_SESSION is not None:  # boto3's (moto's ASL interpreter makes its clients from it)
            _register(boto3.DEFAULT_SESSION._session)
        from . import clientcache

        clientcache.clear()  # a client kept from before the hook would go unchecked
        _installed = True


def _register(session: Any) -> None:
    session.register("before-parameter-build", _before_parameter_build, unique_id="agents-core-iam-params")
    session.register("before-call", _before_call, unique_id="agents-core-iam-call")
