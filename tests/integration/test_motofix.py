"""The local DynamoDB patch is all or nothing with DynamoDB's size rules, so local tests cannot hide
partial-write bugs DynamoDB itself would never have."""

import pytest
from botocore.exceptions import ClientError

from tests.integration.conftest import TABLE, scan


def put(pk, sk, **attrs):
    return {"Put": {"TableName": TABLE, "Item": {"PK": {"S": pk}, "SK": {"S": sk},
                                                  **{k: {"S": v} for k, v in attrs.items()}}}}


def update(pk, sk, expression, values, condition=None):
    entry = {"TableName": TABLE, "Key": {"PK": {"S": pk}, "SK": {"S": sk}}, "UpdateExpression": expression,
             "ExpressionAttributeValues": values}
    if condition:
        entry["ConditionExpression"] = condition
    return {"Update": entry}


def test_a_failed_condition_writes_nothing(aws):
    aws.put_item(TableName=TABLE, Item={"PK": {"S": "p"}, "SK": {"S": "S"}, "n": {"N": "1"}})
    before = scan(aws)
    with pytest.raises(ClientError) as err:
        aws.transact_write_items(TransactItems=[put("p", f"ITEM#{i}") for i in range(75)] + [
            update("p", "S", "SET n = :two", {":two": {"N": "2"}, ":one": {"N": "9"}}, "n = :one")])
    assert err.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert scan(aws) == before


def test_an_oversized_entry_midway_writes_nothing(aws):
    """An entry that fails validation after others were computed leaves no partial write."""
    big = "x" * (401 * 1024)
    with pytest.raises(ClientError) as err:
        aws.transact_write_items(TransactItems=[put("p", f"ITEM#{i}") for i in range(10)]
                                 + [put("p", "BIG", v=big)] + [put("p", "LAST")])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert scan(aws) == []


def test_an_invalid_update_expression_midway_writes_nothing(aws):
    with pytest.raises(ClientError):
        aws.transact_write_items(TransactItems=[put("p", "A"), update("p", "B", "SET n = n + :x",
                                                                      {":x": {"S": "not a number"}})])
    assert scan(aws) == []


def test_replacing_a_large_attribute_counts_only_the_new_size(aws):
    """DynamoDB limits the item's new size; moto counted old plus new."""
    aws.put_item(TableName=TABLE, Item={"PK": {"S": "p"}, "SK": {"S": "S"}, "doc": {"S": "a" * 300_000}})
    aws.transact_write_items(TransactItems=[update("p", "S", "SET doc = :d", {":d": {"S": "b" * 300_000}})])
    item = aws.get_item(TableName=TABLE, Key={"PK": {"S": "p"}, "SK": {"S": "S"}})["Item"]
    assert item["doc"]["S"] == "b" * 300_000


def test_an_update_past_400_kb_is_rejected_whole(aws):
    aws.put_item(TableName=TABLE, Item={"PK": {"S": "p"}, "SK": {"S": "S"}, "a": {"S": "a" * 300_000}})
    with pytest.raises(ClientError) as err:
        aws.transact_write_items(TransactItems=[put("p", "X"), update("p", "S", "SET b = :b",
                                                                      {":b": {"S": "b" * 120_000}})])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert [i["SK"]["S"] for i in scan(aws)] == ["S"]


def test_more_than_4_mb_in_one_transaction_is_rejected_whole(aws):
    chunk = "c" * 380_000
    with pytest.raises(ClientError) as err:
        aws.transact_write_items(TransactItems=[put("p", f"I#{i}", v=chunk) for i in range(12)])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert scan(aws) == []


def test_more_than_100_entries_is_rejected(aws):
    with pytest.raises(ClientError) as err:
        aws.transact_write_items(TransactItems=[put("p", f"I#{i}") for i in range(101)])
    assert err.value.response["Error"]["Code"] == "ValidationException"
    assert scan(aws) == []


def test_a_valid_transaction_of_100_entries_applies_every_entry(aws):
    aws.transact_write_items(TransactItems=[put("p", f"I#{i}") for i in range(100)])
    assert len(scan(aws)) == 100


def test_a_symmetric_kms_key_works_without_an_rsa_key_and_an_asymmetric_one_still_signs(aws):
    """private_keys_when_used: moto's unused RSA key of a symmetric KMS key is made only if read."""
    import boto3

    from local.motofix import _KeyWhenUsed

    kms = boto3.client("kms", region_name="us-east-1")
    key_id = kms.create_key()["KeyMetadata"]["KeyId"]
    from moto.kms.models import kms_backends

    key = kms_backends["123456789012"]["us-east-1"].keys[key_id]
    assert isinstance(key.private_key, _KeyWhenUsed) and key.private_key._key is None
    pair = kms.generate_data_key(KeyId=key_id, KeySpec="AES_256", EncryptionContext={"tenant": "t1"})
    opened = kms.decrypt(CiphertextBlob=pair["CiphertextBlob"], EncryptionContext={"tenant": "t1"})
    assert opened["Plaintext"] == pair["Plaintext"]
    with pytest.raises(ClientError):
        kms.decrypt(CiphertextBlob=pair["CiphertextBlob"], EncryptionContext={"tenant": "t2"})
    assert key.private_key._key is None  # nothing read it

    signing = kms.create_key(KeyUsage="SIGN_VERIFY", KeySpec="RSA_2048")["KeyMetadata"]["KeyId"]
    signature = kms.sign(KeyId=signing, Message=b"m", SigningAlgorithm="RSASSA_PSS_SHA_256")["Signature"]
    assert kms.verify(KeyId=signing, Message=b"m", Signature=signature,
                      SigningAlgorithm="RSASSA_PSS_SHA_256")["SignatureValid"]
    assert key.private_key.public_key() is not None  # read: made then, as moto made it before
    assert key.private_key._key is not None


def test_dynamodb_results_written_directly_are_what_motos_serializer_writes(aws):
    """plain_json_responses: every data-plane operation on every attribute type (a blob, sets, nested maps
    and lists, null, a stream record with its timestamp) answers exactly what moto's shape walk answers."""
    import base64
    import json

    import boto3
    from moto.core.responses import ActionResult

    compared = []
    fast = ActionResult.execute_result
    original = fast.original

    def both(self, context):
        mine = fast(self, context)
        theirs = original(self, context)
        assert mine[0] == theirs[0] and mine[1]["Content-Type"] == theirs[1]["Content-Type"]
        assert json.loads(mine[2]) == json.loads(theirs[2]), context.operation_model.name
        compared.append(context.operation_model.name)
        return mine

    ActionResult.execute_result = both
    try:
        item = {"PK": {"S": "P#1"}, "SK": {"S": "S#1"}, "blob": {"B": b"\x00\xffraw"}, "n": {"N": "12.5"},
                "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": [b"x", b"\x01y"]},
                "m": {"M": {"inner": {"L": [{"S": "x"}, {"B": b"z"}, {"NULL": True}, {"BOOL": False}]}}},
                "B": {"S": "an attribute named B"}}
        aws.put_item(TableName=TABLE, Item=item)
        got = aws.get_item(TableName=TABLE, Key={"PK": {"S": "P#1"}, "SK": {"S": "S#1"}})["Item"]
        assert got["blob"]["B"] == b"\x00\xffraw" and got["m"]["M"]["inner"]["L"][1]["B"] == b"z"
        aws.update_item(TableName=TABLE, Key={"PK": {"S": "P#1"}, "SK": {"S": "S#1"}}, UpdateExpression="SET n = :n",
                        ExpressionAttributeValues={":n": {"N": "13"}}, ReturnValues="ALL_NEW")
        aws.query(TableName=TABLE, KeyConditionExpression="PK = :p", ExpressionAttributeValues={":p": {"S": "P#1"}},
                  Limit=1)
        aws.scan(TableName=TABLE)
        aws.batch_get_item(RequestItems={TABLE: {"Keys": [{"PK": {"S": "P#1"}, "SK": {"S": "S#1"}}]}})
        aws.transact_get_items(TransactItems=[{"Get": {"TableName": TABLE,
                                                       "Key": {"PK": {"S": "P#1"}, "SK": {"S": "S#1"}}}}])
        aws.transact_write_items(TransactItems=[put("P#2", "S#2", a="b")])
        aws.delete_item(TableName=TABLE, Key={"PK": {"S": "P#2"}, "SK": {"S": "S#2"}}, ReturnValues="ALL_OLD")
        aws.batch_write_item(RequestItems={TABLE: [{"PutRequest": {"Item": put("P#3", "S#3")["Put"]["Item"]}}]})

        arn = aws.describe_table(TableName=TABLE)["Table"]["LatestStreamArn"]
        streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard,
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        records = streams.get_records(ShardIterator=iterator)["Records"]
        assert records and records[0]["dynamodb"]["ApproximateCreationDateTime"]
        assert base64.b64encode(b"\x00\xffraw")  # the blob went through both writers above
    finally:
        ActionResult.execute_result = fast
    assert {"GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
            "TransactGetItems", "TransactWriteItems", "GetShardIterator", "GetRecords"} <= set(compared)


def test_a_query_reading_only_its_partition_answers_what_motos_whole_table_sort_answers(aws):
    """queries_read_what_they_need: table and index queries (conditions, order, limits, pages, filters,
    projections) answer exactly what moto's own query answers."""
    from moto.dynamodb.models.table import Table

    entries = []
    for p in range(6):
        for s in range(12):
            attrs = {"PK": {"S": f"P#{p}"}, "SK": {"S": f"S#{s:02d}"}, "n": {"N": str(s % 5)}}
            if (p + s) % 3:
                attrs |= {"GSI1PK": {"S": f"G#{s % 2}"}, "GSI1SK": {"S": f"{(s * 7) % 10:02d}#{p}"}}
            entries.append({"Put": {"TableName": TABLE, "Item": attrs}})
    for start in range(0, len(entries), 100):
        aws.transact_write_items(TransactItems=entries[start:start + 100])

    values = {":p": {"S": "P#3"}, ":a": {"S": "S#03"}, ":b": {"S": "S#09"}, ":g": {"S": "G#1"}, ":r": {"S": "05"},
              ":n": {"N": "2"}, ":pre": {"S": "S#1"}}

    def ask(**kwargs):
        used = {k: v for k, v in values.items() if k in kwargs.get("KeyConditionExpression", "")
                + kwargs.get("FilterExpression", "")}
        pages, key = [], None
        while True:
            extra = {"ExclusiveStartKey": key} if key else {}
            answer = aws.query(TableName=TABLE, ExpressionAttributeValues=used, **kwargs, **extra)
            pages.append((answer["Items"], answer["Count"], answer["ScannedCount"], answer.get("LastEvaluatedKey")))
            key = answer.get("LastEvaluatedKey")
            if not key:
                return pages

    cases = [
        {"KeyConditionExpression": "PK = :p"},
        {"KeyConditionExpression": "PK = :p AND SK BETWEEN :a AND :b", "ScanIndexForward": False},
        {"KeyConditionExpression": "PK = :p AND begins_with(SK, :pre)", "Limit": 1},
        {"KeyConditionExpression": "PK = :p AND SK > :a", "Limit": 4, "FilterExpression": "n >= :n"},
        {"KeyConditionExpression": "PK = :p", "ProjectionExpression": "SK, n", "Limit": 5},
        {"KeyConditionExpression": "PK = :a"},  # an empty partition
        {"KeyConditionExpression": "GSI1PK = :g", "IndexName": "GSI1"},
        {"KeyConditionExpression": "GSI1PK = :g AND GSI1SK > :r", "IndexName": "GSI1", "ScanIndexForward": False},
        {"KeyConditionExpression": "GSI1PK = :g", "IndexName": "GSI1", "Limit": 3},
        {"KeyConditionExpression": "GSI1PK = :g", "IndexName": "GSI1", "Limit": 4, "FilterExpression": "n < :n"},
    ]
    fast = Table.query
    for case in cases:
        mine = ask(**case)
        Table.query = fast.original
        try:
            theirs = ask(**case)
        finally:
            Table.query = fast
        assert mine == theirs, case
        assert sum(page[1] for page in mine) or case["KeyConditionExpression"] == "PK = :a", case


def waiting_machine():
    """A Step Functions client and a state machine whose execution waits a minute (in an active mock_aws)."""
    import json

    import boto3

    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    wait = json.dumps({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 60, "End": True}}})
    return sfn, sfn.create_state_machine(name="turn", definition=wait,
                                         roleArn="arn:aws:iam::123456789012:role/local")["stateMachineArn"]


def test_concurrent_starts_of_one_execution_name_run_one_execution(monkeypatch):
    """Step Functions (Standard): the same name and input while it runs answers that one execution; a closed one,
    or other input, is ExecutionAlreadyExists. moto checked the name and appended the execution apart, so two
    concurrent starts of a Turn's execution (its direct start and its outbox command) ran two executions, and
    the Runtime got two turn.start. The window is widened here so it is hit every time without the fix."""
    import copy
    import threading
    import time

    import moto.stepfunctions.parser.models as parser_models
    from moto import mock_aws

    from local import lambdas, motofix

    motofix.install()

    class SlowCopy:  # moto deep-copies the state machine between its name check and the append
        @staticmethod
        def deepcopy(*args, **kwargs):
            time.sleep(0.05)
            return copy.deepcopy(*args, **kwargs)

    monkeypatch.setattr(parser_models, "copy", SlowCopy)
    with mock_aws(config=lambdas.MOTO_CONFIG):
        sfn, arn = waiting_machine()
        barrier, answers = threading.Barrier(6), []

        def start():
            barrier.wait()
            answers.append(sfn.start_execution(stateMachineArn=arn, name="turn_1", input='{"a": 1}')["executionArn"])

        threads = [threading.Thread(target=start) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        executions = sfn.list_executions(stateMachineArn=arn)["executions"]
        assert len(executions) == 1 and answers == [executions[0]["executionArn"]] * 6
        with pytest.raises(ClientError) as other_input:
            sfn.start_execution(stateMachineArn=arn, name="turn_1", input='{"a": 2}')
        assert other_input.value.response["Error"]["Code"] == "ExecutionAlreadyExists"
        sfn.stop_execution(executionArn=executions[0]["executionArn"])
        for _ in range(100):  # moto's worker closes it in its own thread
            if sfn.describe_execution(executionArn=executions[0]["executionArn"])["status"] != "RUNNING":
                break
            time.sleep(0.02)
        with pytest.raises(ClientError) as closed:
            sfn.start_execution(stateMachineArn=arn, name="turn_1", input='{"a": 1}')
        assert closed.value.response["Error"]["Code"] == "ExecutionAlreadyExists"


def test_an_execution_stopped_the_moment_it_started_is_stopped(monkeypatch):
    """StopExecution right after StartExecution stops it, as in Step Functions: moto's execution thread sets up its
    environment a moment after the start returns, and a stop then raised AttributeError (a fresh make test's
    teardown). The window is widened here (a slow parse) so it is hit every time without the fix."""
    import time

    from moto import mock_aws
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    from local import lambdas, motofix

    motofix.install()
    entrypoint = ExecutionWorker._get_evaluation_entrypoint

    def slow_entrypoint(self):
        time.sleep(0.2)
        return entrypoint(self)

    monkeypatch.setattr(ExecutionWorker, "_get_evaluation_entrypoint", slow_entrypoint)
    with mock_aws(config=lambdas.MOTO_CONFIG):
        sfn, arn = waiting_machine()
        execution = sfn.start_execution(stateMachineArn=arn, name="turn_1")["executionArn"]
        sfn.stop_execution(executionArn=execution)  # raised AttributeError (moto's worker had no environment yet)
        from local.inprocess import wait_for

        wait_for(lambda: sfn.describe_execution(executionArn=execution)["status"] == "ABORTED", timeout=10)
