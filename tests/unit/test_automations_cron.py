"""Automation schedules as data (issue 39): a standard five-field cron expression mapped onto EventBridge
Scheduler's six-field `cron(...)` and back, what EventBridge cannot run refused with a 400 saying so, `at(...)`
for a one-time run, and the local scheduler's occurrences in the schedule's time zone (croniter), DST included.
Pure, except the last test (moto's scheduler, in process)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from agents_contract import automations as contract
from agents_contract.errors import InvalidRequest
from local import scheduler as local_scheduler

UTC = dt.UTC


@pytest.mark.parametrize("standard, eventbridge", [
    ("* * * * *", "cron(* * * * ? *)"),
    ("*/5 9-17 * * 1-5", "cron(0/5 9-17 ? * 2-6 *)"),        # a step from *, Monday-Friday (EventBridge: 2-6)
    ("0 12 1 * *", "cron(0 12 1 * ? *)"),                    # day-of-month: day-of-week is ?
    ("0 0 * * 0", "cron(0 0 ? * 1 *)"),                      # Sunday is 0 in cron, 1 in EventBridge
    ("0 0 * * 7", "cron(0 0 ? * 1 *)"),                      # ... and 7 too
    ("30 8 * * 5-7", "cron(30 8 ? * 6-7,1 *)"),              # a range ending on Sunday
    ("0 0 * * MON-FRI", "cron(0 0 ? * 2-6 *)"),
    ("15 3 */2 * *", "cron(15 3 1/2 * ? *)"),
])
def test_a_standard_cron_expression_maps_onto_eventbridge_and_back(standard, eventbridge):
    assert contract.eventbridge_cron(standard) == eventbridge
    round_trip = contract.standard_cron(eventbridge)
    from croniter import croniter

    start = dt.datetime(2026, 1, 1, tzinfo=UTC)
    a, b = croniter(standard, start), croniter(round_trip, start)
    assert [a.get_next(dt.datetime) for _ in range(20)] == [b.get_next(dt.datetime) for _ in range(20)]


@pytest.mark.parametrize("expression, why", [
    ("* * * *", "has 4 fields"), ("* * * * * *", "has 6 fields"), ("@daily", "has 1 fields"),
    ("61 * * * *", "is not a valid cron expression"), ("0 0 1 * 1", "restricts both day-of-month and day-of-week"),
    ("0 0 * * */2", "uses a step in day-of-week"), ("0 0 ? * 1", "has an invalid field"),
])
def test_what_eventbridge_cannot_run_is_a_400_naming_the_expression(expression, why):
    with pytest.raises(InvalidRequest) as caught:
        contract.eventbridge_cron(expression)
    assert caught.value.param == "expression" and why in caught.value.message and expression in caught.value.message


def test_time_zones_and_run_at():
    contract.check_timezone("America/New_York")
    for bad in ("Mars/Olympus", "", "../etc/passwd"):
        with pytest.raises(InvalidRequest, match="IANA"):
            contract.check_timezone(bad)
    with pytest.raises(InvalidRequest, match="not in the future"):
        contract.check_run_at(1_000, now=2_000)
    assert contract.at_expression(1_800_000_000) == "at(2027-01-15T08:00:00)"


def test_occurrences_follow_the_time_zone_across_a_dst_change():
    schedule = {"ScheduleExpression": contract.eventbridge_cron("0 9 * * *"), "ScheduleExpressionTimezone": "Europe/Paris"}
    before = local_scheduler.next_occurrence(schedule, dt.datetime(2026, 3, 28, 12, tzinfo=UTC))
    after = local_scheduler.next_occurrence(schedule, before)
    assert (before, after) == (dt.datetime(2026, 3, 29, 7, tzinfo=UTC),  # 09:00 CEST (UTC+2) on the change day
                               dt.datetime(2026, 3, 30, 7, tzinfo=UTC))
    winter = local_scheduler.next_occurrence(schedule, dt.datetime(2026, 1, 10, 12, tzinfo=UTC))
    assert winter == dt.datetime(2026, 1, 11, 8, tzinfo=UTC)  # 09:00 CET (UTC+1)
    once = {"ScheduleExpression": "at(2027-01-15T08:00:00)", "ScheduleExpressionTimezone": "UTC"}
    assert local_scheduler.next_occurrence(once, dt.datetime(2027, 1, 1, tzinfo=UTC)).timestamp() == 1_800_000_000
    assert local_scheduler.next_occurrence(once, dt.datetime(2027, 2, 1, tzinfo=UTC)) is None


def test_the_local_scheduler_fires_each_occurrence_once_with_its_scheduled_time():
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        local_scheduler.setup(client)
        fired = []
        clock = [dt.datetime(2030, 1, 1, 10, 0, 30, tzinfo=UTC).timestamp()]
        runner = local_scheduler.LocalScheduler(client, {"AutomationsFunction": lambda event, _: fired.append(event)},
                                                fire_now=False, clock=lambda: clock[0])
        client.create_schedule(Name="auto_1", GroupName=local_scheduler.GROUP, ScheduleExpression="cron(* * * * ? *)",
                               ScheduleExpressionTimezone="Asia/Kolkata", FlexibleTimeWindow={"Mode": "OFF"},
                               State="ENABLED", Target={
                                   "Arn": "arn:aws:lambda:us-east-1:123456789012:function:AutomationsFunction",
                                   "RoleArn": local_scheduler.ROLE_ARN,
                                   "Input": json.dumps({"scheduled_time": local_scheduler.PLACEHOLDER})})
        runner._last["auto_1"] = dt.datetime(2030, 1, 1, 10, 0, tzinfo=UTC)  # noqa: SLF001 - created at 10:00
        assert runner.tick() == 0  # 10:01 is not due at 10:00:30
        clock[0] += 45
        assert runner.tick() == 1 and runner.tick() == 0  # due once at 10:01:15
        assert fired == [{"scheduled_time": "2030-01-01T10:01:00Z"}]
        assert runner.fire_next("auto_1") == dt.datetime(2030, 1, 1, 10, 2, tzinfo=UTC)  # tests: the next one now
        client.update_schedule(Name="auto_1", GroupName=local_scheduler.GROUP, ScheduleExpression="cron(* * * * ? *)",
                               FlexibleTimeWindow={"Mode": "OFF"}, State="DISABLED",
                               Target={"Arn": "arn:aws:lambda:us-east-1:123456789012:function:AutomationsFunction",
                                       "RoleArn": local_scheduler.ROLE_ARN})
        clock[0] += 600
        assert runner.tick() == 0  # a paused (disabled) schedule does not fire
