"""A hosted preparation's `file_id` file is downloaded from its presigned URL into the workspace
(runtime/environments/downloads.py): whole or not at all, every failure naming the entry and the File, never the URL."""

from __future__ import annotations

import http.server
import threading

import pytest

from runtime.environments.downloads import DownloadFailed, fetch

BODY = b"id,total\n1,42\n"


@pytest.fixture(scope="module")
def server():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            if self.path.startswith("/ok"):
                self.send_response(200)
                self.send_header("Content-Length", str(len(BODY)))
                self.end_headers()
                self.wfile.write(BODY)
            else:
                self.send_error(403)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_the_file_arrives_whole_at_its_path(server, tmp_path):
    target = tmp_path / "orders.csv"
    fetch(0, {"file_id": "file-1", "url": f"{server}/ok?X-Amz-Signature=secret", "size_bytes": len(BODY)}, target)
    assert target.read_bytes() == BODY and [p.name for p in tmp_path.iterdir()] == ["orders.csv"]


@pytest.mark.parametrize("entry, message", [
    ({"file_id": "file-1", "size_bytes": 3}, "files[2]: the File file-1 no longer exists."),
    ({"file_id": "file-1", "url": "file:///etc/passwd", "size_bytes": 3}, "files[2]: the File file-1 has no download URL."),
    ({"file_id": "file-1", "url": "{server}/denied?X-Amz-Signature=secret", "size_bytes": 3},
     "files[2]: downloading the File file-1 failed (403)."),
    ({"file_id": "file-1", "url": "{server}/ok", "size_bytes": len(BODY) + 1},
     f"files[2]: the File file-1 did not arrive whole ({len(BODY)} of {len(BODY) + 1} bytes)."),
    ({"file_id": "file-1", "url": "{server}/ok", "size_bytes": 4},
     "files[2]: the File file-1 did not arrive whole (more than 4 bytes)."),
])
def test_a_failed_download_leaves_nothing_and_never_names_the_url(server, tmp_path, entry, message):
    entry = {**entry, **({"url": entry["url"].format(server=server)} if "url" in entry else {})}
    target = tmp_path / "x"
    with pytest.raises(DownloadFailed) as raised:
        fetch(2, entry, target)
    assert str(raised.value) == message and "secret" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []
