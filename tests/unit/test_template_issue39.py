"""template.yaml for automations and webhooks (issue 39): the schedule group, the scheduler's role that may invoke
one function only, the delivery queue and its dead-letter queue, and each function's least privilege - read as
data, and checked with the local IAM evaluator (local/iam.py) the way AWS would decide the calls. Pure."""

from __future__ import annotations

import pytest

from agents_core.settings import Settings
from local import iam, template

R = template.resources()
GROUP = "AutomationsScheduleGroup"  # the group's name locally (its logical id)


def props(name):
    return R[name]["Properties"]


def statements(function):
    return [s for p in props(function)["Policies"] for s in p["Statement"]]


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", "agents-core-test")
    monkeypatch.setenv("VAULT_KEY_ID", "1234abcd-12ab-34cd-56ef-1234567890ab")


def test_one_schedule_group_and_a_scheduler_role_that_invokes_only_the_automations_function():
    assert R[GROUP]["Type"] == "AWS::Scheduler::ScheduleGroup"
    role = props("AutomationsSchedulerRole")
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    assert set(trust["Condition"]) == {"StringEquals", "ArnLike"}  # this account's schedules of this group only
    assert "${AutomationsScheduleGroup}" in trust["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Sub"]
    [policy] = role["Policies"]
    [grant] = policy["PolicyDocument"]["Statement"]
    assert grant["Action"] == "lambda:InvokeFunction"
    name = props("AutomationsFunction")["FunctionName"]["Fn::Sub"]
    assert grant["Resource"]["Fn::Sub"].endswith(f":function:{name}")  # that function, no wildcard
    env = props("AutomationsFunction")["Environment"]["Variables"]
    assert env["AUTOMATIONS_SCHEDULER_ROLE_ARN"] == {"Fn::GetAtt": ["AutomationsSchedulerRole", "Arn"]}
    assert env["AUTOMATIONS_SCHEDULE_GROUP"] == {"Ref": GROUP}


def test_the_automations_function_manages_schedules_of_its_group_and_passes_only_the_scheduler_role():
    granted = statements("AutomationsFunction")
    scheduler = [s for s in granted if any(str(a).startswith("scheduler:") for a in s["Action"])]
    [schedules] = scheduler
    assert set(schedules["Action"]) == {"scheduler:CreateSchedule", "scheduler:UpdateSchedule",
                                        "scheduler:DeleteSchedule"}
    assert schedules["Resource"]["Fn::Sub"].endswith(":schedule/${AutomationsScheduleGroup}/*")
    [pass_role] = [s for s in granted if s["Action"] == "iam:PassRole"]
    assert pass_role["Resource"] == {"Fn::GetAtt": ["AutomationsSchedulerRole", "Arn"]}
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_the_delivery_queue_dead_letters_after_every_attempt_of_the_retry_schedule():
    queue = props("WebhookDeliveryQueue")
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookDeadLetterQueue", "Arn"]}
    delays = [int(s) for s in Settings().webhook_retry_seconds.split(",")]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == len(delays) + 1  # the first attempt and each retry
    assert delays[:2] == [5, 30] and max(delays) <= 43200  # SQS hides a message at most 12 hours
    assert queue["VisibilityTimeout"] >= 2 * props("WebhookDeliveryFunction")["Timeout"]
    assert queue["MessageRetentionPeriod"] > sum(delays)
    assert props("WebhookDeadLetterQueue")["MessageRetentionPeriod"] == 1209600
    [event] = props("WebhookDeliveryFunction")["Events"].values()
    assert event["Type"] == "SQS" and event["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


@pytest.mark.parametrize("principal, service, operation, params, allowed", [
    # the automations function: its group's schedules, the scheduler role passed to the scheduler only
    ("AutomationsFunction", "scheduler", "CreateSchedule",
     {"Name": "auto_1", "GroupName": GROUP, "Target": {"RoleArn": f"arn:aws:iam::{template.ACCOUNT}:role/"
                                                                  "AutomationsSchedulerRole"}}, True),
    ("AutomationsFunction", "scheduler", "CreateSchedule", {"Name": "auto_1", "GroupName": "default"}, False),
    ("AutomationsFunction", "scheduler", "CreateSchedule",
     {"Name": "auto_1", "GroupName": GROUP, "Target": {"RoleArn": f"arn:aws:iam::{template.ACCOUNT}:role/Admin"}},
     False),
    ("AutomationsFunction", "kms", "Decrypt", {"EncryptionContext": {"automation_id": "auto_1"}}, True),
    ("AutomationsFunction", "kms", "Decrypt", {"EncryptionContext": {"webhook_endpoint_id": "whep_1"}}, False),
    ("ReadsFunction", "scheduler", "DeleteSchedule", {"Name": "auto_1", "GroupName": GROUP}, False),
    # webhooks: the delivery function opens endpoint secrets only, and only hides its own queue's messages
    ("WebhookDeliveryFunction", "kms", "Decrypt", {"EncryptionContext": {"webhook_endpoint_id": "whep_1"}}, True),
    ("WebhookDeliveryFunction", "kms", "Decrypt", {"EncryptionContext": {"automation_id": "auto_1"}}, False),
    ("WebhookDeliveryFunction", "sqs", "ChangeMessageVisibility",
     {"QueueUrl": f"https://sqs.us-east-1.amazonaws.com/{template.ACCOUNT}/WebhookDeliveryQueue"}, True),
    ("WebhookDeliveryFunction", "sqs", "SendMessage",
     {"QueueUrl": f"https://sqs.us-east-1.amazonaws.com/{template.ACCOUNT}/WebhookDeliveryQueue"}, False),
    ("WebhooksFunction", "kms", "GenerateDataKey", {"EncryptionContext": {"webhook_endpoint_id": "whep_1"}}, True),
    ("WebhooksFunction", "kms", "Decrypt", {"EncryptionContext": {"credential_id": "cred_1"}}, False),
    # the outbox consumer queues deliveries (a batch is authorized as sqs:SendMessage)
    ("StreamFunction", "sqs", "SendMessageBatch",
     {"QueueUrl": f"https://sqs.us-east-1.amazonaws.com/{template.ACCOUNT}/WebhookDeliveryQueue"}, True),
    ("ResultsFunction", "sqs", "SendMessageBatch",
     {"QueueUrl": f"https://sqs.us-east-1.amazonaws.com/{template.ACCOUNT}/WebhookDeliveryQueue"}, False),
    # the outbox consumer hands a call of the automations Agent tool to the automations function, and only to it
    ("StreamFunction", "lambda", "Invoke", {"FunctionName": template.function_arn("AutomationsFunction")}, True),
    ("StreamFunction", "lambda", "Invoke", {"FunctionName": template.function_arn("SettleFunction")}, False),
])
def test_least_privilege_as_the_local_iam_check_decides_it(env, principal, service, operation, params, allowed):
    if service == "kms":
        params = {"KeyId": "1234abcd-12ab-34cd-56ef-1234567890ab", **params}
    assert (iam.denial(principal, service, operation, params) is None) == allowed
