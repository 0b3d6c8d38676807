"""Session artifacts (issue 38, item 5), in process on moto: a hosted Turn's turn.start carries an upload form for its
outputs only; the Runtime's turn.completed lists what it uploaded, and the completion's commit publishes each
verified object as an immutable SessionArtifact (what is refused or skipped is reported on the Turn); list,
retrieve, content, delete and `for_result(...).download` with the official SDK; another tenant's ids are 404; a
Session's deletion deletes its artifacts' bytes. The reference Runtime's side: tests/unit/test_runtime_artifacts.py."""

from __future__ import annotations

import os
import types

import boto3
import openai
import pytest
import requests

from agents_core.apikeys import create_key
from local import template
from local.inprocess import wait_for
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, runtime, stack  # noqa: F401 - fixtures
from tests.integration.test_hosted_environment_lifecycle import HostedRuntime, hosted_session


@pytest.fixture
def s3(stack):
    return boto3.client("s3", region_name=template.REGION)


def upload(form: dict, name: str, data: bytes) -> str:
    """What the hosted Runtime does with the form (moto serves the presigned POST here)."""
    key = form["key_prefix"] + name
    response = requests.post(form["url"], data={**form["fields"], "key": key}, files={"file": (name, data)},
                             timeout=5)
    assert response.status_code < 300, response.text
    return key


def artifact_objects(s3) -> set[str]:
    out = s3.list_objects_v2(Bucket=os.environ["FILES_BUCKET"], Prefix="artifacts/")
    return {o["Key"] for o in out.get("Contents", [])}


def completed_turn(stack, client, runtime, entries=None, skipped=None):
    session = hosted_session(client, "write /workspace/outputs/report.txt done")
    start = runtime.start()
    form = start["environment"]["hosted"]["artifacts"]
    runtime.observe(start["turn_id"], "turn.environment", status="connected", prepared=True)
    fields = {"artifacts": entries(form) if entries else []}
    if skipped:
        fields["artifacts_skipped"] = skipped
    runtime.observe(start["turn_id"], "turn.completed", **fields)
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=15)
    return session, start, form


def test_a_completed_hosted_turn_publishes_its_uploads_before_idle(stack, client, s3):
    runtime = HostedRuntime(stack, "host-a")
    report = b"total: 42\n"
    session, start, form = completed_turn(stack, client, runtime, entries=lambda f: [
        {"path": "/workspace/outputs/report.txt", "key": upload(f, "0000", report), "size_bytes": len(report)},
        {"path": "/workspace/outputs/data/rows.csv", "key": upload(f, "0001", b"a,b\n"), "size_bytes": 4},
        {"path": "/workspace/outputs/forged.txt", "key": "files/tenant-a/file-x", "size_bytes": 1},
        {"path": "/workspace/outputs/missing.txt", "key": f["key_prefix"] + "0009", "size_bytes": 3},
        {"path": "/etc/passwd", "key": upload(f, "0003", b"x"), "size_bytes": 1},
    ], skipped=[{"path": "/workspace/outputs/huge.bin", "reason": "over the per-file limit"}])
    # the form writes under this Turn's prefix only, each object bounded
    assert form["key_prefix"] == f"artifacts/tenant-a/{session.id}/{start['turn_id']}/"
    assert (form["max_file_bytes"], form["max_files"], form["outputs"]) == (100 * 1024 * 1024, 50, "/workspace/outputs")
    artifacts = client.beta.agents.sessions.artifacts
    listed = artifacts.list(session.id, order="asc").data
    assert [(a.path, a.size_bytes, a.turn_id, a.session_id) for a in listed] == [
        ("/workspace/outputs/report.txt", len(report), start["turn_id"], session.id),
        ("/workspace/outputs/data/rows.csv", 4, start["turn_id"], session.id)]
    env_id = start["environment"]["id"]
    assert {a.environment_id for a in listed} == {env_id} and all(a.id.startswith("art_") for a in listed)
    assert artifacts.list(session.id, environment_id=env_id).data == artifacts.list(session.id).data
    assert artifacts.list(session.id, environment_id="env_other").data == []
    assert artifacts.retrieve(listed[0].id, session_id=session.id) == listed[0]
    assert artifacts.content(listed[0].id, session_id=session.id).content == report
    turn = client.beta.agents.sessions.turns.retrieve(start["turn_id"], session_id=session.id)
    refused = {s["path"]: s["reason"] for s in turn.x_agents_core["artifacts_skipped"]}
    assert refused == {"/workspace/outputs/huge.bin": "over the per-file limit",
                       "/workspace/outputs/forged.txt": "not an upload of this Turn's outputs",
                       "/workspace/outputs/missing.txt": "its upload is missing or not the size stated",
                       "/etc/passwd": "not an upload of this Turn's outputs"}


def test_for_result_download_delete_and_the_session_delete(stack, client, s3, tmp_path):
    runtime = HostedRuntime(stack, "host-a")
    session, start, _ = completed_turn(stack, client, runtime, entries=lambda f: [
        {"path": "/workspace/outputs/report.txt", "key": upload(f, "0000", b"report"), "size_bytes": 6},
        {"path": "/workspace/outputs/other.txt", "key": upload(f, "0001", b"other"), "size_bytes": 5}])
    result = types.SimpleNamespace(session_id=session.id, turn_id=start["turn_id"])
    artifacts = client.beta.agents.sessions.artifacts
    target = tmp_path / "report.txt"
    found = artifacts.for_result(result).download("/workspace/outputs/report.txt", to=target)
    assert target.read_bytes() == b"report" and found.path == "/workspace/outputs/report.txt"
    deleted = artifacts.delete(found.id, session_id=session.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (found.id, True, "agent.session.artifact.deleted")
    with pytest.raises(openai.NotFoundError):
        artifacts.retrieve(found.id, session_id=session.id)
    assert len(artifact_objects(s3)) == 1
    other = artifacts.list(session.id).data[0]
    assert artifacts.content(other.id, session_id=session.id).content == b"other"
    client.beta.agents.sessions.delete(session.id)
    assert artifact_objects(s3) == set()  # a Session's deletion deletes its artifacts' bytes


def test_another_tenants_artifacts_are_404_everywhere(stack, client, s3):
    runtime = HostedRuntime(stack, "host-a")
    session, _, _ = completed_turn(stack, client, runtime, entries=lambda f: [
        {"path": "/workspace/outputs/a.txt", "key": upload(f, "0000", b"mine"), "size_bytes": 4}])
    [mine] = client.beta.agents.sessions.artifacts.list(session.id).data
    other = sdk(stack.http, create_key(stack.store, "tenant-b")).beta.agents.sessions.artifacts
    for call in (lambda: other.list(session.id), lambda: other.retrieve(mine.id, session_id=session.id),
                 lambda: other.content(mine.id, session_id=session.id),
                 lambda: other.delete(mine.id, session_id=session.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert client.beta.agents.sessions.artifacts.content(mine.id, session_id=session.id).content == b"mine"


def test_a_none_session_has_no_artifacts_and_an_unknown_session_is_404(stack, client, runtime):
    session = client.beta.agents.sessions.create(agent={"model": "gpt-5"}, environment={"type": "none"},
                                                 input="say hi")
    wait_for(lambda: client.beta.agents.sessions.retrieve(session.id).status == "idle", timeout=15)
    assert client.beta.agents.sessions.artifacts.list(session.id).data == []
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.artifacts.list("sess_unknown")
