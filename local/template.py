"""Read `template.yaml`: the table, routes, functions and authorizer, so local resources and tests
never carry a second hand-written copy."""

from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"


class _CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when PyYAML has it: 8x faster
    pass


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


@lru_cache(maxsize=4)
def load(path: str = str(TEMPLATE)) -> dict[str, Any]:
    with open(path) as fh:
        return yaml.load(fh, Loader=_CfnLoader)  # noqa: S506 - SafeLoader subclass


def resources(kind: str | None = None) -> dict[str, dict[str, Any]]:
    res = load()["Resources"]
    return {k: v for k, v in res.items() if kind is None or v["Type"] == kind}


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str  # logical id
    streaming: bool = False  # a Lambda proxy integration with responseTransferMode STREAM
    authorize: bool = True  # the REST API's authorizer runs (an HTTP API route of this template: none)

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def public_api() -> dict[str, Any]:
    return next(iter(resources("AWS::Serverless::Api").values()))["Properties"]


def http_routes() -> list[Route]:
    """The public REST API's routes: the API's own `DefinitionBody` paths (Lambda proxy integrations) and the
    functions' `Api` events, which SAM merges into it (`ResponseTransferMode: RESPONSE_STREAM`: a streaming
    integration)."""
    routes = []
    for path, methods in ((public_api().get("DefinitionBody") or {}).get("paths") or {}).items():
        for method, spec in methods.items():
            uri = spec["x-amazon-apigateway-integration"]["uri"]
            function = re.search(r"\$\{(\w+)\.Arn\}", uri.get("Fn::Sub") if isinstance(uri, dict) else uri)
            assert function, f"{method} {path}: not a Lambda integration of this template"
            method = "ANY" if method == "x-amazon-apigateway-any-method" else method.upper()
            routes.append(Route(method, path, function.group(1),
                                spec["x-amazon-apigateway-integration"].get("responseTransferMode") == "STREAM"))
    for logical_id, res in resources("AWS::Serverless::Function").items():
        for event in (res["Properties"].get("Events") or {}).values():
            if event["Type"] == "Api":
                props = event["Properties"]
                routes.append(Route(props["Method"].upper(), props["Path"], logical_id,
                                    props.get("ResponseTransferMode") == "RESPONSE_STREAM"))
    return routes


def http_api_routes() -> list[Route]:
    """The HTTP API's routes (the exec-server registry, a self_hosted Environment's remote_url): served on the
    REST API's local port, without its authorizer (the function checks the request's own signature)."""
    routes = []
    for key, function in _v2_routes("HTTP").items():
        method, _, path = key.partition(" ")
        routes.append(Route(method.upper(), path, function, authorize=False))
    return routes


def gateway_responses() -> dict[str, tuple[Optional[int], dict[str, str], str]]:
    """Response type -> (status or None: the default's, headers, body) from the API's GatewayResponses."""
    out = {}
    for kind, spec in (public_api().get("GatewayResponses") or {}).items():
        headers = {k: v.strip("'") for k, v in ((spec.get("ResponseParameters") or {}).get("Headers") or {}).items()}
        body = (spec.get("ResponseTemplates") or {}).get("application/json", "")
        out[kind] = (int(spec["StatusCode"]) if spec.get("StatusCode") else None, headers, body)
    return out


def throttling() -> tuple[float, int]:
    """The stage-wide (rate per second, burst) of the API's MethodSettings; parameters resolve to defaults."""
    for setting in public_api().get("MethodSettings") or []:
        if setting.get("ResourcePath") == "/*":
            return float(_parameter(setting["ThrottlingRateLimit"])), int(_parameter(setting["ThrottlingBurstLimit"]))
    return 10_000.0, 5_000  # API Gateway's account-level defaults


def usage_plan() -> Optional[tuple[float, int]]:
    """The per-API-key (per-tenant) (rate per second, burst) of the API's usage plan (SAM's Auth.UsagePlan
    Throttle; parameters resolve to defaults), or None when the API has none."""
    plan = ((public_api().get("Auth") or {}).get("UsagePlan") or {})
    throttle = plan.get("Throttle")
    if plan.get("CreateUsagePlan", "NONE") == "NONE" or not throttle:
        return None
    return float(_parameter(throttle["RateLimit"])), int(_parameter(throttle["BurstLimit"]))


def reserved_concurrency() -> dict[str, int]:
    """Function logical id -> its ReservedConcurrentExecutions (parameters resolve to their defaults)."""
    return {k: int(_parameter(v["Properties"]["ReservedConcurrentExecutions"]))
            for k, v in resources("AWS::Serverless::Function").items()
            if v["Properties"].get("ReservedConcurrentExecutions") is not None}


def _parameter(value: Any) -> Any:
    if isinstance(value, dict) and "Ref" in value:
        return load()["Parameters"][value["Ref"]]["Default"]
    return value


def function_dirs() -> dict[str, pathlib.Path]:
    return {k: ROOT / v["Properties"]["CodeUri"] for k, v in resources("AWS::Serverless::Function").items()}


@dataclass(frozen=True)
class Authorizer:
    function: str
    header: str
    ttl_seconds: int


def http_authorizer() -> Authorizer:
    auth = public_api()["Auth"]
    spec = auth["Authorizers"][auth["DefaultAuthorizer"]]
    function = spec["FunctionArn"]["Fn::GetAtt"][0]
    identity = spec.get("Identity", {})
    return Authorizer(function, identity.get("Headers", ["Authorization"])[0], int(identity.get("ReauthorizeEvery", 0)))


def table_definition(table_name: str) -> dict[str, Any]:
    """create_table kwargs for the template's table (keys, GSIs, stream); TTL is separate."""
    props = next(iter(resources("AWS::DynamoDB::Table").values()))["Properties"]
    out: dict[str, Any] = {
        "TableName": table_name,
        "BillingMode": props["BillingMode"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
    }
    if props.get("GlobalSecondaryIndexes"):
        out["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    if props.get("StreamSpecification"):
        out["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
    return out


def table_ttl_attribute() -> str | None:
    props = next(iter(resources("AWS::DynamoDB::Table").values()))["Properties"]
    ttl = props.get("TimeToLiveSpecification") or {}
    return ttl.get("AttributeName") if ttl.get("Enabled") else None


def create_table(client: Any, table_name: str) -> None:
    client.create_table(**table_definition(table_name))
    attribute = table_ttl_attribute()
    if attribute:
        client.update_time_to_live(TableName=table_name,
                                   TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute})


# ---- Step Functions, Lambda ARNs, WebSocket routes, stream event sources -------------------------

ACCOUNT = "123456789012"
REGION = "us-east-1"


def function_arn(logical_id: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical_id}"


def _resolve(value: Any) -> str:
    """Resolve the few intrinsic forms DefinitionSubstitutions use here to local values."""
    if isinstance(value, str):
        return value
    if "Fn::GetAtt" in value:
        logical_id, attribute = value["Fn::GetAtt"]
        if attribute == "Arn":
            return function_arn(logical_id)
    if "Ref" in value:
        return value["Ref"]
    raise ValueError(f"unsupported substitution {value!r}")


@dataclass(frozen=True)
class StateMachine:
    logical_id: str
    definition: str
    type: str


def state_machines() -> list[StateMachine]:
    out = []
    for logical_id, res in resources("AWS::Serverless::StateMachine").items():
        props = res["Properties"]
        text = (ROOT / props["DefinitionUri"]).read_text()
        for name, value in (props.get("DefinitionSubstitutions") or {}).items():
            text = text.replace("${" + name + "}", _resolve(value))
        out.append(StateMachine(logical_id, text, props.get("Type", "STANDARD")))
    return out


def websocket_routes() -> dict[str, str]:
    """Route key -> function logical id, read from the Routes and Integrations."""
    return _v2_routes("WEBSOCKET")


def _v2_routes(protocol: str) -> dict[str, str]:
    """Route key -> function logical id for the ApiGatewayV2 APIs of one ProtocolType."""
    apis = {k for k, v in resources("AWS::ApiGatewayV2::Api").items() if v["Properties"]["ProtocolType"] == protocol}
    integrations = {}
    for logical_id, res in resources("AWS::ApiGatewayV2::Integration").items():
        uri = res["Properties"]["IntegrationUri"]
        text = uri.get("Fn::Sub") if isinstance(uri, dict) else uri
        found = re.search(r"\$\{(\w+)\.Arn\}", text)
        if found:
            integrations[logical_id] = found.group(1)
    routes = {}
    for res in resources("AWS::ApiGatewayV2::Route").values():
        props = res["Properties"]
        if props["ApiId"].get("Ref") not in apis:
            continue
        target = props["Target"]
        text = target.get("Fn::Sub") if isinstance(target, dict) else target
        integration = re.search(r"integrations/\$\{(\w+)\}", text).group(1)  # type: ignore[union-attr]
        routes[props["RouteKey"]] = integrations[integration]
    return routes


def websocket_route_selection() -> str:
    api = next(v for v in resources("AWS::ApiGatewayV2::Api").values() if v["Properties"]["ProtocolType"] == "WEBSOCKET")
    return api["Properties"]["RouteSelectionExpression"]


@dataclass(frozen=True)
class StreamSource:
    function: str
    batch_size: int
    max_retries: int
    patterns: tuple[dict[str, Any], ...]
    report_failures: bool


def stream_sources() -> list[StreamSource]:
    import json as _json

    out = []
    for logical_id, res in resources("AWS::Serverless::Function").items():
        for event in (res["Properties"].get("Events") or {}).values():
            if event["Type"] != "DynamoDB":
                continue
            props = event["Properties"]
            filters = (props.get("FilterCriteria") or {}).get("Filters") or []
            out.append(StreamSource(logical_id, int(props.get("BatchSize", 100)),
                                    int(props.get("MaximumRetryAttempts", -1)),
                                    tuple(_json.loads(f["Pattern"]) for f in filters),
                                    "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or [])))
    return out


def function_environment(logical_id: str) -> dict[str, Any]:
    res = resources("AWS::Serverless::Function")[logical_id]
    return dict(((res["Properties"].get("Environment") or {}).get("Variables")) or {})


def create_keys(client: Any) -> dict[str, str]:
    """The template's KMS keys (the Vault key) in moto's KMS: logical id -> key id."""
    out = {}
    for logical_id, res in resources("AWS::KMS::Key").items():
        props = res["Properties"]
        out[logical_id] = client.create_key(Description=props.get("Description", logical_id),
                                            KeySpec=props.get("KeySpec", "SYMMETRIC_DEFAULT"),
                                            KeyUsage=props.get("KeyUsage", "ENCRYPT_DECRYPT"))["KeyMetadata"]["KeyId"]
    return out


def bucket_name(logical_id: str) -> str:
    """The local name of a template bucket (S3 names are lower case)."""
    return f"agents-core-local-{logical_id.lower()}"


def create_buckets(client: Any) -> dict[str, str]:
    """The template's S3 buckets in moto's S3 (encryption, public access block, lifecycle as declared):
    logical id -> bucket name."""
    out = {}
    for logical_id, res in resources("AWS::S3::Bucket").items():
        name = bucket_name(logical_id)
        client.create_bucket(Bucket=name)
        props = res["Properties"]
        if props.get("PublicAccessBlockConfiguration"):
            client.put_public_access_block(Bucket=name,
                                           PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"])
        rules = (props.get("LifecycleConfiguration") or {}).get("Rules") or []
        if rules:
            client.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": [_lifecycle(r)
                                                                                                   for r in rules]})
        out[logical_id] = name
    return out


def _lifecycle(rule: dict[str, Any]) -> dict[str, Any]:
    """A CloudFormation lifecycle rule as S3's API spells it."""
    out: dict[str, Any] = {"ID": rule["Id"], "Status": rule["Status"], "Filter": {"Prefix": rule.get("Prefix", "")}}
    if "ExpirationInDays" in rule:
        out["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    if "AbortIncompleteMultipartUpload" in rule:
        out["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(rule["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"])}
    return out
