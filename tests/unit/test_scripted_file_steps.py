"""The scripted harness's `write PATH TEXT` and `read PATH` steps (runtime/harnesses/scripted/files.py): files of the
Turn's workspace, never outside it, and none on `environment: none`."""

from __future__ import annotations

import os

import pytest

from runtime.harnesses.scripted import files


def start(tmp_path) -> dict:
    return {"environment": {"type": "self_hosted", "workspace_directory": str(tmp_path)}}


def test_write_then_read_a_workspace_file(tmp_path):
    files.write(start(tmp_path), "/workspace/outputs/report.txt", "total: 42")
    assert (tmp_path / "outputs" / "report.txt").read_bytes() == b"total: 42"  # no newline added
    assert files.read(start(tmp_path), "/workspace/outputs/report.txt") == "total: 42"
    assert files.read(start(tmp_path), "outputs/report.txt") == "total: 42"


@pytest.mark.parametrize("path", ["/etc/passwd", "/workspace/../etc/passwd", "/workspace", "../x", "/workspace/link/x"])
def test_a_path_outside_the_workspace_is_refused(tmp_path, path):
    os.symlink("/etc", tmp_path / "link")
    with pytest.raises(files.FileStepError):
        files.write(start(tmp_path), path, "x")
    assert not (tmp_path / "x").exists()


def test_none_has_no_filesystem():
    with pytest.raises(files.FileStepError, match="no filesystem"):
        files.read({"environment": {"type": "none"}}, "/workspace/a")
