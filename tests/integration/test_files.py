"""The Files API and Uploads (`client.files`, `client.uploads`) with the official SDK, in process on moto (S3 and the
table), each function held to its template policy (local/iam.py): bytes in S3, metadata in the table, tenants
isolated (a foreign id is 404 on every route), and a rejected request writes nothing in either store."""

from __future__ import annotations

import hashlib
import io
import os

import boto3
import openai
import pytest
from moto import mock_aws

from agents_contract import files as contract
from agents_core.apikeys import create_key
from local import template
from local.inprocess import InProcessStack
from local.lambdas import MOTO_CONFIG
from tests.integration.conftest import KEEP_BOTO3_SESSION, sdk


@pytest.fixture(scope="module")
def stack():
    with mock_aws(config={**MOTO_CONFIG, **KEEP_BOTO3_SESSION}):
        s = InProcessStack("agents-core-files")
        yield s
        s.stop()


@pytest.fixture(scope="module")
def s3(stack):
    return boto3.client("s3", region_name=template.REGION)


@pytest.fixture(scope="module")
def clients(stack):
    return sdk(stack.http, create_key(stack.store, "tenant-a")), sdk(stack.http, create_key(stack.store, "tenant-b"))


def objects(s3) -> dict[str, bytes]:
    bucket = os.environ["FILES_BUCKET"]
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for entry in page.get("Contents", []):
            found[entry["Key"]] = s3.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
    return found


def table(stack):
    items, kwargs = [], {"TableName": stack.table, "ConsistentRead": True}
    while True:
        out = stack.dynamodb.scan(**kwargs)
        items += out["Items"]
        if "LastEvaluatedKey" not in out:
            return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))
        kwargs["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def snapshot(stack, s3):
    return table(stack), objects(s3)


def test_create_retrieve_list_content_delete_with_the_sdk_and_no_beta_header(stack, s3, clients):
    a, _ = clients
    data = bytes(range(256)) * 1000  # binary, not UTF-8
    created = a.files.create(file=("notes.bin", io.BytesIO(data), "application/octet-stream"), purpose="user_data")
    assert created.object == "file" and created.id.startswith("file-") and created.bytes == len(data)
    assert created.filename == "notes.bin" and created.purpose == "user_data" and created.status == "processed"
    assert a.files.retrieve(created.id) == created
    assert a.files.content(created.id).content == data
    # the bytes are an S3 object under the tenant's files/ prefix, the metadata one item of the table
    stored = objects(s3)
    assert stored == {f"files/tenant-a/{created.id}": data}
    rows = [i for i in table(stack) if i["PK"]["S"] == f"T#tenant-a#FILE#{created.id}"]
    assert len(rows) == 1 and "data" not in rows[0] and len(str(rows[0])) < 1000
    second = a.files.create(file=("b.txt", b"hello"), purpose="user_data")
    listed = a.files.list()
    assert [f.id for f in listed.data] == [second.id, created.id]  # newest first
    assert [f.id for f in a.files.list(order="asc", limit=1)] == [created.id, second.id]  # the SDK pages on
    assert a.files.list(purpose="batch").data == []
    deleted = a.files.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (created.id, True, "file")
    assert f"files/tenant-a/{created.id}" not in objects(s3)
    with pytest.raises(openai.NotFoundError):
        a.files.retrieve(created.id)
    a.files.delete(second.id)
    assert objects(s3) == {}


def test_a_foreign_file_id_is_404_on_every_route_and_names_nothing(stack, s3, clients):
    a, b = clients
    mine = a.files.create(file=("a.txt", b"tenant a's"), purpose="user_data")
    for call in (lambda: b.files.retrieve(mine.id), lambda: b.files.content(mine.id),
                 lambda: b.files.delete(mine.id), lambda: b.files.list(after=mine.id)):
        with pytest.raises(openai.NotFoundError) as raised:
            call()
        assert raised.value.body["code"] == "not_found_error"
    assert b.files.list().data == []
    upload = a.uploads.create(bytes=1, filename="x", mime_type="text/plain", purpose="user_data")
    for call in (lambda: b.uploads.parts.create(upload.id, data=b"x"),
                 lambda: b.uploads.complete(upload.id, part_ids=[]), lambda: b.uploads.cancel(upload.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert a.files.content(mine.id).content == b"tenant a's"
    a.files.delete(mine.id)
    a.uploads.cancel(upload.id)


@pytest.mark.parametrize("kwargs, status, param, code", [
    ({"purpose": "batch"}, 400, "purpose", "unsupported_value"),
    ({"purpose": "training"}, 400, "purpose", "invalid_request_error"),
    ({"purpose": "user_data", "expires_after": {"anchor": "created_at", "seconds": 3600}}, 400, "expires_after",
     "unsupported_parameter"),
    ({"purpose": "user_data", "file": ("big.bin", b"\0" * (contract.MAX_CREATE_BYTES + 1))}, 400, "file",
     "file_too_large"),
    ({"purpose": "user_data", "file": ("bad\x7fname", b"x")}, 400, "file", "invalid_request_error"),
    ({"purpose": "user_data", "file": ("x" * 256, b"x")}, 400, "file", "invalid_request_error"),
    ({"purpose": "user_data", "file": ("a.txt", b"x", "not a mime type")}, 400, "file", "invalid_request_error"),
])
def test_bad_input_is_its_400_and_writes_nothing(stack, s3, clients, kwargs, status, param, code):
    a, _ = clients
    before = snapshot(stack, s3)
    kwargs = {"file": ("a.txt", b"x"), **kwargs}
    with pytest.raises(openai.APIStatusError) as raised:
        a.files.create(**kwargs)
    assert raised.value.status_code == status
    assert (raised.value.body["param"], raised.value.body["code"]) == (param, code), raised.value.body
    assert snapshot(stack, s3) == before


def test_a_body_that_is_not_a_form_is_a_400_writing_nothing(stack, s3, clients):
    a, _ = clients
    before = snapshot(stack, s3)
    for content_type, body in (("application/json", b'{"purpose": "user_data"}'),
                               ("multipart/form-data; boundary=xyz", b"--xyz\r\nbroken"),
                               ("multipart/form-data; boundary=xyz", b"--xyz--\r\n")):
        response = a._client.post(f"{a.base_url}files", content=body, headers={
            "Content-Type": content_type, "Authorization": f"Bearer {a.api_key}"})
        assert response.status_code == 400, (content_type, body, response.text)
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert snapshot(stack, s3) == before


def test_uploads_compose_parts_in_the_callers_order_through_s3_multipart(stack, s3, clients):
    a, _ = clients
    before_objects = objects(s3)
    chunks = [os.urandom(3 * 1024 * 1024 + 7), os.urandom(4 * 1024 * 1024), os.urandom(4 * 1024 * 1024),
              os.urandom(4 * 1024 * 1024), os.urandom(1234)]  # 15 MiB and more: an S3 multipart upload
    data = b"".join(chunks)
    upload = a.uploads.create(bytes=len(data), filename="big.bin", mime_type="application/octet-stream",
                              purpose="user_data")
    assert (upload.status, upload.object, upload.file) == ("pending", "upload", None)
    ids = {}
    for index in (4, 2, 0, 3, 1):  # arrival order is not the file's order
        part = a.uploads.parts.create(upload.id, data=chunks[index])
        assert part.object == "upload.part" and part.upload_id == upload.id
        ids[index] = part.id
    done = a.uploads.complete(upload.id, part_ids=[ids[i] for i in range(5)], md5=hashlib.md5(data).hexdigest())
    assert done.status == "completed" and done.file.bytes == len(data) and done.file.filename == "big.bin"
    assert a.files.content(done.file.id).content == data
    # the parts' objects and items are gone; only the File remains
    assert set(objects(s3)) - set(before_objects) == {f"files/tenant-a/{done.file.id}"}
    assert not [i for i in table(stack) if i["SK"]["S"].startswith("PART#")]
    with pytest.raises(openai.BadRequestError) as raised:
        a.uploads.parts.create(upload.id, data=b"late")
    assert raised.value.body["code"] == "upload_not_pending"
    a.files.delete(done.file.id)


def test_the_sdk_chunked_upload_helper_works_verbatim(stack, s3, clients, tmp_path):
    a, _ = clients
    path = tmp_path / "report.csv"
    path.write_bytes(b"a,b\n" * 300_000)  # 1.2 MB in parts of 256 KiB
    upload = a.uploads.upload_file_chunked(file=path, mime_type="text/csv", purpose="user_data", part_size=256 * 1024)
    assert upload.status == "completed"
    assert a.files.content(upload.file.id).content == path.read_bytes()
    a.files.delete(upload.file.id)


def test_a_completion_whose_sizes_or_md5_do_not_match_writes_no_file(stack, s3, clients):
    a, _ = clients
    upload = a.uploads.create(bytes=10, filename="x.txt", mime_type="text/plain", purpose="user_data")
    part = a.uploads.parts.create(upload.id, data=b"12345")
    before = snapshot(stack, s3)
    with pytest.raises(openai.BadRequestError) as raised:
        a.uploads.complete(upload.id, part_ids=[part.id])
    assert raised.value.body["param"] == "part_ids" and "5 bytes" in raised.value.body["message"]
    other = a.uploads.parts.create(upload.id, data=b"67890")
    before = snapshot(stack, s3)
    with pytest.raises(openai.BadRequestError) as raised:
        a.uploads.complete(upload.id, part_ids=[part.id, other.id], md5="0" * 32)
    assert raised.value.body["param"] == "md5"
    assert snapshot(stack, s3) == before
    for bad in ([part.id, part.id], ["part_unknown"]):
        with pytest.raises(openai.BadRequestError):
            a.uploads.complete(upload.id, part_ids=bad)
    assert snapshot(stack, s3) == before
    cancelled = a.uploads.cancel(upload.id)
    assert cancelled.status == "cancelled"
    assert not [k for k in objects(s3) if k.startswith("uploads/")]


@pytest.mark.parametrize("body, param", [
    ({"bytes": -1, "filename": "x", "mime_type": "text/plain", "purpose": "user_data"}, "bytes"),
    ({"bytes": contract.MAX_UPLOAD_BYTES + 1, "filename": "x", "mime_type": "text/plain", "purpose": "user_data"},
     "bytes"),
    ({"bytes": 1, "filename": "x", "mime_type": "text", "purpose": "user_data"}, "mime_type"),
    ({"bytes": 1, "filename": "x", "mime_type": "text/plain", "purpose": "fine-tune"}, "purpose"),
    ({"bytes": 1, "filename": "", "mime_type": "text/plain", "purpose": "user_data"}, "filename"),
])
def test_a_bad_upload_is_its_400_and_writes_nothing(stack, s3, clients, body, param):
    a, _ = clients
    before = snapshot(stack, s3)
    with pytest.raises(openai.BadRequestError) as raised:
        a.uploads.create(**body)
    assert raised.value.body["param"] == param
    assert snapshot(stack, s3) == before


def test_the_files_function_reaches_only_its_prefixes_of_the_bucket(stack, s3, monkeypatch):
    """IAM as template.yaml grants it (local/iam.py): files/* and uploads/*, nothing else of the bucket, and no
    other function reaches the bucket at all."""
    from botocore.exceptions import ClientError

    from local import iam

    monkeypatch.setenv("AGENTS_CORE_IAM", "on")
    bucket = os.environ["FILES_BUCKET"]
    with iam.acting_as("FilesFunction"):
        s3.put_object(Bucket=bucket, Key="files/tenant-z/file-x", Body=b"x")
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "files/tenant-z/file-x"}]})
        for key in ("artifacts/tenant-z/a", "other", "filesx/tenant-z/a"):
            with pytest.raises(ClientError) as raised:
                s3.put_object(Bucket=bucket, Key=key, Body=b"x")
            assert raised.value.response["Error"]["Code"] == "AccessDeniedException"
        with pytest.raises(ClientError):
            s3.list_objects_v2(Bucket=bucket)  # no listing: every key it uses comes from the table
    for function in ("ReadsFunction", "AdmissionFunction", "StreamFunction", "SessionStreamFunction"):
        with iam.acting_as(function), pytest.raises(ClientError):
            s3.get_object(Bucket=bucket, Key="files/tenant-z/file-x")


def test_without_its_uploads_grant_a_part_fails_as_a_500_writing_nothing(stack, s3, clients, monkeypatch):
    from local import iam

    monkeypatch.setenv("AGENTS_CORE_IAM", "on")
    a, _ = clients
    upload = a.uploads.create(bytes=1, filename="x", mime_type="text/plain", purpose="user_data")
    before = snapshot(stack, s3)

    def edit(statements):
        for s in statements:
            if isinstance(s.get("Resource"), list):
                s["Resource"] = [r for r in s["Resource"] if not r.endswith("/uploads/*")]
        return statements

    with iam.overridden("FilesFunction", edit):
        with pytest.raises(openai.InternalServerError):
            a.uploads.parts.create(upload.id, data=b"x")
    assert snapshot(stack, s3) == before
    a.uploads.cancel(upload.id)


def test_other_methods_on_the_files_paths_are_405_without_a_beta_header(stack, clients):
    a, _ = clients
    for method, path in (("PUT", "files"), ("PATCH", "files/file-1"), ("GET", "uploads"),
                         ("DELETE", "uploads/upload_1/parts")):
        response = a._client.request(method, f"{a.base_url}{path}", headers={"Authorization": f"Bearer {a.api_key}"})
        assert response.status_code == 405, (method, path, response.text)
        assert response.json()["error"]["code"] == "method_not_allowed"
