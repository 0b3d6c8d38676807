"""Environment files (`client.beta.agents.environments.files`, issue 38 item 4), in process on moto: bytes copied into a
connected Environment's workspace between Turns by the Runtime connection that holds it (here a hosted host whose
answers come from the reference Runtime's own handler, runtime/environments/workspace_files.py), the live files
listed; the SDK helpers `upload`, `prepare` and `prepare_directory` verbatim; the path rules' 400s, a symlink or a
directory at the target, an Environment not connected (409) and foreign ids (404), each writing nothing."""

from __future__ import annotations

import base64
import os
import pathlib
import threading

import boto3
import openai
import pytest
import requests

from agents_core.apikeys import create_key
from local import template
from runtime.environments import workspace_files
from tests.integration.conftest import sdk
from tests.integration.stack_fixtures import client, stack  # noqa: F401 - fixtures
from tests.integration.test_files import snapshot
from tests.integration.test_hosted_environment_lifecycle import HostedRuntime, hosted_session


class Host:
    """A hosted Runtime of host-a that ran the Environment's first Turn and answers environments.files requests from
    a workspace directory, as the reference Runtime does (its download through moto, which urllib cannot reach)."""

    def __init__(self, stack, client, root: pathlib.Path, monkeypatch):
        self.runtime = HostedRuntime(stack, "host-a")
        self.session = hosted_session(client, "say hi")
        start = self.runtime.start()
        self.runtime.complete(start["turn_id"])
        self.env_id = self.session.environment.id
        self.root = root
        self.requests: list[dict] = []

        def fetch(index, entry, target):
            target.write_bytes(requests.get(entry["url"], timeout=5).content)

        monkeypatch.setattr(workspace_files, "fetch", fetch)
        self._seen = 0
        self._stop = threading.Event()
        threading.Thread(target=self._answer, daemon=True).start()

    def _answer(self):
        while not self._stop.wait(0.02):
            frames = self.runtime.frames[self._seen:]
            self._seen += len(frames)
            for frame in frames:
                if str(frame.get("type", "")).startswith("environment.file."):
                    self.requests.append(frame)
                    self.runtime.send(workspace_files.handle(frame, self.root))

    def stop(self):
        self._stop.set()


@pytest.fixture
def host(stack, client, tmp_path, monkeypatch):
    root = tmp_path / "workspace"
    root.mkdir()
    h = Host(stack, client, root, monkeypatch)
    yield h
    h.stop()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_inline_and_file_id_writes_replace_and_list_the_live_files(stack, client, host):
    files = client.beta.agents.environments.files
    made = files.create(host.env_id, type="inline", path="/workspace/data/a.csv", data=b64(b"a,b\n"))
    assert (made.environment_id, made.object, made.path, made.size_bytes) == (host.env_id, "agent.environment.file",
                                                                             "/workspace/data/a.csv", 4)
    assert (host.root / "data" / "a.csv").read_bytes() == b"a,b\n"
    files.create(host.env_id, type="inline", path="/workspace/data/a.csv", data=b64(b"replaced"))
    assert (host.root / "data" / "a.csv").read_bytes() == b"replaced"
    uploaded = client.files.create(file=("notes.md", b"# notes"), purpose="user_data")
    files.create(host.env_id, type="file_id", file_id=uploaded.id, path="/workspace/notes.md")
    assert (host.root / "notes.md").read_bytes() == b"# notes"
    assert [(f.path, f.size_bytes) for f in files.list(host.env_id)] == [("/workspace/notes.md", 7),
                                                                         ("/workspace/data/a.csv", 8)]
    first = files.list(host.env_id, order="asc", limit=1)
    assert [f.path for f in first.data] == ["/workspace/data/a.csv"] and first.has_more
    assert [f.path for f in first] == ["/workspace/data/a.csv", "/workspace/notes.md"]  # the SDK follows `next`
    assert [f.path for f in files.list(host.env_id, path="/workspace/data")] == ["/workspace/data/a.csv"]
    # staged inline bytes are gone once written
    bucket = boto3.client("s3", region_name=template.REGION)
    assert not bucket.list_objects_v2(Bucket=os.environ["FILES_BUCKET"], Prefix="envfiles/").get("Contents")


def test_the_sdk_helpers_upload_prepare_and_prepare_directory_work_verbatim(stack, client, host, tmp_path):
    source = tmp_path / "src"
    (source / "lib").mkdir(parents=True)
    (source / "lib" / "x.py").write_text("x = 1\n")
    (source / "README.md").write_text("readme")
    files = client.beta.agents.environments.files
    staged = files.upload(host.env_id, file=source / "README.md", path="/workspace/README.md")
    assert staged.file.path == "/workspace/README.md" and (host.root / "README.md").read_text() == "readme"
    prepared = files.prepare({"/workspace/in/x.py": source / "lib" / "x.py"})
    session = hosted_session(client, None, files=prepared.files)
    assert [f.file_id for f in session.environment.files] == prepared.uploaded_file_ids
    tree = files.prepare_directory(source, destination="/workspace/src", include=["**/*.py", "*.md"])
    assert sorted(f["path"] for f in tree.files) == ["/workspace/src/README.md", "/workspace/src/lib/x.py"]


@pytest.mark.parametrize("body, param", [
    ({"type": "inline", "path": "/etc/passwd", "data": "eA=="}, "path"),
    ({"type": "inline", "path": "/workspace/../etc/x", "data": "eA=="}, "path"),
    ({"type": "inline", "path": "/workspace/.codex/config.toml", "data": "eA=="}, "path"),
    ({"type": "inline", "path": "/workspace/.managed-agents-x/a", "data": "eA=="}, "path"),
    ({"type": "inline", "path": "/workspace/outputs", "data": "eA=="}, "path"),
    ({"type": "inline", "path": "/workspace/a", "data": "not base64!"}, "data"),
    ({"type": "file_id", "path": "/workspace/a", "file_id": "file-missing"}, "file_id"),
])
def test_bad_input_is_its_error_and_reaches_no_runtime(stack, client, host, body, param):
    before = snapshot(stack, boto3.client("s3", region_name=template.REGION))
    with pytest.raises(openai.APIStatusError) as raised:
        client.beta.agents.environments.files.create(host.env_id, **body)
    assert raised.value.status_code in (400, 404) and raised.value.body["param"] == param
    assert host.requests == [] and list(host.root.iterdir()) == []
    assert snapshot(stack, boto3.client("s3", region_name=template.REGION)) == before


def test_a_symlink_or_a_directory_at_the_target_is_refused_by_the_runtime(stack, client, host):
    (host.root / "dir").mkdir()
    os.symlink("/etc", host.root / "link")
    for path in ("/workspace/dir", "/workspace/link/passwd", "/workspace/link"):
        with pytest.raises(openai.BadRequestError) as raised:
            client.beta.agents.environments.files.create(host.env_id, type="inline", path=path, data="eA==")
        assert raised.value.body["param"] == "path", raised.value.body
    assert sorted(p.name for p in host.root.iterdir()) == ["dir", "link"] and list((host.root / "dir").iterdir()) == []


def test_not_connected_is_409_and_another_tenants_environment_is_404(stack, client, host):
    fresh = client.beta.agents.environments.create(environment={"type": "openai_hosted"})
    with pytest.raises(openai.ConflictError) as raised:
        client.beta.agents.environments.files.create(fresh.id, type="inline", path="/workspace/a", data="eA==")
    assert "is not connected" in raised.value.body["message"]
    with pytest.raises(openai.ConflictError):
        client.beta.agents.environments.files.list(fresh.id)
    other = sdk(stack.http, create_key(stack.store, "tenant-b"))
    with pytest.raises(openai.NotFoundError):
        other.beta.agents.environments.files.create(host.env_id, type="inline", path="/workspace/a", data="eA==")
    with pytest.raises(openai.NotFoundError):
        other.beta.agents.environments.files.list(host.env_id)
    theirs = other.files.create(file=("t.txt", b"theirs"), purpose="user_data")
    with pytest.raises(openai.NotFoundError) as raised:
        client.beta.agents.environments.files.create(host.env_id, type="file_id", file_id=theirs.id, path="/workspace/t")
    assert raised.value.body["param"] == "file_id" and host.requests == []
