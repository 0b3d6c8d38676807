"""Environment files on the Runtime that holds the workspace (`environments.files`): Core's `environment.file.write`
and `environment.file.list`, answered with `environment.file.result` (agents_core/files/environment_files.py).

- write: the bytes come from the presigned URL in the message (runtime/environments/downloads.py); the target
  replaces a regular file, never follows a symbolic link on the way or at the target, and is never a directory.
- list: the live regular files under `path` (a workspace directory), sorted by case-sensitive path components,
  `order` asc or desc, `limit` per page, `page` the opaque token of the previous page (the last path, base64).
Paths are the Environment's (`/workspace/...`); the workspace directory on this machine is the sandbox's
(hosted) or the one this Runtime is bound to (self_hosted). Core checked the path rules; they are checked again.
"""

from __future__ import annotations

import base64
import os
import pathlib
import stat
from typing import Any, Optional

from .downloads import DownloadFailed, fetch

WORKSPACE = "/workspace"


def _error(message: dict[str, Any], text: str, param: str = "path") -> dict[str, Any]:
    return {"action": "environment.file.result", **_route(message), "ok": False,
            "error": {"message": text, "param": param}}


def _route(message: dict[str, Any]) -> dict[str, Any]:
    return {k: message.get(k) for k in ("op_id", "tenant", "environment_id")}


def _relative(path: str) -> Optional[list[str]]:
    if path == WORKSPACE:
        return []
    if not path.startswith(WORKSPACE + "/"):
        return None
    parts = path[len(WORKSPACE) + 1:].split("/")
    return None if any(p in ("", ".", "..") for p in parts) else parts


def handle(message: dict[str, Any], root: Optional[pathlib.Path], uid: Optional[int] = None) -> dict[str, Any]:
    if root is None or not root.is_dir():
        return _error(message, "This Runtime does not hold that Environment's workspace.", param="path")
    if message.get("type") == "environment.file.write":
        return _write(message, root, uid)
    return _list(message, root)


def _write(message: dict[str, Any], root: pathlib.Path, uid: Optional[int]) -> dict[str, Any]:
    parts = _relative(str(message.get("path") or ""))
    if not parts:
        return _error(message, "path must be an absolute POSIX path inside /workspace")
    parent = root
    for part in parts[:-1]:
        parent = parent / part
        if parent.is_symlink():
            return _error(message, f"{message['path']} goes through a symbolic link.")
        if parent.exists() and not parent.is_dir():
            return _error(message, f"{message['path']} goes through a file that is not a directory.")
        if not parent.exists():
            parent.mkdir()
            if uid is not None:
                os.chown(parent, uid, uid, follow_symlinks=False)
    target = parent / parts[-1]
    if target.is_symlink():
        return _error(message, f"{message['path']} is a symbolic link; it is not followed.")
    if target.exists() and not target.is_file():
        return _error(message, f"{message['path']} exists and is not a regular file (a directory cannot be replaced).")
    try:
        fetch(0, {"file_id": "", "url": message.get("url"), "size_bytes": message.get("size_bytes")}, target)
    except DownloadFailed:
        return _error(message, "The file's bytes could not be fetched; nothing was written.", param="data")
    if uid is not None:
        os.chown(target, uid, uid, follow_symlinks=False)
    return {"action": "environment.file.result", **_route(message), "ok": True}


def _list(message: dict[str, Any], root: pathlib.Path) -> dict[str, Any]:
    parts = _relative(str(message.get("path") or WORKSPACE))
    if parts is None:
        return _error(message, "path must be an absolute POSIX path inside /workspace")
    base = root.joinpath(*parts)
    if base.is_symlink() or not base.is_dir():
        return {"action": "environment.file.result", **_route(message), "ok": True, "files": [], "next": None}
    found: list[tuple[tuple[str, ...], int]] = []
    for directory, _dirs, names in os.walk(base, followlinks=False):
        rel = pathlib.PurePosixPath(os.path.relpath(directory, root))
        for name in names:
            info = os.lstat(os.path.join(directory, name))
            if stat.S_ISREG(info.st_mode):
                found.append(((rel / name).parts if str(rel) != "." else (name,), info.st_size))
    descending = message.get("order", "desc") != "asc"
    found.sort(key=lambda f: f[0], reverse=descending)
    after = message.get("page")
    if after:
        try:
            cursor = tuple(base64.urlsafe_b64decode(str(after).encode()).decode().split("/"))
        except (ValueError, UnicodeDecodeError):
            return _error(message, "Invalid 'page': not a token of this listing.", param="page")
        found = [f for f in found if (f[0] < cursor if descending else f[0] > cursor)]
    limit = max(1, min(100, int(message.get("limit") or 20)))
    page, more = found[:limit], len(found) > limit
    files = [{"path": WORKSPACE + "/" + "/".join(p), "size_bytes": size} for p, size in page]
    token = base64.urlsafe_b64encode("/".join(page[-1][0]).encode()).decode() if more else None
    return {"action": "environment.file.result", **_route(message), "ok": True, "files": files, "next": token}
