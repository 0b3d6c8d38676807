"""One EventBridge Scheduler schedule per automation, in the automations' own schedule group.

A periodic automation is `cron(...)` in its IANA time zone; a one-time one is `at(...)` in UTC. Each schedule
invokes the automations function through the scheduler's role (template.yaml: it may invoke only that
function) with `{tenant, automation_id, scheduled_time}`: EventBridge Scheduler fills
`<aws.scheduler.scheduled-time>` with the occurrence, which names the invocation (one per occurrence).
Pausing an automation disables its schedule; deleting it deletes the schedule.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Optional

from botocore.exceptions import ClientError

from agents_contract import automations as contract

from ..settings import get_settings

SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


class Schedules:
    def __init__(self, client: Any, group: str, role_arn: str, target_arn: str):
        self.client, self.group, self.role_arn, self.target_arn = client, group, role_arn, target_arn

    def _definition(self, tenant: str, automation: dict[str, Any]) -> dict[str, Any]:
        if automation["type"] == "periodic":
            when = {"ScheduleExpression": contract.eventbridge_cron(automation["expression"]),
                    "ScheduleExpressionTimezone": automation["timezone"]}
        else:
            when = {"ScheduleExpression": contract.at_expression(int(automation["run_at"])),
                    "ScheduleExpressionTimezone": "UTC"}
        payload = {"tenant": tenant, "automation_id": automation["id"], "scheduled_time": SCHEDULED_TIME}
        return {
            "Name": automation["id"], "GroupName": self.group, **when,
            "State": "ENABLED" if automation["status"] == "active" else "DISABLED",
            "FlexibleTimeWindow": {"Mode": "OFF"},
            "Target": {"Arn": self.target_arn, "RoleArn": self.role_arn, "Input": json.dumps(payload),
                       # a delivery that fails for Lambda's own reasons is retried; each retry is the same
                       # occurrence, so it never makes a second Session
                       "RetryPolicy": {"MaximumEventAgeInSeconds": 3600, "MaximumRetryAttempts": 20}},
        }

    def create(self, tenant: str, automation: dict[str, Any]) -> None:
        self.client.create_schedule(**self._definition(tenant, automation))

    def update(self, tenant: str, automation: dict[str, Any]) -> None:
        """UpdateSchedule replaces the whole definition (state included)."""
        self.client.update_schedule(**self._definition(tenant, automation))

    def delete(self, automation_id: str) -> None:
        try:
            self.client.delete_schedule(Name=automation_id, GroupName=self.group)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                raise


@lru_cache(maxsize=1)
def default_schedules() -> Schedules:
    from ..aws import botocore_session

    settings = get_settings()
    client = botocore_session().create_client("scheduler", region_name=settings.aws_region)
    return Schedules(client, settings.automations_schedule_group or "",
                     settings.automations_scheduler_role_arn or "", settings.automations_function_arn or "")


def scheduled_at(value: Optional[str]) -> Optional[int]:
    """`<aws.scheduler.scheduled-time>` (ISO 8601, UTC) as Unix seconds."""
    if not value or value == SCHEDULED_TIME:
        return None
    from datetime import datetime

    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
