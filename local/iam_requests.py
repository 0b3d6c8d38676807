"""An AWS API call as the IAM requests AWS authorizes for it: (action, resource ARN, condition context).

DynamoDB authorizes each item a request touches: a member of TransactWriteItems is its own PutItem /
UpdateItem / DeleteItem / ConditionCheckItem, of TransactGetItems a GetItem, and each key of BatchGetItem /
BatchWriteItem is checked under that action, each with `dynamodb:LeadingKeys` = the item's partition key
(the index's for a Query on an index; absent for a Scan). KMS calls carry `kms:EncryptionContext:<key>` and
`kms:EncryptionContextKeys`. An S3 call is its object's action on `arn:aws:s3:::bucket/key` (each key of
DeleteObjects; a multipart upload's steps are s3:PutObject). Context keys are lower-cased (IAM compares key names case-insensitively).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

from . import template

Request = tuple[str, str, dict[str, list[str]]]
_R, _A = template.REGION, template.ACCOUNT
LOCAL_WS_API = "localws"  # the WebSocket API's id in ARNs here (the template's ${WebSocketApi})
PREFIX = {"dynamodb": "dynamodb", "dynamodbstreams": "dynamodb", "stepfunctions": "states", "kms": "kms",
          "apigatewaymanagementapi": "execute-api", "lambda": "lambda", "sqs": "sqs", "logs": "logs"}


def _table_arn(name: str) -> str:
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{_R}:{_A}:table/{name}"


@lru_cache(maxsize=1)
def _hash_keys() -> dict[str, str]:
    """Partition key attribute of the table ('') and of each index, as the template defines them."""
    definition = template.table_definition("t")
    out = {"": next(k["AttributeName"] for k in definition["KeySchema"] if k["KeyType"] == "HASH")}
    for index in definition.get("GlobalSecondaryIndexes", []):
        out[index["IndexName"]] = next(k["AttributeName"] for k in index["KeySchema"] if k["KeyType"] == "HASH")
    return out


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping):
        for kind in ("S", "N", "B"):
            if kind in value:
                return value[kind] if isinstance(value[kind], str) else repr(value[kind])
    return str(value)


def _leading(item: Mapping[str, Any], index: str = "") -> dict[str, list[str]]:
    key = _hash_keys().get(index, _hash_keys()[""])
    return {"dynamodb:leadingkeys": [_scalar(item[key])]} if key in item else {}


def _query_leading(params: Mapping[str, Any]) -> dict[str, list[str]]:
    """The partition key value a Query names: `<key> = :v` in KeyConditionExpression (or KeyConditions)."""
    key = _hash_keys().get(params.get("IndexName") or "", _hash_keys()[""])
    if "KeyConditions" in params:
        found = params["KeyConditions"].get(key)
        return {"dynamodb:leadingkeys": [_scalar(found["AttributeValueList"][0])]} if found else {}
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    for left, right in re.findall(r"([#\w.]+)\s*=\s*([:#\w.]+)", params.get("KeyConditionExpression") or ""):
        for attribute, placeholder in ((left, right), (right, left)):
            if names.get(attribute, attribute) == key and placeholder in values:
                return {"dynamodb:leadingkeys": [_scalar(values[placeholder])]}
    return {}


_TRANSACT = {"ConditionCheck": "dynamodb:ConditionCheckItem", "Put": "dynamodb:PutItem",
             "Update": "dynamodb:UpdateItem", "Delete": "dynamodb:DeleteItem", "Get": "dynamodb:GetItem"}


def _dynamodb(operation: str, params: Mapping[str, Any]) -> Iterator[Request]:
    if operation in ("TransactWriteItems", "TransactGetItems"):
        for member in params.get("TransactItems") or []:
            for kind, spec in member.items():
                yield _TRANSACT[kind], _table_arn(spec["TableName"]), _leading(spec.get("Key") or spec.get("Item") or {})
        return
    if operation in ("BatchGetItem", "BatchWriteItem"):
        for table, spec in (params.get("RequestItems") or {}).items():
            entries = spec["Keys"] if operation == "BatchGetItem" else [
                (w.get("PutRequest") or {}).get("Item") or (w.get("DeleteRequest") or {}).get("Key") or {} for w in spec]
            for key in entries:
                yield f"dynamodb:{operation}", _table_arn(table), _leading(key)
        return
    table = params.get("TableName")
    resource = _table_arn(table) if table else "*"
    if table and params.get("IndexName"):
        resource += f"/index/{params['IndexName']}"
    if operation == "Query":
        yield "dynamodb:Query", resource, _query_leading(params)
    elif operation in ("GetItem", "UpdateItem", "DeleteItem", "PutItem"):
        yield f"dynamodb:{operation}", resource, _leading(params.get("Key") or params.get("Item") or {})
    else:
        yield f"dynamodb:{operation}", resource, {}


def _kms_key(params: Mapping[str, Any]) -> str:
    key = params.get("KeyId")
    if not key and params.get("CiphertextBlob"):
        key = bytes(params["CiphertextBlob"])[:36].decode("utf-8", "replace").rstrip("\0")  # moto's blob names its key first
    if not key:
        return "*"
    return key if key.startswith("arn:") else f"arn:aws:kms:{_R}:{_A}:{key if key.startswith('alias/') else 'key/' + key}"


def _kms(operation: str, params: Mapping[str, Any]) -> Iterator[Request]:
    context: dict[str, list[str]] = {}
    encryption = params.get("EncryptionContext") or {}
    for key, value in encryption.items():
        context[f"kms:encryptioncontext:{key}".lower()] = [str(value)]
    if encryption:
        context["kms:encryptioncontextkeys"] = list(encryption)
    context["kms:calleraccount"] = [_A]
    yield f"kms:{operation}", "*" if operation in ("CreateKey", "ListKeys", "ListAliases") else _kms_key(params), context


def _states(operation: str, params: Mapping[str, Any], tokens: Mapping[str, str]) -> Iterator[Request]:
    if operation.startswith("SendTask"):
        resource = tokens.get(params.get("taskToken", ""), "*")
    else:
        resource = params.get("stateMachineArn") or params.get("executionArn") or "*"
    yield f"states:{operation}", resource, {}


def _lambda(operation: str, params: Mapping[str, Any]) -> Iterator[Request]:
    name = params.get("FunctionName") or ""
    arn = name if name.startswith("arn:") else f"arn:aws:lambda:{_R}:{_A}:function:{name}"
    if params.get("Qualifier"):
        arn += f":{params['Qualifier']}"
    action = "lambda:InvokeFunction" if operation in ("Invoke", "InvokeWithResponseStream", "InvokeAsync") \
        else f"lambda:{operation}"
    yield action, arn if name else "*", {}


# S3 operations as IAM authorizes them (the action of each object-level operation; a multipart upload's steps
# are s3:PutObject, DeleteObjects is s3:DeleteObject per key, a copy also reads its source).
_S3_OBJECT = {"GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "PutObject": "s3:PutObject",
              "CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject",
              "UploadPartCopy": "s3:PutObject", "CopyObject": "s3:PutObject",
              "CompleteMultipartUpload": "s3:PutObject", "DeleteObject": "s3:DeleteObject",
              "AbortMultipartUpload": "s3:AbortMultipartUpload", "ListParts": "s3:ListMultipartUploadParts"}
_S3_BUCKET = {"ListObjectsV2": "s3:ListBucket", "ListObjects": "s3:ListBucket", "HeadBucket": "s3:ListBucket",
              "ListMultipartUploads": "s3:ListBucketMultipartUploads"}


def _s3(operation: str, params: Mapping[str, Any]) -> Iterator[Request]:
    bucket = f"arn:aws:s3:::{params.get('Bucket', '')}"
    if operation == "DeleteObjects":
        for entry in (params.get("Delete") or {}).get("Objects") or []:
            yield "s3:DeleteObject", f"{bucket}/{entry['Key']}", {}
        return
    if operation in _S3_OBJECT:
        yield _S3_OBJECT[operation], f"{bucket}/{params.get('Key', '')}", {}
        source = params.get("CopySource")
        if source:
            source = source if isinstance(source, str) else f"{source['Bucket']}/{source['Key']}"
            yield "s3:GetObject", f"arn:aws:s3:::{source.lstrip('/')}", {}
        return
    if operation in _S3_BUCKET:
        context = {"s3:prefix": [params["Prefix"]]} if "Prefix" in params else {}
        yield _S3_BUCKET[operation], bucket, context
        return
    yield f"s3:{operation}", bucket, {}


def _scheduler(operation: str, params: Mapping[str, Any]) -> Iterator[Request]:
    """EventBridge Scheduler: a schedule's ARN names its group; creating or updating one passes its target's role
    to the service (iam:PassRole, iam:PassedToService)."""
    group, name = params.get("GroupName") or "default", params.get("Name") or ""
    yield f"scheduler:{operation}", f"arn:aws:scheduler:{_R}:{_A}:schedule/{group}/{name}" if name else "*", {}
    role = (params.get("Target") or {}).get("RoleArn")
    if operation in ("CreateSchedule", "UpdateSchedule") and role:
        yield "iam:PassRole", role, {"iam:passedtoservice": ["scheduler.amazonaws.com"]}


def requests(service: str, operation: str, params: Mapping[str, Any], tokens: Mapping[str, str]) -> list[Request]:
    if service == "scheduler":
        return list(_scheduler(operation, params))
    if service == "s3":
        return list(_s3(operation, params))
    if service == "dynamodb":
        return list(_dynamodb(operation, params))
    if service == "kms":
        return list(_kms(operation, params))
    if service == "stepfunctions":
        return list(_states(operation, params, tokens))
    if service == "lambda":
        return list(_lambda(operation, params))
    if service == "apigatewaymanagementapi":
        method = {"PostToConnection": "POST", "GetConnection": "GET", "DeleteConnection": "DELETE"}[operation]
        stage = template.load()["Parameters"]["Stage"]["Default"]
        return [("execute-api:ManageConnections",
                 f"arn:aws:execute-api:{_R}:{_A}:{LOCAL_WS_API}/{stage}/{method}/@connections/{params['ConnectionId']}",
                 {})]
    if service == "dynamodbstreams":  # GetRecords names no stream: its shard iterator begins with the stream's ARN
        arn = params.get("StreamArn") or (params.get("ShardIterator") or "").split("|", 1)[0]
        return [(f"dynamodb:{operation}", arn if arn.startswith("arn:") else "*", {})]
    if service == "sqs":
        url = params.get("QueueUrl") or ""
        # a batch action is authorized as its single action (SendMessageBatch is sqs:SendMessage)
        return [(f"sqs:{operation.removesuffix('Batch')}", f"arn:aws:sqs:{_R}:{_A}:{url.rstrip('/').rsplit('/', 1)[-1]}" if url else "*", {})]
    return [(f"{PREFIX.get(service, service)}:{operation}", "*", {})]
