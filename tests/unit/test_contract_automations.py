"""agents_contract.automations: automations.create / update as the SDK sends them (type, cron expression, time
zone, run_at, target, metadata), the `automations` Agent tool's function, and the cron rules not covered by
test_automations_cron.py."""

from __future__ import annotations

import datetime as dt
import time

import pytest
from croniter import croniter

from agents_contract import automations
from agents_contract.errors import InvalidRequest

FUTURE = int(time.time()) + 86_400
EXISTING = {"type": "existing_session", "session_id": "sess_1", "instructions": "Check the build."}
NEW = {"type": "new_session", "environment": {"type": "none"}, "input": [{"type": "message", "content": "hi"}]}
PERIODIC = {"type": "periodic", "expression": "*/15 9-17 * * 1-5", "timezone": "Europe/Paris", "name": "standup",
            "target": EXISTING}
ONCE = {"type": "once", "run_at": FUTURE, "name": "reminder", "target": NEW}


def _refused(call, *args, **kwargs) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        call(*args, **kwargs)
    return caught.value


def test_a_periodic_automation_is_admitted_with_its_target():
    request = automations.parse_create(PERIODIC | {"metadata": {"team": "ops"}})
    assert isinstance(request, automations.PeriodicCreate)
    assert (request.expression, request.timezone, request.name, request.metadata) == (
        "*/15 9-17 * * 1-5", "Europe/Paris", "standup", {"team": "ops"})
    assert isinstance(request.target, automations.ExistingSessionTarget)
    assert (request.target.session_id, request.target.instructions) == ("sess_1", "Check the build.")


def test_a_once_automation_starting_a_new_session_carries_the_session_create_body():
    request = automations.parse_create(ONCE)
    assert isinstance(request, automations.OnceCreate) and request.run_at == FUTURE
    assert isinstance(request.target, automations.NewSessionTarget)
    # only what was sent, without the target's type: what Session admission checks at each run
    assert request.target.session_body() == {"environment": {"type": "none"},
                                             "input": [{"type": "message", "content": "hi"}]}
    full = NEW | {"agent_id": "agent_1", "vault_ids": ["vault_1"], "metadata": {"k": "v"}}
    assert automations.parse_create(ONCE | {"target": full}).target.session_body() == {
        k: v for k, v in full.items() if k != "type"}


@pytest.mark.parametrize("body, message, param", [
    ([], "Invalid type for 'body': expected an object, but got an array instead.", None),
    ({"name": "n"}, "Missing required parameter: 'type'.", "type"),
    (PERIODIC | {"type": "daily"}, "Invalid value: 'daily'. Supported values are: 'periodic' and 'once'.", "type"),
    (PERIODIC | {"type": None}, "Invalid value: 'None'. Supported values are: 'periodic' and 'once'.", "type"),
    ({k: v for k, v in PERIODIC.items() if k != "timezone"}, "Missing required parameter: 'timezone'.", "timezone"),
    (PERIODIC | {"run_at": FUTURE}, "Unknown parameter: 'run_at'.", "run_at"),
    (ONCE | {"expression": "* * * * *"}, "Unknown parameter: 'expression'.", "expression"),
    (PERIODIC | {"name": ""}, "Invalid value for 'name': String should have at least 1 character.", "name"),
    (PERIODIC | {"name": "n" * 257}, "Invalid value for 'name': String should have at most 256 characters.", "name"),
    (PERIODIC | {"expression": ""}, "Invalid value for 'expression': String should have at least 1 character.",
     "expression"),
    (PERIODIC | {"timezone": "Mars/Olympus"},
     "Invalid 'timezone': 'Mars/Olympus' is not an IANA time zone name (e.g. 'Europe/Paris', 'UTC').", "timezone"),
    (PERIODIC | {"expression": "0 9 * *"}, "Invalid 'expression': '0 9 * *' has 4 fields; "
     + automations.CRON_HELP + ".", "expression"),
    (ONCE | {"run_at": "tomorrow"}, "Invalid type for 'run_at': expected an integer, but got a string instead.",
     "run_at"),
    (ONCE | {"run_at": True}, "Invalid type for 'run_at': expected an integer, but got a boolean instead.", "run_at"),
    (ONCE | {"run_at": 1_000}, "Invalid 'run_at': 1000 is not in the future; expected a Unix timestamp in seconds "
     "after now.", "run_at"),
    (ONCE | {"run_at": 253_402_300_800}, "Invalid 'run_at': 253402300800 is too far in the future.", "run_at"),
    (PERIODIC | {"target": {"type": "webhook"}},
     "Invalid value: 'webhook'. Supported values are: 'new_session' and 'existing_session'.", "target.type"),
    (PERIODIC | {"target": EXISTING | {"instructions": ""}},
     "Invalid value for 'target.instructions': String should have at least 1 character.", "target.instructions"),
    (PERIODIC | {"target": EXISTING | {"instructions": "x" * 32_769}},
     "Invalid value for 'target.instructions': String should have at most 32768 characters.", "target.instructions"),
    (PERIODIC | {"target": EXISTING | {"session_id": ""}},
     "Invalid value for 'target.session_id': String should have at least 1 character.", "target.session_id"),
    (PERIODIC | {"target": {k: v for k, v in NEW.items() if k != "input"}},
     "Missing required parameter: 'target.input'.", "target.input"),
    (PERIODIC | {"target": EXISTING | {"input": []}}, "Unknown parameter: 'target.input'.", "target.input"),
    (PERIODIC | {"metadata": {str(i): "v" for i in range(17)}},
     "Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object "
     "with 17 properties instead.", "metadata"),
])
def test_an_invalid_automation_create_is_a_400(body, message, param):
    error = _refused(automations.parse_create, body)
    assert (error.message, error.param, error.status) == (message, param, 400)


def test_the_boundaries_of_a_create_are_accepted():
    assert automations.parse_create(ONCE | {"run_at": 253_402_300_799}).run_at == 253_402_300_799  # 9999-12-31
    assert automations.parse_create(PERIODIC | {"name": "n" * 256}).name == "n" * 256
    long = EXISTING | {"instructions": "x" * 32_768}
    assert len(automations.parse_create(PERIODIC | {"target": long}).target.instructions) == 32_768
    assert automations.parse_create(PERIODIC | {"timezone": "UTC", "expression": "0 0 1 1 *"}).timezone == "UTC"


def test_an_update_checks_only_what_it_sets():
    request = automations.parse_update({"expression": "0 9 * * 1", "timezone": "America/New_York",
                                        "run_at": FUTURE, "metadata": {"k": "v"}})
    assert (request.expression, request.timezone, request.run_at, request.metadata) == (
        "0 9 * * 1", "America/New_York", FUTURE, {"k": "v"})
    assert not request.given("name") and not request.given("target")
    assert not automations.parse_update({}).model_fields_set
    assert automations.parse_update({"target": EXISTING}).target.session_id == "sess_1"


@pytest.mark.parametrize("member", ["expression", "timezone", "name", "run_at", "target"])
def test_an_update_cannot_null_a_member(member):
    error = _refused(automations.parse_update, {member: None})
    assert error.message == f"Invalid type for '{member}': expected a value, but got null instead."
    assert error.param == member


@pytest.mark.parametrize("body, message, param", [
    ({"timezone": "Europe/Atlantis"},
     "Invalid 'timezone': 'Europe/Atlantis' is not an IANA time zone name (e.g. 'Europe/Paris', 'UTC').", "timezone"),
    ({"expression": "0 0 1 * 1"}, "restricts both day-of-month and day-of-week", "expression"),
    ({"run_at": 5}, "Invalid 'run_at': 5 is not in the future; expected a Unix timestamp in seconds after now.",
     "run_at"),
    ({"type": "once"}, "Unknown parameter: 'type'.", "type"),
    ({"metadata": {"k" * 65: "v"}}, "Invalid property name in 'metadata': '" + "k" * 65 + "' is too long.",
     "metadata." + "k" * 65),
])
def test_an_invalid_update_is_a_400(body, message, param):
    error = _refused(automations.parse_update, body)
    assert message in error.message and error.param == param


@pytest.mark.parametrize("run_at, now, why", [
    (100, 100, "not in the future"),             # now is not in the future
    (99, 100, "not in the future"),
    (253_402_300_800, 100, "too far in the future"),
])
def test_run_at_must_be_after_now_and_before_the_year_10000(run_at, now, why):
    error = _refused(automations.check_run_at, run_at, "target.run_at", now=now)
    assert why in error.message and error.param == "target.run_at"


def test_run_at_one_second_after_now_is_accepted():
    automations.check_run_at(101, now=100)
    automations.check_run_at(253_402_300_799, now=100)


@pytest.mark.parametrize("name", ["UTC", "Europe/Paris", "America/Argentina/Buenos_Aires", "Asia/Kolkata"])
def test_iana_time_zones_are_accepted(name):
    automations.check_timezone(name)


@pytest.mark.parametrize("name", ["utc ", "Paris", "+02:00", "/etc/localtime", "Europe/Paris/"])
def test_what_is_not_an_iana_name_is_refused_with_its_param(name):
    error = _refused(automations.check_timezone, name, "tz")
    assert error.param == "tz" and f"'{name}' is not an IANA time zone name" in error.message


# ---- cron: the day-of-week mappings not in test_automations_cron.py --------------------------------------

@pytest.mark.parametrize("standard, eventbridge, back", [
    ("0 0 * * 6-7", "cron(0 0 ? * 7,1 *)", "0 0 * * 6,0"),       # Saturday-Sunday
    ("0 0 * * 0-6", "cron(0 0 ? * 1-7 *)", "0 0 * * 0-6"),
    ("0 0 * * 1,3,5", "cron(0 0 ? * 2,4,6 *)", "0 0 * * 1,3,5"),
    ("0 0 * * sat", "cron(0 0 ? * 7 *)", "0 0 * * 6"),
    ("0 0 * * FRI-SUN", "cron(0 0 ? * 6-7,1 *)", "0 0 * * 5-6,0"),  # SUN ending a range is 7, as croniter reads it
    ("0 0 * * sat-sun", "cron(0 0 ? * 7,1 *)", "0 0 * * 6,0"),
    ("5 4 * 1/3 *", "cron(5 4 * 1/3 ? *)", "5 4 * 1/3 *"),
    ("0 */6 * */2 *", "cron(0 0/6 * 1/2 ? *)", "0 0/6 * 1/2 *"),
])
def test_day_of_week_and_steps_map_onto_eventbridge_and_back(standard, eventbridge, back):
    assert automations.eventbridge_cron(standard) == eventbridge
    assert automations.standard_cron(eventbridge) == back
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    sent, run = croniter(standard, start), croniter(back, start)
    assert [sent.get_next(dt.datetime) for _ in range(15)] == [run.get_next(dt.datetime) for _ in range(15)]


@pytest.mark.parametrize("expression, why", [
    ("0 0 * * 5-1", "has the backwards day-of-week range '5-1'"),
    ("0 0 * * SAT-FRI", "has the backwards day-of-week range 'SAT-FRI'"),
    ("0 0 * * FOO", "is not a valid cron expression"),
    ("0 0 * * 1;2", "has an invalid field"),
])
def test_invalid_day_of_week_is_a_400(expression, why):
    error = _refused(automations.eventbridge_cron, expression)
    assert error.message == f"Invalid 'expression': '{expression}' {why}; {automations.CRON_HELP}."
    assert error.param == "expression"


def test_at_expression_is_utc_with_four_year_digits():
    assert automations.at_expression(0) == "at(1970-01-01T00:00:00)"
    assert automations.at_expression(253_402_300_799) == "at(9999-12-31T23:59:59)"


# ---- the `automations` Agent tool -----------------------------------------------------------------------

def test_the_agent_tool_is_a_plain_function_with_every_argument_described():
    tool = automations.tool_function()
    assert (tool["type"], tool["name"], tool["description"], tool["defer_loading"]) == (
        "function", "automations", automations.TOOL_DESCRIPTION, False)
    parameters = tool["parameters"]
    assert parameters["required"] == ["action"] and parameters["additionalProperties"] is False
    properties = parameters["properties"]
    assert set(properties) == {"action", "automation_id", "name", "instructions", "expression", "timezone", "run_at"}
    assert properties["action"]["enum"] == ["create", "list", "update", "delete"]
    assert properties["run_at"]["type"] == "integer" and properties["automation_id"]["type"] == "string"
    assert (properties["name"]["minLength"], properties["name"]["maxLength"]) == (1, 256)
    for name, prop in properties.items():
        # an optional argument is its plain type (no anyOf with null), without pydantic's title and default
        assert "anyOf" not in prop and "title" not in prop and "default" not in prop
        assert prop["description"] == automations._TOOL_FIELDS[name]


def test_the_agent_tool_arguments_are_validated_as_the_model_sends_them():
    call = automations.AgentToolCall.model_validate({"action": "create", "instructions": "wake", "run_at": FUTURE})
    assert (call.action, call.run_at, call.expression) == ("create", FUTURE, None)
