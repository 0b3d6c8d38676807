"""EventBridge Scheduler, run locally: the schedules live in moto (created by the automations function
through the scheduler API, with its IAM checked), and this runner fires them as the service does.

moto stores schedules but never runs them. The runner reads each ENABLED schedule of the automations'
group, evaluates its expression in its time zone with croniter (PyPI; `cron(...)` back to the five standard
fields, `at(...)` once), and at each occurrence invokes the schedule's target function with its Input,
`<aws.scheduler.scheduled-time>` filled in, as EventBridge Scheduler does; a failed invocation is retried
with backoff for the same occurrence. A schedule changed (updated, resumed) runs its next occurrence after the
change, never one it missed while disabled, as EventBridge Scheduler does. `fire_next(name)` runs a schedule's
next occurrence at once (in-process tests). `AGENTS_CORE_SCHEDULES_FIRE_NOW` (`1`: every schedule; or a
comma-separated list of tenants: only their schedules) runs a schedule's next occurrence, still computed from
its expression and time zone and each occurrence once, as soon as the runner sees the schedule created,
updated or resumed, and the later ones at their time; so a test of a daily schedule need not wait a day, and
the shared e2e stack fires at once only for the tenant its schedule tests use.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Optional, Union
from zoneinfo import ZoneInfo

from agents_contract.automations import standard_cron

from . import apigw, template

log = logging.getLogger("local.scheduler")
GROUP = "AutomationsScheduleGroup"  # the group's name here (its logical id: the template's Ref of it, locally)
ROLE_ARN = f"arn:aws:iam::{template.ACCOUNT}:role/AutomationsSchedulerRole"
FUNCTION = "AutomationsFunction"
PLACEHOLDER = "<aws.scheduler.scheduled-time>"
ENV = ("AUTOMATIONS_SCHEDULE_GROUP", "AUTOMATIONS_SCHEDULER_ROLE_ARN", "AUTOMATIONS_FUNCTION_ARN")


def setup(client: Any) -> dict[str, str]:
    """Create the schedule group and name it, the role and the target to the automations function."""
    try:
        client.create_schedule_group(Name=GROUP)
    except client.exceptions.ConflictException:
        pass
    values = dict(zip(ENV, (GROUP, ROLE_ARN, template.function_arn(FUNCTION)), strict=True))
    os.environ.update(values)
    return values


def next_occurrence(schedule: dict[str, Any], after: dt.datetime) -> Optional[dt.datetime]:
    """The schedule's first occurrence strictly after `after` (UTC), or None (an `at()` already past)."""
    expression = schedule["ScheduleExpression"]
    zone = ZoneInfo(schedule.get("ScheduleExpressionTimezone") or "UTC")
    if expression.startswith("at("):
        when = dt.datetime.fromisoformat(expression[3:-1]).replace(tzinfo=zone).astimezone(dt.UTC)
        return when if when > after else None
    from croniter import croniter

    start = after.astimezone(zone)
    return croniter(standard_cron(expression), start).get_next(dt.datetime).astimezone(dt.UTC)


def fire_now_setting(value: str) -> Union[bool, frozenset[str]]:
    """AGENTS_CORE_SCHEDULES_FIRE_NOW: `1` every schedule, `0` or empty none, else the tenants whose do."""
    value = value.strip()
    if value in ("", "0"):
        return False
    return True if value == "1" else frozenset(t.strip() for t in value.split(",") if t.strip())


class LocalScheduler:
    def __init__(self, client: Any, handlers: dict[str, apigw.Handler],
                 fire_now: Union[bool, Collection[str], None] = None, clock: Callable[[], float] = time.time):
        self.client, self.handlers, self.clock = client, handlers, clock
        if fire_now is None:
            fire_now = fire_now_setting(os.environ.get("AGENTS_CORE_SCHEDULES_FIRE_NOW", "0"))
        self.fire_now = fire_now if isinstance(fire_now, bool) else frozenset(fire_now)
        self._last: dict[str, dt.datetime] = {}  # schedule -> the occurrence it last ran
        self._versions: dict[str, Any] = {}  # schedule -> the modification the runner last saw
        self._definitions: dict[tuple[str, Any], dict[str, Any]] = {}  # (name, last modified) -> definition
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def _now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.clock(), dt.UTC)

    def _schedules(self) -> list[dict[str, Any]]:
        """The ENABLED schedules, each read again only when it changed (one list call a tick otherwise)."""
        out = []
        for page in self.client.get_paginator("list_schedules").paginate(GroupName=GROUP, State="ENABLED"):
            for summary in page["Schedules"]:
                version = (summary["Name"], summary.get("LastModificationDate"))
                if version not in self._definitions:
                    try:
                        self._definitions[version] = self.client.get_schedule(Name=summary["Name"], GroupName=GROUP)
                    except self.client.exceptions.ResourceNotFoundException:
                        continue  # deleted meanwhile
                out.append(self._definitions[version])
        return out

    def _invoke(self, schedule: dict[str, Any], occurrence: dt.datetime) -> bool:
        target = schedule["Target"]
        payload = (target.get("Input") or "{}").replace(PLACEHOLDER, occurrence.strftime("%Y-%m-%dT%H:%M:%SZ"))
        name = target["Arn"].split(":")[6]
        for attempt in range(5):  # the schedule's RetryPolicy, shortened: the same occurrence each time
            try:
                self.handlers[name](json.loads(payload), apigw.LambdaContext(name))
                return True
            except Exception:  # noqa: BLE001 - Lambda's error; EventBridge Scheduler retries
                log.warning("schedule %s: invocation failed (attempt %d)", schedule["Name"], attempt + 1,
                            exc_info=True)
                time.sleep(min(2.0, 0.1 * 2 ** attempt))
        return False

    def _baseline(self, schedule: dict[str, Any], field: str = "CreationDate") -> dt.datetime:
        created = schedule.get(field) or self._now()
        return created.astimezone(dt.UTC) if isinstance(created, dt.datetime) else self._now()

    def _fires_now(self, schedule: dict[str, Any]) -> bool:
        if isinstance(self.fire_now, bool):
            return self.fire_now
        payload = json.loads(schedule["Target"].get("Input") or "{}")
        return isinstance(payload, dict) and payload.get("tenant") in self.fire_now

    def tick(self) -> int:
        """Fire every occurrence now due; the count fired."""
        fired = 0
        now = self._now()
        for schedule in self._schedules():
            name = schedule["Name"]
            with self._lock:
                last = self._last.get(name) or self._baseline(schedule)
                changed = self._versions.get(name) != schedule.get("LastModificationDate")
                if changed:  # created, updated or resumed: its next occurrence after the change
                    self._versions[name] = schedule.get("LastModificationDate")
                    last = self._last[name] = max(last, self._baseline(schedule, "LastModificationDate"))
                due = next_occurrence(schedule, last)
                if due is None or (due > now and not (changed and self._fires_now(schedule))):
                    continue
                self._last[name] = due
            fired += self._invoke(schedule, due)
        return fired

    def fire_next(self, name: str) -> dt.datetime:
        """Run the schedule's next occurrence at once (its own scheduled time); the occurrence run."""
        schedule = self.client.get_schedule(Name=name, GroupName=GROUP)
        with self._lock:
            last = self._last.get(name) or max(self._baseline(schedule), self._now())
            due = next_occurrence(schedule, last)
            if due is None:
                raise ValueError(f"schedule {name} has no further occurrence")
            self._last[name] = due
        self._invoke(schedule, due)
        return due

    def start(self, interval: float = 1.0) -> threading.Thread:
        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.tick()
                except Exception:  # noqa: BLE001 - the runner keeps running
                    log.exception("scheduler tick failed")

        thread = threading.Thread(target=loop, name="local-scheduler", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
