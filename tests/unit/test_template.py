"""template.yaml as CloudFormation and SAM deploy it (issue 35, item 7): no extra `Stage` stage, one invoke
permission for the reads function, the Vault key kept like the table, partition-aware ARNs, and the SSE streams
under a reserved concurrency of their own. tests/integration/test_sam_build.py checks the same on SAM's own
transform where the SAM CLI is installed."""

import json
import re

from local import template


def test_sam_creates_no_extra_stage_named_stage():
    """Without OpenApiVersion SAM's Deployment also names a stage `Stage` (unthrottled, beside the real one)."""
    version = (template.load().get("Globals", {}).get("Api") or {}).get("OpenApiVersion")
    assert version and re.fullmatch(r"[23]\.\d(\.\d)?", version)


def _permissions(function):
    return [res["Properties"] for res in template.resources("AWS::Lambda::Permission").values()
            if res["Properties"]["FunctionName"] == {"Ref": function}]


def test_the_reads_function_has_one_invoke_permission_over_this_api_only():
    """SAM adds one resource-policy statement per Api event (20 KB per function policy): the reads' routes are the
    API's definition, with one permission for them all, scoped to this API."""
    reads = template.resources("AWS::Serverless::Function")["ReadsFunction"]["Properties"]
    assert not any(e["Type"] == "Api" for e in (reads.get("Events") or {}).values())
    [permission] = _permissions("ReadsFunction")
    assert permission["Principal"] == "apigateway.amazonaws.com" and permission["Action"] == "lambda:InvokeFunction"
    assert permission["SourceArn"] == {
        "Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${PublicApi}/*"}
    routes = [r for r in template.http_routes() if r.function == "ReadsFunction"]
    assert len(routes) >= 30 and {r.method for r in routes} == {"GET", "ANY"}  # automations: their own function
    assert template.public_api()["MergeDefinitions"] is True  # the other functions' Api events join the body


def test_every_function_the_api_definition_integrates_has_an_invoke_permission():
    body = template.public_api()["DefinitionBody"]
    functions = {re.search(r"\$\{(\w+)\.Arn\}", spec["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]).group(1)
                 for methods in body["paths"].values() for spec in methods.values()}
    assert functions and all(len(_permissions(f)) == 1 for f in functions)


def test_the_vault_key_is_kept_like_the_table():
    for kind in ("AWS::DynamoDB::Table", "AWS::KMS::Key"):
        for name, res in template.resources(kind).items():
            assert res.get("DeletionPolicy") == "Retain" and res.get("UpdateReplacePolicy") == "Retain", name


def test_every_arn_the_template_builds_names_the_stacks_partition():
    text = json.dumps(template.load()["Resources"])
    assert "arn:aws:" not in text
    layers = template.resources("AWS::Serverless::Function")["SessionStreamFunction"]["Properties"]["Layers"]
    assert all("${AWS::Partition}" in layer["Fn::Sub"] for layer in layers)
