"""template.yaml is operable on day one (issue 36, items 1-3): every alarm watches its metric at its threshold and
notifies the one SNS topic; every function, both workflows and every API stage log to a group with a retention; the
workflows log at ERROR without execution data; access logs are JSON without a secret; the EMF metrics need no
`cloudwatch:PutMetricData` and never take a tenant, Session, Turn or connection id as a dimension."""

import ast
import itertools
import json
import re
from pathlib import Path

import pytest

from agents_core import metrics
from local import template

ROOT = Path(__file__).resolve().parents[2]
T = template.load(str(ROOT / "template.yaml"))
RES = T["Resources"]
NAMESPACE = {"Fn::Sub": "AgentsCore/${AWS::StackName}"}
SERVICE = [{"Name": "service", "Value": "agents-core"}]


def of_type(kind):
    return {k: v for k, v in RES.items() if v["Type"] == kind}


def alarm_metrics(alarm):
    """(namespace, metric name, dimensions, stat) of each metric the alarm reads."""
    props = alarm["Properties"]
    if "MetricName" in props:
        return [(props["Namespace"], props["MetricName"], props["Dimensions"], props["Statistic"])]
    return [(m["MetricStat"]["Metric"]["Namespace"], m["MetricStat"]["Metric"]["MetricName"],
             m["MetricStat"]["Metric"]["Dimensions"], m["MetricStat"]["Stat"]) for m in props["Metrics"] if "MetricStat" in m]


def expression(alarm):
    return next((m["Expression"] for m in alarm["Properties"].get("Metrics", []) if "Expression" in m), None)


FUNCTIONS = sorted(of_type("AWS::Serverless::Function"))
REASONS = {"HeartbeatTimeout": "heartbeat_timeout", "RuntimeLost": "runtime_lost", "HarnessError": "harness_error",
           "WaitExpired": "wait_expired", "ExecutionLost": "execution_lost"}

# (alarm, [(namespace, metric)], comparison, threshold)
ALARMS = [
    ("OutboxDlqAlarm", [("AWS/SQS", "ApproximateNumberOfMessagesVisible")], "GreaterThanThreshold", 0),
    ("WebhookDlqAlarm", [("AWS/SQS", "ApproximateNumberOfMessagesVisible")], "GreaterThanThreshold", 0),
    ("TurnExecutionsFailedAlarm", [("AWS/States", "ExecutionsFailed"), ("AWS/States", "ExecutionsTimedOut")],
     "GreaterThanThreshold", 0),
    ("RestApi5xxAlarm", [("AWS/ApiGateway", "5XXError"), ("AWS/ApiGateway", "Count")], "GreaterThanThreshold",
     {"Ref": "ApiErrorRatePercent"}),
    ("HttpApi5xxAlarm", [("AWS/ApiGateway", "5xx"), ("AWS/ApiGateway", "Count")], "GreaterThanThreshold",
     {"Ref": "ApiErrorRatePercent"}),
    ("WebSocket5xxAlarm", [("AWS/ApiGateway", "ExecutionError"), ("AWS/ApiGateway", "MessageCount"),
                           ("AWS/ApiGateway", "ConnectCount")], "GreaterThanThreshold", {"Ref": "ApiErrorRatePercent"}),
    ("WebSocketIntegrationErrorsAlarm", [("AWS/ApiGateway", "IntegrationError"), ("AWS/ApiGateway", "MessageCount"),
                                         ("AWS/ApiGateway", "ConnectCount")], "GreaterThanThreshold",
     {"Ref": "ApiErrorRatePercent"}),
    ("TableThrottledAlarm", [("AWS/DynamoDB", "ReadThrottleEvents"), ("AWS/DynamoDB", "WriteThrottleEvents")],
     "GreaterThanThreshold", 0),
    ("TurnFailureRateAlarm", [(NAMESPACE, metrics.TURNS_COMPLETED), (NAMESPACE, metrics.TURNS_CANCELLED),
                              (NAMESPACE, metrics.TURNS_FAILED)], "GreaterThanThreshold",
     {"Ref": "TurnFailureRatePercent"}),
    *[(f"TurnFailures{name}Alarm", [(NAMESPACE, metrics.TURNS_COMPLETED), (NAMESPACE, metrics.TURNS_CANCELLED),
                                    (NAMESPACE, metrics.TURNS_FAILED), (NAMESPACE, metrics.TURNS_FAILED)],
       "GreaterThanThreshold", {"Ref": "TurnFailureRatePercent"}) for name in REASONS],
    *[(f"{fn}ErrorsAlarm", [("AWS/Lambda", "Errors"), ("AWS/Lambda", "Throttles")], "GreaterThanOrEqualToThreshold",
       {"Ref": "LambdaErrorsPerFiveMinutes"}) for fn in FUNCTIONS],
]


@pytest.mark.parametrize(("name", "watched", "comparison", "threshold"), ALARMS, ids=[a[0] for a in ALARMS])
def test_each_alarm_watches_its_metric_at_its_threshold_and_notifies_the_topic(name, watched, comparison, threshold):
    assert name in RES, f"declare {name} (every function has an Errors + Throttles alarm and a log group)"
    alarm = RES[name]
    props = alarm["Properties"]
    assert alarm["Type"] == "AWS::CloudWatch::Alarm"
    assert sorted((ns if isinstance(ns, str) else json.dumps(ns), m) for ns, m, _, _ in alarm_metrics(alarm)) == \
        sorted((ns if isinstance(ns, str) else json.dumps(ns), m) for ns, m in watched)
    assert (props["ComparisonOperator"], props["Threshold"]) == (comparison, threshold)
    assert props["AlarmActions"] == {"Fn::If": ["Notify", [{"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"},
                                                                          {"Ref": "AlarmTopicArn"}]}],
                                                {"Ref": "AWS::NoValue"}]}
    assert props["TreatMissingData"] == "notBreaching" and props["AlarmDescription"]
    if "Metrics" in props:  # metric math: exactly one expression is the alarm's value, over every metric it names
        returned = [m for m in props["Metrics"] if m.get("ReturnData")]
        assert returned == [m for m in props["Metrics"] if "Expression" in m] and len(returned) == 1
        ids = {m["Id"] for m in props["Metrics"] if "MetricStat" in m}
        assert ids <= set(re.findall(r"[a-z_]+", expression(alarm)))


def test_every_alarm_is_in_the_table_above_and_on_the_dashboard():
    assert set(of_type("AWS::CloudWatch::Alarm")) == {a[0] for a in ALARMS}
    body = RES["OperationsDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    widgets = json.loads(body)["widgets"]
    shown = next(w for w in widgets if w["type"] == "alarm")["properties"]["alarms"]
    assert sorted(shown) == sorted(f"${{{a[0]}.Arn}}" for a in ALARMS)
    for name in (metrics.TURNS_STARTED, metrics.TURNS_COMPLETED, metrics.TURNS_FAILED, metrics.TURNS_CANCELLED,
                 metrics.TURN_QUEUE_WAIT, metrics.FUNCTION_ROUND_TRIP, metrics.RUNTIME_CONNECTIONS,
                 metrics.REJECTED_REQUESTS, metrics.OUTBOX_RECORDS_FAILED):
        assert name in body, name
    # every ${...} the body names is a parameter, a resource or a pseudo parameter (Fn::Sub resolves it)
    for ref in re.findall(r"\$\{([^}]+)\}", body):
        assert ref.startswith("AWS::") or ref.split(".")[0] in RES or ref in T["Parameters"], ref


def test_the_emf_alarms_read_the_namespace_and_dimension_sets_the_functions_write():
    assert T["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == NAMESPACE
    for name in ["TurnFailureRateAlarm", *[f"TurnFailures{n}Alarm" for n in REASONS]]:
        dims = [d for ns, _, d, _ in alarm_metrics(RES[name]) if ns == NAMESPACE]
        assert all(d == SERVICE or (len(d) == 1 and d[0]["Name"] == "reason") for d in dims)
    for name, reason in REASONS.items():
        assert reason in metrics.REASONS
        assert [{"Name": "reason", "Value": reason}] in [d for _, _, d, _ in alarm_metrics(RES[f"TurnFailures{name}Alarm"])]


def _conditions(topic_arn, email):
    notify_new = topic_arn == "" and email != ""
    return {"CreateAlarmTopic": notify_new, "UseAlarmTopicArn": topic_arn != ""}


def test_exactly_one_topic_applies_and_both_parameters_are_refused():
    conditions = T["Conditions"]
    assert conditions["CreateAlarmTopic"] == {"Fn::And": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]},
                                                          {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}]}
    assert conditions["UseAlarmTopicArn"] == {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]}
    for arn, email in itertools.product(["", "arn:aws:sns:us-east-1:123456789012:ops"], ["", "ops@example.com"]):
        c = _conditions(arn, email)
        assert not (c["CreateAlarmTopic"] and c["UseAlarmTopicArn"])
    rule = T["Rules"]["OneAlarmTarget"]
    assert rule["RuleCondition"] == conditions["UseAlarmTopicArn"]
    assert rule["Assertions"][0]["Assert"] == {"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}
    topic = RES["AlarmTopic"]
    assert topic["Condition"] == "CreateAlarmTopic"
    assert topic["Properties"]["Subscription"] == [{"Protocol": "email", "Endpoint": {"Ref": "AlarmEmail"}}]


def test_every_function_has_its_log_group_with_the_retention():
    assert T["Parameters"]["LogRetentionDays"]["Default"] == 30
    groups = {g["Properties"].get("LogGroupName", {}).get("Fn::Sub"): g for g in of_type("AWS::Logs::LogGroup").values()
              if isinstance(g["Properties"].get("LogGroupName"), dict)}
    for fn in FUNCTIONS:
        group = groups.get(f"/aws/lambda/${{{fn}}}")
        assert group is not None, f"{fn} has no AWS::Logs::LogGroup named /aws/lambda/${{{fn}}} (declare one)"
    for group in of_type("AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}


def test_the_workflows_log_errors_without_execution_data_through_the_delivery_actions():
    delivery = {"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
                "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies",
                "logs:DescribeLogGroups"}
    machines = of_type("AWS::Serverless::StateMachine")
    assert machines
    for name, machine in machines.items():
        logging = machine["Properties"]["Logging"]
        assert logging["Level"] == "ERROR" and logging["IncludeExecutionData"] is False, name
        assert logging["Destinations"] == [{"CloudWatchLogsLogGroup": {
            "LogGroupArn": {"Fn::GetAtt": ["StateMachineLogGroup", "Arn"]}}}]
        granted = set()
        for policy in machine["Properties"]["Policies"]:
            for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
                if any(str(a).startswith("logs:") for a in statement["Action"]):
                    granted |= set(statement["Action"])
        assert granted == delivery, name
    assert RES["StateMachineLogGroup"]["Properties"]["LogGroupName"] == {
        "Fn::Sub": "/aws/vendedlogs/states/${AWS::StackName}"}


SECRET = re.compile(r"apiKey|authorization|token|\$input|body|requestOverride|header|cookie", re.IGNORECASE)


def _access_logs():
    out = {}
    for name, api in of_type("AWS::Serverless::Api").items():
        out[name] = api["Properties"].get("AccessLogSetting")
    for name, stage in of_type("AWS::ApiGatewayV2::Stage").items():
        out[name] = stage["Properties"].get("AccessLogSettings")
    return out


def test_every_stage_writes_json_access_logs_without_a_secret():
    logs = _access_logs()
    assert set(logs) >= {"PublicApi", "WebSocketStage", "ExecutorApiStage"}
    for name, setting in logs.items():
        assert setting, f"{name} has no access log"
        fields = json.loads(setting["Format"])
        assert {"requestId", "route", "status"} <= set(fields), name
        assert any(k.lower().endswith("latencyms") for k in fields), name
        assert not SECRET.search(setting["Format"]), name
        group = setting["DestinationArn"]["Fn::GetAtt"][0]
        assert RES[group]["Type"] == "AWS::Logs::LogGroup"
    assert json.loads(logs["PublicApi"]["Format"])["tenant"] == "$context.authorizer.tenant"
    for name in ("PublicApi", "WebSocketStage"):  # REST and WebSocket access logs need the account's CloudWatch role
        assert RES[name]["DependsOn"] == "ApiGatewayAccount"
    assert RES["ApiGatewayAccount"]["Properties"]["CloudWatchRoleArn"] == {"Fn::GetAtt": ["ApiGatewayLogsRole", "Arn"]}


def _actions(resource):
    for policy in resource["Properties"].get("Policies") or []:
        for statement in (policy.get("Statement") or []) if isinstance(policy, dict) else []:
            actions = statement.get("Action")
            yield from actions if isinstance(actions, list) else [actions]


def test_emf_needs_no_put_metric_data_anywhere():
    for name, resource in {**of_type("AWS::Serverless::Function"), **of_type("AWS::Serverless::StateMachine")}.items():
        assert not any(str(a).startswith("cloudwatch:") for a in _actions(resource)), name


def _emit_calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "emit":
            yield node


IDENTIFIERS = re.compile(r"tenant|session|turn_id|connection|call_id|request_id|agent", re.IGNORECASE)


def test_no_metric_dimension_is_a_tenant_session_turn_or_connection_id():
    assert not any(IDENTIFIERS.search(d) for d in metrics.DIMENSIONS)
    source = (ROOT / "layers/contract/agents_core/metrics.py").read_text()
    tree = ast.parse(source)
    keys = set()
    for node in ast.walk(tree):  # every dimension set the module builds is a dict literal with constant keys
        if isinstance(node, ast.Dict):
            keys |= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    dimension_keys = keys & ({"harness", "placement", "outcome", "reason", "kind", "code"} | {
        k for k in keys if IDENTIFIERS.search(k)})
    assert dimension_keys and not any(IDENTIFIERS.search(k) for k in dimension_keys), dimension_keys
    # nothing outside the module emits a metric with dimensions of its own
    for path in itertools.chain((ROOT / "layers/contract/agents_core").rglob("*.py"), (ROOT / "functions").rglob("*.py")):
        if path.name == "metrics.py" and path.parent.name == "agents_core":
            continue
        text = path.read_text()
        assert "add_dimension" not in text and "single_metric" not in text, path
        for call in _emit_calls(ast.parse(text)):
            assert not getattr(call.func, "value", None) or getattr(call.func.value, "id", "") != "metrics", path


def test_emit_refuses_a_dimension_outside_the_list(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    with pytest.raises(ValueError, match="session_id"):
        metrics.emit(metrics.TURNS_STARTED, metrics.MetricUnit.Count, 1, {"session_id": "sess_1"})


@pytest.mark.parametrize(("event", "reason"), [
    ({"lost": True, "error": {"Error": "States.HeartbeatTimeout"}}, "heartbeat_timeout"),
    ({"lost": True, "error": {"Error": "States.Timeout"}}, "turn_timeout"),
    ({"lost": True, "error": {"Error": "RuntimeLost", "Cause": "The Runtime's connection closed."}}, "runtime_lost"),
    ({"lost": True, "error": {"Error": "TurnFailedBeforeStart"}}, "failed_before_start"),
    ({"lost": True, "error": {"Error": "States.TaskFailed"}}, "execution_lost"),
    ({"lost": True, "last_resort": True}, "settle_failed"),
    ({"environment_wait": True}, "wait_expired"),
    ({"outcome": {"status": "failed"}}, None),
])
def test_the_settle_task_names_why_a_turn_failed(event, reason):
    assert metrics.settle_reason(event) == reason
    assert reason is None or reason in metrics.REASONS
