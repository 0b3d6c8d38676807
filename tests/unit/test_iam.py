"""local/iam.py on AWS's documented examples of policy evaluation (IAM User Guide: "Policy evaluation logic",
"IAM JSON policy elements: Action / NotAction / Condition", "Single-valued vs. multivalued context keys";
DynamoDB Developer Guide: "Using IAM policy conditions for fine-grained access control", "Using IAM with
DynamoDB transactions"), and the denial's shape as botocore raises it."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.exceptions import ClientError

from local import iam

TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/agents-core-test"


def verdict(statements, action, resource="*", context=None):
    return iam.evaluate(iam.compile_statements(statements), action, resource,
                        {k.lower(): v for k, v in (context or {}).items()})


def test_action_wildcards_match_case_insensitively_and_only_their_prefix():
    allow = [{"Effect": "Allow", "Action": "dynamodb:Get*", "Resource": "*"}]
    assert verdict(allow, "dynamodb:GetItem") == "Allow"
    assert verdict(allow, "DynamoDB:getitem") == "Allow"  # action names are case-insensitive
    assert verdict(allow, "dynamodb:PutItem") == "ImplicitDeny"
    assert verdict([{"Effect": "Allow", "Action": "dynamodb:?etItem", "Resource": "*"}], "dynamodb:GetItem") == "Allow"
    assert verdict([{"Effect": "Allow", "Action": "*", "Resource": "*"}], "states:StartExecution") == "Allow"


def test_not_action_allows_everything_but_the_listed_actions():
    # the User Guide's example: everything except IAM
    statements = [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]
    assert verdict(statements, "dynamodb:GetItem") == "Allow"
    assert verdict(statements, "iam:CreateUser") == "ImplicitDeny"
    # NotAction with Deny: deny all but the listed ones (the listed ones still need an Allow)
    deny_others = [{"Effect": "Allow", "Action": "*", "Resource": "*"},
                   {"Effect": "Deny", "NotAction": ["dynamodb:GetItem"], "Resource": "*"}]
    assert verdict(deny_others, "dynamodb:GetItem") == "Allow"
    assert verdict(deny_others, "dynamodb:PutItem") == "ExplicitDeny"


def test_an_explicit_deny_wins_over_any_allow_and_nothing_allowed_is_an_implicit_deny():
    statements = [{"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"},
                  {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE}]
    assert verdict(statements, "dynamodb:DeleteItem", TABLE) == "ExplicitDeny"
    assert verdict(statements, "dynamodb:DeleteItem", TABLE + "-other") == "Allow"
    assert verdict([], "dynamodb:GetItem", TABLE) == "ImplicitDeny"


def test_resource_arns_match_with_wildcards_and_an_index_is_not_its_table():
    statements = [{"Effect": "Allow", "Action": "dynamodb:Query", "Resource": TABLE}]
    assert verdict(statements, "dynamodb:Query", TABLE) == "Allow"
    assert verdict(statements, "dynamodb:Query", TABLE + "/index/GSI1") == "ImplicitDeny"
    indexes = [{"Effect": "Allow", "Action": "dynamodb:Query", "Resource": TABLE + "/index/*"}]
    assert verdict(indexes, "dynamodb:Query", TABLE + "/index/GSI1") == "Allow"
    connections = [{"Effect": "Allow", "Action": "execute-api:ManageConnections",
                    "Resource": "arn:aws:execute-api:us-east-1:123456789012:api/dev/POST/@connections/*"}]
    base = "arn:aws:execute-api:us-east-1:123456789012:api/dev/"
    assert verdict(connections, "execute-api:ManageConnections", base + "POST/@connections/abc=") == "Allow"
    assert verdict(connections, "execute-api:ManageConnections", base + "DELETE/@connections/abc=") == "ImplicitDeny"
    assert verdict([{"Effect": "Allow", "Action": "dynamodb:GetItem", "NotResource": TABLE}],
                   "dynamodb:GetItem", TABLE) == "ImplicitDeny"


def leading(prefixes, qualifier="ForAllValues"):
    return [{"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:Scan", "dynamodb:PutItem"], "Resource": TABLE,
             "Condition": {f"{qualifier}:StringLike": {"dynamodb:LeadingKeys": prefixes}}}]


def test_for_all_values_holds_on_an_empty_set_and_for_any_value_does_not():
    # the User Guide's warning: ForAllValues is true when the request has no value for the key (a Scan
    # names no partition key), so such a condition must only be used with keys that are always present
    assert verdict(leading(["T#*"]), "dynamodb:Scan", TABLE) == "Allow"
    assert verdict(leading(["T#*"]), "dynamodb:Scan", TABLE, {"dynamodb:LeadingKeys": []}) == "Allow"
    assert verdict(leading(["T#*"], "ForAnyValue"), "dynamodb:Scan", TABLE) == "ImplicitDeny"
    assert verdict(leading(["T#*"]), "dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ["T#a", "T#b"]}) == "Allow"
    assert verdict(leading(["T#*"]), "dynamodb:GetItem", TABLE, {"dynamodb:LeadingKeys": ["T#a", "HOST#b"]}) \
        == "ImplicitDeny"
    assert verdict(leading(["T#*"], "ForAnyValue"), "dynamodb:GetItem", TABLE,
                   {"dynamodb:LeadingKeys": ["T#a", "HOST#b"]}) == "Allow"


def test_string_like_wildcards_are_case_sensitive_and_several_values_are_alternatives():
    statements = [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
                   "Condition": {"StringLike": {"kms:EncryptionContext:credential_id": ["cred_*", "key_??"]}}}]
    assert verdict(statements, "kms:Decrypt", context={"kms:EncryptionContext:credential_id": ["cred_1"]}) == "Allow"
    assert verdict(statements, "kms:Decrypt", context={"kms:EncryptionContext:credential_id": ["key_12"]}) == "Allow"
    assert verdict(statements, "kms:Decrypt", context={"kms:EncryptionContext:credential_id": ["key_123"]}) \
        == "ImplicitDeny"
    assert verdict(statements, "kms:Decrypt", context={"kms:EncryptionContext:credential_id": ["CRED_1"]}) \
        == "ImplicitDeny"
    assert verdict(statements, "kms:Decrypt") == "ImplicitDeny"  # a key absent from the request: no match
    equals = [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
               "Condition": {"StringEquals": {"kms:EncryptionContext:owner": "a*"}}}]
    assert verdict(equals, "kms:Decrypt", context={"kms:EncryptionContext:owner": ["ab"]}) == "ImplicitDeny"
    assert verdict(equals, "kms:Decrypt", context={"kms:EncryptionContext:owner": ["a*"]}) == "Allow"


def test_negated_operators_and_if_exists_hold_when_the_key_is_absent_and_null_checks_presence():
    not_like = [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
                 "Condition": {"StringNotLike": {"kms:EncryptionContext:owner": "evil*"}}}]
    assert verdict(not_like, "kms:Decrypt") == "Allow"
    assert verdict(not_like, "kms:Decrypt", context={"kms:EncryptionContext:owner": ["evil1"]}) == "ImplicitDeny"
    if_exists = [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
                  "Condition": {"StringLikeIfExists": {"kms:EncryptionContext:owner": "a*"}}}]
    assert verdict(if_exists, "kms:Decrypt") == "Allow"
    assert verdict(if_exists, "kms:Decrypt", context={"kms:EncryptionContext:owner": ["b"]}) == "ImplicitDeny"
    null = [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*",
             "Condition": {"Null": {"kms:EncryptionContext:owner": "false"}}}]
    assert verdict(null, "kms:Decrypt") == "ImplicitDeny"
    assert verdict(null, "kms:Decrypt", context={"kms:EncryptionContext:owner": ["x"]}) == "Allow"


def test_every_condition_key_and_operator_must_hold():
    statements = [{"Effect": "Allow", "Action": "kms:Decrypt", "Resource": "*", "Condition": {
        "StringLike": {"kms:EncryptionContext:a": "1*", "kms:EncryptionContext:b": "2*"},
        "StringEquals": {"kms:CallerAccount": "123456789012"}}}]
    ctx = {"kms:EncryptionContext:a": ["10"], "kms:EncryptionContext:b": ["20"], "kms:CallerAccount": ["123456789012"]}
    assert verdict(statements, "kms:Decrypt", context=ctx) == "Allow"
    assert verdict(statements, "kms:Decrypt", context={**ctx, "kms:EncryptionContext:b": ["30"]}) == "ImplicitDeny"


@pytest.fixture
def tables(monkeypatch):
    monkeypatch.setenv("TABLE_NAME", "agents-core-test")
    monkeypatch.setenv("VAULT_KEY_ID", "1234abcd-12ab-34cd-56ef-1234567890ab")


def put(pk):
    return {"Put": {"TableName": "agents-core-test", "Item": {"PK": {"S": pk}, "SK": {"S": "x"}}}}


def test_leading_keys_cover_every_member_of_a_transaction_and_of_a_batch(tables):
    # the admission function may write T#* rows: a transaction with one HOST# member is denied as a whole
    assert iam.denial("AdmissionFunction", "dynamodb", "TransactWriteItems",
                      {"TransactItems": [put("T#a"), put("T#b")]}) is None
    denied = iam.denial("AdmissionFunction", "dynamodb", "TransactWriteItems",
                        {"TransactItems": [put("T#a"), put("KEY#b")]})
    assert denied["Error"]["Code"] == "AccessDeniedException"
    assert "dynamodb:PutItem" in denied["Error"]["Message"]  # a member's own action, not the operation's
    batch = {"RequestItems": {"agents-core-test": [{"PutRequest": {"Item": {"PK": {"S": "T#a"}}}},
                                                   {"DeleteRequest": {"Key": {"PK": {"S": "KEY#b"}}}}]}}
    assert iam.denial("AdmissionFunction", "dynamodb", "BatchWriteItem", batch) is not None
    get = {"RequestItems": {"agents-core-test": {"Keys": [{"PK": {"S": "T#a"}, "SK": {"S": "1"}},
                                                          {"PK": {"S": "KEY#b"}, "SK": {"S": "1"}}]}}}
    assert iam.denial("ResultsFunction", "dynamodb", "BatchGetItem", get) is not None
    get["RequestItems"]["agents-core-test"]["Keys"].pop()
    assert iam.denial("ResultsFunction", "dynamodb", "BatchGetItem", get) is None
    # a result with images reads the claiming Runtime's declaration, and nothing else of CONN#
    declaration = {"RequestItems": {"agents-core-test": {"Keys": [{"PK": {"S": "CONN#b"}, "SK": {"S": "H#codex"}}]}}}
    assert iam.denial("ResultsFunction", "dynamodb", "BatchGetItem", declaration) is None
    assert iam.denial("ResultsFunction", "dynamodb", "GetItem", {"TableName": "agents-core-test",
                                                                "Key": {"PK": {"S": "CONN#b"}, "SK": {"S": "C"}}}) is not None


def test_a_query_on_an_index_is_checked_on_the_index_and_its_partition_key(tables):
    query = {"TableName": "agents-core-test", "IndexName": "GSI1", "KeyConditionExpression": "#p = :p",
             "ExpressionAttributeNames": {"#p": "GSI1PK"}, "ExpressionAttributeValues": {":p": {"S": "RUNTIME#h"}}}
    assert iam.denial("ResultsFunction", "dynamodb", "Query", query) is None
    query["ExpressionAttributeValues"][":p"] = {"S": "T#x"}
    assert iam.denial("ResultsFunction", "dynamodb", "Query", query) is not None  # GSI1 only for RUNTIME#
    assert iam.denial("ReadsFunction", "dynamodb", "Query", query) is None


def test_the_template_expands_sam_policy_templates_and_every_principal_compiles(tables):
    from local import template

    machine = iam.statements("TurnStateMachine")
    # Lambda only, besides the log delivery actions Step Functions' logging needs (they take no resource but "*")
    assert {r for s in machine if not all(a.startswith("logs:") for a in s["Action"]) for r in s["Resource"]} == {
        "arn:aws:lambda:us-east-1:123456789012:function:DispatchFunction*",
        "arn:aws:lambda:us-east-1:123456789012:function:SettleFunction*"}
    for kind in ("AWS::Serverless::Function", "AWS::Serverless::StateMachine"):
        for logical_id in template.resources(kind):
            assert iam.policy(logical_id), logical_id
    stream = iam.statements("StreamFunction")  # a DynamoDB event: SAM attaches AWSLambdaDynamoDBExecutionRole
    assert any("dynamodb:GetRecords" in s["Action"] for s in stream)


def test_kms_calls_are_checked_on_the_key_and_the_encryption_context(tables):
    key = "1234abcd-12ab-34cd-56ef-1234567890ab"
    assert iam.denial("DispatchFunction", "kms", "Decrypt",
                      {"CiphertextBlob": key.encode() + bytes(40), "EncryptionContext": {"credential_id": "cred_1"}}) is None
    assert iam.denial("DispatchFunction", "kms", "Decrypt",
                      {"CiphertextBlob": key.encode() + bytes(40), "EncryptionContext": {"executor_key_id": "AKEX1"}})
    assert iam.denial("AdmissionFunction", "kms", "Decrypt",  # seals, never opens
                      {"CiphertextBlob": key.encode() + bytes(40), "EncryptionContext": {"credential_id": "cred_1"}})
    assert iam.denial("AdmissionFunction", "kms", "GenerateDataKey",
                      {"KeyId": "other-key", "EncryptionContext": {"credential_id": "cred_1"}})


def test_a_denied_call_raises_the_client_error_aws_answers(tables):
    iam.install()
    client = botocore.session.Session().create_client(
        "dynamodb", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y",
        endpoint_url="http://127.0.0.1:9")  # never reached: the denial comes first
    with iam.acting_as("AuthorizerFunction"), pytest.raises(ClientError) as raised:
        client.get_item(TableName="agents-core-test", Key={"PK": {"S": "T#a"}, "SK": {"S": "x"}})
    error = raised.value.response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert error["Message"] == (
        "User: arn:aws:sts::123456789012:assumed-role/agents-core-local-AuthorizerFunctionRole/AuthorizerFunction "
        "is not authorized to perform: dynamodb:GetItem on resource: "
        "arn:aws:dynamodb:us-east-1:123456789012:table/agents-core-test "
        "because no identity-based policy allows the dynamodb:GetItem action")
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert raised.value.operation_name == "GetItem"
