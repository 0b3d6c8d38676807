"""Read `template.yaml`: the table, routes, functions and authorizer, so local resources and tests
never carry a second hand-written copy."""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
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

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def http_routes() -> list[Route]:
    routes = []
    for logical_id, res in resources("AWS::Serverless::Function").items():
        for event in (res["Properties"].get("Events") or {}).values():
            if event["Type"] == "HttpApi":
                props = event["Properties"]
                routes.append(Route(props["Method"].upper(), props["Path"], logical_id))
    return routes


def function_dirs() -> dict[str, pathlib.Path]:
    return {k: ROOT / v["Properties"]["CodeUri"] for k, v in resources("AWS::Serverless::Function").items()}


@dataclass(frozen=True)
class Authorizer:
    function: str
    header: str
    ttl_seconds: int


def http_authorizer() -> Authorizer:
    api = next(iter(resources("AWS::Serverless::HttpApi").values()))
    auth = api["Properties"]["Auth"]
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
