"""A hosted Turn's outputs: every regular file under /workspace/outputs that is new or changed in the Turn is
uploaded as an artifact before the Runtime reports `turn.completed`, which lists them (Core verifies and publishes
them in the completion's commit: agents_core/files/artifacts.py).

- The baseline is taken when the Turn starts (after preparation): each file's (size, mtime_ns, inode, ctime_ns).
- Symlinks are never followed (an `outputs` that is itself a symlink publishes nothing); what is not a regular
  file is skipped and reported, as is what is over the limits `turn.start` names (per file, per Turn, count).
- Each file goes through the presigned upload form of `turn.start` (`environment.hosted.artifacts`: a POST that
  writes only under this Turn's prefix), with httpx2 (the HTTP client the pinned `mcp` package brings).
"""

from __future__ import annotations

import logging
import os
import stat
from typing import Any, Optional

import httpx2

log = logging.getLogger("runtime.artifacts")
UPLOAD_TIMEOUT_SECONDS = 300

Baseline = dict[str, tuple[int, int, int, int]]


def _outputs(workspace: str, form: dict[str, Any]) -> tuple[str, str]:
    inside = str(form.get("outputs") or "/workspace/outputs")
    return inside, os.path.join(workspace, os.path.relpath(inside, "/workspace"))


def scan(workspace: str, form: Optional[dict[str, Any]]) -> tuple[Baseline, list[tuple[str, str]]]:
    """(regular files under outputs -> their identity, [(path, why it is not a regular file)])."""
    if not form:
        return {}, []
    inside, host = _outputs(workspace, form)
    files: Baseline = {}
    other: list[tuple[str, str]] = []
    try:
        if not stat.S_ISDIR(os.lstat(host).st_mode):
            return {}, []
    except OSError:
        return {}, []
    for root, dirs, names in os.walk(host, followlinks=False):
        rel_root = os.path.relpath(root, host)
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            shown = inside + "/" + os.path.normpath(os.path.join(rel_root, name))
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                files[shown] = (info.st_size, info.st_mtime_ns, info.st_ino, info.st_ctime_ns)
            else:
                other.append((shown, "not a regular file (symbolic links are not followed)"))
    return files, other


def publish(workspace: str, form: Optional[dict[str, Any]], baseline: Baseline) -> dict[str, Any]:
    """Upload what is new or changed since `baseline`: the `artifacts` and `artifacts_skipped` of turn.completed."""
    if not form:
        return {}
    files, other = scan(workspace, form)
    inside, host = _outputs(workspace, form)
    published: list[dict[str, Any]] = []
    skipped = [{"path": p, "reason": r} for p, r in other]
    total = 0
    for index, (shown, identity) in enumerate(sorted(files.items())):
        if baseline.get(shown) == identity:
            continue  # unchanged in this Turn
        size = identity[0]
        if size > int(form["max_file_bytes"]):
            skipped.append({"path": shown, "reason": f"over the per-file limit of {form['max_file_bytes']} bytes"})
        elif len(published) >= int(form["max_files"]):
            skipped.append({"path": shown, "reason": f"over the per-Turn limit of {form['max_files']} files"})
        elif total + size > int(form["max_turn_bytes"]):
            skipped.append({"path": shown, "reason": f"over the per-Turn limit of {form['max_turn_bytes']} bytes"})
        else:
            key = f"{form['key_prefix']}{index:04d}"
            reason = _upload(form, key, os.path.join(host, os.path.relpath(shown, inside)), size)
            if reason is None:
                published.append({"path": shown, "key": key, "size_bytes": size})
                total += size
            else:
                skipped.append({"path": shown, "reason": reason})
    out: dict[str, Any] = {"artifacts": published}
    if skipped:
        out["artifacts_skipped"] = skipped
    return out


def _upload(form: dict[str, Any], key: str, path: str, size: int) -> Optional[str]:
    """None when the object holds the file; else why not (never the form's signature)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fh.fileno()).st_size != size:
                return "it changed while it was published"
            response = httpx2.post(str(form["url"]), data={**form["fields"], "key": key},
                                   files={"file": (os.path.basename(path), fh, "application/octet-stream")},
                                   timeout=UPLOAD_TIMEOUT_SECONDS)
    except (OSError, httpx2.HTTPError) as exc:
        log.warning("artifact upload failed: %s", type(exc).__name__)
        return "its upload failed"
    if response.status_code >= 300:
        log.warning("artifact upload answered %s", response.status_code)
        return f"its upload was refused ({response.status_code})"
    return None
