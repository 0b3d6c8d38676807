"""The reference Runtime's side of Session artifacts (runtime/environments/artifacts.py): what a hosted Turn left new
or changed under /workspace/outputs is uploaded through the upload form of its turn.start, and turn.completed lists
it; unchanged files, symbolic links and what is over a limit are not uploaded, and each skipped file is reported."""

from __future__ import annotations

import http.server
import io
import os
import threading

import pytest
from python_multipart.multipart import parse_form

from runtime.environments import artifacts

RECEIVED: dict[str, bytes] = {}


@pytest.fixture(scope="module")
def server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the stdlib's name
            fields, files = {}, {}
            body = io.BytesIO(self.rfile.read(int(self.headers["Content-Length"])))
            parse_form({"Content-Type": self.headers["Content-Type"].encode()}, body,
                       lambda f: fields.__setitem__(f.field_name.decode(), f.value.decode()),
                       lambda f: files.__setitem__(f.field_name.decode(), f.file_object.getvalue()))
            if fields.get("policy") != "signed" or fields["key"].startswith("refuse"):
                self.send_response(403)
            else:
                RECEIVED[fields["key"]] = files["file"]
                self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def form(url: str, **limits) -> dict:
    return {"url": url, "fields": {"policy": "signed"}, "key_prefix": "artifacts/t/s/turn_1/",
            "outputs": "/workspace/outputs", "max_file_bytes": 100, "max_files": 50, "max_turn_bytes": 1000,
            **limits}


def test_new_and_changed_regular_files_are_uploaded_and_listed(server, tmp_path):
    RECEIVED.clear()
    outputs = tmp_path / "outputs"
    (outputs / "sub").mkdir(parents=True)
    (outputs / "kept.txt").write_text("same")
    (outputs / "changed.txt").write_text("before")
    f = form(server)
    baseline = artifacts.scan(str(tmp_path), f)[0]
    (outputs / "changed.txt").write_text("after!")
    (outputs / "sub" / "report.txt").write_text("new")
    (outputs / "link").symlink_to(outputs / "kept.txt")
    (outputs / "big.bin").write_bytes(b"x" * 101)
    out = artifacts.publish(str(tmp_path), f, baseline)
    assert out["artifacts"] == [
        {"path": "/workspace/outputs/changed.txt", "key": "artifacts/t/s/turn_1/0001", "size_bytes": 6},
        {"path": "/workspace/outputs/sub/report.txt", "key": "artifacts/t/s/turn_1/0003", "size_bytes": 3}]
    assert RECEIVED == {"artifacts/t/s/turn_1/0001": b"after!", "artifacts/t/s/turn_1/0003": b"new"}
    assert out["artifacts_skipped"] == [
        {"path": "/workspace/outputs/link", "reason": "not a regular file (symbolic links are not followed)"},
        {"path": "/workspace/outputs/big.bin", "reason": "over the per-file limit of 100 bytes"}]


def test_the_per_turn_limits_and_a_refused_upload_are_reported(server, tmp_path):
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    for name in ("a", "b", "c"):
        (outputs / name).write_text(name * 10)
    out = artifacts.publish(str(tmp_path), form(server, max_files=2), {})
    assert [a["path"] for a in out["artifacts"]] == ["/workspace/outputs/a", "/workspace/outputs/b"]
    assert out["artifacts_skipped"] == [{"path": "/workspace/outputs/c", "reason": "over the per-Turn limit of 2 files"}]
    out = artifacts.publish(str(tmp_path), form(server, max_turn_bytes=15), {})
    assert len(out["artifacts"]) == 1 and len(out["artifacts_skipped"]) == 2
    out = artifacts.publish(str(tmp_path), form(server, key_prefix="refuse"), {})
    assert out == {"artifacts": [], "artifacts_skipped": [
        {"path": f"/workspace/outputs/{n}", "reason": "its upload was refused (403)"} for n in ("a", "b", "c")]}


def test_no_outputs_directory_or_one_that_is_a_symlink_publishes_nothing(server, tmp_path):
    assert artifacts.publish(str(tmp_path), form(server), {}) == {"artifacts": []}
    os.symlink("/etc", tmp_path / "outputs")
    assert artifacts.publish(str(tmp_path), form(server), {}) == {"artifacts": []}
    assert artifacts.publish(str(tmp_path), None, {}) == {}
