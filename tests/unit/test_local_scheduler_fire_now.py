"""The local EventBridge Scheduler's test setting (AGENTS_CORE_SCHEDULES_FIRE_NOW) and its resumed schedules:
a schedule of a listed tenant runs its next occurrence (from its expression and time zone) as soon as the runner
sees it created or resumed, each occurrence once; another tenant's waits for its time; a resumed schedule never
runs an occurrence it missed while disabled."""

from __future__ import annotations

import datetime as dt
import json
import time

import boto3
import pytest
from moto import mock_aws

from local import scheduler as local_scheduler

UTC = dt.UTC
TARGET = "arn:aws:lambda:us-east-1:123456789012:function:AutomationsFunction"


def put(client, name, tenant, state="ENABLED", update=False):
    call = client.update_schedule if update else client.create_schedule
    call(Name=name, GroupName=local_scheduler.GROUP, ScheduleExpression="cron(* * * * ? *)",
         ScheduleExpressionTimezone="Asia/Kolkata", FlexibleTimeWindow={"Mode": "OFF"}, State=state,
         Target={"Arn": TARGET, "RoleArn": local_scheduler.ROLE_ARN,
                 "Input": json.dumps({"tenant": tenant, "automation_id": name,
                                      "scheduled_time": local_scheduler.PLACEHOLDER})})


@pytest.fixture
def scheduler():
    with mock_aws():
        client = boto3.client("scheduler", region_name="us-east-1")
        local_scheduler.setup(client)
        fired: list[dict] = []
        frozen = time.time()  # the runner's clock stands still: only the setting makes anything due

        def runner(fire_now):
            return local_scheduler.LocalScheduler(client, {"AutomationsFunction": lambda e, _: fired.append(e)},
                                                  fire_now=fire_now, clock=lambda: frozen)

        yield client, runner, fired, frozen


def occurrence(event):
    return dt.datetime.fromisoformat(event["scheduled_time"].replace("Z", "+00:00"))


def test_the_setting_names_tenants():
    assert local_scheduler.fire_now_setting("1") is True
    assert local_scheduler.fire_now_setting("0") is False and local_scheduler.fire_now_setting("") is False
    assert local_scheduler.fire_now_setting("e2e-a, e2e-b") == frozenset({"e2e-a", "e2e-b"})


def test_a_listed_tenants_schedule_fires_its_next_occurrence_when_created_and_when_resumed(scheduler):
    client, runner, fired, frozen = scheduler
    run = runner({"fast"})
    put(client, "auto_fast", "fast")
    put(client, "auto_slow", "slow")
    assert run.tick() == 1 and run.tick() == 0  # the listed tenant's only, each occurrence once
    first = occurrence(fired[0])
    assert fired[0]["automation_id"] == "auto_fast"
    assert first.second == 0 and 0 < first.timestamp() - frozen <= 60  # the next minute boundary, not "now"
    put(client, "auto_fast", "fast", state="DISABLED", update=True)
    assert run.tick() == 0  # paused: nothing
    put(client, "auto_fast", "fast", update=True)
    assert run.tick() == 1 and run.tick() == 0  # resumed: its next occurrence at once
    assert occurrence(fired[1]) == first + dt.timedelta(minutes=1)
    assert [e["automation_id"] for e in fired] == ["auto_fast", "auto_fast"]
    assert runner(False).tick() == 0 and runner(True).tick() == 2  # off: none; 1: every schedule


def test_a_resumed_schedule_never_runs_what_it_missed_while_disabled(scheduler):
    client, runner, fired, frozen = scheduler
    run = runner(False)
    put(client, "auto_1", "t")
    assert run.tick() == 0
    run._last["auto_1"] = dt.datetime.fromtimestamp(frozen, UTC) - dt.timedelta(minutes=10)  # noqa: SLF001 - ran 10 min ago
    put(client, "auto_1", "t", state="DISABLED", update=True)
    put(client, "auto_1", "t", update=True)  # resumed now: the occurrences of the last ten minutes are gone
    assert run.tick() == 0 and fired == []
