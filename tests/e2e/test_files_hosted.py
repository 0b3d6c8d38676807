"""Files in and out of a hosted Environment on the local stack (issue 38), with the official SDK on the reference
hosted Runtime (bubblewrap): real Codex and Claude Code on the scripted model provider, and the scripted harness. A
File uploaded through the API is placed by id at preparation (downloaded from the moto server's presigned URL), the
Turn reads it and writes /workspace/outputs/report.txt through the Harness's own shell tool, and the completed Turn
publishes it (uploaded through its Turn's form): list, content and for_result download; another tenant's ids are
404; environments.files adds a file between Turns; the dashboard's Files tab downloads the artifact."""

from __future__ import annotations

import base64
import types

import openai
import pytest

from local.inprocess import wait_for
from tests.e2e.conftest import tenant_client
from tests.e2e.test_dashboard import CONTRAST, browser, needs_chromium, open_session, page  # noqa: F401 - fixtures
from tests.e2e.test_hosted_environments import finished, hosted_runtime  # noqa: F401 - its host

pytestmark = pytest.mark.e2e


def test_the_scripted_harness_reads_and_writes_the_hosted_workspace(local_stack, hosted_runtime):
    """`read PATH` and `write PATH TEXT` (the scripted harness's file steps) on a hosted Environment: the File placed
    by id is read back as the answer, and what the Turn writes under /workspace/outputs is published."""
    client = tenant_client(local_stack, "files-carol")
    uploaded = client.files.create(file=("notes.txt", b"from the Files API"), purpose="user_data")
    session = client.beta.agents.sessions.create(
        environment={"type": "openai_hosted",
                     "files": [{"type": "file_id", "file_id": uploaded.id, "path": "/workspace/notes.txt"}]},
        agent={"model": "gpt-5"}, extra_body={"x_agents_core": {"harness": "scripted"}},
        input="write /workspace/outputs/summary.txt one line, no newline\nread /workspace/notes.txt")
    turn = finished(client, session.id)
    assert turn.status == "completed", (turn.model_extra, hosted_runtime.stderr.read_text()[-3000:])
    answer = [i for i in client.beta.agents.sessions.items.list(session.id).data if i.type == "message"][0]
    assert answer.content[0].text == "from the Files API"
    [artifact] = client.beta.agents.sessions.artifacts.list(session.id).data
    assert artifact.path == "/workspace/outputs/summary.txt"
    assert client.beta.agents.sessions.artifacts.content(artifact.id, session_id=session.id).content == \
        b"one line, no newline"
    # between Turns: another file through environments.files (the host that holds the workspace writes it)
    env_id = session.environment.id
    added = client.beta.agents.environments.files.create(env_id, type="inline", path="/workspace/more/added.txt",
                                                         data=base64.b64encode(b"added between Turns").decode())
    assert (added.path, added.size_bytes) == ("/workspace/more/added.txt", 19)
    listed = {f.path for f in client.beta.agents.environments.files.list(env_id)}
    assert {"/workspace/notes.txt", "/workspace/more/added.txt", "/workspace/outputs/summary.txt"} <= listed
    with pytest.raises(openai.BadRequestError):
        client.beta.agents.environments.files.create(env_id, type="inline", path="/workspace/outputs", data="eA==")
    client.beta.agents.sessions.events.create(session.id, events=[{
        "type": "agent.session.input.message",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "read /workspace/more/added.txt"}]}]}])
    wait_for(lambda: len(client.beta.agents.sessions.turns.list(session.id).data) == 2, timeout=30)
    second = finished(client, session.id)
    assert second.status == "completed", (second.model_extra, hosted_runtime.stderr.read_text()[-3000:])
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(session.id, order="asc").data
             if i.type == "message" and i.role == "assistant"]
    assert texts[-1] == "added between Turns"


@pytest.mark.parametrize("harness", ["codex", "claude_code"])
def test_the_scripted_model_reads_and_writes_through_the_native_shell_tool(local_stack, hosted_runtime, harness,
                                                                          tmp_path):
    """`write PATH TEXT` and `read PATH` played by the scripted model provider through the Harness's own shell tool
    (Codex exec_command, Claude Code Bash): the written output is published, the read file is the answer."""
    client = tenant_client(local_stack, f"files-dave-{harness}")
    uploaded = client.files.create(file=("orders.csv", b"id,total\n1,42"), purpose="user_data")
    session = client.beta.agents.sessions.create(
        environment={"type": "openai_hosted",
                     "files": [{"type": "file_id", "file_id": uploaded.id, "path": "/workspace/in/orders.csv"}]},
        agent={"model": "gpt-5"}, extra_body={"x_agents_core": {"harness": harness}},
        input="write /workspace/outputs/report.txt 42 rows, no newline\nread /workspace/in/orders.csv")
    turn = finished(client, session.id)
    assert turn.status == "completed", (turn.model_extra, hosted_runtime.stderr.read_text()[-3000:])
    texts = [i.content[0].text for i in client.beta.agents.sessions.items.list(session.id, order="asc").data
             if i.type == "message" and i.role == "assistant"]
    assert texts[-1].strip() == "id,total\n1,42", texts
    assert (hosted_runtime.workspace(session.environment.id) / "in" / "orders.csv").read_bytes() == b"id,total\n1,42"
    artifacts = client.beta.agents.sessions.artifacts
    [artifact] = artifacts.list(session.id).data
    assert (artifact.path, artifact.turn_id) == ("/workspace/outputs/report.txt", turn.id)
    assert artifacts.content(artifact.id, session_id=session.id).content == b"42 rows, no newline"
    target = tmp_path / "report.txt"
    artifacts.for_result(types.SimpleNamespace(session_id=session.id, turn_id=turn.id)).download(
        "/workspace/outputs/report.txt", to=target)
    assert target.read_bytes() == b"42 rows, no newline"
    other = tenant_client(local_stack, f"files-erin-{harness}")
    for call in (lambda: other.files.retrieve(uploaded.id), lambda: other.files.content(uploaded.id),
                 lambda: other.beta.agents.sessions.artifacts.list(session.id),
                 lambda: other.beta.agents.sessions.artifacts.content(artifact.id, session_id=session.id),
                 lambda: other.beta.agents.environments.files.list(session.environment.id)):
        with pytest.raises(openai.NotFoundError):
            call()


@needs_chromium
def test_the_files_tab_downloads_an_artifact_and_lists_the_environments_files(client, page, local_stack,
                                                                              hosted_runtime, tmp_path):
    from playwright.sync_api import expect

    session = client.beta.agents.sessions.create(
        environment={"type": "openai_hosted"}, agent={"model": "gpt-5"},
        extra_body={"x_agents_core": {"harness": "scripted"}},
        input="write /workspace/notes.txt kept in the workspace\nwrite /workspace/outputs/report.txt 42 rows\nsay Done.")
    turn = finished(client, session.id)
    assert turn.status == "completed", (turn.model_extra, hosted_runtime.stderr.read_text()[-2000:])
    [artifact] = client.beta.agents.sessions.artifacts.list(session.id).data
    open_session(page, local_stack, session.id)
    expect(page.locator(".item[data-phase=final_answer] .text").first).to_have_text("Done.")
    page.click("#tab-files")
    row = page.locator(f"#artifact-list tr[data-artifact-id={artifact.id}]")
    expect(row).to_contain_text("/workspace/outputs/report.txt")
    with page.expect_download() as download:
        row.locator("button.download").click()
    target = tmp_path / "report.txt"
    download.value.save_as(target)
    assert download.value.suggested_filename == "report.txt" and target.read_bytes() == b"42 rows"
    files = page.locator("#environment-file-list")
    expect(files).to_contain_text("/workspace/notes.txt")
    expect(files).to_contain_text("/workspace/outputs/report.txt")
    result = page.evaluate(CONTRAST)
    assert result["checked"] > 10 and not result["failures"], result
