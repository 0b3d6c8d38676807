"""Automations as the SDK sends them (`client.beta.agents.automations`): wire models, the checks that are
pure, and the mapping of a five-field cron expression onto EventBridge Scheduler's six-field `cron(...)`.

"A cron expression plus a time zone starts new sessions or continues an existing one." A `new_session`
target is a Session create body, admitted by Session admission itself (agents_core.sessions.admit); here
it is only its outer shape.
"""

from __future__ import annotations

import re
import time
from typing import Annotated, Any, Literal, Optional, Union
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import Field

from . import validation
from .errors import InvalidRequest
from .parser import check_metadata
from .wire import JSONObject, Metadata, Wire

Name = Annotated[str, Field(min_length=1, max_length=256)]
Expression = Annotated[str, Field(min_length=1, max_length=256)]
INSTRUCTIONS_MAX = 32_768


class NewSessionTarget(Wire):
    type: Literal["new_session"]
    environment: JSONObject
    input: list[Any]
    agent: Optional[JSONObject] = None
    agent_id: Optional[str] = None
    metadata: Metadata = None
    vault_ids: Optional[list[str]] = None

    def session_body(self) -> dict[str, Any]:
        """The Session create body each invocation sends (what Session admission checks)."""
        return self.model_dump(exclude={"type"}, exclude_unset=True)


class ExistingSessionTarget(Wire):
    type: Literal["existing_session"]
    session_id: Annotated[str, Field(min_length=1)]
    instructions: Annotated[str, Field(min_length=1, max_length=INSTRUCTIONS_MAX)]


Target = Annotated[Union[NewSessionTarget, ExistingSessionTarget], Field(discriminator="type")]


class PeriodicCreate(Wire):
    type: Literal["periodic"]
    expression: Expression
    timezone: str
    name: Name
    target: Target
    metadata: Metadata = None


class OnceCreate(Wire):
    type: Literal["once"]
    run_at: int
    name: Name
    target: Target
    metadata: Metadata = None


AutomationCreate = Annotated[Union[PeriodicCreate, OnceCreate], Field(discriminator="type")]


class AutomationUpdate(Wire):
    expression: Optional[Expression] = None
    timezone: Optional[str] = None
    name: Optional[Name] = None
    run_at: Optional[int] = None
    target: Optional[Target] = None
    metadata: Optional[dict[str, str]] = None


class AgentToolCall(Wire):
    """The `automations` Agent tool's arguments (an agent managing its own wake-ups)."""
    action: Literal["create", "list", "update", "delete"]
    automation_id: Optional[str] = None
    name: Optional[Name] = None
    instructions: Optional[str] = None
    expression: Optional[Expression] = None
    timezone: Optional[str] = None
    run_at: Optional[int] = None


TOOL_NAME = "automations"  # the function a Harness's model calls for the `automations` Agent tool
TOOL_DESCRIPTION = ("Manage your own scheduled wake-ups in this session: create (a five-field cron `expression` with "
                    "an IANA `timezone`, or a one-time `run_at` in Unix seconds, and the `instructions` you will be "
                    "sent), list, update or delete them (by `automation_id`).")
_TOOL_FIELDS = {
    "action": "What to do with your wake-ups.",
    "automation_id": "The wake-up to update or delete (from create or list).",
    "name": "A short name for the wake-up (create, update).",
    "instructions": "The message you will be sent at each wake-up (create, update).",
    "expression": "A standard five-field cron expression, for a periodic wake-up (create, update).",
    "timezone": "The IANA time zone of the cron expression, e.g. Europe/Paris (default UTC).",
    "run_at": "A future Unix timestamp in seconds, for a one-time wake-up instead of an expression.",
}


def tool_function() -> dict[str, Any]:
    """The `automations` tool as the function tool a Harness offers its model (turn.start carries it in place of
    `{"type": "automations"}`, so each driver offers it as any declared function): the JSON schema of
    `AgentToolCall`, each optional field as its plain type."""
    schema = AgentToolCall.model_json_schema()
    properties = {}
    for name, prop in schema["properties"].items():
        plain = next((p for p in prop.get("anyOf", [prop]) if p.get("type") != "null"), prop)
        properties[name] = {k: v for k, v in plain.items() if k not in ("title", "default")} | {
            "description": _TOOL_FIELDS[name]}
    parameters = {"type": "object", "properties": properties, "required": schema["required"],
                  "additionalProperties": False}
    return {"type": "function", "name": TOOL_NAME, "description": TOOL_DESCRIPTION, "parameters": parameters,
            "defer_loading": False}


def parse_create(body: Any) -> PeriodicCreate | OnceCreate:
    if not isinstance(body, dict):
        validation.parse(PeriodicCreate, body)  # the official "Invalid type for 'body'" 400
    if "type" not in body:
        raise InvalidRequest("Missing required parameter: 'type'.", param="type")
    if body.get("type") not in ("periodic", "once"):
        raise InvalidRequest(f"Invalid value: '{body.get('type')}'. Supported values are: 'periodic' and 'once'.",
                             param="type")
    request = validation.parse(PeriodicCreate if body["type"] == "periodic" else OnceCreate, body)
    check_metadata(request.metadata)
    if isinstance(request, PeriodicCreate):
        check_timezone(request.timezone)
        eventbridge_cron(request.expression)
    else:
        check_run_at(request.run_at)
    return request


def parse_update(body: Any) -> AutomationUpdate:
    request = validation.parse(AutomationUpdate, body)
    for member in ("expression", "timezone", "name", "run_at", "target"):
        if request.given(member) and getattr(request, member) is None:
            raise InvalidRequest(f"Invalid type for '{member}': expected a value, but got null instead.",
                                 param=member)
    check_metadata(request.metadata)
    if request.timezone is not None:
        check_timezone(request.timezone)
    if request.expression is not None:
        eventbridge_cron(request.expression)
    if request.run_at is not None:
        check_run_at(request.run_at)
    return request


def check_timezone(name: str, param: str = "timezone") -> None:
    try:
        if name not in available_timezones():
            raise ZoneInfoNotFoundError(name)
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidRequest(f"Invalid 'timezone': '{name}' is not an IANA time zone name (e.g. "
                             "'Europe/Paris', 'UTC').", param=param) from None


def check_run_at(run_at: int, param: str = "run_at", now: Optional[float] = None) -> None:
    if run_at <= int(now if now is not None else time.time()):
        raise InvalidRequest(f"Invalid 'run_at': {run_at} is not in the future; expected a Unix timestamp in "
                             "seconds after now.", param=param)
    if run_at > 253_402_300_799:  # 9999-12-31T23:59:59Z: EventBridge Scheduler's at() has four year digits
        raise InvalidRequest(f"Invalid 'run_at': {run_at} is too far in the future.", param=param)


# ---- cron: five standard fields <-> EventBridge Scheduler's cron(minutes hours dom month dow year) ----------

_FIELD = re.compile(r"^[0-9A-Za-z*,/\-]+$")
_DOW_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
CRON_HELP = ("expected a standard five-field cron expression (minute hour day-of-month month day-of-week), "
             "e.g. '*/15 9-17 * * 1-5'")


def _bad(expression: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid 'expression': '{expression}' {why}; {CRON_HELP}.", param="expression")


def _step_start(field: str, first: str) -> str:
    # EventBridge writes an increment from a start value (0/15), standard cron also from `*` (*/15)
    return first + field[1:] if field.startswith("*/") else field


def _dow_number(token: str) -> int:
    return _DOW_NAMES.index(token.upper()) if token.upper() in _DOW_NAMES else int(token) % 7


def _eventbridge_dow(field: str, expression: str) -> str:
    """Standard day-of-week (0-7, Sunday 0 or 7) -> EventBridge's (1-7, Sunday 1)."""
    if "/" in field:
        raise _bad(expression, "uses a step in day-of-week, which EventBridge Scheduler cannot run")
    out: list[str] = []
    for part in field.split(","):
        ends = part.split("-")
        if len(ends) == 1:
            out.append(str(_dow_number(ends[0]) + 1))
            continue
        first, last = (_dow_number(e) for e in ends)
        if ends[1].upper() in ("7", "SUN"):
            last = 7  # a range ending on Sunday written as 7 or SUN (5-7 = FRI-SUN = FRI, SAT, SUN)
        if last == 7:
            out.append(f"{first + 1}-7,1" if first + 1 < 7 else "7,1")
        elif first > last:
            raise _bad(expression, f"has the backwards day-of-week range '{part}'")
        else:
            out.append(f"{first + 1}-{last + 1}")
    return ",".join(out)


def eventbridge_cron(expression: str) -> str:
    """The EventBridge Scheduler schedule expression for a standard five-field cron expression, or a 400."""
    from croniter import croniter  # the cron evaluator (PyPI croniter) judges validity, not our own parsing

    fields = expression.split()
    if len(fields) != 5 or not all(_FIELD.match(f) for f in fields):
        raise _bad(expression, f"has {len(fields)} fields" if len(fields) != 5 else "has an invalid field")
    if not croniter.is_valid(expression):
        raise _bad(expression, "is not a valid cron expression")
    minute, hour, dom, month, dow = fields
    if dom != "*" and dow != "*":
        raise _bad(expression, "restricts both day-of-month and day-of-week (either one matching), which "
                               "EventBridge Scheduler cannot run; restrict one of them")
    try:
        dow_field = "?" if dow == "*" else _eventbridge_dow(dow, expression)
    except ValueError:
        raise _bad(expression, "has an invalid day-of-week") from None
    dom_field = "?" if dow_field != "?" else _step_start(dom, "1")
    return (f"cron({_step_start(minute, '0')} {_step_start(hour, '0')} {dom_field} {_step_start(month, '1')} "
            f"{dow_field} *)")


def standard_cron(schedule_expression: str) -> str:
    """The inverse of `eventbridge_cron` (the local scheduler evaluates it with croniter)."""
    minute, hour, dom, month, dow, _year = schedule_expression.removeprefix("cron(").removesuffix(")").split()
    if dow != "?":
        dow = ",".join("-".join(str(int(n) - 1) for n in part.split("-")) for part in dow.split(","))
    return f"{minute} {hour} {'*' if dom == '?' else dom} {month} {'*' if dow == '?' else dow}"


def at_expression(run_at: int) -> str:
    """EventBridge Scheduler's one-time `at(yyyy-mm-ddThh:mm:ss)` (in UTC: the schedule's time zone)."""
    return "at(" + time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(run_at)) + ")"
