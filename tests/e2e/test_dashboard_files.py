"""The dashboard's Files tab (issue 38, item 6) in headless Chromium on the local stack: a hosted Session's artifacts
beside its transcript, each downloadable, and its Environment's live files."""

from __future__ import annotations

import pytest

from tests.e2e.test_dashboard import (  # noqa: F401 - fixtures
    CONTRAST,
    browser,
    needs_chromium,
    open_session,
    page,
)
from tests.e2e.test_hosted_environments import finished, hosted_runtime  # noqa: F401 - the module's host

pytestmark = pytest.mark.e2e


@needs_chromium
def test_the_files_tab_downloads_an_artifact_and_lists_the_environments_files(client, page, local_stack,
                                                                              hosted_runtime, tmp_path):
    from playwright.sync_api import expect

    session = client.beta.agents.sessions.create(
        environment={"type": "openai_hosted"}, agent={"model": "gpt-5"},
        extra_body={"x_agents_core": {"harness": "scripted"}},
        input="write /workspace/notes.txt kept in the workspace\nwrite /workspace/outputs/report.txt 42 rows\nsay Done.")
    assert finished(client, session.id).status == "completed", hosted_runtime.stderr.read_text()[-2000:]
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
