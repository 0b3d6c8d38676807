"""The scripted harness's file steps (`write PATH TEXT`, `read PATH`): the workspace of the Turn's Environment, as the
Harness's own file tool would see it.

`/workspace/...` (or a relative path) names a file of the Environment's workspace: a hosted Environment's sandbox
workspace on this host, or the directory a self_hosted Environment's Runtime is bound to. A path that leaves the
workspace (`..`, a symbolic link) is refused, and `environment: none` has no filesystem.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

WORKSPACE = "/workspace"


class FileStepError(Exception):
    """Why the step cannot run (the Turn fails with it)."""


def _root(start: dict[str, Any]) -> pathlib.Path:
    sandbox = start.get("sandbox")
    if sandbox is not None:
        return pathlib.Path(sandbox.workspace)
    environment = start.get("environment") or {}
    if environment.get("type") in ("self_hosted", "openai_hosted") and environment.get("workspace_directory"):
        return pathlib.Path(environment["workspace_directory"])
    raise FileStepError("This Session's environment has no filesystem (environment: none).")


def resolve(start: dict[str, Any], path: str) -> pathlib.Path:
    root = _root(start).resolve()
    relative = path[len(WORKSPACE):].lstrip("/") if path == WORKSPACE or path.startswith(WORKSPACE + "/") else path
    if os.path.isabs(relative) or not relative:
        raise FileStepError(f"{path} is not a file of the workspace ({WORKSPACE}/...).")
    target = root / relative
    if not target.resolve().is_relative_to(root) or any(p.is_symlink() for p in [target, *target.parents]
                                                        if p.is_relative_to(root) and p != root):
        raise FileStepError(f"{path} leaves the workspace.")
    return target


def write(start: dict[str, Any], path: str, text: str) -> None:
    target = resolve(start, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    uid = getattr(start.get("sandbox"), "uid", None)
    if uid is not None:  # the sandbox's own user owns what its Harness writes
        for p in [target, *target.parents]:
            if not p.is_relative_to(_root(start)) or p == _root(start):
                break
            os.chown(p, uid, uid, follow_symlinks=False)


def read(start: dict[str, Any], path: str) -> str:
    target = resolve(start, path)
    try:
        return target.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise FileStepError(f"{path} cannot be read ({type(exc).__name__}).") from None
