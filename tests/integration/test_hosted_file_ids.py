"""`openai_hosted` files of `type: "file_id"` (issue 38, item 3), in process on moto: the tenant's File is resolved at
admission (its size in the Session's and the Environment's view; a foreign or missing id is a 404 naming the entry,
with nothing written), and the claimed Turn's `turn.start` carries a presigned URL of exactly that File's object,
which the hosted Runtime downloads (runtime/environments/downloads.py; tests/unit/test_environment_downloads.py)."""

from __future__ import annotations

import os
import urllib.parse

import boto3
import openai
import pytest
import requests

from agents_core.apikeys import create_key
from local import template
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures
from tests.integration.test_files import snapshot
from tests.integration.test_hosted_environment_lifecycle import HostedRuntime, hosted_session


@pytest.fixture
def s3(stack):
    return boto3.client("s3", region_name=template.REGION)


def test_a_session_places_the_tenants_file_by_id_and_turn_start_carries_its_download(stack, client, s3):
    data = b"id,total\n1,42\n"
    uploaded = client.files.create(file=("orders.csv", data), purpose="user_data")
    runtime = HostedRuntime(stack, "host-a")
    session = hosted_session(client, "say hi", files=[{"type": "file_id", "file_id": uploaded.id,
                                                        "path": "/workspace/in/orders.csv"}])
    [entry] = session.environment.files
    assert (entry.type, entry.file_id, entry.path, entry.size_bytes) == ("file_id", uploaded.id,
                                                                         "/workspace/in/orders.csv", len(data))
    start = runtime.start()
    [file] = start["environment"]["hosted"]["files"]
    assert (file["path"], file["file_id"], file["size_bytes"]) == ("/workspace/in/orders.csv", uploaded.id, len(data))
    url = urllib.parse.urlsplit(file["url"])
    assert url.path.endswith(f"/files/tenant-a/{uploaded.id}") and "X-Amz-Signature" in url.query
    assert "X-Amz-Expires=900" in url.query
    assert requests.get(file["url"], timeout=5).content == data  # moto serves the presigned GET
    runtime.complete(start["turn_id"])


def test_a_foreign_or_missing_file_id_is_a_404_naming_the_entry_and_writes_nothing(stack, client, s3):
    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    theirs = other.files.create(file=("secret.txt", b"tenant b"), purpose="user_data")
    before = snapshot(stack, s3)
    for file_id in (theirs.id, "file-missing"):
        files = [{"type": "inline", "path": "/workspace/a.txt", "data": "eA=="},
                 {"type": "file_id", "file_id": file_id, "path": "/workspace/b.txt"}]
        for create in (lambda: hosted_session(client, "say hi", files=files),
                       lambda: client.beta.agents.environments.create(environment={"type": "openai_hosted",
                                                                                  "files": files})):
            with pytest.raises(openai.NotFoundError) as raised:
                create()
            assert raised.value.body["param"] == "environment.files[1].file_id"
            assert raised.value.body["message"] == f"No such File object: {file_id}."
            assert snapshot(stack, s3) == before


def test_environments_create_shows_the_files_size(stack, client):
    uploaded = client.files.create(file=("notes.md", b"# notes\n"), purpose="user_data")
    env = client.beta.agents.environments.create(environment={"type": "openai_hosted", "files": [
        {"type": "file_id", "file_id": uploaded.id, "path": "/workspace/notes.md"}]})
    [entry] = client.beta.agents.environments.retrieve(env.id).files
    assert (entry.type, entry.file_id, entry.size_bytes) == ("file_id", uploaded.id, 8)
    assert os.environ["FILES_BUCKET"]
